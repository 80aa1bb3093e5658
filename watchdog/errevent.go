package watchdog

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// ErrorEvent is an error reported inside a stream whose HTTP status was
// 200, with the fields a failure classifier needs. Fields the event does not
// carry are left empty.
type ErrorEvent struct {
	// Event is the SSE event name ("" when the event had none).
	Event string
	// Data is the event's joined data lines, as received.
	Data []byte
	// Type is the error type: error.type, else the root type when it is
	// not just "error".
	Type string
	// Code is error.code (a string or a number, as text).
	Code string
	// Message is error.message, or error itself when it is a string.
	Message string
	// Status is an HTTP status carried by the event (error.status,
	// error.status_code, status or status_code), or 0.
	Status int
}

// SSE returns the event in its wire form: an "event:" line when it has a
// name, one "data:" line per line of Data, and the blank line that ends the
// event. A classifier that reads whole events sees the name as well as the
// data; [FindErrorEvent] of the result finds the same Event and Data.
func (e ErrorEvent) SSE() []byte {
	n := len(e.Data) + len(e.Event) + 16
	out := make([]byte, 0, n)
	if e.Event != "" {
		out = append(out, "event: "...)
		out = append(out, e.Event...)
		out = append(out, '\n')
	}
	if len(e.Data) > 0 || e.Event == "" {
		for line := range bytes.SplitSeq(e.Data, []byte{'\n'}) {
			out = append(out, "data: "...)
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return append(out, '\n')
}

// FindErrorEvent scans an SSE stream held in memory and returns the first
// error event: an event named "error", an event whose JSON "type" is "error"
// or "response.failed", or one with a non-null root "error" field. A final
// event without its terminating blank line is considered too. Events larger
// than 1 MiB are skipped.
func FindErrorEvent(stream []byte) (ErrorEvent, bool) {
	o := &Observer{}
	o.setup(Config{})
	o.parse = true
	o.feed(stream)
	if o.errEvent == nil {
		// Terminate a last, unterminated line and event.
		o.feed([]byte("\n\n"))
	}
	if o.errEvent == nil {
		return ErrorEvent{}, false
	}
	return *o.errEvent, true
}

// newErrorEvent extracts the fields of an error event. It allocates; it runs
// at most once per stream.
func newErrorEvent(name, data []byte) ErrorEvent {
	ev := ErrorEvent{Event: string(name), Data: bytes.Clone(data)}
	var doc struct {
		Type       string          `json:"type"`
		Code       json.RawMessage `json:"code"`
		Message    string          `json:"message"`
		Status     json.RawMessage `json:"status"`
		StatusCode json.RawMessage `json:"status_code"`
		Error      json.RawMessage `json:"error"`
		Response   struct {
			Error json.RawMessage `json:"error"`
		} `json:"response"`
	}
	if json.Unmarshal(data, &doc) != nil {
		return ev
	}
	if doc.Type != "error" {
		ev.Type = doc.Type
	}
	ev.Code = textOf(doc.Code)
	ev.Message = doc.Message
	ev.Status = statusOf(doc.Status, doc.StatusCode)
	inner := doc.Error
	if len(inner) == 0 || string(inner) == "null" {
		inner = doc.Response.Error
	}
	var s string
	if json.Unmarshal(inner, &s) == nil {
		ev.Message = s
		return ev
	}
	var e struct {
		Type       string          `json:"type"`
		Code       json.RawMessage `json:"code"`
		Message    string          `json:"message"`
		Status     json.RawMessage `json:"status"`
		StatusCode json.RawMessage `json:"status_code"`
	}
	if json.Unmarshal(inner, &e) != nil {
		return ev
	}
	if e.Type != "" {
		ev.Type = e.Type
	}
	if c := textOf(e.Code); c != "" {
		ev.Code = c
	}
	if e.Message != "" {
		ev.Message = e.Message
	}
	if st := statusOf(e.Status, e.StatusCode); st != 0 {
		ev.Status = st
	}
	return ev
}

// textOf renders a JSON string or number as text.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// statusOf returns the first value that is an HTTP status (100..599).
func statusOf(raws ...json.RawMessage) int {
	for _, raw := range raws {
		if n, err := strconv.Atoi(textOf(raw)); err == nil && n >= 100 && n <= 599 {
			return n
		}
	}
	return 0
}
