package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/admin"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lockout"
	"github.com/routeguard/routeguard/queue"
)

const adminToken = "Bearer admin-secret"

// bearerAuth authorizes "Bearer admin-secret", forbids "Bearer viewer"
// and refuses everything else.
func bearerAuth(r *http.Request) error {
	switch r.Header.Get("Authorization") {
	case adminToken:
		return nil
	case "Bearer viewer":
		return admin.ErrForbidden
	}
	return admin.ErrUnauthorized
}

// adminFixture is an admin API over layers with known state.
type adminFixture struct {
	cfg admin.Config
	api *admin.Handler
}

func newAdminFixture(t testing.TB) *adminFixture {
	t.Helper()
	f := &adminFixture{cfg: admin.Config{
		Layers: combo.Config{
			Breakers: breaker.NewSet(breaker.Config{Profiles: map[string]breaker.Profile{
				"p-open":     {OpenAt: 2, DegradedAt: 1, Reset: time.Minute},
				"p-degraded": {OpenAt: 5, DegradedAt: 2, Reset: time.Minute},
			}}),
			Cooldowns: cooldown.New(cooldown.Config{}),
			Lockouts:  lockout.New(lockout.Config{Enabled: true}),
			Leases:    lease.New(lease.Config{}),
			Queue:     queue.New(queue.Config{}),
			Pins:      affinity.New(affinity.Config{TTL: time.Hour}),
		},
		Authorize: bearerAuth,
	}}
	f.api = admin.New(f.cfg)
	return f
}

// seed puts the layers into a known state at now: p-open OPEN, p-degraded
// DEGRADED, p-closed CLOSED; connection k1 cooling 30 s, k2 banned, k3
// available; gpt-4o locked on k1.
func (f *adminFixture) seed(t testing.TB, now time.Time) {
	t.Helper()
	fail := func(p string, n int) {
		for range n {
			done, err := f.cfg.Layers.Breakers.AllowReportAt(p, now)
			require.NoError(t, err)
			done(breaker.Report{Outcome: breaker.Failure, At: now})
		}
	}
	fail("p-open", 2)
	fail("p-degraded", 2)
	done, err := f.cfg.Layers.Breakers.AllowReportAt("p-closed", now)
	require.NoError(t, err)
	done(breaker.Report{Outcome: breaker.Success, At: now})

	c := f.cfg.Layers.Cooldowns
	c.RegisterAt("k1", cooldown.Options{Provider: "openai"}, now)
	c.RegisterAt("k2", cooldown.Options{Provider: "openai"}, now)
	c.RegisterAt("k3", cooldown.Options{Provider: "anthropic"}, now)
	c.FailAt("k1", cooldown.Failure{Status: 429, Reason: "rate_limit_exceeded", Message: "slow down", RetryAfter: 30 * time.Second}, now)
	c.FailAt("k2", cooldown.Failure{Status: 403, Reason: "auth_error", Message: "account suspended", Permanent: true}, now)
	c.SucceedAt("k3", now)

	f.cfg.Layers.Lockouts.RecordFailureAt(lockout.Failure{Provider: "openai", Connection: "k1", Model: "gpt-4o", Status: 404}, now)
}

// call sends one request to the admin API and returns the status, the
// Allow header and the body.
func (f *adminFixture) call(method, path, auth, contentType, body string) (int, http.Header, string) {
	var rd *strings.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	var req *http.Request
	if rd != nil {
		req = httptest.NewRequest(method, path, rd)
	} else {
		req = httptest.NewRequest(method, path, nil)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	f.api.ServeHTTP(rec, req)
	return rec.Code, rec.Header(), rec.Body.String()
}

func TestAdminRequiresAuthorization(t *testing.T) {
	f := newAdminFixture(t)
	endpoints := []struct{ method, path, body string }{
		{http.MethodDelete, admin.HealthPath, ""},
		{http.MethodPost, admin.ResetPath, ""},
		{http.MethodGet, admin.ModelCooldownsPath, ""},
		{http.MethodDelete, admin.ModelCooldownsPath, `{"provider":"openai","connection":"k1","model":"gpt-4o"}`},
		{http.MethodGet, admin.CooldownsPath, ""},
		{http.MethodPost, admin.CooldownsPath, `{"all":true}`},
	}
	for _, e := range endpoints {
		t.Run(e.method+" "+e.path, func(t *testing.T) {
			for _, tc := range []struct {
				auth   string
				status int
				body   string
			}{
				{"", 401, `{"error":"Unauthorized","code":"unauthorized"}`},
				{"Bearer wrong", 401, `{"error":"Unauthorized","code":"unauthorized"}`},
				{"Bearer viewer", 403, `{"error":"Forbidden","code":"forbidden"}`},
			} {
				status, h, body := f.call(e.method, e.path, tc.auth, "application/json", e.body)
				assert.Equal(t, tc.status, status, tc.auth)
				assert.JSONEq(t, tc.body, body, tc.auth)
				assert.Equal(t, "application/json", h.Get("Content-Type"))
			}
		})
	}
}

func TestAdminNilAuthorizerRefusesManagement(t *testing.T) {
	a := admin.New(admin.Config{Layers: combo.Config{Breakers: breaker.NewSet(breaker.Config{})}})
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, admin.ResetPath, nil))
	assert.Equal(t, 401, rec.Code)
	rec = httptest.NewRecorder()
	a.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, admin.HealthPath, nil))
	assert.Equal(t, 200, rec.Code)
	assert.JSONEq(t, `{"status":"healthy"}`, rec.Body.String())
}

// statusError is an error that carries an HTTP status.
type statusError int

func (e statusError) Error() string   { return http.StatusText(int(e)) }
func (e statusError) HTTPStatus() int { return int(e) }

func TestAdminAuthorizerStatusFromError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status int
		body   string
	}{
		{"plain error", context.Canceled, 401, `{"error":"Unauthorized","code":"unauthorized"}`},
		{"status 403", statusError(403), 403, `{"error":"Forbidden","code":"forbidden"}`},
		{"custom admin error", &admin.Error{Status: 429, Code: "slow_down", Message: "Too many admin calls"}, 429, `{"error":"Too many admin calls","code":"slow_down"}`},
		{"5xx admin error", &admin.Error{Status: 500, Code: "boom", Message: "boom"}, 401, `{"error":"Unauthorized","code":"unauthorized"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := admin.New(admin.Config{Authorize: func(*http.Request) error { return tc.err }})
			rec := httptest.NewRecorder()
			a.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, admin.CooldownsPath, nil))
			assert.Equal(t, tc.status, rec.Code)
			assert.JSONEq(t, tc.body, rec.Body.String())
		})
	}
}

func TestAdminHealth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newAdminFixture(t)
		now := time.Now() // 2000-01-01T00:00:00Z in the bubble
		f.seed(t, now)
		time.Sleep(10 * time.Second)

		status, _, body := f.call(http.MethodGet, admin.HealthPath, "", "", "")
		assert.Equal(t, 200, status)
		assert.JSONEq(t, `{"status":"healthy"}`, body, "anonymous callers see only the status")

		status, _, body = f.call(http.MethodGet, admin.HealthPath, adminToken, "", "")
		assert.Equal(t, 200, status)
		assert.JSONEq(t, `{
			"status":"healthy",
			"timestamp":"2000-01-01T00:00:10Z",
			"circuitBreakers":{"open":1,"halfOpen":0,"closed":2,"total":3},
			"providerHealth":{
				"p-closed":{"state":"CLOSED","failures":0,"lastFailure":null},
				"p-degraded":{"state":"DEGRADED","failures":2,"lastFailure":"2000-01-01T00:00:00Z"},
				"p-open":{"state":"OPEN","failures":2,"lastFailure":"2000-01-01T00:00:00Z"}},
			"providerBreakers":[
				{"provider":"p-closed","state":"CLOSED","failures":0,"lastFailure":null,"retryAfterMs":0,"openCycles":0,"probeInFlight":false},
				{"provider":"p-degraded","state":"DEGRADED","failures":2,"lastFailure":"2000-01-01T00:00:00Z","retryAfterMs":0,"openCycles":0,"probeInFlight":false},
				{"provider":"p-open","state":"OPEN","failures":2,"lastFailure":"2000-01-01T00:00:00Z","retryAfterMs":50000,"openCycles":0,"probeInFlight":false}],
			"providerCooldowns":[],
			"lockouts":[{"provider":"openai","connectionId":"k1","model":"gpt-4o","scope":"model","reason":"not_found",
				"lockedAt":"2000-01-01T00:00:00Z","until":946684920000,"remainingMs":110000,"failureCount":1}],
			"connections":{"tracked":3,"cooling":1,"terminal":1},
			"connectionStates":[
				{"connectionId":"k1","provider":"openai","state":"cooling","terminal":false,"until":"2000-01-01T00:00:30Z",
				 "remainingMs":20000,"reason":"rate_limit_exceeded","backoffLevel":0,"errorStatus":429,"lastError":"slow down"},
				{"connectionId":"k2","provider":"openai","state":"banned","terminal":true,"until":null,
				 "remainingMs":0,"reason":"auth_error","backoffLevel":0,"errorStatus":403,"lastError":"account suspended"}],
			"queues":[],
			"sessions":{"pins":0},
			"leases":{"active":0}
		}`, body)
	})
}

func TestAdminHealthHidesTestProviders(t *testing.T) {
	f := newAdminFixture(t)
	for _, p := range []string{"test-x", "test_y", "real"} {
		done, err := f.cfg.Layers.Breakers.AllowReportAt(p, time.Now())
		require.NoError(t, err)
		done(breaker.Report{Outcome: breaker.Success})
	}
	_, _, body := f.call(http.MethodGet, admin.HealthPath, adminToken, "", "")
	assert.Contains(t, body, `"providerHealth":{"real":`)
	assert.NotContains(t, body, "test-x")
	assert.NotContains(t, body, "test_y")
	assert.Contains(t, body, `"circuitBreakers":{"open":0,"halfOpen":0,"closed":3,"total":3}`)
}

// Scenario M1.3/14: breakers in OPEN, DEGRADED and CLOSED; the reset answers
// resetCount 3 and closes all three.
func TestAdminResetClosesEveryBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newAdminFixture(t)
		f.seed(t, time.Now())
		status, _, body := f.call(http.MethodPost, admin.ResetPath, adminToken, "", "")
		assert.Equal(t, 200, status)
		assert.JSONEq(t, `{"ok":true,"resetCount":3,"message":"Reset 3 circuit breaker(s)"}`, body)
		for _, s := range f.cfg.Layers.Breakers.SnapshotAt(time.Now()) {
			assert.Equal(t, breaker.Closed, s.State, s.Provider)
			assert.Zero(t, s.Failures, s.Provider)
		}

		f.seed(t, time.Now())
		status, _, body = f.call(http.MethodDelete, admin.HealthPath, adminToken, "application/json", "{}")
		assert.Equal(t, 200, status)
		assert.JSONEq(t, `{"success":true,"message":"Reset 3 circuit breaker(s) to healthy state","resetCount":3}`, body)
	})
}

func TestAdminModelCooldowns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newAdminFixture(t)
		now := time.Now()
		f.seed(t, now)
		// Scenario M4.3/9: an exact lock lists its model as "exact:<model>".
		f.cfg.Layers.Lockouts.RecordFailureAt(lockout.Failure{Provider: "p", Connection: "c", Model: "A:B", Status: 503}, now)

		status, _, body := f.call(http.MethodGet, admin.ModelCooldownsPath, adminToken, "", "")
		assert.Equal(t, 200, status)
		assert.JSONEq(t, `{"lockouts":[
			{"provider":"openai","connectionId":"k1","model":"gpt-4o","scope":"model","reason":"not_found",
			 "lockedAt":"2000-01-01T00:00:00Z","until":946684920000,"remainingMs":120000,"failureCount":1},
			{"provider":"p","connectionId":"c","model":"exact:a:b","scope":"exact","reason":"server_error",
			 "lockedAt":"2000-01-01T00:00:00Z","until":946684920000,"remainingMs":120000,"failureCount":1}],
			"total":2}`, body)

		del := `{"provider":"openai","connection":"k1","model":"gpt-4o"}`
		status, _, body = f.call(http.MethodDelete, admin.ModelCooldownsPath, adminToken, "application/json", del)
		assert.Equal(t, 200, status)
		assert.JSONEq(t, `{"cleared":true,"provider":"openai","connection":"k1","model":"gpt-4o"}`, body)
		_, _, locked := f.cfg.Layers.Lockouts.LockedAt("openai", "k1", "gpt-4o", time.Now())
		assert.False(t, locked)

		status, _, body = f.call(http.MethodDelete, admin.ModelCooldownsPath, adminToken, "application/json; charset=utf-8", del)
		assert.Equal(t, 200, status)
		assert.JSONEq(t, `{"cleared":false,"provider":"openai","connection":"k1","model":"gpt-4o"}`, body)

		// The listed form clears the exact lock.
		status, _, body = f.call(http.MethodDelete, admin.ModelCooldownsPath, adminToken, "application/json",
			`{"provider":"p","connection":"c","model":"exact:a:b"}`)
		assert.Equal(t, 200, status)
		assert.JSONEq(t, `{"cleared":true,"provider":"p","connection":"c","model":"exact:a:b"}`, body)
	})
}

func TestAdminCooldowns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newAdminFixture(t)
		now := time.Now()
		f.seed(t, now)
		time.Sleep(5 * time.Second)

		status, _, body := f.call(http.MethodGet, admin.CooldownsPath, adminToken, "", "")
		assert.Equal(t, 200, status)
		assert.JSONEq(t, `{"connections":[
			{"connectionId":"k1","provider":"openai","state":"cooling","terminal":false,"until":"2000-01-01T00:00:30Z",
			 "remainingMs":25000,"reason":"rate_limit_exceeded","backoffLevel":0,"errorStatus":429,"lastError":"slow down"},
			{"connectionId":"k2","provider":"openai","state":"banned","terminal":true,"until":null,
			 "remainingMs":0,"reason":"auth_error","backoffLevel":0,"errorStatus":403,"lastError":"account suspended"}],
			"total":2}`, body)

		status, _, body = f.call(http.MethodPost, admin.CooldownsPath, adminToken, "application/json",
			`{"connectionIds":["k1","k2","k3","unknown","k1"]}`)
		assert.Equal(t, 200, status)
		assert.JSONEq(t, `{"cleared":1,"unchanged":2,"skippedTerminal":1,"lockoutsCleared":1}`, body)
		assert.Equal(t, cooldown.Available, f.cfg.Layers.Cooldowns.Status("k1").State)
		assert.Equal(t, cooldown.Banned, f.cfg.Layers.Cooldowns.Status("k2").State, "a terminal state is never lifted")
		assert.Empty(t, f.cfg.Layers.Lockouts.Snapshot())
	})
}

func TestAdminCooldownsAllByProvider(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newAdminFixture(t)
		now := time.Now()
		f.seed(t, now)
		f.cfg.Layers.Cooldowns.FailAt("k3", cooldown.Failure{Status: 429, RetryAfter: time.Minute}, now)

		status, _, body := f.call(http.MethodPost, admin.CooldownsPath, adminToken, "application/json",
			`{"all":true,"provider":"ANTHROPIC"}`)
		assert.Equal(t, 200, status)
		assert.JSONEq(t, `{"cleared":1,"unchanged":0,"skippedTerminal":0,"lockoutsCleared":0}`, body)
		assert.Equal(t, cooldown.Cooling, f.cfg.Layers.Cooldowns.Status("k1").State, "other providers keep their cooldowns")

		status, _, body = f.call(http.MethodPost, admin.CooldownsPath, adminToken, "application/json", `{"all":true}`)
		assert.Equal(t, 200, status)
		assert.JSONEq(t, `{"cleared":1,"unchanged":1,"skippedTerminal":1,"lockoutsCleared":1}`, body)
	})
}

func TestAdminRejectsBadRequests(t *testing.T) {
	f := newAdminFixture(t)
	big := `{"connectionIds":["` + strings.Repeat("x", admin.DefaultMaxBody) + `"]}`
	for _, tc := range []struct {
		name, method, path, ct, body string
		status                       int
		want                         string
	}{
		{"no content type", "POST", admin.CooldownsPath, "", `{"all":true}`, 415,
			`{"error":"Content-Type must be application/json","code":"unsupported_media_type"}`},
		{"text content type", "DELETE", admin.ModelCooldownsPath, "text/plain", `{"provider":"p","model":"m"}`, 415,
			`{"error":"Content-Type must be application/json","code":"unsupported_media_type"}`},
		{"reset with a text body", "POST", admin.ResetPath, "text/plain", `hello`, 415,
			`{"error":"Content-Type must be application/json","code":"unsupported_media_type"}`},
		{"bad json", "POST", admin.CooldownsPath, "application/json", `{"all":`, 400,
			`{"error":"Request body is not valid JSON","code":"invalid_json"}`},
		{"not an object", "POST", admin.CooldownsPath, "application/json", `[1,2]`, 400,
			`{"error":"Request body is not valid JSON","code":"invalid_json"}`},
		{"wrong field type", "POST", admin.CooldownsPath, "application/json", `{"all":"yes"}`, 400,
			`{"error":"Field \"all\" must be a boolean","code":"invalid_json"}`},
		{"ids not a list", "POST", admin.CooldownsPath, "application/json", `{"connectionIds":"k1"}`, 400,
			`{"error":"Field \"connectionIds\" must be an array","code":"invalid_json"}`},
		{"unknown field", "POST", admin.CooldownsPath, "application/json", `{"all":true,"force":true}`, 400,
			`{"error":"Unknown field \"force\"","code":"unknown_field"}`},
		{"unknown field in delete", "DELETE", admin.ModelCooldownsPath, "application/json", `{"provider":"p","model":"m","connectionId":"c"}`, 400,
			`{"error":"Unknown field \"connectionId\"","code":"unknown_field"}`},
		{"unknown field in reset", "POST", admin.ResetPath, "application/json", `{"all":true}`, 400,
			`{"error":"Unknown field \"all\"","code":"unknown_field"}`},
		{"trailing data", "POST", admin.CooldownsPath, "application/json", `{"all":true} {}`, 400,
			`{"error":"Request body has data after the JSON value","code":"invalid_json"}`},
		{"empty body", "POST", admin.CooldownsPath, "application/json", ``, 400,
			`{"error":"Request body is required","code":"invalid_json"}`},
		{"oversized", "POST", admin.CooldownsPath, "application/json", big, 413,
			`{"error":"Request body is larger than 65536 bytes","code":"body_too_large"}`},
		{"nothing selected", "POST", admin.CooldownsPath, "application/json", `{}`, 400,
			`{"error":"connectionIds must name at least one connection, or set all: true","code":"invalid_request"}`},
		{"empty id list", "POST", admin.CooldownsPath, "application/json", `{"connectionIds":[]}`, 400,
			`{"error":"connectionIds must name at least one connection, or set all: true","code":"invalid_request"}`},
		{"blank id", "POST", admin.CooldownsPath, "application/json", `{"connectionIds":[" "]}`, 400,
			`{"error":"connectionIds must not contain empty ids","code":"invalid_request"}`},
		{"ids and all", "POST", admin.CooldownsPath, "application/json", `{"connectionIds":["k1"],"all":true}`, 400,
			`{"error":"give either connectionIds or all, not both","code":"invalid_request"}`},
		{"provider without all", "POST", admin.CooldownsPath, "application/json", `{"connectionIds":["k1"],"provider":"openai"}`, 400,
			`{"error":"provider is only valid with all: true","code":"invalid_request"}`},
		{"delete without model", "DELETE", admin.ModelCooldownsPath, "application/json", `{"provider":"p"}`, 400,
			`{"error":"provider and model are required","code":"invalid_request"}`},
		{"delete null", "DELETE", admin.ModelCooldownsPath, "application/json", `null`, 400,
			`{"error":"provider and model are required","code":"invalid_request"}`},
		{"unknown path", "GET", "/api/resilience/nothing", "", "", 404,
			`{"error":"Not found","code":"not_found"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := f.call(tc.method, tc.path, adminToken, tc.ct, tc.body)
			assert.Equal(t, tc.status, status)
			assert.JSONEq(t, tc.want, body)
		})
	}
}

func TestAdminMethodNotAllowed(t *testing.T) {
	f := newAdminFixture(t)
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodPost, admin.HealthPath, "GET, HEAD, DELETE"},
		{http.MethodGet, admin.ResetPath, "POST"},
		{http.MethodPut, admin.ModelCooldownsPath, "GET, HEAD, DELETE"},
		{http.MethodDelete, admin.CooldownsPath, "GET, HEAD, POST"},
	} {
		status, h, body := f.call(tc.method, tc.path, adminToken, "", "")
		assert.Equal(t, 405, status, tc.path)
		assert.Equal(t, tc.allow, h.Get("Allow"), tc.path)
		assert.JSONEq(t, `{"error":"Method not allowed","code":"method_not_allowed"}`, body)
	}
}

func TestAdminLeaseRoute(t *testing.T) {
	f := newAdminFixture(t)
	status, _, body := f.call(http.MethodPost, admin.LeasePath, "", "application/json", `{"action":"acquire","model":"openai/gpt-4o"}`)
	assert.Equal(t, 404, status, "not mounted without an authenticator")
	assert.JSONEq(t, `{"error":"Session leases are not enabled","code":"not_found"}`, body)

	f.cfg.LeaseAuth = admin.LeaseAuthenticatorFunc(func(r *http.Request) (admin.LeaseCaller, error) {
		if r.Header.Get("Authorization") != "Bearer rk-1" {
			return admin.LeaseCaller{}, admin.ErrLeaseAuthenticationRequired
		}
		return admin.LeaseCaller{APIKeyID: "kid1", Scopes: []string{admin.ScopeLeaseExclusive}, AllowedConnections: []string{"k1"}}, nil
	})
	f.api = admin.New(f.cfg)
	status, _, body = f.call(http.MethodPost, admin.LeasePath, "", "application/json", `{"action":"acquire","model":"openai/gpt-4o"}`)
	assert.Equal(t, 401, status)
	assert.JSONEq(t, `{"error":{"message":"Authentication is required","type":"lease_error","code":"LEASE_AUTHENTICATION_REQUIRED"}}`, body)

	owner := ownerA
	req := httptest.NewRequest(http.MethodPost, admin.LeasePath, strings.NewReader(`{"action":"acquire","model":"openai/gpt-4o"}`))
	req.Header.Set("Authorization", "Bearer rk-1")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(lease.HeaderOwner, owner)
	rec := httptest.NewRecorder()
	f.api.ServeHTTP(rec, req)
	assert.Equal(t, 200, rec.Code)
	assert.Contains(t, rec.Body.String(), `"state":"ACTIVE","generation":1`)
	assert.NotContains(t, rec.Body.String(), "k1")
}

// FuzzAdminBody sends arbitrary bodies to the endpoints that read one: the
// answer is always JSON with a 2xx or 4xx status, never a 5xx.
func FuzzAdminBody(f *testing.F) {
	for _, s := range []string{
		`{"connectionIds":["k1"]}`, `{"all":true,"provider":"openai"}`, `{"all":true}`,
		`{"provider":"openai","connection":"k1","model":"gpt-4o"}`, `{}`, `null`, `[]`, `{"all":`, `"x"`,
		`{"connectionIds":[1]}`, `{"all":true} x`, "\xff",
	} {
		f.Add(s, uint8(0))
	}
	fx := newAdminFixture(f)
	fx.seed(f, time.Now())
	routes := []struct{ method, path string }{
		{http.MethodPost, admin.CooldownsPath},
		{http.MethodDelete, admin.ModelCooldownsPath},
		{http.MethodPost, admin.ResetPath},
		{http.MethodDelete, admin.HealthPath},
	}
	f.Fuzz(func(t *testing.T, body string, route uint8) {
		r := routes[int(route)%len(routes)]
		status, h, out := fx.call(r.method, r.path, adminToken, "application/json", body)
		if status >= 500 || status < 200 {
			t.Fatalf("%s %s %q: status %d", r.method, r.path, body, status)
		}
		if h.Get("Content-Type") != "application/json" || !json.Valid([]byte(out)) {
			t.Fatalf("%s %s %q: answer is not JSON: %q", r.method, r.path, body, out)
		}
	})
}

func BenchmarkAdminHealth(b *testing.B) {
	f := newAdminFixture(b)
	f.seed(b, time.Now())
	req := httptest.NewRequest(http.MethodGet, admin.HealthPath, nil)
	req.Header.Set("Authorization", adminToken)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		f.api.ServeHTTP(rec, req)
	}
}

// leaseCall sends one request to the mounted lease route.
func (f *adminFixture) leaseCall(key, owner, contentType, body string) (int, http.Header, string) {
	req := httptest.NewRequest(http.MethodPost, admin.LeasePath, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if owner != "" {
		req.Header.Set(lease.HeaderOwner, owner)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	f.api.ServeHTTP(rec, req)
	return rec.Code, rec.Header(), rec.Body.String()
}

// The lease lifecycle through the admin mount (spec lease.md 2c/4, 8, 9,
// 10): exact status codes, bodies and the error envelope.
func TestAdminLeaseLifecycle(t *testing.T) {
	f := newAdminFixture(t)
	now := time.Date(2026, 8, 12, 19, 30, 0, 0, time.UTC)
	keys := map[string]admin.LeaseCaller{
		"rk-managed": {APIKeyID: "kid1", Scopes: []string{admin.ScopeLeaseExclusive}, AllowedConnections: []string{"k1"}},
		"rk-plain":   {APIKeyID: "kid2"},
	}
	f.cfg.LeaseAuth = admin.LeaseAuthenticatorFunc(func(r *http.Request) (admin.LeaseCaller, error) {
		key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			return admin.LeaseCaller{}, admin.ErrLeaseAuthenticationRequired
		}
		c, ok := keys[key]
		if !ok {
			return admin.LeaseCaller{}, admin.ErrLeaseAPIKeyInvalid
		}
		return c, nil
	})
	f.cfg.Lease = admin.LeaseConfig{Now: func() time.Time { return now }}
	f.cfg.Now = func() time.Time { return now }
	f.api = admin.New(f.cfg)
	ownerA := "vlo_" + strings.Repeat("A", 43)
	ownerB := "vlo_" + strings.Repeat("B", 43)
	envelope := func(code, msg string) string {
		return `{"error":{"message":` + strconv.Quote(msg) + `,"type":"lease_error","code":"` + code + `"}}`
	}
	acquire := `{"action":"acquire","model":"openai/gpt-4o"}`

	// Refusals before any lease exists (scenario 9), in the route's order.
	for _, tc := range []struct {
		name, key, owner, ct, body string
		status                     int
		code                       string
	}{
		{"no key", "", ownerA, "application/json", acquire, 401, "LEASE_AUTHENTICATION_REQUIRED"},
		{"unknown key", "rk-nope", ownerA, "application/json", acquire, 401, "LEASE_API_KEY_INVALID"},
		{"no content type", "rk-managed", ownerA, "", acquire, 415, "LEASE_CONTENT_TYPE_REQUIRED"},
		{"bad json", "rk-managed", ownerA, "application/json", `{"action":`, 400, "LEASE_ACTION_INVALID"},
		{"unknown action", "rk-managed", ownerA, "application/json", `{"action":"steal"}`, 400, "LEASE_ACTION_INVALID"},
		{"generation zero", "rk-managed", ownerA, "application/json", `{"action":"renew","generation":0}`, 400, "LEASE_ACTION_INVALID"},
		{"key without the scope", "rk-plain", ownerA, "application/json", acquire, 403, "LEASE_SCOPE_REQUIRED"},
		{"no owner", "rk-managed", "", "application/json", acquire, 400, "LEASE_CONTEXT_REQUIRED"},
		{"malformed owner", "rk-managed", "vlo_short", "application/json", acquire, 400, "LEASE_CONTEXT_INVALID"},
		{"model without provider", "rk-managed", ownerA, "application/json", `{"action":"acquire","model":"gpt-4o"}`, 400, "LEASE_MODEL_INVALID"},
		{"renew without a lease", "rk-managed", ownerA, "application/json", `{"action":"renew","generation":1}`, 409, "LEASE_FENCE_STALE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := f.leaseCall(tc.key, tc.owner, tc.ct, tc.body)
			assert.Equal(t, tc.status, status, body)
			assert.Equal(t, "application/json", h.Get("Content-Type"))
			var env struct {
				Error struct{ Message, Type, Code string }
			}
			require.NoError(t, json.Unmarshal([]byte(body), &env), body)
			assert.Equal(t, tc.code, env.Error.Code)
			assert.Equal(t, "lease_error", env.Error.Type)
			assert.NotEmpty(t, env.Error.Message)
		})
	}

	// Scenario 10: acquire, then status with exactly the documented keys.
	status, _, body := f.leaseCall("rk-managed", ownerA, "application/json", acquire)
	require.Equal(t, 200, status, body)
	assert.JSONEq(t, `{"state":"ACTIVE","generation":1,"acquiredAt":"2026-08-12T19:30:00.000Z",
		"renewedAt":"2026-08-12T19:30:00.000Z","expiresAt":"2026-08-12T19:32:00.000Z"}`, body)
	status, _, body = f.leaseCall("rk-managed", ownerA, "application/json", `{"action":"status","generation":1}`)
	require.Equal(t, 200, status, body)
	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	assert.ElementsMatch(t, []string{"acquiredAt", "connection", "expiresAt", "generation", "renewedAt", "state"}, slices.Collect(maps.Keys(st)))
	assert.NotContains(t, body, "k1")
	assert.NotContains(t, body, "kid1")

	// Scenario 8: another owner waits for capacity, 429 with Retry-After.
	status, h, body := f.leaseCall("rk-managed", ownerB, "application/json", acquire)
	assert.Equal(t, 429, status)
	assert.Equal(t, "120", h.Get("Retry-After"))
	assert.JSONEq(t, `{"state":"WAITING_FOR_CAPACITY","error":{"type":"lease_error","code":"LEASE_CAPACITY_UNAVAILABLE",
		"message":"Exclusive managed session capacity is temporarily unavailable"},"reason":"NO_FREE_ELIGIBLE_CONNECTION",
		"retryAfter":120,"eligibleCount":1,"freeCount":0}`, body)
	assert.NotContains(t, body, ownerA)
	assert.NotContains(t, body, ownerB)

	// The health report counts the active lease.
	_, _, body = f.call(http.MethodGet, admin.HealthPath, adminToken, "", "")
	assert.Contains(t, body, `"leases":{"active":1}`)

	// Scenario 4 over HTTP: a wrong generation is stale, the right one
	// renews; release is idempotent; status after release is stale.
	now = now.Add(time.Minute)
	status, _, body = f.leaseCall("rk-managed", ownerA, "application/json", `{"action":"renew","generation":2}`)
	assert.Equal(t, 409, status)
	assert.JSONEq(t, envelope("LEASE_FENCE_STALE", "Session lease generation is stale"), body)
	status, _, body = f.leaseCall("rk-managed", ownerA, "application/json", `{"action":"renew","generation":1}`)
	assert.Equal(t, 200, status)
	assert.JSONEq(t, `{"state":"ACTIVE","generation":1,"acquiredAt":"2026-08-12T19:30:00.000Z",
		"renewedAt":"2026-08-12T19:31:00.000Z","expiresAt":"2026-08-12T19:33:00.000Z"}`, body)
	for range 2 {
		status, _, body = f.leaseCall("rk-managed", ownerA, "application/json", `{"action":"release","generation":1}`)
		assert.Equal(t, 200, status, body)
		assert.Contains(t, body, `"state":"RELEASED","generation":1`)
	}
	status, _, _ = f.leaseCall("rk-managed", ownerA, "application/json", `{"action":"status","generation":1}`)
	assert.Equal(t, 409, status)
	_, _, body = f.call(http.MethodGet, admin.HealthPath, adminToken, "", "")
	assert.Contains(t, body, `"leases":{"active":0}`)
}

// listFails is a lease store whose listing is unavailable.
type listFails struct{ lease.Store }

func (listFails) List(context.Context, time.Time) ([]lease.Lease, error) {
	return nil, errors.New("store unavailable")
}

// A layer that cannot answer makes the report degraded, still 200, with the
// rest of the report intact.
func TestAdminHealthDegraded(t *testing.T) {
	f := newAdminFixture(t)
	f.cfg.Layers.Leases = lease.New(lease.Config{Store: listFails{lease.NewMemoryStore(lease.Config{})}})
	f.api = admin.New(f.cfg)
	status, _, body := f.call(http.MethodGet, admin.HealthPath, adminToken, "", "")
	assert.Equal(t, 200, status)
	var h struct {
		Status          string
		Error           string
		CircuitBreakers map[string]int
		Leases          map[string]int
	}
	require.NoError(t, json.Unmarshal([]byte(body), &h), body)
	assert.Equal(t, "degraded", h.Status)
	assert.Equal(t, "Health check partially unavailable", h.Error)
	assert.Equal(t, map[string]int{"open": 0, "halfOpen": 0, "closed": 0, "total": 0}, h.CircuitBreakers)
	assert.Equal(t, map[string]int{"active": 0}, h.Leases)

	status, _, body = f.call(http.MethodGet, admin.HealthPath, "", "", "")
	assert.Equal(t, 200, status)
	assert.JSONEq(t, `{"status":"healthy"}`, body, "anonymous callers learn nothing of the layers")
}
