package watchdog

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Stable codes carried by [Error].
const (
	CodeThroughputTooLow = "STREAM_THROUGHPUT_TOO_LOW"
	CodeIdleTimeout      = "STREAM_IDLE_TIMEOUT"
	CodeAttemptDeadline  = "STREAM_ATTEMPT_DEADLINE"
)

// Reasons carried by [Error], in the vocabulary of failure reasons.
const (
	ReasonThroughputTooLow = "throughput_too_low"
	ReasonIdleTimeout      = "idle_timeout"
	ReasonAttemptDeadline  = "attempt_deadline"
)

// Sentinels matched by errors.Is against an [*Error] of the same code.
var (
	ErrThroughputTooLow = errors.New("watchdog: stream throughput too low")
	ErrIdleTimeout      = errors.New("watchdog: stream idle timeout")
	ErrAttemptDeadline  = errors.New("watchdog: stream attempt deadline exceeded")
)

// Error reports why an attempt was aborted. Every abort of this package is
// an *Error; errors.Is matches it against the sentinel of its code
// ([ErrThroughputTooLow], [ErrIdleTimeout], [ErrAttemptDeadline]).
type Error struct {
	// Code is one of CodeThroughputTooLow, CodeIdleTimeout,
	// CodeAttemptDeadline.
	Code string
	// Reason is the matching reason (ReasonThroughputTooLow, …).
	Reason string
	// Status is the HTTP status to answer with when nothing was sent yet:
	// always 504 Gateway Timeout.
	Status int
	// Elapsed is the time from the start of the attempt to the abort.
	Elapsed time.Duration
	// Limit is the configured bound that was crossed: the window for a
	// throughput abort, the idle timeout or the attempt deadline.
	Limit time.Duration
	// WindowBytes and Rate describe the window at a throughput abort.
	WindowBytes int64
	Rate        float64
}

func newError(code string, elapsed, limit time.Duration) *Error {
	e := &Error{Code: code, Status: http.StatusGatewayTimeout, Elapsed: elapsed, Limit: limit}
	switch code {
	case CodeThroughputTooLow:
		e.Reason = ReasonThroughputTooLow
	case CodeIdleTimeout:
		e.Reason = ReasonIdleTimeout
	case CodeAttemptDeadline:
		e.Reason = ReasonAttemptDeadline
	}
	return e
}

// Error describes the abort.
func (e *Error) Error() string {
	switch e.Code {
	case CodeThroughputTooLow:
		return fmt.Sprintf("watchdog: stream throughput too low: %.3g useful B/s over %v (%d B) after %v",
			e.Rate, e.Limit, e.WindowBytes, e.Elapsed)
	case CodeIdleTimeout:
		return fmt.Sprintf("watchdog: stream idle for %v", e.Limit)
	case CodeAttemptDeadline:
		return fmt.Sprintf("watchdog: stream attempt deadline of %v exceeded", e.Limit)
	}
	return "watchdog: stream aborted: " + e.Code
}

// Is matches the sentinel of e's code.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrThroughputTooLow:
		return e.Code == CodeThroughputTooLow
	case ErrIdleTimeout:
		return e.Code == CodeIdleTimeout
	case ErrAttemptDeadline:
		return e.Code == CodeAttemptDeadline
	}
	return false
}

// Timeout reports true for the idle timeout and the attempt deadline, so
// net-style timeout checks recognise them.
func (e *Error) Timeout() bool {
	return e.Code == CodeIdleTimeout || e.Code == CodeAttemptDeadline
}
