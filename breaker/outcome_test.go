package breaker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClassify(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	cases := []struct {
		status int
		err    error
		want   Outcome
	}{
		{200, nil, Success},
		{204, nil, Success},
		{304, nil, Success},
		{408, nil, Failure},
		{500, nil, Failure},
		{502, nil, Failure},
		{503, nil, Failure},
		{504, nil, Failure},
		{400, nil, Ignored},
		{401, nil, Ignored},
		{403, nil, Ignored},
		{404, nil, Ignored},
		{429, nil, Ignored},
		{501, nil, Ignored},
		{529, nil, Ignored},
		{0, nil, Ignored},
		{0, context.Canceled, Ignored},
		{0, fmt.Errorf("read: %w", context.DeadlineExceeded), Ignored},
		{0, dial, Failure},
		{0, fmt.Errorf("post: %w", dial), Failure},
		{0, errors.New("Controller is already closed"), Ignored},
		{0, errors.New("exec: ENOENT"), Ignored},
		{503, context.Canceled, Ignored},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, Classify(tc.status, tc.err), "Classify(%d, %v)", tc.status, tc.err)
	}
}

func TestClassifyBody(t *testing.T) {
	cases := []struct {
		status int
		body   string
		want   Outcome
	}{
		{502, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, Ignored},
		{503, `Service OVERLOADED`, Ignored},
		{502, `{"error":{"code":"proxy_unreachable"}}`, Ignored},
		{502, `bad gateway`, Failure},
		{503, ``, Failure},
		{200, `overloaded`, Success},
		{429, `overloaded`, Ignored},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, ClassifyBody(tc.status, []byte(tc.body), nil), "ClassifyBody(%d, %q)", tc.status, tc.body)
	}
}

func TestStrings(t *testing.T) {
	assert.Equal(t, []string{"closed", "degraded", "open", "half-open", "state(9)"},
		[]string{Closed.String(), Degraded.String(), Open.String(), HalfOpen.String(), State(9).String()})
	assert.Equal(t, []string{"ignored", "success", "failure", "outcome(7)"},
		[]string{Ignored.String(), Success.String(), Failure.String(), Outcome(7).String()})
	assert.Equal(t, []string{"apikey", "oauth", "local", "class(5)"},
		[]string{APIKey.String(), OAuth.String(), Local.String(), Class(5).String()})
	txt, err := HalfOpen.MarshalText()
	assert.NoError(t, err)
	assert.Equal(t, "HALF_OPEN", string(txt))
	for _, st := range []State{Closed, Degraded, Open, HalfOpen} {
		txt, err := st.MarshalText()
		require.NoError(t, err)
		back, err := ParseState(string(txt))
		require.NoError(t, err)
		assert.Equal(t, st, back, "%s round-trips", txt)
	}
	_, err = State(9).MarshalText()
	assert.Error(t, err)
	for _, s := range []string{"apikey", "api_key", "oauth", "local"} {
		_, ok := ParseClass(s)
		assert.True(t, ok, s)
	}
	c, ok := ParseClass("x")
	assert.False(t, ok)
	assert.Equal(t, APIKey, c)
}

func TestErrors(t *testing.T) {
	e := &OpenError{Provider: "openai", State: Open, RetryAfter: 1500 * time.Millisecond}
	assert.Equal(t, `breaker: provider "openai" circuit open, retry after 1.5s`, e.Error())
	assert.Equal(t, 2, e.RetryAfterSeconds())
	assert.Equal(t, 1, RetryAfterSeconds(0))
	assert.Equal(t, 50, RetryAfterSeconds(50*time.Second))
	assert.True(t, errors.Is(fmt.Errorf("wrapped: %w", e), ErrOpen))
	h := http.Header{}
	(&OpenError{Provider: "p", State: HalfOpen}).SetHeaders(h)
	assert.Equal(t, http.Header{"Retry-After": {"1"}, "X-Omniroute-Provider-Breaker": {"open"}}, h)
	assert.JSONEq(t, `{"error":{"message":"Provider p circuit breaker is open","type":"server_error",
		"code":"provider_circuit_open","provider":"p","retry_after":2,"failure_kind":"rate_limit"}}`,
		string((&OpenError{Provider: "p", RetryAfter: 1500 * time.Millisecond, Kind: KindRateLimit}).Body()))
	assert.NotContains(t, string((&OpenError{Provider: "p", Kind: Kind(200)}).Body()), "failure_kind")
	se := &SettingsError{Name: "X", Value: "abc", Reason: "not a number"}
	assert.Equal(t, `breaker: X="abc": not a number`, se.Error())
	assert.Equal(t, "invalid_settings", se.Code())
}
