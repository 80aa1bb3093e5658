package queue

import (
	"fmt"
	"net/http"
	"time"
)

// Error codes carried by [Error].
const (
	// CodeQueueFull: the key's queue already holds MaxQueueDepth waiters.
	CodeQueueFull = "RATE_LIMIT_QUEUE_FULL"
	// CodeQueueTimeout: the wait for a slot exceeded MaxQueueWait.
	CodeQueueTimeout = "RATE_LIMIT_QUEUE_TIMEOUT"
	// CodeExecutionTimeout: a started request ran longer than ExecutionTimeout.
	CodeExecutionTimeout = "RATE_LIMIT_EXECUTION_TIMEOUT"
	// CodeReset: the key was reset while the request waited.
	CodeReset = "SEMAPHORE_RESET"
)

// Sentinel errors. Every error the queue returns for a refusal, a timeout or
// a reset is an [*Error] that matches one of these with errors.Is.
var (
	// ErrQueueFull is matched by refusals because the queue is full (HTTP 429).
	ErrQueueFull = &Error{Code: CodeQueueFull, Status: http.StatusTooManyRequests}
	// ErrQueueTimeout is matched when the wait for a slot ran out (HTTP 429).
	ErrQueueTimeout = &Error{Code: CodeQueueTimeout, Status: http.StatusTooManyRequests}
	// ErrExecutionTimeout is matched when a started request ran out of its
	// execution budget (HTTP 504).
	ErrExecutionTimeout = &Error{Code: CodeExecutionTimeout, Status: http.StatusGatewayTimeout}
	// ErrReset is matched by waiters rejected because their key was reset
	// (HTTP 503).
	ErrReset = &Error{Code: CodeReset, Status: http.StatusServiceUnavailable}
)

// Error is a refusal, timeout or reset reported by the queue. It matches the
// sentinel with the same Code under errors.Is, and errors.As gives the
// details.
type Error struct {
	// Code is the stable code string, one of the Code constants.
	Code string
	// Status is the HTTP status to answer with.
	Status int
	// Key is the key concerned; for several keys they are joined by commas.
	// It is empty for the sentinels.
	Key string
	// Depth is the queue depth that was reached (CodeQueueFull).
	Depth int
	// Budget is the wait or execution budget that ran out (timeouts).
	Budget time.Duration
	// Err is the underlying error, if any: for an execution timeout, what
	// the run returned.
	Err error
}

// Error returns a lowercase message prefixed with "queue:".
func (e *Error) Error() string {
	key := e.Key
	if key == "" {
		key = "key"
	}
	switch e.Code {
	case CodeQueueFull:
		if e.Depth > 0 {
			return fmt.Sprintf("queue: queue full (%d waiting) for %s", e.Depth, key)
		}
		return "queue: queue full for " + key
	case CodeQueueTimeout:
		if e.Budget > 0 {
			return fmt.Sprintf("queue: no slot for %s within %v", key, e.Budget)
		}
		return "queue: no slot for " + key + " within the wait budget"
	case CodeExecutionTimeout:
		if e.Budget > 0 {
			return fmt.Sprintf("queue: execution on %s exceeded %v", key, e.Budget)
		}
		return "queue: execution on " + key + " exceeded its budget"
	case CodeReset:
		return "queue: " + key + " was reset"
	}
	return "queue: " + e.Code + " for " + key
}

// Is reports whether target is an [*Error] with the same Code, so that a
// detailed error matches its sentinel.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Unwrap returns the underlying error, if any.
func (e *Error) Unwrap() error { return e.Err }

// Timeout reports whether the error is one of the two budget timeouts.
func (e *Error) Timeout() bool {
	return e.Code == CodeQueueTimeout || e.Code == CodeExecutionTimeout
}
