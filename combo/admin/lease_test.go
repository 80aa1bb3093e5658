package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo/admin"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lease/leasetest"
)

var (
	ctx = context.Background()
	T0  = leasetest.T0
)

// keys is a fake key table: the Authorization header names the key id.
var keys = map[string]admin.LeaseCaller{
	"managed":  {APIKeyID: "kid-managed", Scopes: []string{"chat", admin.ScopeLeaseExclusive}, AllowedConnections: []string{"conn-secret-1"}},
	"managed2": {APIKeyID: "kid-managed2", Scopes: []string{admin.ScopeLeaseExclusive}, AllowedConnections: []string{"conn-secret-2", "conn-secret-3"}},
	"plain":    {APIKeyID: "kid-plain", Scopes: []string{"chat"}},
	"broken":   {APIKeyID: "kid-broken", Scopes: []string{admin.ScopeLeaseExclusive}},
	"flaky":    {APIKeyID: ""},
}

var auth = admin.LeaseAuthenticatorFunc(func(r *http.Request) (admin.LeaseCaller, error) {
	v := r.Header.Get("Authorization")
	if v == "" {
		return admin.LeaseCaller{}, admin.ErrLeaseAuthenticationRequired
	}
	if v == "Bearer boom" {
		return admin.LeaseCaller{}, errors.New("db down")
	}
	c, ok := keys[strings.TrimPrefix(v, "Bearer ")]
	if !ok {
		return admin.LeaseCaller{}, admin.ErrLeaseAPIKeyInvalid
	}
	return c, nil
})

type server struct {
	t   *testing.T
	m   *lease.Manager
	h   *admin.LeaseHandler
	now time.Time
}

func newServer(t *testing.T, cfg *admin.LeaseConfig) *server {
	s := &server{t: t, m: lease.New(lease.Config{}), now: T0}
	if cfg == nil {
		cfg = &admin.LeaseConfig{}
	}
	cfg.Now = func() time.Time { return s.now }
	s.h = admin.NewLeaseHandler(s.m, auth, *cfg)
	return s
}

type call struct {
	method, key, owner, ctype, body string
}

func (s *server) do(c call) *httptest.ResponseRecorder {
	if c.method == "" {
		c.method = http.MethodPost
	}
	if c.ctype == "" {
		c.ctype = "application/json"
	}
	r := httptest.NewRequest(c.method, admin.LeasePath, strings.NewReader(c.body))
	if c.key != "" {
		r.Header.Set("Authorization", "Bearer "+c.key)
	}
	if c.owner != "" {
		r.Header.Set("X-OmniRoute-Lease-Owner", c.owner)
	}
	if c.ctype != "-" {
		r.Header.Set("Content-Type", c.ctype)
	}
	w := httptest.NewRecorder()
	s.h.ServeHTTP(w, r)
	return w
}

func code(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var env struct {
		Error struct{ Code, Type string }
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &env), w.Body.String())
	assert.Equal(t, "lease_error", env.Error.Type)
	return env.Error.Code
}

var (
	ownerA  = leasetest.Owner('A')
	ownerB  = leasetest.Owner('B')
	acquire = `{"action":"acquire","model":"openai/gpt-4o"}`
)

func genBody(action string, g int) string {
	return `{"action":"` + action + `","generation":` + strconv.Itoa(g) + `}`
}

// noSecrets checks that a response never reveals ids or owners.
func noSecrets(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	body := w.Body.String()
	for _, s := range []string{"conn-secret", "kid-", ownerA, ownerB, lease.HashOwner(ownerA).String(), lease.HashOwner(ownerB).String(), "connectionId", "apiKeyId"} {
		assert.NotContains(t, body, s)
	}
}

// Scenario 9 and the other refusals before any lease work.
func TestHandlerRefusals(t *testing.T) {
	s := newServer(t, nil)
	cases := []struct {
		name   string
		c      call
		status int
		code   string
	}{
		{"no authorization", call{owner: ownerA, body: acquire}, 401, "LEASE_AUTHENTICATION_REQUIRED"},
		{"unknown key", call{key: "nope", owner: ownerA, body: acquire}, 401, "LEASE_API_KEY_INVALID"},
		{"authenticator failure", call{key: "boom", owner: ownerA, body: acquire}, 503, "LEASE_SERVICE_UNAVAILABLE"},
		{"authenticator without key id", call{key: "flaky", owner: ownerA, body: acquire}, 401, "LEASE_AUTHENTICATION_REQUIRED"},
		{"no content type", call{key: "managed", owner: ownerA, ctype: "-", body: acquire}, 415, "LEASE_CONTENT_TYPE_REQUIRED"},
		{"text content type", call{key: "managed", owner: ownerA, ctype: "text/plain", body: acquire}, 415, "LEASE_CONTENT_TYPE_REQUIRED"},
		{"json suffix type", call{key: "managed", owner: ownerA, ctype: "application/json-patch+json", body: acquire}, 415, "LEASE_CONTENT_TYPE_REQUIRED"},
		{"bad json", call{key: "managed", owner: ownerA, body: `{"action":`}, 400, "LEASE_ACTION_INVALID"},
		{"unknown field", call{key: "managed", owner: ownerA, body: `{"action":"renew","generation":1,"x":1}`}, 400, "LEASE_ACTION_INVALID"},
		{"unknown action", call{key: "managed", owner: ownerA, body: `{"action":"steal"}`}, 400, "LEASE_ACTION_INVALID"},
		{"oversized body", call{key: "managed", owner: ownerA, body: `{"action":"acquire","model":"` + strings.Repeat("a", 20<<10) + `"}`}, 413, "LEASE_BODY_TOO_LARGE"},
		{"key without scope", call{key: "plain", owner: ownerA, body: acquire}, 403, "LEASE_SCOPE_REQUIRED"},
		{"managed key without allowlist", call{key: "broken", owner: ownerA, body: acquire}, 403, "LEASE_KEY_CONFIGURATION_INVALID"},
		{"no owner", call{key: "managed", body: acquire}, 400, "LEASE_CONTEXT_REQUIRED"},
		{"short owner", call{key: "managed", owner: "vlo_short", body: acquire}, 400, "LEASE_CONTEXT_INVALID"},
		{"model without provider", call{key: "managed", owner: ownerA, body: `{"action":"acquire","model":"gpt-4o"}`}, 400, "LEASE_MODEL_INVALID"},
		{"method", call{method: http.MethodGet, key: "managed", owner: ownerA}, 405, "LEASE_METHOD_NOT_ALLOWED"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := s.do(c.c)
			assert.Equal(t, c.status, w.Code, w.Body.String())
			assert.Equal(t, c.code, code(t, w))
			assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
			noSecrets(t, w)
		})
	}
	snap, err := s.m.SnapshotAt(ctx, s.now)
	require.NoError(t, err)
	assert.Empty(t, snap, "no refusal may create a lease")
}

func TestHandlerContentTypeParameters(t *testing.T) {
	s := newServer(t, nil)
	w := s.do(call{key: "managed", owner: ownerA, ctype: "Application/JSON; charset=utf-8", body: acquire})
	assert.Equal(t, 200, w.Code, w.Body.String())
}

func TestHandlerOptions(t *testing.T) {
	s := newServer(t, nil)
	w := s.do(call{method: http.MethodOptions})
	assert.Equal(t, http.StatusNoContent, w.Code)
	allow := w.Header().Get("Access-Control-Allow-Headers")
	assert.Contains(t, allow, "X-OmniRoute-Lease-Owner")
	assert.Contains(t, allow, "X-OmniRoute-Lease-Generation")
	assert.Equal(t, "POST, OPTIONS", w.Header().Get("Access-Control-Allow-Methods"))
	assert.Empty(t, w.Body.String())
}

// Scenario 10: acquire answers ACTIVE generation 1 without ids; status
// answers exactly the lifecycle keys and the connection.
func TestHandlerAcquireAndStatus(t *testing.T) {
	s := newServer(t, &admin.LeaseConfig{Describe: func(conn string) admin.LeaseConnection {
		return admin.LeaseConnection{DisplayName: "Team key " + strings.TrimPrefix(conn, "conn-secret-")}
	}})
	w := s.do(call{key: "managed", owner: ownerA, body: acquire})
	require.Equal(t, 200, w.Code, w.Body.String())
	noSecrets(t, w)
	var got map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
	assert.Equal(t, map[string]any{
		"state":      "ACTIVE",
		"generation": 1.0,
		"acquiredAt": "2026-08-12T19:30:00.000Z",
		"renewedAt":  "2026-08-12T19:30:00.000Z",
		"expiresAt":  "2026-08-12T19:32:00.000Z",
	}, got)
	assert.Equal(t, "no-store", w.Header().Get("Cache-Control"))

	s.now = T0.Add(5 * time.Second)
	w = s.do(call{key: "managed", owner: ownerA, body: genBody("status", 1)})
	require.Equal(t, 200, w.Code, w.Body.String())
	noSecrets(t, w)
	got = nil
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
	var names []string
	for k := range got {
		names = append(names, k)
	}
	slices.Sort(names)
	assert.Equal(t, []string{"acquiredAt", "connection", "expiresAt", "generation", "renewedAt", "state"}, names)
	assert.Equal(t, map[string]any{"displayName": "Team key 1", "provider": "openai"}, got["connection"])
}

func TestHandlerStatusNullDisplayName(t *testing.T) {
	s := newServer(t, nil)
	require.Equal(t, 200, s.do(call{key: "managed", owner: ownerA, body: acquire}).Code)
	w := s.do(call{key: "managed", owner: ownerA, body: genBody("status", 1)})
	require.Equal(t, 200, w.Code)
	assert.Contains(t, w.Body.String(), `"connection":{"displayName":null,"provider":"openai"}`)
}

// Scenario 8: a second owner on a key with one held connection gets the
// 429 capacity body.
func TestHandlerCapacity(t *testing.T) {
	s := newServer(t, nil)
	require.Equal(t, 200, s.do(call{key: "managed", owner: ownerA, body: acquire}).Code)
	s.now = T0.Add(30500 * time.Millisecond)
	w := s.do(call{key: "managed", owner: ownerB, body: acquire})
	require.Equal(t, 429, w.Code, w.Body.String())
	noSecrets(t, w)
	ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
	require.NoError(t, err)
	assert.Equal(t, 90, ra)
	var body struct {
		State         string
		Reason        string
		RetryAfter    int
		EligibleCount int
		FreeCount     int
		Error         struct{ Code, Type, Message string }
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
	assert.Equal(t, "WAITING_FOR_CAPACITY", body.State)
	assert.Equal(t, "NO_FREE_ELIGIBLE_CONNECTION", body.Reason)
	assert.Equal(t, ra, body.RetryAfter)
	assert.Equal(t, 1, body.EligibleCount)
	assert.Equal(t, 0, body.FreeCount)
	assert.Equal(t, "LEASE_CAPACITY_UNAVAILABLE", body.Error.Code)
	assert.Equal(t, "Exclusive managed session capacity is temporarily unavailable", body.Error.Message)
}

func TestHandlerRenewReleaseStatus(t *testing.T) {
	s := newServer(t, nil)
	require.Equal(t, 200, s.do(call{key: "managed", owner: ownerA, body: acquire}).Code)
	s.now = T0.Add(time.Minute)
	stale := []call{
		{key: "managed", owner: ownerA, body: genBody("renew", 2)},
		{key: "managed2", owner: ownerA, body: genBody("renew", 1)},
		{key: "managed", owner: ownerB, body: genBody("renew", 1)},
		{key: "managed", owner: ownerA, body: genBody("status", 2)},
		{key: "managed", owner: ownerA, body: genBody("release", 2)},
	}
	for _, c := range stale {
		w := s.do(c)
		assert.Equal(t, 409, w.Code, c.body)
		assert.Equal(t, "LEASE_FENCE_STALE", code(t, w))
	}
	w := s.do(call{key: "managed", owner: ownerA, body: genBody("renew", 1)})
	require.Equal(t, 200, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), `"expiresAt":"2026-08-12T19:33:00.000Z"`)
	assert.Contains(t, w.Body.String(), `"renewedAt":"2026-08-12T19:31:00.000Z"`)

	w = s.do(call{key: "managed", owner: ownerA, body: `{"action":"release","generation":1,"reason":"CLIENT_CANCELLED"}`})
	require.Equal(t, 200, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), `"state":"RELEASED"`)
	w = s.do(call{key: "managed", owner: ownerA, body: genBody("release", 1)})
	assert.Equal(t, 200, w.Code, "release is idempotent")
	w = s.do(call{key: "managed", owner: ownerA, body: genBody("status", 1)})
	assert.Equal(t, 409, w.Code, "status of an inactive lease")

	s.now = T0.Add(2 * time.Minute)
	w = s.do(call{key: "managed", owner: ownerA, body: acquire})
	require.Equal(t, 200, w.Code)
	assert.Contains(t, w.Body.String(), `"generation":2`)
}

// The same owner through a second managed key gets 409 and the first
// binding is unchanged.
func TestHandlerOwnerOnSecondKey(t *testing.T) {
	s := newServer(t, nil)
	require.Equal(t, 200, s.do(call{key: "managed", owner: ownerA, body: acquire}).Code)
	w := s.do(call{key: "managed2", owner: ownerA, body: acquire})
	assert.Equal(t, 409, w.Code)
	assert.Equal(t, "LEASE_OWNER_ALREADY_ACTIVE", code(t, w))
	w = s.do(call{key: "managed", owner: ownerA, body: genBody("status", 1)})
	assert.Equal(t, 200, w.Code)
}

func TestHandlerResolver(t *testing.T) {
	var seen []string
	s := newServer(t, &admin.LeaseConfig{Resolver: admin.LeaseResolverFunc(func(_ context.Context, c admin.LeaseCaller, model string) (admin.LeaseTarget, error) {
		seen = append(seen, model)
		switch model {
		case "retired/x":
			return admin.LeaseTarget{}, admin.ErrLeaseProviderRetired
		case "broken/x":
			return admin.LeaseTarget{}, errors.New("catalog: lookup failed for provider broken")
		case "cooling/x":
			return admin.LeaseTarget{}, admin.ErrLeaseEligibilityUnavailable
		case "none/x":
			return admin.LeaseTarget{Provider: "none", Candidates: []string{}}, nil
		case "foreign/x":
			return admin.LeaseTarget{Provider: "foreign", Candidates: []string{"not-allowed", "conn-secret-3"}}, nil
		}
		return admin.LeaseTarget{Provider: "openai"}, nil
	})})
	model := func(m string) string { return `{"action":"acquire","model":"` + m + `"}` }
	w := s.do(call{key: "managed2", owner: ownerA, body: model("retired/x")})
	assert.Equal(t, 410, w.Code)
	assert.Equal(t, "PROVIDER_RETIRED", code(t, w))
	assert.Contains(t, w.Body.String(), "Provider is retired and unavailable.")
	assert.NotContains(t, w.Body.String(), "retired/x")

	w = s.do(call{key: "managed2", owner: ownerA, body: model("broken/x")})
	assert.Equal(t, 503, w.Code)
	assert.Equal(t, "LEASE_SERVICE_UNAVAILABLE", code(t, w))
	assert.NotContains(t, w.Body.String(), "catalog")

	w = s.do(call{key: "managed2", owner: ownerA, body: model("cooling/x")})
	assert.Equal(t, 429, w.Code)
	assert.Equal(t, "LEASE_ELIGIBILITY_UNAVAILABLE", code(t, w))
	assert.Empty(t, w.Header().Get("Retry-After"))

	w = s.do(call{key: "managed2", owner: ownerA, body: model("none/x")})
	assert.Equal(t, 409, w.Code)
	assert.Equal(t, "LEASE_NO_ELIGIBLE_CONNECTION", code(t, w))

	w = s.do(call{key: "managed2", owner: ownerA, body: model("foreign/x")})
	require.Equal(t, 200, w.Code, w.Body.String())
	snap, err := s.m.SnapshotAt(ctx, s.now)
	require.NoError(t, err)
	require.Len(t, snap, 1)
	assert.Equal(t, "conn-secret-3", snap[0].Connection, "only allowlisted candidates are leased")
	assert.Equal(t, "foreign", snap[0].Provider)

	// Resolution errors come before the scope check.
	w = s.do(call{key: "plain", owner: ownerA, body: model("retired/x")})
	assert.Equal(t, 410, w.Code)
	assert.Len(t, seen, 6)
}

func TestHandlerBodyLimitClamp(t *testing.T) {
	s := newServer(t, &admin.LeaseConfig{MaxBodyBytes: 10})
	// Clamped up to MinMaxBodyBytes, so a normal body fits.
	assert.Equal(t, 200, s.do(call{key: "managed", owner: ownerA, body: acquire}).Code)
	big := bytes.Repeat([]byte(" "), admin.MinMaxBodyBytes) // white space only
	w := s.do(call{key: "managed", owner: ownerB, body: string(big) + acquire})
	assert.Equal(t, 413, w.Code)
}

func TestNewHandlerPanicsWithoutDependencies(t *testing.T) {
	assert.Panics(t, func() { admin.NewLeaseHandler(nil, auth, admin.LeaseConfig{}) })
	assert.Panics(t, func() { admin.NewLeaseHandler(lease.New(lease.Config{}), nil, admin.LeaseConfig{}) })
}

func TestHandlerRepeatedOwnerHeader(t *testing.T) {
	s := newServer(t, nil)
	r := httptest.NewRequest(http.MethodPost, admin.LeasePath, strings.NewReader(acquire))
	r.Header.Set("Authorization", "Bearer managed")
	r.Header.Set("Content-Type", "application/json")
	r.Header.Add("X-OmniRoute-Lease-Owner", ownerA)
	r.Header.Add("X-OmniRoute-Lease-Owner", ownerA)
	w := httptest.NewRecorder()
	s.h.ServeHTTP(w, r)
	assert.Equal(t, 400, w.Code)
	assert.Equal(t, "LEASE_CONTEXT_INVALID", code(t, w))
}
