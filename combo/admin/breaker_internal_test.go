package admin

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard"
	"github.com/routeguard/routeguard/breaker"
)

// refusal opens an OAuth breaker (opens at 8, reset 60 s) for provider at
// T with failures of kind k and asks it again at T+after.
func refusal(t *testing.T, provider string, hints bool, k breaker.Kind, after time.Duration) *breaker.Error {
	t.Helper()
	T := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := breaker.NewSet(breaker.Config{
		ClassOf: func(string) routeguard.Class { return routeguard.OAuth },
		OAuth:   breaker.Profile{Hints: hints},
	})
	for range 8 {
		s.ReportAt(provider, breaker.Report{Outcome: breaker.Failure, Kind: k}, T)
	}
	_, err := s.AllowReportAt(provider, T.Add(after))
	var be *breaker.Error
	require.True(t, errors.As(err, &be), "%v", err)
	return be
}

// Spec M1.3 #3: 10 s into the open period the gate answers 503 with
// Retry-After 50, the breaker header and the error envelope (no
// failure_kind for failures without a kind).
func TestBreakerOpenScenarioOpensAtEight(t *testing.T) {
	be := refusal(t, "openai", false, breaker.KindNone, 10*time.Second)
	assert.Equal(t, 50, breakerRetryAfterSeconds(be.RetryAfter))
	rec := httptest.NewRecorder()
	WriteBreakerOpen(rec, be)
	assert.Equal(t, 503, rec.Code)
	assert.Equal(t, "50", rec.Header().Get("Retry-After"))
	assert.Equal(t, "open", rec.Header().Get("X-OmniRoute-Provider-Breaker"))
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	assert.JSONEq(t, `{"error":{"message":"Provider openai circuit breaker is open","type":"server_error",
		"code":"provider_circuit_open","provider":"openai","retry_after":50}}`, rec.Body.String())
}

// Spec M1.3 #16: with hints on, the quota failure that opened the breaker
// is named in the body, with the hour's wait.
func TestBreakerOpenBodyFailureKind(t *testing.T) {
	be := refusal(t, "claude", true, breaker.KindQuotaExhausted, 0)
	assert.JSONEq(t, `{"error":{"message":"Provider claude circuit breaker is open","type":"server_error",
		"code":"provider_circuit_open","provider":"claude","retry_after":3600,"failure_kind":"quota_exhausted"}}`,
		string(breakerOpenBody(be)))
}

// The pieces of the answer: Retry-After rounds up with a minimum of 1, the
// headers, the body with and without a kind.
func TestBreakerOpenPieces(t *testing.T) {
	assert.Equal(t, 2, breakerRetryAfterSeconds(1500*time.Millisecond))
	assert.Equal(t, 1, breakerRetryAfterSeconds(0))
	assert.Equal(t, 50, breakerRetryAfterSeconds(50*time.Second))
	h := http.Header{}
	setBreakerOpenHeaders(h, &breaker.Error{Code: breaker.CodeOpen, Provider: "p", State: breaker.HalfOpen})
	assert.Equal(t, http.Header{"Retry-After": {"1"}, "X-Omniroute-Provider-Breaker": {"open"}}, h)
	assert.JSONEq(t, `{"error":{"message":"Provider p circuit breaker is open","type":"server_error",
		"code":"provider_circuit_open","provider":"p","retry_after":2,"failure_kind":"rate_limit"}}`,
		string(breakerOpenBody(&breaker.Error{Provider: "p", RetryAfter: 1500 * time.Millisecond, Kind: breaker.KindRateLimit})))
	assert.NotContains(t, string(breakerOpenBody(&breaker.Error{Provider: "p", Kind: breaker.Kind(200)})), "failure_kind")
}

// A gateway that finds a provider's breaker open answers the client with
// the refusal itself: 503, Retry-After and the error envelope.
func TestWriteBreakerOpen(t *testing.T) {
	T := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := breaker.NewSet(breaker.Config{Profiles: map[string]breaker.Profile{"openai": {OpenAt: 1, Reset: time.Minute}}})
	s.ReportAt("openai", breaker.Report{Outcome: breaker.Failure}, T)
	_, err := s.AllowReportAt("openai", T)
	var be *breaker.Error
	require.True(t, errors.As(err, &be))
	rec := httptest.NewRecorder()
	WriteBreakerOpen(rec, be)
	assert.Equal(t, 503, rec.Code)
	assert.Equal(t, "60", rec.Header().Get("Retry-After"))
	assert.Equal(t, "open", rec.Header().Get(headerProviderBreaker))
	assert.Equal(t, `{"error":{"message":"Provider openai circuit breaker is open","type":"server_error","code":"provider_circuit_open","provider":"openai","retry_after":60}}`,
		rec.Body.String())
}
