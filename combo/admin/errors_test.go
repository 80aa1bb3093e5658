package admin_test

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo/admin"
	"github.com/routeguard/routeguard/lease"
)

// Every refusal the lease route answers: status, code and message of the
// envelope.
func TestWriteLeaseErrorCodes(t *testing.T) {
	m := lease.New(lease.Config{})
	_, err := m.AcquireAt(ctx, lease.Holder{Owner: lease.HashOwner("a"), APIKeyID: "k1"}, "openai", []string{"c1"}, T0)
	require.NoError(t, err)
	stale := m.FenceAt(ctx, lease.Holder{Owner: lease.HashOwner("a"), APIKeyID: "k1", Generation: 2}, "c1", T0)
	cases := []struct {
		err     error
		status  int
		code    string
		message string
	}{
		{admin.ErrLeaseAuthenticationRequired, 401, "LEASE_AUTHENTICATION_REQUIRED", "Authentication is required"},
		{admin.ErrLeaseAPIKeyInvalid, 401, "LEASE_API_KEY_INVALID", "Invalid API key"},
		{admin.ErrActionInvalid, 400, "LEASE_ACTION_INVALID", "Invalid session lease action"},
		{admin.ErrLeaseProviderRetired, 410, "PROVIDER_RETIRED", "Provider is retired and unavailable."},
		{admin.ErrLeaseKeyPolicyInvalid, 400, "LEASE_KEY_POLICY_INVALID", "An API key with the lease:exclusive scope requires a non-empty connection allowlist"},
		{admin.ErrLeaseModelInvalid, 400, "LEASE_MODEL_INVALID", "Model does not resolve to a provider"},
		{admin.ErrLeaseEligibilityUnavailable, 429, "LEASE_ELIGIBILITY_UNAVAILABLE", "No connection is currently eligible for an exclusive session lease"},
		{lease.ErrServiceUnavailable, 503, "LEASE_SERVICE_UNAVAILABLE", "Session lease service is temporarily unavailable"},
		{lease.ErrContextRequired, 400, "LEASE_CONTEXT_REQUIRED", "Lease owner header is required"},
		{lease.ErrContextInvalid, 400, "LEASE_CONTEXT_INVALID", "Lease owner or generation is invalid"},
		{lease.ErrRequired, 409, "LEASE_REQUIRED", "An active session lease is required"},
		{stale, 409, "LEASE_FENCE_STALE", "Session lease generation is stale"},
		{lease.ErrConnectionMismatch, 409, "LEASE_CONNECTION_MISMATCH", "Requested connection does not match the session lease"},
		{lease.ErrOwnerAlreadyActive, 409, "LEASE_OWNER_ALREADY_ACTIVE", "Lease owner already holds an active session lease"},
		{lease.ErrNoEligibleConnection, 409, "LEASE_NO_ELIGIBLE_CONNECTION", "No eligible connection for an exclusive session lease"},
		{lease.ErrCapacityUnavailable, 429, "LEASE_CAPACITY_UNAVAILABLE", "Exclusive managed session capacity is temporarily unavailable"},
		{&admin.Error{Status: 403, Code: "MODEL_NOT_ALLOWED", Message: "Model not allowed for this key"}, 403, "MODEL_NOT_ALLOWED", "Model not allowed for this key"},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		admin.WriteLeaseError(rec, c.err)
		assert.Equal(t, c.status, rec.Code, c.code)
		assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
		assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
		var env map[string]map[string]string
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &env))
		assert.Equal(t, map[string]string{"message": c.message, "type": "lease_error", "code": c.code}, env["error"])
	}
}

func TestWriteLeaseErrorHidesOtherErrors(t *testing.T) {
	rec := httptest.NewRecorder()
	admin.WriteLeaseError(rec, errors.New("redis: connection refused at 10.0.0.7"))
	assert.Equal(t, 503, rec.Code)
	assert.NotContains(t, rec.Body.String(), "10.0.0.7")
	assert.Contains(t, rec.Body.String(), "LEASE_SERVICE_UNAVAILABLE")
}

func TestWriteLeaseErrorCapacity(t *testing.T) {
	rec := httptest.NewRecorder()
	admin.WriteLeaseError(rec, &lease.Error{Code: lease.CodeCapacityUnavailable, Status: 429, RetryAfter: 17 * time.Second, Eligible: 3})
	assert.Equal(t, 429, rec.Code)
	assert.Equal(t, "17", rec.Header().Get("Retry-After"))
	assert.JSONEq(t, `{"state":"WAITING_FOR_CAPACITY","error":{"type":"lease_error","code":"LEASE_CAPACITY_UNAVAILABLE",
		"message":"Exclusive managed session capacity is temporarily unavailable"},"reason":"NO_FREE_ELIGIBLE_CONNECTION",
		"retryAfter":17,"eligibleCount":3,"freeCount":0}`, rec.Body.String())
}

func TestValidateLeaseKeyPolicy(t *testing.T) {
	err := admin.ValidateLeaseKeyPolicy([]string{"chat", "lease:exclusive"}, nil)
	assert.ErrorIs(t, err, admin.ErrLeaseKeyPolicyInvalid)
	var ae *admin.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, 400, ae.Status)
	assert.Equal(t, "LEASE_KEY_POLICY_INVALID", ae.Code)
	assert.NoError(t, admin.ValidateLeaseKeyPolicy([]string{"lease:exclusive"}, []string{"c1"}))
	assert.NoError(t, admin.ValidateLeaseKeyPolicy([]string{"chat"}, nil))
}
