package admin

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/routeguard/routeguard/lease"
)

// Actions of the lifecycle route.
const (
	actionAcquire = "acquire"
	actionRenew   = "renew"
	actionRelease = "release"
	actionStatus  = "status"
)

// maxModelLen is the longest model name, in characters, that acquire
// accepts.
const maxModelLen = 512

// command is one parsed lifecycle request body.
type command struct {
	// Action is actionAcquire, actionRenew, actionRelease or actionStatus.
	Action string
	// Model is the trimmed model of an acquire (1..maxModelLen characters).
	Model string
	// Generation is the generation of renew, release and status (1 to
	// lease.MaxGeneration). An acquire may carry one; it is validated and
	// ignored, since the store assigns generations.
	Generation uint64
	// Reason is the release reason, lease.ReasonOwnerExit when absent.
	Reason lease.Reason
}

// parseCommand parses a lifecycle request body. The accepted shapes are
//
//	{"action":"acquire","model":"<provider/model>"}
//	{"action":"renew","generation":N}
//	{"action":"release","generation":N,"reason":"OWNER_EXIT"|"CLIENT_CANCELLED"}
//	{"action":"status","generation":N}
//
// where N is a JSON integer written without sign, fraction or exponent.
// Bad JSON, other types, unknown or misplaced fields, null values and
// trailing data all give errActionInvalid.
func parseCommand(body []byte) (command, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return command{}, errActionInvalid
	}
	var c command
	if !jsonString(fields["action"], &c.Action) {
		return command{}, errActionInvalid
	}
	allowed := map[string]bool{"action": true}
	switch c.Action {
	case actionAcquire:
		allowed["model"], allowed["generation"] = true, true
		if !jsonString(fields["model"], &c.Model) {
			return command{}, errActionInvalid
		}
		c.Model = strings.TrimSpace(c.Model)
		if n := utf8.RuneCountInString(c.Model); n < 1 || n > maxModelLen {
			return command{}, errActionInvalid
		}
	case actionRenew, actionStatus, actionRelease:
		allowed["generation"] = true
		if c.Action == actionRelease {
			allowed["reason"] = true
			c.Reason = lease.ReasonOwnerExit
			if raw, ok := fields["reason"]; ok {
				var r string
				if !jsonString(raw, &r) {
					return command{}, errActionInvalid
				}
				c.Reason = lease.Reason(r)
				if c.Reason != lease.ReasonOwnerExit && c.Reason != lease.ReasonClientCancelled {
					return command{}, errActionInvalid
				}
			}
		}
		if _, ok := fields["generation"]; !ok {
			return command{}, errActionInvalid
		}
	default:
		return command{}, errActionInvalid
	}
	for k := range fields {
		if !allowed[k] {
			return command{}, errActionInvalid
		}
	}
	if raw, ok := fields["generation"]; ok {
		g, ok := parseGeneration(raw)
		if !ok {
			return command{}, errActionInvalid
		}
		if c.Action != actionAcquire {
			c.Generation = g
		}
	}
	return c, nil
}

// jsonString decodes raw into *dst when raw is a JSON string.
func jsonString(raw json.RawMessage, dst *string) bool {
	if len(raw) == 0 || raw[0] != '"' {
		return false
	}
	return json.Unmarshal(raw, dst) == nil
}

// parseGeneration parses a JSON generation: digits only, no leading zero,
// 1..lease.MaxGeneration.
func parseGeneration(raw []byte) (uint64, bool) {
	if len(raw) == 0 || len(raw) > 16 || raw[0] < '1' || raw[0] > '9' {
		return 0, false
	}
	var n uint64
	for _, c := range raw {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, n <= lease.MaxGeneration
}
