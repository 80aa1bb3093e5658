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
		assert.Equal(t, tc.want, Classify(tc.status, nil, tc.err), "Classify(%d, nil, %v)", tc.status, tc.err)
		assert.Equal(t, tc.want, Classify(tc.status, []byte("bad gateway"), tc.err), "Classify(%d, body, %v)", tc.status, tc.err)
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
		assert.Equal(t, tc.want, Classify(tc.status, []byte(tc.body), nil), "Classify(%d, %q, nil)", tc.status, tc.body)
	}
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	assert.Equal(t, Failure, Classify(0, []byte("overloaded"), dial), "an error is judged by the error alone")
	assert.Zero(t, testing.AllocsPerRun(100, func() { Classify(502, []byte(`{"error":"Overloaded"}`), nil) }))
}

func TestStrings(t *testing.T) {
	assert.Equal(t, []string{"closed", "degraded", "open", "half-open", "state(9)"},
		[]string{Closed.String(), Degraded.String(), Open.String(), HalfOpen.String(), State(9).String()})
	assert.Equal(t, []string{"ignored", "success", "failure", "outcome(7)"},
		[]string{Ignored.String(), Success.String(), Failure.String(), Outcome(7).String()})
	txt, err := HalfOpen.MarshalText()
	assert.NoError(t, err)
	assert.Equal(t, "HALF_OPEN", string(txt))
	for _, st := range []State{Closed, Degraded, Open, HalfOpen} {
		txt, err := st.MarshalText()
		require.NoError(t, err)
		back, err := parseState(string(txt))
		require.NoError(t, err)
		assert.Equal(t, st, back, "%s round-trips", txt)
	}
	_, err = State(9).MarshalText()
	assert.ErrorIs(t, err, ErrInvalidRecord)
}

// Every refusal is an *Error whose Unwrap gives the code's sentinel, with
// the contract's code and status; the sentinels are plain values.
func TestErrors(t *testing.T) {
	e := openError("openai", Open, 1500*time.Millisecond, KindRateLimit)
	assert.Equal(t, &Error{Code: CodeOpen, Status: 503, Provider: "openai", State: Open,
		RetryAfter: 1500 * time.Millisecond, Kind: KindRateLimit}, e)
	assert.Equal(t, `breaker: provider_circuit_open: provider "openai" circuit open, retry after 1.5s`, e.Error())
	assert.True(t, errors.Is(fmt.Errorf("wrapped: %w", e), ErrOpen))
	assert.False(t, errors.Is(e, ErrInvalidConfig))
	var got *Error
	require.True(t, errors.As(fmt.Errorf("wrapped: %w", e), &got))
	assert.Same(t, e, got)

	ce := configError("X", "abc", "not a number")
	assert.Equal(t, `breaker: invalid_config: X="abc": not a number`, ce.Error())
	assert.Equal(t, CodeInvalidConfig, ce.Code)
	assert.Equal(t, http.StatusBadRequest, ce.Status)
	assert.Equal(t, "invalid_config", CodeInvalidConfig)
	assert.ErrorIs(t, ce, ErrInvalidConfig)

	re := recordError("p", "no provider")
	assert.Equal(t, `breaker: invalid_record: record "p": no provider`, re.Error())
	assert.Equal(t, "invalid_record", re.Code)
	assert.Equal(t, http.StatusBadRequest, re.Status)
	assert.ErrorIs(t, re, ErrInvalidRecord)
	ne := nameError("quota", "unknown failure kind")
	assert.Equal(t, `breaker: invalid_record: "quota": unknown failure kind`, ne.Error())
	assert.ErrorIs(t, ne, ErrInvalidRecord)

	assert.Nil(t, (&Error{Code: "other"}).Unwrap())
	assert.Equal(t, "breaker: circuit open", ErrOpen.Error())
}
