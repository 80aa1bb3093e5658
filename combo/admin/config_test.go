package admin_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/admin"
	"github.com/routeguard/routeguard/lease"
)

// An *Error unwraps to the sentinel of its code, whoever built it.
func TestErrorUnwrapsCodeSentinel(t *testing.T) {
	for _, tc := range []struct {
		code string
		want error
	}{
		{admin.CodeUnauthorized, admin.ErrUnauthorized},
		{admin.CodeForbidden, admin.ErrForbidden},
		{"LEASE_API_KEY_INVALID", admin.ErrLeaseAPIKeyInvalid},
		{"LEASE_KEY_POLICY_INVALID", admin.ErrLeaseKeyPolicyInvalid},
		{"PROVIDER_RETIRED", admin.ErrLeaseProviderRetired},
		{"LEASE_FENCE_STALE", lease.ErrFenceStale},
	} {
		e := &admin.Error{Code: tc.code}
		assert.Same(t, tc.want, e.Unwrap(), tc.code)
		assert.ErrorIs(t, e, tc.want, tc.code)
	}
	e := &admin.Error{Code: "slow_down", Status: 429, Message: "Too many admin calls"}
	assert.NoError(t, e.Unwrap())
	assert.NotErrorIs(t, e, admin.ErrUnauthorized)
	assert.EqualError(t, e, "admin: slow_down: Too many admin calls")
	assert.NotErrorIs(t, &admin.Error{Code: admin.CodeForbidden}, admin.ErrUnauthorized)
}

// The authorizer's sentinels are matched with errors.Is, so wrapped ones
// keep their answer; an *Error without a 4xx status answers by its code.
func TestAdminAuthorizerWrappedSentinels(t *testing.T) {
	const (
		unauthorized = `{"error":"Unauthorized","code":"unauthorized"}`
		forbidden    = `{"error":"Forbidden","code":"forbidden"}`
	)
	for _, tc := range []struct {
		name   string
		err    error
		status int
		body   string
	}{
		{"forbidden", admin.ErrForbidden, 403, forbidden},
		{"wrapped forbidden", fmt.Errorf("key viewer: %w", admin.ErrForbidden), 403, forbidden},
		{"unauthorized", admin.ErrUnauthorized, 401, unauthorized},
		{"wrapped unauthorized", fmt.Errorf("no token: %w", admin.ErrUnauthorized), 401, unauthorized},
		{"forbidden code without status", &admin.Error{Code: admin.CodeForbidden}, 403, forbidden},
		{"joined", errors.Join(errors.New("audit"), admin.ErrForbidden), 403, forbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := admin.New(admin.Config{Authorize: func(*http.Request) error { return tc.err }})
			rec := httptest.NewRecorder()
			a.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, admin.ResetPath, nil))
			assert.Equal(t, tc.status, rec.Code)
			assert.JSONEq(t, tc.body, rec.Body.String())
		})
	}
}

// Normalize fills the defaults, clamps the body limit and never changes
// its receiver.
func TestConfigNormalize(t *testing.T) {
	var zero admin.Config
	n := zero.Normalize()
	assert.Equal(t, int64(64<<10), n.MaxBodyBytes)
	assert.Equal(t, int64(16<<10), n.Lease.MaxBodyBytes)
	require.NotNil(t, n.Now)
	require.NotNil(t, n.Lease.Now)
	require.NotNil(t, n.Lease.Resolver)
	assert.Nil(t, n.Lease.Describe)
	assert.Nil(t, zero.Now, "Normalize must not change its receiver")
	assert.Nil(t, zero.Lease.Now, "Normalize must not change its receiver")
	assert.WithinDuration(t, time.Now(), n.Now(), time.Minute)

	for _, tc := range []struct{ in, want int64 }{
		{0, 64 << 10}, {10, 1 << 10}, {-5, 1 << 10}, {1 << 10, 1 << 10}, {100 << 10, 100 << 10}, {2 << 20, 1 << 20},
	} {
		assert.Equal(t, tc.want, admin.Config{MaxBodyBytes: tc.in}.Normalize().MaxBodyBytes, tc.in)
	}
	for _, tc := range []struct{ in, want int64 }{
		{0, 16 << 10}, {-1, 16 << 10}, {10, 1 << 10}, {4 << 10, 4 << 10}, {2 << 20, 1 << 20},
	} {
		assert.Equal(t, tc.want, admin.LeaseConfig{MaxBodyBytes: tc.in}.Normalize().MaxBodyBytes, tc.in)
	}
}

// Without a clock of its own the admin API uses the router's (Layers.Now),
// and the lease route the admin API's; a clock of their own wins.
func TestAdminUsesLayersClock(t *testing.T) {
	routerNow := time.Date(2026, 8, 12, 19, 30, 0, 0, time.UTC)
	layers := combo.Config{
		Breakers: breaker.NewSet(breaker.Config{}),
		Leases:   lease.New(lease.Config{}),
		Now:      func() time.Time { return routerNow },
	}
	keys := admin.LeaseAuthenticatorFunc(func(*http.Request) (admin.LeaseCaller, error) {
		return admin.LeaseCaller{APIKeyID: "kid", Scopes: []string{admin.ScopeLeaseExclusive}, AllowedConnections: []string{"c1"}}, nil
	})
	allow := func(*http.Request) error { return nil }
	health := func(a *admin.Handler) string {
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, admin.HealthPath, nil))
		require.Equal(t, 200, rec.Code)
		return rec.Body.String()
	}
	acquire := func(a *admin.Handler, owner string) string {
		r := httptest.NewRequest(http.MethodPost, admin.LeasePath, strings.NewReader(`{"action":"acquire","model":"openai/gpt-4o"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(lease.HeaderOwner, owner)
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, r)
		require.Equal(t, 200, rec.Code, rec.Body.String())
		return rec.Body.String()
	}

	a := admin.New(admin.Config{Layers: layers, Authorize: allow, LeaseAuth: keys})
	assert.Contains(t, health(a), `"timestamp":"2026-08-12T19:30:00Z"`)
	assert.Contains(t, acquire(a, "vlo_"+strings.Repeat("A", 43)), `"acquiredAt":"2026-08-12T19:30:00.000Z"`)

	own := routerNow.Add(time.Hour)
	layers.Leases = lease.New(lease.Config{})
	a = admin.New(admin.Config{Layers: layers, Authorize: allow, LeaseAuth: keys, Now: func() time.Time { return own }})
	assert.Contains(t, health(a), `"timestamp":"2026-08-12T20:30:00Z"`)
	assert.Contains(t, acquire(a, "vlo_"+strings.Repeat("B", 43)), `"acquiredAt":"2026-08-12T20:30:00.000Z"`)

	leaseNow := routerNow.Add(2 * time.Hour)
	layers.Leases = lease.New(lease.Config{})
	a = admin.New(admin.Config{Layers: layers, Authorize: allow, LeaseAuth: keys, Lease: admin.LeaseConfig{Now: func() time.Time { return leaseNow }}})
	assert.Contains(t, health(a), `"timestamp":"2026-08-12T19:30:00Z"`)
	assert.Contains(t, acquire(a, "vlo_"+strings.Repeat("C", 43)), `"acquiredAt":"2026-08-12T21:30:00.000Z"`)
}
