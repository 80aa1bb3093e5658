package lease

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Actions of the lifecycle route.
const (
	ActionAcquire = "acquire"
	ActionRenew   = "renew"
	ActionRelease = "release"
	ActionStatus  = "status"
)

// MaxModelLen is the longest model name, in characters, that acquire
// accepts.
const MaxModelLen = 512

// Command is one parsed lifecycle request body.
type Command struct {
	// Action is ActionAcquire, ActionRenew, ActionRelease or ActionStatus.
	Action string
	// Model is the trimmed model of an acquire (1..MaxModelLen characters).
	Model string
	// Generation is the generation of renew, release and status (1 to
	// MaxGeneration). An acquire may carry one; it is validated and
	// ignored, since the store assigns generations.
	Generation uint64
	// Reason is the release reason, ReasonOwnerExit when absent.
	Reason Reason
}

// ParseCommand parses a lifecycle request body. The accepted shapes are
//
//	{"action":"acquire","model":"<provider/model>"}
//	{"action":"renew","generation":N}
//	{"action":"release","generation":N,"reason":"OWNER_EXIT"|"CLIENT_CANCELLED"}
//	{"action":"status","generation":N}
//
// where N is a JSON integer written without sign, fraction or exponent.
// Bad JSON, other types, unknown or misplaced fields, null values and
// trailing data all give [ErrActionInvalid].
func ParseCommand(body []byte) (Command, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return Command{}, ErrActionInvalid
	}
	var c Command
	if !jsonString(fields["action"], &c.Action) {
		return Command{}, ErrActionInvalid
	}
	allowed := map[string]bool{"action": true}
	switch c.Action {
	case ActionAcquire:
		allowed["model"], allowed["generation"] = true, true
		if !jsonString(fields["model"], &c.Model) {
			return Command{}, ErrActionInvalid
		}
		c.Model = strings.TrimSpace(c.Model)
		if n := utf8.RuneCountInString(c.Model); n < 1 || n > MaxModelLen {
			return Command{}, ErrActionInvalid
		}
	case ActionRenew, ActionStatus, ActionRelease:
		allowed["generation"] = true
		if c.Action == ActionRelease {
			allowed["reason"] = true
			c.Reason = ReasonOwnerExit
			if raw, ok := fields["reason"]; ok {
				var r string
				if !jsonString(raw, &r) {
					return Command{}, ErrActionInvalid
				}
				c.Reason = Reason(r)
				if c.Reason != ReasonOwnerExit && c.Reason != ReasonClientCancelled {
					return Command{}, ErrActionInvalid
				}
			}
		}
		if _, ok := fields["generation"]; !ok {
			return Command{}, ErrActionInvalid
		}
	default:
		return Command{}, ErrActionInvalid
	}
	for k := range fields {
		if !allowed[k] {
			return Command{}, ErrActionInvalid
		}
	}
	if raw, ok := fields["generation"]; ok {
		g, err := ParseGeneration(string(raw))
		if err != nil || len(raw) == 0 || raw[0] < '0' || raw[0] > '9' {
			return Command{}, ErrActionInvalid
		}
		if c.Action != ActionAcquire {
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
