package combo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/routeguard/routeguard/cooldown"
)

// EmergencyFallback sends a request once more to an emergency target when
// every target failed and one of the failures says the account ran out of
// money: HTTP 402, or an error body naming exhausted funds, credits, quota
// or budget (the trigger of the EmergencyFallback method of the router's
// restate.Classifier). It also sends it there when nothing could be
// dispatched and one of the targets was held back because its connection
// is out of credits (the state an earlier 402 leaves behind), so later
// requests are served the same way as the first. Requests that carry
// tools, or that hold a lease, never fall back.
//
// The emergency attempt goes through every layer like any other, with a
// capped output budget: the send function must read it with [OutputBudget]
// and bound the answer's output tokens (max_tokens, max_output_tokens)
// accordingly ([CapOutputTokens] does this for a JSON body). Behind a
// [Transport], Rewrite finds it in the context of the request it is given.
//
// The fallback can be switched off and on at run time with
// [EmergencyFallback.SetEnabled]; the classifier's EmergencyDisabled setting
// (read from OMNIROUTE_EMERGENCY_FALLBACK by restate.FromEnv) switches it
// off as well. Configure Target and MaxOutputTokens before the router uses
// the value; do not copy it afterwards.
type EmergencyFallback struct {
	// Target is the emergency target. A zero Provider means the classifier's
	// emergency provider and model (by default nvidia and
	// openai/gpt-oss-120b).
	Target Target
	// MaxOutputTokens caps the emergency answer; 0 means the classifier's
	// (by default 4096).
	MaxOutputTokens int

	disabled atomic.Bool
}

// SetEnabled switches the fallback on or off; it takes effect for the next
// failure, without restarting anything.
func (e *EmergencyFallback) SetEnabled(on bool) { e.disabled.Store(!on) }

// enabled reports whether the fallback is on. A new EmergencyFallback is on.
func (e *EmergencyFallback) enabled() bool { return e != nil && !e.disabled.Load() }

type budgetKey struct{}

// OutputBudget returns the output-token cap the router set for the attempt
// ctx belongs to, if any. The emergency fallback sets one; a send function
// must honour it.
func OutputBudget(ctx context.Context) (int, bool) {
	n, ok := ctx.Value(budgetKey{}).(int)
	return n, ok
}

// withOutputBudget returns a context carrying an output-token cap for
// [OutputBudget].
func withOutputBudget(ctx context.Context, tokens int) context.Context {
	return context.WithValue(ctx, budgetKey{}, tokens)
}

// outputTokenFields are the request fields that bound an answer's output
// tokens: Chat Completions and Anthropic Messages (max_tokens), newer Chat
// Completions models (max_completion_tokens), and the Responses API
// (max_output_tokens).
var outputTokenFields = [...]string{"max_tokens", "max_completion_tokens", "max_output_tokens"}

// CapOutputTokens bounds the output of the request whose JSON body is body
// to tokens, for a send function that honours [OutputBudget]. Every
// output-token field present (max_tokens, max_completion_tokens,
// max_output_tokens) that is missing a number or asks for more is set to
// tokens; when none is present, max_output_tokens is added to a Responses
// API body (one with "input" and no "messages") and max_tokens to any
// other. It returns the body to send and whether it changed; a rewritten
// body keeps every other field, with object keys in sorted order. A
// tokens of 0 or less leaves the body as it is; a body that is not a JSON
// object is returned as it is with [ErrNotJSONObject].
func CapOutputTokens(body []byte, tokens int) (out []byte, changed bool, err error) {
	if tokens <= 0 {
		return body, false, nil
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return body, false, ErrNotJSONObject
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		return body, false, ErrNotJSONObject
	}
	capped := json.RawMessage(strconv.Itoa(tokens))
	present := false
	for _, k := range outputTokenFields {
		v, ok := fields[k]
		if !ok {
			continue
		}
		present = true
		if withinBudget(v, tokens) {
			continue
		}
		fields[k] = capped
		changed = true
	}
	if !present {
		_, input := fields["input"]
		_, messages := fields["messages"]
		if input && !messages {
			fields["max_output_tokens"] = capped
		} else {
			fields["max_tokens"] = capped
		}
		changed = true
	}
	if !changed {
		return body, false, nil
	}
	out, err = marshalObject(fields)
	if err != nil {
		return body, false, err
	}
	return out, true, nil
}

// withinBudget reports whether the JSON value v is a number no greater
// than tokens.
func withinBudget(v json.RawMessage, tokens int) bool {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return false // null, a string, or anything else that is not a number
	}
	var n float64
	return json.Unmarshal(v, &n) == nil && n <= float64(tokens)
}

// emergencyTrigger reports whether the failure err of req takes the
// emergency fallback and, if so, the emergency target, the output budget
// and the status that triggered it. An upstream failure ([CodeUpstream])
// triggers it when the classifier says so (402, or a body naming exhausted
// funds); a terminal answer when a target was held back because its connection is
// out of credits, the remembered form of the same failure. res holds the
// attempts made so far: an emergency target that has just failed is not
// asked again.
func (r *Router) emergencyTrigger(ctx context.Context, req Request, res *Result, err error) (Target, int, int, bool) {
	e := r.cfg.Emergency
	if !e.enabled() || req.Tools > 0 || req.Lease != nil || ctx.Err() != nil {
		return Target{}, 0, 0, false
	}
	var status int
	var body []byte
	ce, _ := errors.AsType[*Error](err)
	switch {
	case ce == nil:
		return Target{}, 0, 0, false
	case ce.Code == CodeUpstream:
		status, body = ce.Status, ce.Body
		if res.trigger != nil { // an earlier target named exhausted credits
			status, body = res.trigger.Status, res.trigger.Body
		}
	case ce.TerminalReason != "" && outOfCredits(ce.Excluded):
		status = http.StatusPaymentRequired
	default:
		return Target{}, 0, 0, false
	}
	et, ok := r.classifier().EmergencyFallback(status, body, req.Tools > 0)
	if !ok {
		return Target{}, 0, 0, false
	}
	t := e.Target
	if t.Provider == "" {
		t = Target{Provider: et.Provider, Model: et.Model}
	}
	budget := e.MaxOutputTokens
	if budget <= 0 {
		budget = et.MaxOutputTokens
	}
	for _, a := range res.Attempts {
		if a.Outcome != OutcomeSkipped && keyOf(&a.Target) == keyOf(&t) {
			return Target{}, 0, 0, false // the emergency target itself just failed
		}
	}
	return t, budget, status, true
}

// creditsExhausted is the Detail of an exclusion whose connection is out of
// credits.
var creditsExhausted = cooldown.CreditsExhausted.String()

// outOfCredits reports whether one of the exclusions is a connection out of
// credits.
func outOfCredits(xs []Exclusion) bool {
	for _, x := range xs {
		if x.Reason == ReasonUnavailable && x.Detail == creditsExhausted {
			return true
		}
	}
	return false
}

// emergency decides whether the failure err of req takes the emergency
// fallback and, if so, dispatches once to the emergency target. It returns
// the original failure when the fallback does not apply or fails too.
func (r *Router) emergency(ctx context.Context, req Request, send SendFunc, res *Result, err error) (*Result, error) {
	t, budget, status, ok := r.emergencyTrigger(ctx, req, res, err)
	if !ok {
		return res, err
	}
	name := "emergency"
	var set Settings
	if req.Combo != nil {
		name = req.Combo.Name + "/emergency"
		set.TargetTimeout = req.Combo.Settings.TargetTimeout
	}
	set.MaxAttempts = 1
	set.CooldownWait.Disabled = true
	ereq := req
	ereq.Combo = &Combo{Name: name, Strategy: strategyPriority, Targets: []Target{t}, Settings: set}
	r.log.Info("combo: emergency fallback", "target", t.String(), "status", status, "maxOutputTokens", budget)
	eres, eerr := r.dispatch(withOutputBudget(ctx, budget), ereq, send)
	if eres != nil {
		res.Attempts = append(res.Attempts, eres.Attempts...)
	}
	if eerr != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if ue, ok := errors.AsType[*Error](err); ok && ue.Code == CodeUpstream {
			ue.Attempts = res.Attempts
		}
		return res, err
	}
	res.Response, res.Target, res.Emergency = eres.Response, eres.Target, true
	return res, nil
}
