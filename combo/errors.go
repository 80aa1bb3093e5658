package combo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/routeguard/routeguard/queue"
	"github.com/routeguard/routeguard/watchdog"
)

// Reason names why a target was excluded before dispatch.
type Reason string

// Exclusion reasons of the built-in layers, in the order the router asks
// them. A user [Layer] names its own reasons: any short snake_case string.
// Its reason "context_too_small" (a request larger than the target's
// context window) counts, like tool_limit, towards the 400
// capability_mismatch answer.
const (
	ReasonCircuitOpen        Reason = "circuit_open"        // provider breaker OPEN
	ReasonProviderCooldown   Reason = "provider_cooldown"   // provider window gate
	ReasonModelLockout       Reason = "model_lockout"       // model or quota family locked
	ReasonConnectionCooldown Reason = "connection_cooldown" // connection cooling
	ReasonUnavailable        Reason = "unavailable"         // connection terminal, or no timer
	ReasonExhausted          Reason = "exhausted"           // failed earlier in this request
	ReasonLeaseHeld          Reason = "lease_held"          // another session owns the connection
	ReasonQueueFull          Reason = "queue_full"          // admission refused
	ReasonToolLimit          Reason = "tool_limit"          // too many tools for this target
)

// reasonContextTooSmall is a capability reason a user layer may give.
const reasonContextTooSmall Reason = "context_too_small"

// timed reports whether an exclusion of this reason ends by itself, so that
// waiting is a meaningful answer.
func (r Reason) timed() bool {
	switch r {
	case ReasonCircuitOpen, ReasonProviderCooldown, ReasonModelLockout, ReasonConnectionCooldown,
		ReasonQueueFull, ReasonLeaseHeld:
		return true
	}
	return false
}

// builtin reports whether r is one of the router's own reasons, rather than
// a user [Layer]'s.
func (r Reason) builtin() bool {
	switch r {
	case ReasonCircuitOpen, ReasonProviderCooldown, ReasonModelLockout, ReasonConnectionCooldown,
		ReasonUnavailable, ReasonExhausted, ReasonLeaseHeld, ReasonQueueFull, ReasonToolLimit,
		reasonContextTooSmall:
		return true
	}
	return false
}

// Exclusion records why one target was not dispatched and when it may be
// eligible again.
type Exclusion struct {
	Provider   string
	Connection string
	Model      string
	Reason     Reason
	// Detail is the layer's own reason (a lockout reason, a terminal state, a
	// skip message); it may be empty.
	Detail string
	// RetryAfter is how long until the target may be eligible again; 0 when
	// unknown or not timed.
	RetryAfter time.Duration
}

// Codes of [Error], the contract's strings.
const (
	// CodeAllCoolingDown: nothing was dispatched and some target is held
	// back by something that ends by itself. HTTP 503 with Retry-After.
	CodeAllCoolingDown = "all_targets_cooling_down"
	// CodeQueueFull: nothing was dispatched because the admission queue
	// refused every target. HTTP 429 with Retry-After.
	CodeQueueFull = "RATE_LIMIT_QUEUE_FULL"
	// CodeModelNotFound: no target can run and no timer will change that
	// (terminalReason no_executable_targets). HTTP 404.
	CodeModelNotFound = "model_not_found"
	// CodeCapabilityMismatch: every target was kept out because it cannot
	// take this request (too many tools, a prompt larger than its context
	// window). HTTP 400.
	CodeCapabilityMismatch = "capability_mismatch"
	// CodeUpstream: attempts were made and failed, or a failure was not
	// worth a fallback; Status is the last upstream answer's (502 for a
	// transport failure).
	CodeUpstream = "upstream_error"
	// CodeUnknownStrategy: a combo names a strategy the router does not
	// know. HTTP 400.
	CodeUnknownStrategy = "unknown_strategy"
	// CodeFusionNoAnswers: no leg of a fusion panel answered. HTTP 503.
	CodeFusionNoAnswers = "fusion_no_answers"
	// CodePipelineStepFailed: a pipeline step failed; Status is the
	// step's.
	CodePipelineStepFailed = "pipeline_step_failed"
	// CodePipelineNoSteps: a pipeline has no steps. HTTP 404.
	CodePipelineNoSteps = "pipeline_no_steps"
)

// Sentinels, matched with errors.Is by the [*Error] of their code.
var (
	// ErrAllCoolingDown matches CodeAllCoolingDown.
	ErrAllCoolingDown = errors.New("combo: all targets cooling down")
	// ErrQueueFull matches CodeQueueFull; such an error also matches
	// [queue.ErrQueueFull].
	ErrQueueFull = errors.New("combo: every target's queue is full")
	// ErrNoExecutableTargets matches CodeModelNotFound.
	ErrNoExecutableTargets = errors.New("combo: no executable targets")
	// ErrCapabilityMismatch matches CodeCapabilityMismatch.
	ErrCapabilityMismatch = errors.New("combo: no target can take this request")
	// ErrUpstream matches CodeUpstream.
	ErrUpstream = errors.New("combo: upstream failed")
	// ErrUnknownStrategy matches CodeUnknownStrategy.
	ErrUnknownStrategy = errors.New("combo: unknown strategy")
	// ErrNoPanelAnswer matches CodeFusionNoAnswers.
	ErrNoPanelAnswer = errors.New("combo: no panel answer")
	// ErrPipeline matches CodePipelineStepFailed and CodePipelineNoSteps.
	ErrPipeline = errors.New("combo: pipeline failed")
)

// Terminal reasons, the diagnostics' terminalReason of the answers given
// before any dispatch.
const (
	terminalAllCoolingDown = "all_targets_cooling_down"
	terminalNoExecutable   = "no_executable_targets"
	terminalCapability     = "capability_mismatch"
	terminalQueueFull      = "queue_full"
)

// queueFullRetryAfter is the Retry-After of the 429 answer given when every
// target's admission queue is full: a queue has no timer, so the caller is
// told to come back after this short, fixed delay.
const queueFullRetryAfter = time.Second

// Error is the answer for a request the router did not serve, and the
// failure of a composition or a strategy look-up: Code (one of the CodeX
// constants) says which, Status is the HTTP status of the answer, and
// errors.Is matches the code's sentinel ([ErrAllCoolingDown],
// [ErrUpstream], ...). [Error.Response] and [Error.WriteHTTP] render it.
//
// Which fields are set depends on the code: the terminal answers (nothing
// dispatched) fill TerminalReason, PoolSize, Attempted, Excluded and
// RetryAfter; an upstream failure fills the last upstream answer (Header,
// Body, Reason, Err), RetryAfter and Attempts; a composition fills Step and
// Errs; an unknown strategy fills Strategy and Valid.
type Error struct {
	Code   string
	Status int
	Combo  string // the combo's name, when there is one

	// TerminalReason is the diagnostics' terminalReason of an answer given
	// before any dispatch: "all_targets_cooling_down", "queue_full",
	// "no_executable_targets" or "capability_mismatch"; "" for the other
	// codes.
	TerminalReason string
	PoolSize       int
	Attempted      int
	Excluded       []Exclusion
	// RetryAfter is how long the caller is told to wait. A terminal answer
	// gives the earliest recovery rounded up to whole seconds (0 when no
	// exclusion carries a timer; 1 s for a full queue); an upstream failure
	// the upstream's own hint, else a restatement rule's default (60 s for
	// the agentrouter quota rule), 0 when there is none. See
	// [Error.RetryAfterSeconds] for the header value.
	RetryAfter time.Duration

	// The last upstream answer of an upstream failure: its restated
	// status is Status.
	Header   http.Header
	Body     []byte
	Reason   string    // classifier reason of the last failure
	Err      error     // transport or stream error of the last attempt, if any
	Attempts []Attempt // the request's trail

	// Step is the failed pipeline step, from 0; -1 for a fusion or a
	// pipeline without steps.
	Step int
	// Errs are the failures of a composition's legs or step.
	Errs []error

	// Strategy is the unknown strategy name; Valid lists the known ones.
	Strategy string
	Valid    []string
}

// sentinel is the sentinel of e's code.
func (e *Error) sentinel() error {
	switch e.Code {
	case CodeAllCoolingDown:
		return ErrAllCoolingDown
	case CodeQueueFull:
		return ErrQueueFull
	case CodeModelNotFound:
		return ErrNoExecutableTargets
	case CodeCapabilityMismatch:
		return ErrCapabilityMismatch
	case CodeUpstream:
		return ErrUpstream
	case CodeUnknownStrategy:
		return ErrUnknownStrategy
	case CodeFusionNoAnswers:
		return ErrNoPanelAnswer
	case CodePipelineStepFailed, CodePipelineNoSteps:
		return ErrPipeline
	}
	return nil
}

// Unwrap returns the code's sentinel (and, for a full queue,
// [queue.ErrQueueFull]), then the last attempt's transport or stream error
// and a composition's failures.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 2+len(e.Errs))
	if s := e.sentinel(); s != nil {
		errs = append(errs, s)
	}
	if e.Code == CodeQueueFull {
		errs = append(errs, queue.ErrQueueFull)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return append(errs, e.Errs...)
}

func (e *Error) Error() string {
	switch e.Code {
	case CodeUpstream:
		msg := "combo: upstream failed with status " + http.StatusText(e.Status)
		if e.Reason != "" {
			msg += " (" + e.Reason + ")"
		}
		if e.Err != nil {
			msg += ": " + e.Err.Error()
		}
		return msg
	case CodeUnknownStrategy:
		return fmt.Sprintf("combo: unknown strategy %q (valid: %s)", e.Strategy, strings.Join(e.Valid, ", "))
	case CodeFusionNoAnswers, CodePipelineStepFailed, CodePipelineNoSteps:
		msg := "combo: " + e.Code
		if e.Step >= 0 {
			msg += " at step " + strconv.Itoa(e.Step)
		}
		if len(e.Errs) > 0 {
			msg += ": " + errors.Join(e.Errs...).Error()
		}
		return msg
	case CodeModelNotFound:
		return "combo: combo has no executable targets"
	}
	return "combo: " + e.message()
}

// maxClientRetryAfter bounds the Retry-After the router tells a caller.
const maxClientRetryAfter = 24 * time.Hour

// maxRetryAfterSeconds is maxClientRetryAfter in whole seconds.
const maxRetryAfterSeconds = int64(maxClientRetryAfter / time.Second)

// setRetryAfter makes h's Retry-After a whole number of seconds in
// 1..86 400: the upstream's own value when it is a whole number (clamped),
// else [Error.RetryAfterSeconds] of ue, else none.
func setRetryAfter(h http.Header, ue *Error) {
	if v := h.Get("Retry-After"); v != "" {
		if sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && sec >= 0 {
			h.Set("Retry-After", strconv.FormatInt(min(max(sec, 1), maxRetryAfterSeconds), 10))
			return
		}
		h.Del("Retry-After")
	}
	if sec := ue.RetryAfterSeconds(); sec > 0 {
		h.Set("Retry-After", strconv.FormatInt(sec, 10))
	}
}

// RetryAfterSeconds is the Retry-After header value for the answer: RetryAfter
// rounded up to whole seconds, at least 1 and at most 86 400, or 0 when
// there is no retry time. [Transport] sets the header from it when the
// upstream answer carries no Retry-After of its own.
func (e *Error) RetryAfterSeconds() int64 {
	if e.RetryAfter <= 0 {
		return 0
	}
	return int64(ceilSeconds(min(e.RetryAfter, maxClientRetryAfter)) / time.Second)
}

// terminalError builds the answer for an empty pool, or nil when there is
// nothing to explain (an empty combo).
func terminalError(combo string, pool, attempted int, excl ...[]Exclusion) *Error {
	e := &Error{Combo: combo, PoolSize: pool, Attempted: attempted}
	for _, l := range excl {
		e.Excluded = append(e.Excluded, l...)
	}
	timed, capability, queueFull := false, len(e.Excluded) > 0, len(e.Excluded) > 0
	var earliest time.Duration
	for _, x := range e.Excluded {
		if x.Reason.timed() || (x.RetryAfter > 0 && !x.Reason.builtin()) {
			timed = true // a user layer's exclusion with a recovery time ends by itself too
		}
		if x.Reason != ReasonToolLimit && x.Reason != reasonContextTooSmall {
			capability = false
		}
		if x.Reason != ReasonQueueFull {
			queueFull = false
		}
		if x.RetryAfter > 0 && (earliest == 0 || x.RetryAfter < earliest) {
			earliest = x.RetryAfter
		}
	}
	switch {
	case capability:
		e.Status = http.StatusBadRequest
		e.Code = CodeCapabilityMismatch
		e.TerminalReason = terminalCapability
	case queueFull:
		e.Status = http.StatusTooManyRequests
		e.Code = CodeQueueFull
		e.TerminalReason = terminalQueueFull
		e.RetryAfter = queueFullRetryAfter
	case timed:
		e.Status = http.StatusServiceUnavailable
		e.Code = CodeAllCoolingDown
		e.TerminalReason = terminalAllCoolingDown
		e.RetryAfter = ceilSeconds(earliest)
	default:
		e.Status = http.StatusNotFound
		e.Code = CodeModelNotFound
		e.TerminalReason = terminalNoExecutable
	}
	return e
}

// ceilSeconds rounds d up to whole seconds.
func ceilSeconds(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return (d + time.Second - 1) / time.Second * time.Second
}

// message is the human message of a terminal answer.
func (e *Error) message() string {
	if e.TerminalReason == terminalNoExecutable {
		return "Combo has no executable targets"
	}
	var b strings.Builder
	name := e.Combo
	if name == "" {
		name = "combo"
	}
	switch e.TerminalReason {
	case terminalCapability:
		fmt.Fprintf(&b, "No target of %s can take this request: ", name)
	case terminalQueueFull:
		fmt.Fprintf(&b, "Every request queue of %s is full: ", name)
	default:
		fmt.Fprintf(&b, "All targets of %s are cooling down: ", name)
	}
	b.WriteString(e.exclusionList())
	return b.String()
}

// exclusionList lists the exclusions as "provider/model: reason (Ns), …".
func (e *Error) exclusionList() string {
	var b strings.Builder
	for i, x := range e.Excluded {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s/%s: %s", x.Provider, x.Model, x.Reason)
		if x.RetryAfter > 0 {
			fmt.Fprintf(&b, " (%ds)", int64(ceilSeconds(x.RetryAfter)/time.Second))
		}
	}
	return b.String()
}

// terminalBody is the JSON shape of a terminal answer.
type terminalBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Diagnostics struct {
		PoolSize       int             `json:"poolSize"`
		Attempted      int             `json:"attempted"`
		Excluded       []exclusionJSON `json:"excluded"`
		TerminalReason string          `json:"terminalReason"`
	} `json:"diagnostics"`
	RecoveryHint struct {
		Action            string `json:"action"`
		NextStep          string `json:"next_step"`
		RetryAfterSeconds int64  `json:"retry_after_seconds,omitempty"`
	} `json:"recovery_hint"`
}

// exclusionJSON is one excluded target in a terminal answer.
type exclusionJSON struct {
	Provider          string `json:"provider"`
	Connection        string `json:"connection,omitempty"`
	Model             string `json:"model"`
	Reason            Reason `json:"reason"`
	Detail            string `json:"detail,omitempty"`
	RetryAfterSeconds int64  `json:"retryAfterSeconds,omitempty"`
}

// terminalBody returns the JSON body of a terminal answer.
func (e *Error) terminalBody() terminalBody {
	var b terminalBody
	b.Error.Code = e.Code
	b.Error.Message = e.message()
	b.Diagnostics.PoolSize = e.PoolSize
	b.Diagnostics.Attempted = e.Attempted
	b.Diagnostics.TerminalReason = e.TerminalReason
	b.Diagnostics.Excluded = make([]exclusionJSON, len(e.Excluded))
	for i, x := range e.Excluded {
		b.Diagnostics.Excluded[i] = exclusionJSON{
			Provider: x.Provider, Connection: x.Connection, Model: x.Model,
			Reason: x.Reason, Detail: x.Detail,
			RetryAfterSeconds: int64(ceilSeconds(x.RetryAfter) / time.Second),
		}
	}
	switch e.TerminalReason {
	case terminalNoExecutable:
		b.RecoveryHint.Action = "switch-combo"
		b.RecoveryHint.NextStep = "Choose another combo or model: no target of this one can serve requests."
	case terminalCapability:
		b.RecoveryHint.Action = "change-request"
		b.RecoveryHint.NextStep = "Send fewer tools or a shorter prompt, or choose a combo whose models accept this request."
	case terminalQueueFull:
		b.RecoveryHint.Action = "wait"
		b.RecoveryHint.NextStep = "Retry after the indicated delay; every request queue of this combo is full."
		b.RecoveryHint.RetryAfterSeconds = e.RetryAfterSeconds()
	default:
		b.RecoveryHint.Action = "wait"
		b.RecoveryHint.NextStep = "Retry after the indicated delay; the targets recover by themselves."
		b.RecoveryHint.RetryAfterSeconds = e.RetryAfterSeconds()
	}
	return b
}

// terminalHeader returns the headers of a terminal answer.
func (e *Error) terminalHeader() http.Header {
	h := make(http.Header, 5)
	h.Set("Content-Type", "application/json")
	h.Set("X-Omniroute-Combo-Terminal-Reason", e.TerminalReason)
	switch e.TerminalReason {
	case terminalAllCoolingDown, terminalQueueFull:
		h.Set("X-Omniroute-Recovery-Action", "wait")
	case terminalCapability:
		h.Set("X-Omniroute-Recovery-Action", "change-request")
	default:
		h.Set("X-Omniroute-Recovery-Action", "switch-combo")
	}
	if sec := e.RetryAfterSeconds(); sec > 0 {
		s := strconv.FormatInt(sec, 10)
		h.Set("Retry-After", s)
		h.Set("X-Omniroute-Retry-After-Seconds", s)
	}
	return h
}

// WriteHTTP writes the answer to w: see [Error.Response].
func (e *Error) WriteHTTP(w http.ResponseWriter) {
	if e.TerminalReason != "" {
		for k, v := range e.terminalHeader() {
			w.Header()[k] = v
		}
		w.WriteHeader(e.Status)
		_ = json.NewEncoder(w).Encode(e.terminalBody())
		return
	}
	resp := e.Response(nil)
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// Response returns the answer as an *http.Response to req. A terminal
// answer is the contract's JSON (error, diagnostics, recovery_hint) with its
// X-Omniroute headers and Retry-After; an upstream failure that carries an
// upstream answer is that answer; any other error is a JSON
// {"error":{"code","message"}} with Status (502 when unset).
//
// Every Retry-After it gives is a whole number of seconds in 1..86 400:
// an upstream's own value is kept when it is such a number (0 becomes 1,
// larger values 86 400); one that is not (an HTTP date, a negative or
// malformed value) is replaced by [Error.RetryAfterSeconds], or removed
// when that is 0.
func (e *Error) Response(req *http.Request) *http.Response {
	status := e.Status
	if status == 0 {
		status = http.StatusBadGateway
	}
	var h http.Header
	var body []byte
	switch {
	case e.TerminalReason != "":
		h = e.terminalHeader()
		body, _ = json.Marshal(e.terminalBody())
	case e.Code == CodeUpstream && e.Header != nil:
		h = e.Header.Clone()
		h.Del("Content-Length")
		setRetryAfter(h, e)
		body = e.Body
	default:
		h = http.Header{"Content-Type": {"application/json"}}
		var b struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		b.Error.Code, b.Error.Message = e.Code, e.Error()
		body, _ = json.Marshal(b)
		if s := e.RetryAfterSeconds(); s > 0 {
			h.Set("Retry-After", strconv.FormatInt(s, 10))
		}
	}
	return &http.Response{
		Status:        strconv.Itoa(status) + " " + http.StatusText(status),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// StreamError renders err, the error a committed stream's Read returned,
// as a server-sent event named "error" that an SSE client can read:
//
//	event: error
//	data: {"error":{"type":"upstream_error","code":"stream_truncated","message":"..."}}
//
// A proxy relaying a stream that breaks off writes it (and flushes) and then
// aborts the response without finishing it, for example with
// panic(http.ErrAbortHandler), so that the client sees a broken answer and
// never a short one that looks complete. The code is the watchdog's code
// for one of its aborts, "request_timeout" for [ErrRequestTimeout],
// "stream_truncated" for io.ErrUnexpectedEOF and "stream_error" otherwise;
// the message names the code's cause and never the error's text, which may
// name upstream addresses.
func StreamError(err error) []byte {
	code, msg := "stream_error", "The upstream stream failed."
	var we *watchdog.Error
	switch {
	case errors.As(err, &we):
		code, msg = we.Code, "The upstream stream was cut by the stream watchdog."
	case errors.Is(err, ErrRequestTimeout):
		code, msg = reasonRequestTimeout, "The request ran past its deadline."
	case errors.Is(err, io.ErrUnexpectedEOF):
		code, msg = "stream_truncated", "The upstream stream broke off."
	}
	var b struct {
		Error struct {
			Type    string `json:"type"`
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	b.Error.Type, b.Error.Code, b.Error.Message = "upstream_error", code, msg
	data, _ := json.Marshal(b)
	out := make([]byte, 0, len(data)+22)
	out = append(out, "event: error\ndata: "...)
	out = append(out, data...)
	return append(out, "\n\n"...)
}
