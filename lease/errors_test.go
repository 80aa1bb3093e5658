package lease_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/lease"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 8, 12, 19, 30, 0, 0, time.UTC)
	cases := []struct {
		expiry time.Time
		want   time.Duration
	}{
		{time.Time{}, time.Second},
		{now, time.Second},
		{now.Add(-time.Hour), time.Second},
		{now.Add(time.Millisecond), time.Second},
		{now.Add(1001 * time.Millisecond), 2 * time.Second},
		{now.Add(119500 * time.Millisecond), 120 * time.Second},
		{now.Add(120 * time.Second), 120 * time.Second},
		{now.Add(3600 * time.Second), time.Hour},
		{now.Add(5 * time.Hour), time.Hour},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, lease.RetryAfter(c.expiry, now), "RetryAfter(%v)", c.expiry)
	}
}

func TestErrorMatching(t *testing.T) {
	assert.NotErrorIs(t, lease.ErrRequired, lease.ErrFenceStale)
	assert.Equal(t, "lease: connection is not the leased one", lease.ErrConnectionMismatch.Error())

	m := lease.New(lease.Config{})
	_, err := m.AcquireAt(ctx, lease.Holder{Owner: hashA, APIKeyID: "k1"}, "openai", []string{"c1"}, T0)
	require.NoError(t, err)
	err = m.FenceAt(ctx, lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: 1}, "c2", T0)
	wrapped := fmt.Errorf("dispatch: %w", err)
	var le *lease.Error
	require.ErrorAs(t, wrapped, &le)
	assert.Equal(t, "LEASE_CONNECTION_MISMATCH", le.Code)
	assert.Equal(t, http.StatusConflict, le.Status)
	assert.ErrorIs(t, wrapped, lease.ErrConnectionMismatch)
	assert.Equal(t, "lease: LEASE_CONNECTION_MISMATCH: connection is not the leased one", le.Error())

	err = m.FenceAt(ctx, lease.Holder{Owner: hashA, APIKeyID: "k2", Generation: 1}, "c1", T0)
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "LEASE_FENCE_STALE", le.Code, "an authorization mismatch has the stale code")
	assert.Equal(t, "lease held under another api key", le.Detail)
	assert.ErrorIs(t, err, lease.ErrFenceStale)
	assert.Equal(t, lease.ErrFenceStale, le.Unwrap())
	stale := m.FenceAt(ctx, lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: 2}, "c1", T0)
	require.ErrorAs(t, stale, &le)
	assert.Empty(t, le.Detail, "another generation is a plain stale refusal")
	assert.EqualError(t, err, "lease: LEASE_FENCE_STALE: lease held under another api key")

	ce := &lease.Error{Code: lease.CodeCapacityUnavailable, Status: 429, RetryAfter: 5 * time.Second}
	assert.ErrorIs(t, ce, lease.ErrCapacityUnavailable)
	assert.Equal(t, "lease: LEASE_CAPACITY_UNAVAILABLE: capacity unavailable, retry after 5s", ce.Error())
	assert.NoError(t, (&lease.Error{Code: "SOMETHING_ELSE"}).Unwrap())
}

// Every code's refusal, as the package returns it: code, status and the
// sentinel it matches.
func TestErrorCodes(t *testing.T) {
	m := lease.New(lease.Config{Store: lease.NewMemoryStore(lease.Config{MaxOwners: 16})})
	_, err := m.AcquireAt(ctx, lease.Holder{Owner: hashA, APIKeyID: "k1"}, "openai", []string{"c1"}, T0)
	require.NoError(t, err)
	h := lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: 1}
	_, ownerErr := lease.ParseOwner(" ")
	_, malformed := lease.ParseOwner("vlo_short")
	_, busyErr := m.AcquireAt(ctx, lease.Holder{Owner: hashB, APIKeyID: "k1"}, "openai", []string{"c1"}, T0)
	_, activeErr := m.AcquireAt(ctx, lease.Holder{Owner: hashA, APIKeyID: "k2"}, "openai", []string{"c1"}, T0)
	_, noneErr := m.AcquireAt(ctx, lease.Holder{Owner: hashB, APIKeyID: "k1"}, "openai", nil, T0)
	for i := range 15 {
		_, err := m.AcquireAt(ctx, lease.Holder{Owner: lease.HashOwner(fmt.Sprint("fill", i)), APIKeyID: "k1"}, "openai", []string{fmt.Sprint("f", i)}, T0)
		require.NoError(t, err)
	}
	_, fullErr := m.AcquireAt(ctx, lease.Holder{Owner: hashB, APIKeyID: "k1"}, "openai", []string{"c9"}, T0)
	_, reasonErr := m.ReleaseAt(ctx, h, "BECAUSE", T0)
	_, envErr := lease.FromEnv(func(string) (string, bool) { return "x", true })
	envErr = envErr.(interface{ Unwrap() []error }).Unwrap()[0]
	cases := []struct {
		name     string
		err      error
		sentinel error
		status   int
		code     string
	}{
		{"owner missing", ownerErr, lease.ErrContextRequired, 400, "LEASE_CONTEXT_REQUIRED"},
		{"owner malformed", malformed, lease.ErrContextInvalid, 400, "LEASE_CONTEXT_INVALID"},
		{"no lease", m.FenceAt(ctx, lease.Holder{Owner: hashB, APIKeyID: "k1", Generation: 1}, "c1", T0), lease.ErrRequired, 409, "LEASE_REQUIRED"},
		{"stale", m.FenceAt(ctx, lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: 2}, "c1", T0), lease.ErrFenceStale, 409, "LEASE_FENCE_STALE"},
		{"other connection", m.FenceAt(ctx, h, "c2", T0), lease.ErrConnectionMismatch, 409, "LEASE_CONNECTION_MISMATCH"},
		{"owner active", activeErr, lease.ErrOwnerAlreadyActive, 409, "LEASE_OWNER_ALREADY_ACTIVE"},
		{"no candidates", noneErr, lease.ErrNoEligibleConnection, 409, "LEASE_NO_ELIGIBLE_CONNECTION"},
		{"capacity", busyErr, lease.ErrCapacityUnavailable, 429, "LEASE_CAPACITY_UNAVAILABLE"},
		{"store full", fullErr, lease.ErrServiceUnavailable, 503, "LEASE_SERVICE_UNAVAILABLE"},
		{"bad reason", reasonErr, lease.ErrInvalidConfig, 400, "invalid_config"},
		{"bad env value", envErr, lease.ErrInvalidConfig, 400, "invalid_config"},
	}
	for _, c := range cases {
		var le *lease.Error
		require.ErrorAs(t, c.err, &le, c.name)
		assert.Equal(t, c.code, le.Code, c.name)
		assert.Equal(t, c.status, le.Status, c.name)
		assert.ErrorIs(t, c.err, c.sentinel, c.name)
		assert.Equal(t, c.sentinel, le.Unwrap(), c.name)
	}
}
