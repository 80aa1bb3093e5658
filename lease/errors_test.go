package lease_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
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
	assert.ErrorIs(t, lease.ErrAuthorizationMismatch, lease.ErrFenceStale)
	assert.NotErrorIs(t, lease.ErrFenceStale, lease.ErrAuthorizationMismatch)
	assert.Equal(t, "LEASE_FENCE_STALE", lease.ErrAuthorizationMismatch.Code)
	assert.ErrorIs(t, lease.ErrGenerationExhausted, lease.ErrServiceUnavailable)
	assert.ErrorIs(t, lease.ErrStoreFull, lease.ErrServiceUnavailable)
	assert.NotErrorIs(t, lease.ErrRequired, lease.ErrFenceStale)

	wrapped := fmt.Errorf("dispatch: %w", lease.ErrConnectionMismatch)
	var le *lease.Error
	require.ErrorAs(t, wrapped, &le)
	assert.Equal(t, "LEASE_CONNECTION_MISMATCH", le.Code)
	assert.Equal(t, http.StatusConflict, le.Status)
	assert.Equal(t, "lease: connection is not the leased one", lease.ErrConnectionMismatch.Error())

	ce := &lease.CapacityError{RetryAfter: 5 * time.Second}
	assert.ErrorIs(t, ce, lease.ErrCapacityUnavailable)
	assert.Equal(t, 5, ce.RetryAfterSeconds())
	assert.Equal(t, "lease: capacity unavailable, retry after 5s", ce.Error())
}

func TestErrorCodes(t *testing.T) {
	cases := []struct {
		err    *lease.Error
		status int
		code   string
	}{
		{lease.ErrAuthenticationRequired, 401, "LEASE_AUTHENTICATION_REQUIRED"},
		{lease.ErrAPIKeyInvalid, 401, "LEASE_API_KEY_INVALID"},
		{lease.ErrContentTypeRequired, 415, "LEASE_CONTENT_TYPE_REQUIRED"},
		{lease.ErrActionInvalid, 400, "LEASE_ACTION_INVALID"},
		{lease.ErrServiceUnavailable, 503, "LEASE_SERVICE_UNAVAILABLE"},
		{lease.ErrProviderRetired, 410, "PROVIDER_RETIRED"},
		{lease.ErrScopeRequired, 403, "LEASE_SCOPE_REQUIRED"},
		{lease.ErrKeyConfigurationInvalid, 403, "LEASE_KEY_CONFIGURATION_INVALID"},
		{lease.ErrKeyPolicyInvalid, 400, "LEASE_KEY_POLICY_INVALID"},
		{lease.ErrContextRequired, 400, "LEASE_CONTEXT_REQUIRED"},
		{lease.ErrContextInvalid, 400, "LEASE_CONTEXT_INVALID"},
		{lease.ErrModelInvalid, 400, "LEASE_MODEL_INVALID"},
		{lease.ErrRequired, 409, "LEASE_REQUIRED"},
		{lease.ErrFenceStale, 409, "LEASE_FENCE_STALE"},
		{lease.ErrConnectionMismatch, 409, "LEASE_CONNECTION_MISMATCH"},
		{lease.ErrNoEligibleConnection, 409, "LEASE_NO_ELIGIBLE_CONNECTION"},
		{lease.ErrEligibilityUnavailable, 429, "LEASE_ELIGIBILITY_UNAVAILABLE"},
		{lease.ErrUnsupportedRoute, 409, "LEASE_UNSUPPORTED_ROUTE"},
		{lease.ErrCapacityUnavailable, 429, "LEASE_CAPACITY_UNAVAILABLE"},
	}
	for _, c := range cases {
		assert.Equal(t, c.status, c.err.Status, c.code)
		assert.Equal(t, c.code, c.err.Code)
		rec := httptest.NewRecorder()
		lease.WriteError(rec, c.err)
		assert.Equal(t, c.status, rec.Code, c.code)
		var env map[string]map[string]string
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &env))
		assert.Equal(t, map[string]string{"message": c.err.Message, "type": "lease_error", "code": c.code}, env["error"])
	}
}

func TestWriteErrorHidesOtherErrors(t *testing.T) {
	rec := httptest.NewRecorder()
	lease.WriteError(rec, errors.New("redis: connection refused at 10.0.0.7"))
	assert.Equal(t, 503, rec.Code)
	assert.NotContains(t, rec.Body.String(), "10.0.0.7")
	assert.Contains(t, rec.Body.String(), "LEASE_SERVICE_UNAVAILABLE")
}

func TestWriteErrorCapacity(t *testing.T) {
	rec := httptest.NewRecorder()
	lease.WriteError(rec, &lease.CapacityError{RetryAfter: 17 * time.Second, Eligible: 3})
	assert.Equal(t, 429, rec.Code)
	assert.Equal(t, "17", rec.Header().Get("Retry-After"))
	assert.JSONEq(t, `{"state":"WAITING_FOR_CAPACITY","error":{"type":"lease_error","code":"LEASE_CAPACITY_UNAVAILABLE",
		"message":"Exclusive managed session capacity is temporarily unavailable"},"reason":"NO_FREE_ELIGIBLE_CONNECTION",
		"retryAfter":17,"eligibleCount":3,"freeCount":0}`, rec.Body.String())
}
