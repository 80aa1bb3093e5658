package watchdog

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Codes carried by [Error], the contract's strings.
const (
	// CodeThroughputTooLow: the throughput rule aborted the attempt.
	// HTTP 504.
	CodeThroughputTooLow = "STREAM_THROUGHPUT_TOO_LOW"
	// CodeIdleTimeout: no chunk arrived for IdleTimeout. HTTP 504.
	CodeIdleTimeout = "STREAM_IDLE_TIMEOUT"
	// CodeAttemptDeadline: the attempt ran past AttemptDeadline. HTTP 504.
	CodeAttemptDeadline = "STREAM_ATTEMPT_DEADLINE"
	// CodeReadinessTimeout: no event other than a heartbeat within
	// ReadinessTimeout. HTTP 504.
	CodeReadinessTimeout = "STREAM_READINESS_TIMEOUT"
	// CodeInvalidConfig: a configuration value [FromEnv] or
	// [Config.Validate] refuses. HTTP 400.
	CodeInvalidConfig = "invalid_config"
)

// Reasons carried by an abort's [Error.Reason], in the vocabulary of failure
// reasons.
const (
	ReasonThroughputTooLow = "throughput_too_low"
	ReasonIdleTimeout      = "idle_timeout"
	ReasonAttemptDeadline  = "attempt_deadline"
	ReasonReadinessTimeout = "readiness_timeout"
)

// Sentinels, matched with errors.Is by the [*Error] of their code.
var (
	// ErrThroughputTooLow matches an [*Error] with [CodeThroughputTooLow].
	ErrThroughputTooLow = errors.New("watchdog: stream throughput too low")
	// ErrIdleTimeout matches an [*Error] with [CodeIdleTimeout].
	ErrIdleTimeout = errors.New("watchdog: stream idle timeout")
	// ErrAttemptDeadline matches an [*Error] with [CodeAttemptDeadline].
	ErrAttemptDeadline = errors.New("watchdog: stream attempt deadline exceeded")
	// ErrReadinessTimeout matches an [*Error] with [CodeReadinessTimeout].
	ErrReadinessTimeout = errors.New("watchdog: stream readiness timeout")
	// ErrInvalidConfig matches an [*Error] with [CodeInvalidConfig].
	ErrInvalidConfig = errors.New("watchdog: invalid config")
)

// Error is a refusal or failure of this package, with the contract's code
// and HTTP status: a guard that aborted an attempt (HTTP 504), or a
// configuration value that cannot be used (HTTP 400). Every abort of this
// package is an *Error; match it with errors.As. Its Unwrap gives the
// sentinel of its code, so errors.Is matches [ErrThroughputTooLow],
// [ErrIdleTimeout], [ErrAttemptDeadline], [ErrReadinessTimeout] or
// [ErrInvalidConfig].
type Error struct {
	// Code is one of the CodeX constants.
	Code string
	// Status is the HTTP status the contract gives the code: 504 Gateway
	// Timeout for an abort (to answer with when nothing was sent yet), 400
	// for CodeInvalidConfig.
	Status int
	// Reason is, for an abort, the matching reason (ReasonThroughputTooLow,
	// …); for an invalid configuration, what is wrong with the value.
	Reason string
	// Elapsed is the time from the start of the attempt to the abort.
	Elapsed time.Duration
	// Limit is the configured bound that was crossed: the window for a
	// throughput abort, the idle timeout, the attempt deadline or the
	// readiness timeout.
	Limit time.Duration
	// WindowBytes and Rate describe the window at a throughput abort.
	WindowBytes int64
	Rate        float64
	// Field and Value are the environment variable (or Config field) and
	// the value refused with CodeInvalidConfig.
	Field, Value string

	err error // the sentinel of Code
}

func newError(code string, elapsed, limit time.Duration) *Error {
	e := &Error{Code: code, Status: http.StatusGatewayTimeout, Elapsed: elapsed, Limit: limit}
	switch code {
	case CodeThroughputTooLow:
		e.Reason, e.err = ReasonThroughputTooLow, ErrThroughputTooLow
	case CodeIdleTimeout:
		e.Reason, e.err = ReasonIdleTimeout, ErrIdleTimeout
	case CodeAttemptDeadline:
		e.Reason, e.err = ReasonAttemptDeadline, ErrAttemptDeadline
	case CodeReadinessTimeout:
		e.Reason, e.err = ReasonReadinessTimeout, ErrReadinessTimeout
	}
	return e
}

// invalidConfig is the refusal of a configuration value, for config.Env and
// Validate.
func invalidConfig(name, value string, reason error) error {
	return &Error{Code: CodeInvalidConfig, Status: http.StatusBadRequest, err: ErrInvalidConfig,
		Field: name, Value: value, Reason: reason.Error()}
}

// Error describes the abort or the refusal, starting "watchdog: ".
func (e *Error) Error() string {
	switch e.Code {
	case CodeThroughputTooLow:
		return fmt.Sprintf("watchdog: stream throughput too low: %.3g useful B/s over %v (%d B) after %v",
			e.Rate, e.Limit, e.WindowBytes, e.Elapsed)
	case CodeIdleTimeout:
		return fmt.Sprintf("watchdog: stream idle for %v", e.Limit)
	case CodeAttemptDeadline:
		return fmt.Sprintf("watchdog: stream attempt deadline of %v exceeded", e.Limit)
	case CodeReadinessTimeout:
		return fmt.Sprintf("watchdog: stream produced no non-ping SSE event within %d ms", e.Limit.Milliseconds())
	case CodeInvalidConfig:
		return "watchdog: " + CodeInvalidConfig + ": " + e.Field + "=" + strconv.Quote(e.Value) + ": " + e.Reason
	}
	return "watchdog: stream aborted: " + e.Code
}

// Unwrap returns the sentinel of e's code.
func (e *Error) Unwrap() error { return e.err }

// Timeout reports true for the idle timeout, the attempt deadline and the
// readiness timeout, so net-style timeout checks recognise them.
func (e *Error) Timeout() bool {
	return e.Code == CodeIdleTimeout || e.Code == CodeAttemptDeadline || e.Code == CodeReadinessTimeout
}
