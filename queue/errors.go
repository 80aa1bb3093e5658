package queue

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Codes carried by [Error], the contract's strings. The request queue
// ([Queue.Acquire], [Queue.Do]) and the hierarchical semaphore
// ([Queue.AcquireMany]) each have their own codes for a full queue and a
// timed-out wait.
const (
	// CodeQueueFull: the request queue of the key already holds
	// MaxQueueDepth waiters (Acquire, Do), or the key is new and the queue
	// already keeps Config.MaxKeys keys, none of them idle (Acquire,
	// AcquireMany; [Error.Keys] is then set). HTTP 429.
	CodeQueueFull = "RATE_LIMIT_QUEUE_FULL"
	// CodeQueueTimeout: the wait for a slot in the request queue exceeded
	// MaxQueueWait (Acquire, Do). HTTP 429.
	CodeQueueTimeout = "RATE_LIMIT_QUEUE_TIMEOUT"
	// CodeSemaphoreQueueFull: a key needed by AcquireMany already holds
	// ManyOptions.MaxQueue waiters. HTTP 429.
	CodeSemaphoreQueueFull = "SEMAPHORE_QUEUE_FULL"
	// CodeSemaphoreTimeout: AcquireMany did not get every slot within
	// ManyOptions.Timeout. HTTP 429.
	CodeSemaphoreTimeout = "SEMAPHORE_TIMEOUT"
	// CodeExecutionTimeout: a started request ran longer than
	// ExecutionTimeout. HTTP 504.
	CodeExecutionTimeout = "RATE_LIMIT_EXECUTION_TIMEOUT"
	// CodeReset: the key was reset while the request waited. HTTP 503.
	CodeReset = "SEMAPHORE_RESET"
	// CodeInvalidConfig: an environment value [FromEnv] cannot use.
	// HTTP 400.
	CodeInvalidConfig = "invalid_config"
)

// Sentinels, matched with errors.Is by the [*Error] of their code.
//
// [ErrQueueFull] and [ErrQueueTimeout] are the general sentinels: they match
// the refusals and timeouts of both the request queue and the semaphore.
// [ErrSemaphoreQueueFull] and [ErrSemaphoreTimeout] match only the
// semaphore's; to tell a request-queue error apart, compare [Error.Code].
//
//	path                     code                          status  errors.Is
//	Acquire, queue full      RATE_LIMIT_QUEUE_FULL         429     ErrQueueFull
//	Acquire, wait ran out    RATE_LIMIT_QUEUE_TIMEOUT      429     ErrQueueTimeout
//	AcquireMany, queue full  SEMAPHORE_QUEUE_FULL          429     ErrSemaphoreQueueFull, ErrQueueFull
//	AcquireMany, wait out    SEMAPHORE_TIMEOUT             429     ErrSemaphoreTimeout, ErrQueueTimeout
//	Do, run past its budget  RATE_LIMIT_EXECUTION_TIMEOUT  504     ErrExecutionTimeout
//	waiter of a reset key    SEMAPHORE_RESET               503     ErrReset
//	new key, MaxKeys busy    RATE_LIMIT_QUEUE_FULL         429     ErrQueueFull (Error.Keys set)
//	FromEnv, bad value       invalid_config                400     ErrInvalidConfig
//
// Every refusal and wait timeout answers 429, never a 5xx, so that a local
// capacity limit is not mistaken for an upstream failure (which would trip a
// provider breaker).
var (
	// ErrQueueFull is matched by refusals because a queue is full, the
	// request queue's (RATE_LIMIT_QUEUE_FULL) and the semaphore's
	// (SEMAPHORE_QUEUE_FULL).
	ErrQueueFull = errors.New("queue: queue full")
	// ErrQueueTimeout is matched when the wait for a slot ran out, in the
	// request queue (RATE_LIMIT_QUEUE_TIMEOUT) or the semaphore
	// (SEMAPHORE_TIMEOUT).
	ErrQueueTimeout = errors.New("queue: no slot within the wait budget")
	// ErrSemaphoreQueueFull is matched only by the semaphore's refusals
	// (SEMAPHORE_QUEUE_FULL).
	ErrSemaphoreQueueFull = errors.New("queue: semaphore queue full")
	// ErrSemaphoreTimeout is matched only by the semaphore's wait timeouts
	// (SEMAPHORE_TIMEOUT).
	ErrSemaphoreTimeout = errors.New("queue: semaphore timeout")
	// ErrExecutionTimeout is matched when a started request ran out of its
	// execution budget (RATE_LIMIT_EXECUTION_TIMEOUT).
	ErrExecutionTimeout = errors.New("queue: execution exceeded its budget")
	// ErrReset is matched by waiters rejected because their key was reset
	// (SEMAPHORE_RESET).
	ErrReset = errors.New("queue: key was reset")
	// ErrInvalidConfig is matched by the refusals of [FromEnv]
	// (invalid_config).
	ErrInvalidConfig = errors.New("queue: invalid config")
)

// The sentinels each code unwraps to, shared by every error of the code.
var (
	unwrapQueueFull          = []error{ErrQueueFull}
	unwrapQueueTimeout       = []error{ErrQueueTimeout}
	unwrapSemaphoreQueueFull = []error{ErrSemaphoreQueueFull, ErrQueueFull}
	unwrapSemaphoreTimeout   = []error{ErrSemaphoreTimeout, ErrQueueTimeout}
	unwrapExecutionTimeout   = []error{ErrExecutionTimeout}
	unwrapReset              = []error{ErrReset}
	unwrapInvalidConfig      = []error{ErrInvalidConfig}
)

// Error is a refusal or failure of this package, with the contract's code
// and HTTP status: a full queue, a wait or run past its budget, a reset, or
// a bad environment value. Match it with errors.As; its Unwrap gives the
// sentinels of its code (see the table at [ErrQueueFull]), so errors.Is
// matches them. Errors may be shared between callers and must not be
// modified.
type Error struct {
	// Code is one of the CodeX constants.
	Code string
	// Status is the HTTP status the contract gives the code: 429 for the
	// full queues and wait timeouts, 504 for CodeExecutionTimeout, 503
	// for CodeReset, 400 for CodeInvalidConfig.
	Status int
	// Key is the key concerned; for several keys they are joined by commas.
	Key string
	// Depth is the queue depth that was reached (the queue-full codes).
	Depth int
	// Keys is, for the refusal of a new key because the queue keeps
	// Config.MaxKeys keys and none of them is idle (CodeQueueFull), that
	// MaxKeys; zero for every other error.
	Keys int
	// Budget is the wait or execution budget that ran out (timeouts).
	Budget time.Duration
	// Err is, for an execution timeout returned by [Queue.Do], what the
	// run returned; errors.Is and errors.As see it too.
	Err error
	// Field and Value are the environment variable and the value refused
	// with CodeInvalidConfig, and Reason what is wrong with it.
	Field, Value, Reason string

	errs []error // what Unwrap returns: the code's sentinels, then Err
}

// newError returns an error of code, matching the code's sentinels.
func newError(code, key string) *Error {
	e := &Error{Code: code, Key: key}
	switch code {
	case CodeQueueFull:
		e.Status, e.errs = http.StatusTooManyRequests, unwrapQueueFull
	case CodeQueueTimeout:
		e.Status, e.errs = http.StatusTooManyRequests, unwrapQueueTimeout
	case CodeSemaphoreQueueFull:
		e.Status, e.errs = http.StatusTooManyRequests, unwrapSemaphoreQueueFull
	case CodeSemaphoreTimeout:
		e.Status, e.errs = http.StatusTooManyRequests, unwrapSemaphoreTimeout
	case CodeExecutionTimeout:
		e.Status, e.errs = http.StatusGatewayTimeout, unwrapExecutionTimeout
	case CodeReset:
		e.Status, e.errs = http.StatusServiceUnavailable, unwrapReset
	case CodeInvalidConfig:
		e.Status, e.errs = http.StatusBadRequest, unwrapInvalidConfig
	}
	return e
}

// withErr returns a copy of e that also wraps err.
func (e *Error) withErr(err error) *Error {
	out := *e
	out.Err = err
	out.errs = append(append(make([]error, 0, len(e.errs)+1), e.errs...), err)
	return &out
}

// invalidConfig is the refusal of an environment value, for config.Env.
func invalidConfig(name, value string, reason error) error {
	e := newError(CodeInvalidConfig, "")
	e.Field, e.Value, e.Reason = name, value, reason.Error()
	return e
}

// Error returns a lowercase message prefixed with "queue:".
func (e *Error) Error() string {
	key := e.Key
	if key == "" {
		key = "key"
	}
	switch e.Code {
	case CodeQueueFull:
		if e.Keys > 0 {
			return fmt.Sprintf("queue: queue full (%d keys kept, none idle) for new key %s", e.Keys, key)
		}
		if e.Depth > 0 {
			return fmt.Sprintf("queue: queue full (%d waiting) for %s", e.Depth, key)
		}
		return "queue: queue full for " + key
	case CodeQueueTimeout:
		if e.Budget > 0 {
			return fmt.Sprintf("queue: no slot for %s within %v", key, e.Budget)
		}
		return "queue: no slot for " + key + " within the wait budget"
	case CodeSemaphoreQueueFull:
		if e.Depth > 0 {
			return fmt.Sprintf("queue: semaphore queue full (%d) for %s", e.Depth, key)
		}
		return "queue: semaphore queue full for " + key
	case CodeSemaphoreTimeout:
		if e.Budget > 0 {
			return fmt.Sprintf("queue: semaphore timeout after %v for %s", e.Budget, key)
		}
		return "queue: semaphore timeout for " + key
	case CodeExecutionTimeout:
		if e.Budget > 0 {
			return fmt.Sprintf("queue: execution on %s exceeded %v", key, e.Budget)
		}
		return "queue: execution on " + key + " exceeded its budget"
	case CodeReset:
		return "queue: " + key + " was reset"
	case CodeInvalidConfig:
		return "queue: " + CodeInvalidConfig + ": " + e.Field + "=" + strconv.Quote(e.Value) + ": " + e.Reason
	}
	return "queue: " + e.Code + " for " + key
}

// Unwrap returns the sentinels of e's code (two for the semaphore codes:
// its own and the general one) followed by Err, if any.
func (e *Error) Unwrap() []error { return e.errs }
