package breaker

import (
	"errors"
	"net/http"
	"strconv"
	"time"
)

// The sentinels. Every error the package returns is an [*Error] whose
// Unwrap gives one of them, so errors.Is matches the code without reading
// it.
var (
	// ErrOpen is matched by every refusal of a breaker: open, or half-open
	// with its probe already out. Code [CodeOpen].
	ErrOpen = errors.New("breaker: circuit open")
	// ErrInvalidConfig is matched by every refused setting: a malformed
	// environment value (which keeps its default) or a pair that
	// [GateConfig.Validate] refuses. Code [CodeInvalidConfig].
	ErrInvalidConfig = errors.New("breaker: invalid config")
	// ErrInvalidRecord is matched by every refused [Record] (restore) and
	// every state or kind name that does not decode. Code
	// [CodeInvalidRecord].
	ErrInvalidRecord = errors.New("breaker: invalid record")
)

// The codes of [Error.Code].
const (
	// CodeOpen is a breaker's refusal; HTTP 503.
	CodeOpen = "provider_circuit_open"
	// CodeInvalidConfig is a refused setting; HTTP 400.
	CodeInvalidConfig = "invalid_config"
	// CodeInvalidRecord is a refused record, state name or kind name; HTTP
	// 400.
	CodeInvalidRecord = "invalid_record"
)

// Error is a refusal or failure of this package, with the contract's code
// and HTTP status. Match it with [errors.As]; its Unwrap gives the code's
// sentinel ([ErrOpen], [ErrInvalidConfig] or [ErrInvalidRecord]), so
// [errors.Is] matches too.
//
// A refusal ([CodeOpen]) fills Provider, State, RetryAfter and Kind. A
// refused setting ([CodeInvalidConfig]) fills Field (the environment
// variable or field name), Value and Reason. A refused record
// ([CodeInvalidRecord]) fills Provider (when the record names one), Value
// (for a state or kind name) and Reason.
type Error struct {
	// Code is one of the CodeX constants.
	Code string
	// Status is the HTTP status the contract gives the code: 503 for
	// CodeOpen, 400 for the others.
	Status int
	// Provider is the breaker's name.
	Provider string
	// State is Open, or HalfOpen when the probe slot is taken (CodeOpen).
	State State
	// RetryAfter is how long until the breaker admits a probe; never
	// negative (CodeOpen).
	RetryAfter time.Duration
	// Kind is the kind of the breaker's last counted failure; KindNone when
	// the failure had no kind (CodeOpen).
	Kind Kind
	// Field names the refused setting: the environment variable or the
	// field (CodeInvalidConfig).
	Field string
	// Value is the refused input.
	Value string
	// Reason says what is wrong.
	Reason string
}

// Error returns "breaker: <code>: <detail>".
func (e *Error) Error() string {
	msg := "breaker: " + e.Code + ": "
	switch e.Code {
	case CodeOpen:
		return msg + "provider " + strconv.Quote(e.Provider) + " circuit " + e.State.String() +
			", retry after " + e.RetryAfter.String()
	case CodeInvalidConfig:
		return msg + e.Field + "=" + strconv.Quote(e.Value) + ": " + e.Reason
	case CodeInvalidRecord:
		if e.Value != "" {
			return msg + strconv.Quote(e.Value) + ": " + e.Reason
		}
		return msg + "record " + strconv.Quote(e.Provider) + ": " + e.Reason
	}
	return msg + e.Reason
}

// Unwrap returns the sentinel of e.Code: [ErrOpen], [ErrInvalidConfig] or
// [ErrInvalidRecord]; nil for a code the package does not give.
func (e *Error) Unwrap() error {
	switch e.Code {
	case CodeOpen:
		return ErrOpen
	case CodeInvalidConfig:
		return ErrInvalidConfig
	case CodeInvalidRecord:
		return ErrInvalidRecord
	}
	return nil
}

// openError is a refusal of the breaker provider.
func openError(provider string, st State, retry time.Duration, k Kind) *Error {
	return &Error{Code: CodeOpen, Status: http.StatusServiceUnavailable, Provider: provider,
		State: st, RetryAfter: retry, Kind: k}
}

// configError is a refused setting.
func configError(field, value, reason string) *Error {
	return &Error{Code: CodeInvalidConfig, Status: http.StatusBadRequest, Field: field, Value: value, Reason: reason}
}

// recordError is a refused record of provider.
func recordError(provider, reason string) *Error {
	return &Error{Code: CodeInvalidRecord, Status: http.StatusBadRequest, Provider: provider, Reason: reason}
}

// nameError is a state or kind name that does not decode.
func nameError(value, reason string) *Error {
	return &Error{Code: CodeInvalidRecord, Status: http.StatusBadRequest, Value: value, Reason: reason}
}
