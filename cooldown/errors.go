package cooldown

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Codes carried by [Error], the contract's strings.
const (
	// CodeCooling is the code of a connection that is cooling down
	// (HTTP 429).
	CodeCooling = "connection_cooldown"
	// CodeUnavailable is the code of a connection in a terminal state
	// (HTTP 503).
	CodeUnavailable = "unavailable"
	// CodeInvalidConfig is the code of a configuration value that cannot
	// be used (HTTP 400).
	CodeInvalidConfig = "invalid_config"
)

// Sentinels matched with errors.Is by the [*Error] of the same code.
var (
	// ErrCooling matches an [*Error] with [CodeCooling].
	ErrCooling = errors.New("cooldown: " + CodeCooling)
	// ErrUnavailable matches an [*Error] with [CodeUnavailable].
	ErrUnavailable = errors.New("cooldown: " + CodeUnavailable)
	// ErrInvalidConfig matches an [*Error] with [CodeInvalidConfig].
	ErrInvalidConfig = errors.New("cooldown: " + CodeInvalidConfig)
)

// Error is a refusal or failure of this package, with the contract's code
// and HTTP status: [Tracker.CheckAt] refuses a connection that may not be
// used with [CodeCooling] or [CodeUnavailable], and [FromEnv] refuses a bad
// value with [CodeInvalidConfig]. Match it with errors.As; its Unwrap gives
// the code's sentinel, so errors.Is matches [ErrCooling], [ErrUnavailable]
// or [ErrInvalidConfig].
type Error struct {
	// Code is one of the CodeX constants.
	Code string
	// Status is the HTTP status the contract gives the code: 429 for
	// CodeCooling, 503 for CodeUnavailable, 400 for CodeInvalidConfig.
	Status int

	// Conn is the refused connection.
	Conn string
	// State is the connection's state when it was refused.
	State State
	// Until is the end of the cooldown, or the known time the credits come
	// back; zero when only a reset lifts the state.
	Until time.Time
	// RetryAfter is how long after the check the connection becomes
	// available (Until minus the check's time); 0 when Until is zero.
	RetryAfter time.Duration
	// Reason is, for a refused connection, the classified reason of the
	// failure behind its state; for an invalid configuration, what is
	// wrong with the value.
	Reason string

	// Field and Value are the environment variable and the value refused
	// with CodeInvalidConfig.
	Field, Value string

	err error // the sentinel of Code
}

// refusal returns the error of a connection whose status s at now is not
// available.
func refusal(conn string, s Status, now time.Time) *Error {
	e := &Error{Code: CodeUnavailable, Status: http.StatusServiceUnavailable, err: ErrUnavailable,
		Conn: conn, State: s.State, Until: s.Until, Reason: s.Reason}
	if s.State == Cooling {
		e.Code, e.Status, e.err = CodeCooling, http.StatusTooManyRequests, ErrCooling
	}
	if !s.Until.IsZero() {
		e.RetryAfter = max(s.Until.Sub(now), 0)
	}
	return e
}

// invalidConfig is the refusal of an environment value, for config.Env.
func invalidConfig(name, value string, reason error) error {
	return &Error{Code: CodeInvalidConfig, Status: http.StatusBadRequest, err: ErrInvalidConfig,
		Field: name, Value: value, Reason: reason.Error()}
}

// Error describes the refusal, starting "cooldown: <code>: ".
func (e *Error) Error() string {
	b := []byte("cooldown: " + e.Code + ": ")
	if e.Code == CodeInvalidConfig {
		b = append(b, e.Field...)
		b = append(b, '=')
		b = strconv.AppendQuote(b, e.Value)
		b = append(b, ": "...)
		b = append(b, e.Reason...)
		return string(b)
	}
	b = fmt.Appendf(b, "connection %s %s", e.Conn, e.State)
	if !e.Until.IsZero() {
		b = fmt.Appendf(b, " until %s, reset after %s", e.Until.Format(time.RFC3339), formatWait(e.RetryAfter))
	}
	if e.Reason != "" {
		b = fmt.Appendf(b, " (%s)", e.Reason)
	}
	return string(b)
}

// Unwrap returns the sentinel of the error's code.
func (e *Error) Unwrap() error { return e.err }

// formatWait renders a wait the way the cooldown answers show it ("reset
// after 1h 2m 3s"): seconds rounded up, zero parts dropped, at least "0s"
// (for example "1h 2m 3s", "2m 5s", "1h").
func formatWait(d time.Duration) string {
	var secs int64
	if d > 0 {
		secs = int64(d / time.Second)
		if d%time.Second != 0 {
			secs++
		}
	}
	h, m, s := secs/3600, secs/60%60, secs%60
	var b []byte
	if h > 0 {
		b = fmt.Appendf(b, "%dh", h)
	}
	if m > 0 {
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = fmt.Appendf(b, "%dm", m)
	}
	if s > 0 || len(b) == 0 {
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = fmt.Appendf(b, "%ds", s)
	}
	return string(b)
}
