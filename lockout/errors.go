package lockout

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Codes of [Error], the contract's strings.
const (
	// CodeLocked is the exclusion reason a router reports for a locked
	// model; Status 503.
	CodeLocked = "model_lockout"
	// CodeInvalidConfig marks a configuration value that could not be used;
	// Status 400.
	CodeInvalidConfig = "invalid_config"
)

// Sentinels matched with errors.Is by every [*Error] of the matching code.
var (
	ErrLocked        = errors.New("lockout: model locked")
	ErrInvalidConfig = errors.New("lockout: invalid config")
)

// Error is a refusal or failure of this package, with the contract's code
// and HTTP status. [Lockout.CheckAt] returns one with [CodeLocked];
// [FromEnv] returns them, joined, with [CodeInvalidConfig].
type Error struct {
	Code   string // CodeLocked or CodeInvalidConfig
	Status int    // 503 for CodeLocked, 400 for CodeInvalidConfig

	// CodeLocked: the locked model and its lock.
	Provider   string // canonical provider id
	Connection string
	Model      string
	Reason     Reason
	Until      time.Time     // the model is locked at Until itself
	RetryAfter time.Duration // Until minus the time of the check

	// CodeInvalidConfig: the environment variable and its value.
	Field string
	Value string

	detail string // what was wrong with Value
	err    error  // the sentinel of Code
}

// Error returns "lockout: <code>: <detail>".
func (e *Error) Error() string {
	if e.Code == CodeLocked {
		return fmt.Sprintf("lockout: %s: model %s locked on %s/%s (%s) for %v",
			e.Code, e.Model, e.Provider, e.Connection, e.Reason, e.RetryAfter)
	}
	return fmt.Sprintf("lockout: %s: %s=%q: %s", e.Code, e.Field, e.Value, e.detail)
}

// Unwrap returns the sentinel of e.Code: [ErrLocked] or [ErrInvalidConfig].
func (e *Error) Unwrap() error { return e.err }

func invalidConfig(field, value, detail string) *Error {
	return &Error{Code: CodeInvalidConfig, Status: http.StatusBadRequest,
		Field: field, Value: value, detail: detail, err: ErrInvalidConfig}
}

func lockedError(provider, connection, model string, reason Reason, until, now time.Time) *Error {
	return &Error{Code: CodeLocked, Status: http.StatusServiceUnavailable,
		Provider: provider, Connection: connection, Model: model,
		Reason: reason, Until: until, RetryAfter: until.Sub(now), err: ErrLocked}
}
