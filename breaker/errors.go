package breaker

import (
	"encoding/json"
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
	// Kind is the kind of the breaker's last counted failure; KindNone when
	// the failure had no kind.
	Kind Kind
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

// HeaderProviderBreaker names the header that marks a breaker refusal's
// answer; its value is "open".
const HeaderProviderBreaker = "X-OmniRoute-Provider-Breaker"

// SetHeaders sets the headers of the refusal's answer on h: Retry-After
// ([OpenError.RetryAfterSeconds]) and [HeaderProviderBreaker] "open".
func (e *OpenError) SetHeaders(h http.Header) {
	h.Set("Retry-After", strconv.Itoa(e.RetryAfterSeconds()))
	h.Set(HeaderProviderBreaker, "open")
}

// openBody is the JSON answer to a request a breaker refused.
type openBody struct {
	Error struct {
		Message     string `json:"message"`
		Type        string `json:"type"`
		Code        string `json:"code"`
		Provider    string `json:"provider"`
		RetryAfter  int    `json:"retry_after"`
		FailureKind string `json:"failure_kind,omitempty"`
	} `json:"error"`
}

// Body returns the JSON body of the refusal's answer:
//
//	{"error":{"message":"Provider <p> circuit breaker is open","type":"server_error",
//	  "code":"provider_circuit_open","provider":"<p>","retry_after":S,"failure_kind":"<kind>"}}
//
// where S is [OpenError.RetryAfterSeconds] and failure_kind is left out
// when Kind is KindNone.
func (e *OpenError) Body() []byte {
	var b openBody
	b.Error.Message = "Provider " + e.Provider + " circuit breaker is open"
	b.Error.Type = "server_error"
	b.Error.Code = OpenCode
	b.Error.Provider = e.Provider
	b.Error.RetryAfter = e.RetryAfterSeconds()
	if e.Kind != KindNone && int(e.Kind) < NumKinds {
		b.Error.FailureKind = e.Kind.String()
	}
	out, _ := json.Marshal(b) // strings and ints only: never fails
	return out
}

// WriteHTTP answers w with the refusal: status 503, the headers of
// [OpenError.SetHeaders], Content-Type application/json and
// [OpenError.Body].
func (e *OpenError) WriteHTTP(w http.ResponseWriter) {
	e.SetHeaders(w.Header())
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.HTTPStatus())
	_, _ = w.Write(e.Body())
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
