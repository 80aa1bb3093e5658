package restate

import (
	"bytes"
	"encoding/json"
	"strings"
)

// maxEvent bounds the bytes of one SSE event that parseStreamError reads.
const maxEvent = 64 << 10

var errorTypeStatus = map[string]int{
	"rate_limit_error": 429, "rate_limit_exceeded": 429, "too_many_requests": 429,
	"resource_exhausted": 429, "insufficient_quota": 429,
	"overloaded_error": 503, "overloaded": 503, "unavailable": 503, "service_unavailable": 503,
	"authentication_error": 401, "invalid_api_key": 401, "unauthenticated": 401,
	"permission_error": 403, "permission_denied": 403, "forbidden": 403,
	"not_found_error": 404, "not_found": 404, "model_not_found": 404,
	"invalid_request_error": 400, "invalid_argument": 400, "bad_request": 400,
	"payment_required": 402, "billing_error": 402,
	"request_too_large": 413,
	"api_error":         500, "server_error": 500, "internal": 500, "internal_error": 500, "internal_server_error": 500,
	"deadline_exceeded": 504, "timeout": 504, "timeout_error": 504,
}

// parseStreamError extracts the error carried by one SSE event: the lines
// of one event ("event: error", "data: {...}") or a bare JSON payload. A
// payload is an error when it has an "error" member or "type": "error", or
// when the event is named "error"; a Responses API "response.failed" event
// (by type or by name) is an error too, read from its response.error
// member. The status is the error's numeric status or code when it lies in
// 400..599, else the one its type or code names (rate_limit_error → 429,
// overloaded_error → 503, authentication_error → 401, …), else 500. Only
// the first 64 KiB of the event are read.
func parseStreamError(event []byte) (status int, payload []byte, ok bool) {
	if len(event) > maxEvent {
		event = event[:maxEvent]
	}
	var name string
	var data [][]byte
	sawField := false
	for line := range bytes.Lines(event) {
		line = bytes.TrimRight(line, "\r\n")
		field, value, found := bytes.Cut(line, []byte(":"))
		if !found {
			continue
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			name, sawField = strings.TrimSpace(string(value)), true
		case "data":
			data, sawField = append(data, value), true
		}
	}
	if sawField {
		payload = bytes.Join(data, []byte("\n"))
	} else {
		payload = bytes.TrimSpace(event)
	}
	var v any
	if json.Unmarshal(payload, &v) != nil {
		if name == "error" && len(bytes.TrimSpace(payload)) > 0 {
			return 500, payload, true
		}
		return 0, nil, false
	}
	o, isObj := v.(map[string]any)
	if !isObj {
		if name == "error" {
			return 500, payload, true
		}
		return 0, nil, false
	}
	errv, hasErr := o["error"]
	typ, _ := o["type"].(string)
	failed := typ == "response.failed" || name == "response.failed"
	if failed && (errv == nil || !hasErr) {
		// A failed Responses API answer carries its error in response.error.
		if resp, ok := o["response"].(map[string]any); ok && resp["error"] != nil {
			errv, hasErr = resp["error"], true
		}
	}
	named := typ == "error" || name == "error" || failed
	if !hasErr && !named {
		return 0, nil, false
	}
	if errv == nil && hasErr && !named {
		return 0, nil, false // "error": null is not an error
	}
	e, _ := errv.(map[string]any)
	for _, src := range []map[string]any{e, o} {
		if src == nil {
			continue
		}
		for _, k := range [...]string{"status", "status_code", "statusCode", "code", "http_status"} {
			if n, ok := number(src[k]); ok && n >= 400 && n < 600 {
				return int(n), payload, true
			}
		}
	}
	for _, src := range []map[string]any{e, o} {
		if src == nil {
			continue
		}
		for _, k := range [...]string{"type", "code", "status"} {
			if s, ok := src[k].(string); ok {
				if st, ok := errorTypeStatus[strings.ToLower(strings.TrimSpace(s))]; ok {
					return st, payload, true
				}
			}
		}
	}
	return 500, payload, true
}
