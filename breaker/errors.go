package breaker

import (
	"errors"
	"net/http"
	"strconv"
	"time"
)

// ErrOpen is matched (with [errors.Is]) by every refusal of a breaker: open,
// or half-open with its probe already out. The refusal itself is an
// [*OpenError].
var ErrOpen = errors.New("breaker: circuit open")

// OpenCode is the stable code string of a breaker refusal.
const OpenCode = "provider_circuit_open"

// OpenError is a breaker's refusal. It matches [ErrOpen].
type OpenError struct {
	// Provider is the breaker's name.
	Provider string
	// State is Open, or HalfOpen when the probe slot is taken.
	State State
	// RetryAfter is how long until the breaker will admit a probe; never
	// negative.
	RetryAfter time.Duration
}

// Error returns a message naming the provider and the wait.
func (e *OpenError) Error() string {
	return "breaker: provider " + strconv.Quote(e.Provider) + " circuit " + e.State.String() +
		", retry after " + e.RetryAfter.String()
}

// Is reports whether target is [ErrOpen].
func (e *OpenError) Is(target error) bool { return target == ErrOpen }

// Code returns [OpenCode].
func (e *OpenError) Code() string { return OpenCode }

// HTTPStatus returns 503 (Service Unavailable), the status a gateway answers
// with when a provider's breaker refuses.
func (e *OpenError) HTTPStatus() int { return http.StatusServiceUnavailable }

// RetryAfterSeconds returns the value of a Retry-After header for this
// refusal: RetryAfter rounded up to whole seconds, at least 1.
func (e *OpenError) RetryAfterSeconds() int {
	return RetryAfterSeconds(e.RetryAfter)
}

// RetryAfterSeconds rounds d up to whole seconds, with a minimum of 1: the
// value of a Retry-After header.
func RetryAfterSeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// ErrInvalidSettings is matched by every [*SettingsError].
var ErrInvalidSettings = errors.New("breaker: invalid settings")

// SettingsError reports a rejected setting: a malformed environment value
// (which keeps its default) or an inconsistent pair that Validate refuses.
type SettingsError struct {
	// Name is the environment variable or field name.
	Name string
	// Value is the rejected input.
	Value string
	// Reason says what is wrong.
	Reason string
}

// Error returns "breaker: <name>=<value>: <reason>".
func (e *SettingsError) Error() string {
	return "breaker: " + e.Name + "=" + strconv.Quote(e.Value) + ": " + e.Reason
}

// Is reports whether target is [ErrInvalidSettings].
func (e *SettingsError) Is(target error) bool { return target == ErrInvalidSettings }

// Code returns "invalid_settings".
func (e *SettingsError) Code() string { return "invalid_settings" }

// HTTPStatus returns 400 (Bad Request).
func (e *SettingsError) HTTPStatus() int { return http.StatusBadRequest }
