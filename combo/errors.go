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
)

// Reason names why a target was excluded before dispatch.
type Reason string

// Exclusion reasons, in the order the router asks the layers.
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
	ReasonContextTooSmall    Reason = "context_too_small"   // request larger than the context window
)

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

// Sentinel errors matched by [TerminalError] with errors.Is.
var (
	// ErrAllCoolingDown means every target is held back by something that
	// ends by itself; the answer is 503 with Retry-After.
	ErrAllCoolingDown = errors.New("combo: all targets cooling down")
	// ErrNoExecutableTargets means no target can run and no timer will
	// change that; the answer is 404.
	ErrNoExecutableTargets = errors.New("combo: no executable targets")
	// ErrCapabilityMismatch means every target was kept out because it
	// cannot take this request (too many tools, a prompt larger than its
	// context window); the answer is 400.
	ErrCapabilityMismatch = errors.New("combo: no target can take this request")
)

// Terminal reasons carried by [TerminalError].
const (
	TerminalAllCoolingDown = "all_targets_cooling_down"
	TerminalNoExecutable   = "no_executable_targets"
	TerminalCapability     = "capability_mismatch"
)

// TerminalError is the answer when nothing can be dispatched. It matches
// [ErrAllCoolingDown], [ErrNoExecutableTargets] or [ErrCapabilityMismatch]
// and renders itself as an HTTP answer with [TerminalError.WriteHTTP].
type TerminalError struct {
	Combo          string
	Status         int    // 503, 404 or 400
	Code           string // error code of the body
	TerminalReason string // TerminalAllCoolingDown, TerminalNoExecutable or TerminalCapability
	PoolSize       int
	Attempted      int
	Excluded       []Exclusion
	// RetryAfter is the earliest recovery, rounded up to whole seconds; 0
	// when no exclusion carries a timer.
	RetryAfter time.Duration
}

// terminalError builds the answer for an empty pool, or nil when there is
// nothing to explain (an empty combo).
func terminalError(combo string, pool, attempted int, excl ...[]Exclusion) *TerminalError {
	e := &TerminalError{Combo: combo, PoolSize: pool, Attempted: attempted}
	for _, l := range excl {
		e.Excluded = append(e.Excluded, l...)
	}
	timed, capability := false, len(e.Excluded) > 0
	var earliest time.Duration
	for _, x := range e.Excluded {
		if x.Reason.timed() {
			timed = true
		}
		if x.Reason != ReasonToolLimit && x.Reason != ReasonContextTooSmall {
			capability = false
		}
		if x.RetryAfter > 0 && (earliest == 0 || x.RetryAfter < earliest) {
			earliest = x.RetryAfter
		}
	}
	switch {
	case capability:
		e.Status = http.StatusBadRequest
		e.Code = TerminalCapability
		e.TerminalReason = TerminalCapability
	case timed:
		e.Status = http.StatusServiceUnavailable
		e.Code = TerminalAllCoolingDown
		e.TerminalReason = TerminalAllCoolingDown
		e.RetryAfter = ceilSeconds(earliest)
	default:
		e.Status = http.StatusNotFound
		e.Code = "model_not_found"
		e.TerminalReason = TerminalNoExecutable
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

func (e *TerminalError) Error() string {
	if e.TerminalReason == TerminalNoExecutable {
		return "combo: combo has no executable targets"
	}
	return "combo: " + e.message()
}

// Is matches the sentinel of the terminal reason.
func (e *TerminalError) Is(target error) bool {
	switch target {
	case ErrAllCoolingDown:
		return e.TerminalReason == TerminalAllCoolingDown
	case ErrNoExecutableTargets:
		return e.TerminalReason == TerminalNoExecutable
	case ErrCapabilityMismatch:
		return e.TerminalReason == TerminalCapability
	}
	return false
}

func (e *TerminalError) message() string {
	if e.TerminalReason == TerminalNoExecutable {
		return "Combo has no executable targets"
	}
	var b strings.Builder
	name := e.Combo
	if name == "" {
		name = "combo"
	}
	if e.TerminalReason == TerminalCapability {
		fmt.Fprintf(&b, "No target of %s can take this request: ", name)
	} else {
		fmt.Fprintf(&b, "All targets of %s are cooling down: ", name)
	}
	b.WriteString(e.exclusionList())
	return b.String()
}

// exclusionList lists the exclusions as "provider/model: reason (Ns), …".
func (e *TerminalError) exclusionList() string {
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

// Body is the JSON shape of a terminal answer.
type Body struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Diagnostics struct {
		PoolSize       int             `json:"poolSize"`
		Attempted      int             `json:"attempted"`
		Excluded       []ExclusionJSON `json:"excluded"`
		TerminalReason string          `json:"terminalReason"`
	} `json:"diagnostics"`
	RecoveryHint struct {
		Action            string `json:"action"`
		NextStep          string `json:"next_step"`
		RetryAfterSeconds int64  `json:"retry_after_seconds,omitempty"`
	} `json:"recovery_hint"`
}

// ExclusionJSON is one excluded target in a terminal answer.
type ExclusionJSON struct {
	Provider          string `json:"provider"`
	Connection        string `json:"connection,omitempty"`
	Model             string `json:"model"`
	Reason            Reason `json:"reason"`
	Detail            string `json:"detail,omitempty"`
	RetryAfterSeconds int64  `json:"retryAfterSeconds,omitempty"`
}

// Body returns the JSON body of the answer.
func (e *TerminalError) Body() Body {
	var b Body
	b.Error.Code = e.Code
	b.Error.Message = e.message()
	b.Diagnostics.PoolSize = e.PoolSize
	b.Diagnostics.Attempted = e.Attempted
	b.Diagnostics.TerminalReason = e.TerminalReason
	b.Diagnostics.Excluded = make([]ExclusionJSON, len(e.Excluded))
	for i, x := range e.Excluded {
		b.Diagnostics.Excluded[i] = ExclusionJSON{
			Provider: x.Provider, Connection: x.Connection, Model: x.Model,
			Reason: x.Reason, Detail: x.Detail,
			RetryAfterSeconds: int64(ceilSeconds(x.RetryAfter) / time.Second),
		}
	}
	switch e.TerminalReason {
	case TerminalNoExecutable:
		b.RecoveryHint.Action = "switch-combo"
		b.RecoveryHint.NextStep = "Choose another combo or model: no target of this one can serve requests."
	case TerminalCapability:
		b.RecoveryHint.Action = "change-request"
		b.RecoveryHint.NextStep = "Send fewer tools or a shorter prompt, or choose a combo whose models accept this request."
	default:
		b.RecoveryHint.Action = "wait"
		b.RecoveryHint.NextStep = "Retry after the indicated delay; the targets recover by themselves."
		b.RecoveryHint.RetryAfterSeconds = int64(e.RetryAfter / time.Second)
	}
	return b
}

// Header returns the headers of the answer.
func (e *TerminalError) Header() http.Header {
	h := make(http.Header, 5)
	h.Set("Content-Type", "application/json")
	h.Set("X-Omniroute-Combo-Terminal-Reason", e.TerminalReason)
	switch e.TerminalReason {
	case TerminalAllCoolingDown:
		h.Set("X-Omniroute-Recovery-Action", "wait")
	case TerminalCapability:
		h.Set("X-Omniroute-Recovery-Action", "change-request")
	default:
		h.Set("X-Omniroute-Recovery-Action", "switch-combo")
	}
	if e.RetryAfter > 0 {
		s := strconv.FormatInt(int64(e.RetryAfter/time.Second), 10)
		h.Set("Retry-After", s)
		h.Set("X-Omniroute-Retry-After-Seconds", s)
	}
	return h
}

// WriteHTTP writes the answer: status, headers and JSON body.
func (e *TerminalError) WriteHTTP(w http.ResponseWriter) {
	for k, v := range e.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(e.Body())
}

// Response returns the answer as an *http.Response to req.
func (e *TerminalError) Response(req *http.Request) *http.Response {
	body, _ := json.Marshal(e.Body())
	return &http.Response{
		Status:        strconv.Itoa(e.Status) + " " + http.StatusText(e.Status),
		StatusCode:    e.Status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        e.Header(),
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}
