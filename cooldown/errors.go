package cooldown

import (
	"fmt"
	"net/http"
	"time"
)

// Stable error codes carried by [Error].
const (
	// CodeCooling is the code of a connection that is cooling down.
	CodeCooling = "connection_cooldown"
	// CodeUnavailable is the code of a connection in a terminal state.
	CodeUnavailable = "unavailable"
)

// Sentinel errors matched by [Error] through errors.Is.
var (
	// ErrCooling matches an [Error] for a cooling connection.
	ErrCooling = fmt.Errorf("cooldown: %s", CodeCooling)
	// ErrUnavailable matches an [Error] for a terminal connection.
	ErrUnavailable = fmt.Errorf("cooldown: %s", CodeUnavailable)
)

// Error is the refusal returned by [Tracker.CheckAt] for a connection that
// may not be used. It matches [ErrCooling] or [ErrUnavailable] with
// errors.Is.
type Error struct {
	// Conn is the connection id.
	Conn string
	// Status is the connection's status when it was refused.
	Status Status
}

// Error describes the refusal.
func (e *Error) Error() string {
	s := e.Status
	if s.State == Cooling || (s.State == CreditsExhausted && !s.Until.IsZero()) {
		return fmt.Sprintf("cooldown: connection %s %s until %s (%s)", e.Conn, s.State, s.Until.Format(time.RFC3339), s.Reason)
	}
	return fmt.Sprintf("cooldown: connection %s %s (%s)", e.Conn, s.State, s.Reason)
}

// Is reports whether target is the sentinel matching the refusal's kind.
func (e *Error) Is(target error) bool {
	if e.Status.State == Cooling {
		return target == ErrCooling
	}
	return target == ErrUnavailable
}

// Code returns [CodeCooling] or [CodeUnavailable].
func (e *Error) Code() string {
	if e.Status.State == Cooling {
		return CodeCooling
	}
	return CodeUnavailable
}

// HTTPStatus returns 429 for a cooling connection and 503 otherwise.
func (e *Error) HTTPStatus() int {
	if e.Status.State == Cooling {
		return http.StatusTooManyRequests
	}
	return http.StatusServiceUnavailable
}

// FormatWait renders a wait the way the cooldown answers show it: seconds
// rounded up, zero parts dropped, at least "0s" (for example "1h 2m 3s",
// "2m 5s", "1h").
func FormatWait(d time.Duration) string {
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
