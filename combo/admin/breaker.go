package admin

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/routeguard/routeguard/breaker"
)

// The answer a gateway gives to a request that a provider's circuit
// breaker refused (the single-model gate of the contract): 503 (the
// refusal's Status), Retry-After, the X-OmniRoute-Provider-Breaker header
// and the provider_circuit_open envelope. The breaker package decides and
// carries the code, status, wait and failure kind on its *breaker.Error;
// the wire format is this package's.
//
// A router answers a request whose every target is held back (an open
// breaker among them) with its own 503 all_targets_cooling_down;
// WriteBreakerOpen is for a handler that asks one provider's breaker
// itself, outside a router, and answers its refusal.

// headerProviderBreaker marks a breaker refusal's answer; its value is
// "open".
const headerProviderBreaker = "X-OmniRoute-Provider-Breaker"

// breakerRetryAfterSeconds rounds d up to whole seconds, with a minimum of
// 1: the Retry-After of a breaker refusal.
func breakerRetryAfterSeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// setBreakerOpenHeaders sets the headers of a refusal's answer on h:
// Retry-After (breakerRetryAfterSeconds of the wait) and
// headerProviderBreaker "open".
func setBreakerOpenHeaders(h http.Header, e *breaker.Error) {
	h.Set("Retry-After", strconv.Itoa(breakerRetryAfterSeconds(e.RetryAfter)))
	h.Set(headerProviderBreaker, "open")
}

// breakerOpenJSON is the JSON answer to a request a breaker refused.
type breakerOpenJSON struct {
	Error struct {
		Message     string `json:"message"`
		Type        string `json:"type"`
		Code        string `json:"code"`
		Provider    string `json:"provider"`
		RetryAfter  int    `json:"retry_after"`
		FailureKind string `json:"failure_kind,omitempty"`
	} `json:"error"`
}

// breakerOpenBody returns the JSON body of a refusal's answer:
//
//	{"error":{"message":"Provider <p> circuit breaker is open","type":"server_error",
//	  "code":"provider_circuit_open","provider":"<p>","retry_after":S,"failure_kind":"<kind>"}}
//
// where S is breakerRetryAfterSeconds of the wait and failure_kind is left
// out when the refusal has no kind (or one that does not encode).
func breakerOpenBody(e *breaker.Error) []byte {
	var b breakerOpenJSON
	b.Error.Message = "Provider " + e.Provider + " circuit breaker is open"
	b.Error.Type = "server_error"
	b.Error.Code = breaker.CodeOpen
	b.Error.Provider = e.Provider
	b.Error.RetryAfter = breakerRetryAfterSeconds(e.RetryAfter)
	if e.Kind != breaker.KindNone {
		if k, err := e.Kind.MarshalText(); err == nil {
			b.Error.FailureKind = string(k)
		}
	}
	out, _ := json.Marshal(b) // strings and ints only: never fails
	return out
}

// WriteBreakerOpen answers w with the refusal of a provider's circuit
// breaker (the *breaker.Error that [breaker.Set.AllowReportAt] returns): its
// Status (503 when unset), Retry-After S, X-OmniRoute-Provider-Breaker: open,
// Content-Type application/json and the body
//
//	{"error":{"message":"Provider <p> circuit breaker is open","type":"server_error",
//	  "code":"provider_circuit_open","provider":"<p>","retry_after":S,"failure_kind":"<kind>"}}
//
// where S is the refusal's RetryAfter rounded up to whole seconds, at least
// 1, and failure_kind (the failure that opened the breaker, when its
// profile gives hints) is left out when the refusal has none.
func WriteBreakerOpen(w http.ResponseWriter, e *breaker.Error) {
	setBreakerOpenHeaders(w.Header(), e)
	w.Header().Set("Content-Type", "application/json")
	status := e.Status
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	w.WriteHeader(status)
	_, _ = w.Write(breakerOpenBody(e))
}
