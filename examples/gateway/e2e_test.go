package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	adminapi "github.com/routeguard/routeguard/combo/admin"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/examples/gateway/gw"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lease/leasetest"
)

const adminToken = "e2e-admin-token"

// upstreams starts one fake provider per id, closed when the test ends.
func upstreams(t *testing.T, ids ...string) map[string]*combotest.Upstream {
	t.Helper()
	m := map[string]*combotest.Upstream{}
	for _, id := range ids {
		u := combotest.New()
		t.Cleanup(u.Close)
		m[id] = u
	}
	return m
}

// provider is a provider config on u with one connection per id; the
// connection's API key is "sk-" + id.
func provider(id string, u *combotest.Upstream, conns ...string) gw.Provider {
	p := gw.Provider{ID: id, BaseURL: u.URL() + "/v1"}
	for _, c := range conns {
		p.Connections = append(p.Connections, gw.Connection{ID: c, Name: c + " key", APIKey: "sk-" + c})
	}
	return p
}

// config is a configuration with the admin token and no cooldown-aware
// waiting, so that every answer is immediate.
func config(providers []gw.Provider, combos ...gw.Combo) *gw.Config {
	c := &gw.Config{AdminToken: adminToken, Providers: providers, Combos: combos}
	c.Resilience.ComboCooldownWait.Disabled = true
	return c
}

// A provider's 503s open its breaker; traffic moves to the other provider
// without touching the open one; the admin reset closes it again.
func TestE2EOpenBreakerMovesTraffic(t *testing.T) {
	up := upstreams(t, "p1", "p2")
	up["p1"].Script("", combotest.Error(503, "overloaded"))
	cfg := config([]gw.Provider{provider("p1", up["p1"], "p1-a", "p1-b", "p1-c"), provider("p2", up["p2"], "p2-a")},
		gw.Combo{Name: "smart", Strategy: "priority", Targets: []gw.Target{{Provider: "p1", Model: "m1"}, {Provider: "p2", Model: "m2"}}})
	cfg.Resilience.Breaker.APIKey = gw.BreakerProfile{OpenAt: 3, ResetMs: 60_000}
	g := startGateway(t, cfg)

	a := g.chat(t, "smart", "hello", nil)
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, "p2/m2", a.Header.Get("X-Routeguard-Target"))
	assert.Equal(t, "4", a.Header.Get("X-Routeguard-Attempts"), "three p1 keys failed, then p2")
	require.Equal(t, 3, up["p1"].Total())

	h := g.admin(t, http.MethodGet, "/api/monitoring/health", "").json(t)
	assert.Equal(t, "OPEN", h["providerHealth"].(map[string]any)["p1"].(map[string]any)["state"], h)

	for range 3 {
		a = g.chat(t, "smart", "hello", nil)
		require.Equal(t, http.StatusOK, a.StatusCode, a.body)
		assert.Equal(t, "p2/m2", a.Header.Get("X-Routeguard-Target"))
		assert.Equal(t, "1", a.Header.Get("X-Routeguard-Attempts"))
	}
	assert.Equal(t, 3, up["p1"].Total(), "the open provider is not called")
	assert.Equal(t, 4, up["p2"].Total())

	// The 503s also cooled p1's keys. Lifting those cooldowns (all,
	// narrowed to the provider) leaves the open breaker alone in the way.
	h = g.admin(t, http.MethodGet, "/api/monitoring/health", "").json(t)
	assert.EqualValues(t, 3, h["connections"].(map[string]any)["cooling"])
	up["p1"].Script("", combotest.OK("p1 is back"))
	r := g.admin(t, http.MethodPost, "/api/resilience/cooldowns", `{"all":true,"provider":"p1"}`)
	require.Equal(t, http.StatusOK, r.StatusCode, r.body)
	assert.JSONEq(t, `{"cleared":3,"unchanged":0,"skippedTerminal":0,"lockoutsCleared":0}`, r.body)
	a = g.chat(t, "smart", "hello", nil)
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, "p2/m2", a.Header.Get("X-Routeguard-Target"))
	assert.Equal(t, 3, up["p1"].Total(), "the breaker alone keeps p1 out")

	// POST reset closes the breaker, and p1 serves first again.
	r = g.admin(t, http.MethodPost, "/api/resilience/reset", "")
	require.Equal(t, http.StatusOK, r.StatusCode, r.body)
	assert.Equal(t, true, r.json(t)["ok"])
	assert.EqualValues(t, 2, r.json(t)["resetCount"])
	h = g.admin(t, http.MethodGet, "/api/monitoring/health", "").json(t)
	assert.Equal(t, "CLOSED", h["providerHealth"].(map[string]any)["p1"].(map[string]any)["state"], h)
	a = g.chat(t, "smart", "hello", nil)
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, "p1/m1", a.Header.Get("X-Routeguard-Target"))
	assert.Contains(t, a.body, "p1 is back")
	assert.Equal(t, 4, up["p1"].Total())
}

// A 429 with Retry-After cools one key while its sibling serves; the admin
// cooldowns view shows it and POST lifts it.
func TestE2ERetryAfterCoolsOneKey(t *testing.T) {
	up := upstreams(t, "openai")
	up["openai"].Script("sk-k1", combotest.RateLimited(20*time.Second))
	cfg := config([]gw.Provider{provider("openai", up["openai"], "k1", "k2")},
		gw.Combo{Name: "keys", Strategy: "priority", Targets: []gw.Target{{Provider: "openai", Model: "gpt-4o"}}})
	g := startGateway(t, cfg)

	for range 3 {
		a := g.chat(t, "keys", "hi", nil)
		require.Equal(t, http.StatusOK, a.StatusCode, a.body)
		assert.Equal(t, "k2", servedBy(t, up["openai"]))
	}
	assert.Equal(t, 1, up["openai"].Count("sk-k1"), "the cooling key is not called again")
	assert.Equal(t, 3, up["openai"].Count("sk-k2"))

	cd := g.admin(t, http.MethodGet, "/api/resilience/cooldowns", "")
	require.Equal(t, http.StatusOK, cd.StatusCode, cd.body)
	var list struct {
		Connections []struct {
			ID          string `json:"connectionId"`
			Provider    string `json:"provider"`
			State       string `json:"state"`
			Terminal    bool   `json:"terminal"`
			RemainingMs int64  `json:"remainingMs"`
			ErrorStatus int    `json:"errorStatus"`
		} `json:"connections"`
		Total int `json:"total"`
	}
	require.NoError(t, json.Unmarshal([]byte(cd.body), &list))
	require.Equal(t, 1, list.Total, cd.body)
	c := list.Connections[0]
	assert.Equal(t, "k1", c.ID)
	assert.Equal(t, "openai", c.Provider)
	assert.False(t, c.Terminal)
	assert.Equal(t, 429, c.ErrorStatus)
	assert.InDelta(t, 20_000, c.RemainingMs, 2_000, "the cooldown follows Retry-After")

	// Lifting k1 by id makes it first again.
	up["openai"].Script("sk-k1", combotest.OK("k1 again"))
	r := g.admin(t, http.MethodPost, "/api/resilience/cooldowns", `{"connectionIds":["k1","k2"]}`)
	require.Equal(t, http.StatusOK, r.StatusCode, r.body)
	assert.JSONEq(t, `{"cleared":1,"unchanged":1,"skippedTerminal":0,"lockoutsCleared":0}`, r.body)
	a := g.chat(t, "keys", "hi", nil)
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, "k1", servedBy(t, up["openai"]))
	assert.Equal(t, 2, up["openai"].Count("sk-k1"))
}

// A 404 locks one model while another model on the same key works; the
// admin model-cooldowns view lists the lock and DELETE clears it.
func TestE2ENotFoundLocksOneModel(t *testing.T) {
	up := upstreams(t, "openai")
	up["openai"].Handle("sk-k1", func(c combotest.Call) combotest.Reply {
		if strings.Contains(string(c.Body), `"retired-1"`) {
			return combotest.Error(404, "model not found")
		}
		return combotest.OK("fine")
	})
	cfg := config([]gw.Provider{provider("openai", up["openai"], "k1")})
	cfg.Resilience.Lockout = gw.LockoutConfig{Enabled: true, BaseCooldownMs: 60_000}
	g := startGateway(t, cfg)

	a := g.chat(t, "openai/retired-1", "hi", nil)
	assert.Equal(t, http.StatusNotFound, a.StatusCode, a.body)
	assert.Contains(t, a.body, "model not found", "the upstream's answer is passed through")

	a = g.chat(t, "openai/gpt-4o", "hi", nil)
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, "k1", servedBy(t, up["openai"]))

	a = g.chat(t, "openai/retired-1", "hi", nil)
	assert.Equal(t, http.StatusServiceUnavailable, a.StatusCode, a.body)
	assert.Equal(t, "all_targets_cooling_down", errorCode(t, a))
	assert.Equal(t, 2, up["openai"].Count("sk-k1"), "the locked model is not sent again")

	l := g.admin(t, http.MethodGet, "/api/resilience/model-cooldowns", "")
	require.Equal(t, http.StatusOK, l.StatusCode, l.body)
	var locks struct {
		Lockouts []struct {
			Provider   string `json:"provider"`
			Connection string `json:"connectionId"`
			Model      string `json:"model"`
		} `json:"lockouts"`
		Total int `json:"total"`
	}
	require.NoError(t, json.Unmarshal([]byte(l.body), &locks))
	require.Equal(t, 1, locks.Total, l.body)
	assert.Equal(t, "openai", locks.Lockouts[0].Provider)
	assert.Equal(t, "k1", locks.Lockouts[0].Connection)
	assert.Equal(t, "retired-1", locks.Lockouts[0].Model)

	d := g.admin(t, http.MethodDelete, "/api/resilience/model-cooldowns", `{"provider":"openai","connection":"k1","model":"retired-1"}`)
	require.Equal(t, http.StatusOK, d.StatusCode, d.body)
	assert.Equal(t, true, d.json(t)["cleared"])
	l = g.admin(t, http.MethodGet, "/api/resilience/model-cooldowns", "")
	assert.JSONEq(t, `{"lockouts":[],"total":0}`, l.body)

	a = g.chat(t, "openai/retired-1", "hi", nil)
	assert.Equal(t, http.StatusNotFound, a.StatusCode, "the cleared model is sent again")
	assert.Equal(t, 3, up["openai"].Count("sk-k1"))
}

// servedBy returns the connection of u's latest call: the test
// connections' keys are "sk-" + id. Clients are not told connection ids.
func servedBy(t *testing.T, u *combotest.Upstream) string {
	t.Helper()
	calls := u.Calls()
	if len(calls) == 0 {
		return ""
	}
	return strings.TrimPrefix(calls[len(calls)-1].Credential, "sk-")
}

// errorCode returns the error code of an OpenAI-style or admin error body.
func errorCode(t *testing.T, a answer) string {
	t.Helper()
	v := a.json(t)
	if e, ok := v["error"].(map[string]any); ok {
		s, _ := e["code"].(string)
		return s
	}
	s, _ := v["code"].(string)
	return s
}

// An agentrouter 403 carrying the quota marker is restated to 429: the
// key cools as rate limited and the next request skips it.
func TestE2EAgentrouterQuotaRestatedTo429(t *testing.T) {
	up := upstreams(t, "agentrouter", "openai")
	up["agentrouter"].Script("", combotest.Error(403, "额度不足, please top up"))
	cfg := config([]gw.Provider{provider("agentrouter", up["agentrouter"], "r1"), provider("openai", up["openai"], "k1")},
		gw.Combo{Name: "ar", Strategy: "priority", Targets: []gw.Target{{Provider: "agentrouter", Model: "claude"}, {Provider: "openai", Model: "gpt-4o"}}})
	g := startGateway(t, cfg)

	a := g.chat(t, "ar", "hi", nil)
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, "openai/gpt-4o", a.Header.Get("X-Routeguard-Target"))
	assert.Equal(t, "2", a.Header.Get("X-Routeguard-Attempts"))

	cd := g.admin(t, http.MethodGet, "/api/resilience/cooldowns", "")
	var list struct {
		Connections []struct {
			ID          string `json:"connectionId"`
			State       string `json:"state"`
			Terminal    bool   `json:"terminal"`
			ErrorStatus int    `json:"errorStatus"`
		} `json:"connections"`
	}
	require.NoError(t, json.Unmarshal([]byte(cd.body), &list))
	require.Len(t, list.Connections, 1, cd.body)
	assert.Equal(t, "r1", list.Connections[0].ID)
	assert.Equal(t, 429, list.Connections[0].ErrorStatus, "403 restated to 429: %s", cd.body)
	assert.False(t, list.Connections[0].Terminal, "a restated quota answer is not a ban")

	a = g.chat(t, "ar", "hi", nil)
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, "1", a.Header.Get("X-Routeguard-Attempts"))
	assert.Equal(t, 1, up["agentrouter"].Total(), "the cooling key is skipped")
}

// A session (X-Session-Id) stays on its connection under round-robin; the
// session header never goes upstream.
func TestE2ESessionStaysOnItsConnection(t *testing.T) {
	up := upstreams(t, "openai")
	cfg := config([]gw.Provider{provider("openai", up["openai"], "k1", "k2", "k3")},
		gw.Combo{Name: "rr", Strategy: "round-robin", Targets: []gw.Target{{Provider: "openai", Model: "m"}}})
	cfg.Resilience.SessionAffinityTTLMs = 600_000
	g := startGateway(t, cfg)

	session := hdr("X-Session-Id", "agent-42")
	first := g.chat(t, "rr", "turn 0", session.Clone())
	require.Equal(t, http.StatusOK, first.StatusCode, first.body)
	pinned := servedBy(t, up["openai"])
	require.NotEmpty(t, pinned)
	for i := 1; i <= 5; i++ {
		a := g.chat(t, "rr", "turn "+strconv.Itoa(i), session.Clone())
		require.Equal(t, http.StatusOK, a.StatusCode, a.body)
		assert.Equal(t, pinned, servedBy(t, up["openai"]), "turn %d", i)
	}
	assert.Equal(t, 6, up["openai"].Count("sk-"+pinned))

	// Other conversations are spread by round-robin.
	seen := map[string]bool{}
	for i := range 6 {
		a := g.chat(t, "rr", "conversation "+strconv.Itoa(i), nil)
		require.Equal(t, http.StatusOK, a.StatusCode, a.body)
		seen[servedBy(t, up["openai"])] = true
	}
	assert.Len(t, seen, 3)

	for _, c := range up["openai"].Calls() {
		assert.Empty(t, c.Header.Get("X-Session-Id"), "session header forwarded")
	}
	h := g.admin(t, http.MethodGet, "/api/monitoring/health", "").json(t)
	assert.NotZero(t, h["sessions"].(map[string]any)["pins"])
}

// A session lease restricts a managed key to its connection; a stale
// generation is refused before any upstream call.
func TestE2EStaleLeaseRefusedBeforeUpstream(t *testing.T) {
	up := upstreams(t, "openai")
	cfg := config([]gw.Provider{provider("openai", up["openai"], "k1", "k2")})
	cfg.APIKeys = []gw.APIKey{
		{ID: "managed", Key: "rk-managed", Scopes: []string{adminapi.ScopeLeaseExclusive}, AllowedConnections: []string{"k2"}},
		{ID: "plain", Key: "rk-plain"},
	}
	g := startGateway(t, cfg)
	owner := leasetest.Owner('A')
	leaseCall := func(key, body string) answer {
		return g.do(t, http.MethodPost, adminapi.LeasePath,
			hdr("Authorization", "Bearer "+key, lease.HeaderOwner, owner, "Content-Type", "application/json"), body)
	}

	acq := leaseCall("rk-managed", `{"action":"acquire","model":"openai/gpt-4o"}`)
	require.Equal(t, http.StatusOK, acq.StatusCode, acq.body)
	assert.Equal(t, "ACTIVE", acq.json(t)["state"])
	gen := int(acq.json(t)["generation"].(float64))
	require.Equal(t, 1, gen)
	assert.NotContains(t, acq.body, "k2", "no connection id in a lease answer")

	st := leaseCall("rk-managed", `{"action":"status","generation":1}`)
	require.Equal(t, http.StatusOK, st.StatusCode, st.body)
	assert.Equal(t, "k2 key", st.json(t)["connection"].(map[string]any)["displayName"])

	withLease := func(g int) http.Header {
		return hdr("Authorization", "Bearer rk-managed", lease.HeaderOwner, owner, lease.HeaderGeneration, strconv.Itoa(g))
	}
	a := g.chat(t, "openai/gpt-4o", "hi", withLease(1))
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, "k2", servedBy(t, up["openai"]))
	require.Equal(t, 1, up["openai"].Total())
	call := up["openai"].Calls()[0]
	assert.Equal(t, "sk-k2", call.Credential)
	for k := range call.Header {
		assert.False(t, strings.EqualFold(k, lease.HeaderOwner) || strings.EqualFold(k, lease.HeaderGeneration), "lease header %s forwarded", k)
	}

	a = g.chat(t, "openai/gpt-4o", "hi", withLease(2))
	assert.Equal(t, http.StatusConflict, a.StatusCode, a.body)
	assert.Equal(t, "LEASE_FENCE_STALE", errorCode(t, a))
	a = g.chat(t, "openai/gpt-4o", "hi", hdr("Authorization", "Bearer rk-managed"))
	assert.Equal(t, http.StatusBadRequest, a.StatusCode, a.body)
	assert.Equal(t, "LEASE_CONTEXT_REQUIRED", errorCode(t, a))
	assert.Equal(t, 1, up["openai"].Total(), "no upstream call for a refused lease")

	// A plain key keeps off the leased connection.
	a = g.chat(t, "openai/gpt-4o", "hi", hdr("Authorization", "Bearer rk-plain"))
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, "k1", servedBy(t, up["openai"]))

	// After release the old generation is stale too.
	rel := leaseCall("rk-managed", `{"action":"release","generation":1}`)
	require.Equal(t, http.StatusOK, rel.StatusCode, rel.body)
	a = g.chat(t, "openai/gpt-4o", "hi", withLease(1))
	assert.Equal(t, http.StatusConflict, a.StatusCode, a.body)
	assert.Equal(t, 2, up["openai"].Total())

	// A key without the scope cannot lease.
	acq = leaseCall("rk-plain", `{"action":"acquire","model":"openai/gpt-4o"}`)
	assert.Equal(t, http.StatusForbidden, acq.StatusCode, acq.body)
	assert.Equal(t, "LEASE_SCOPE_REQUIRED", errorCode(t, acq))
}

// A stream that sends only heartbeats is cut by the throughput watchdog
// before anything reaches the client and completed on the next target.
func TestE2ESlowStreamCutAndCompletedElsewhere(t *testing.T) {
	up := upstreams(t, "slow", "fast")
	beats := make([]combotest.Event, 100)
	for i := range beats {
		beats[i] = combotest.Heartbeat()
	}
	up["slow"].Script("", combotest.SSE(100*time.Millisecond, beats...))
	up["fast"].Script("", combotest.TextStream(10*time.Millisecond, "Hello", " world"))
	cfg := config([]gw.Provider{provider("slow", up["slow"], "s1"), provider("fast", up["fast"], "f1")},
		gw.Combo{Name: "s", Strategy: "priority", Targets: []gw.Target{{Provider: "slow", Model: "m"}, {Provider: "fast", Model: "m"}}})
	cfg.Resilience.ThroughputWatchdog = gw.WatchdogConfig{Enabled: true, WarmupMs: -1, WindowMs: 1000, MinBytesPerSecond: 1, HoldHeartbeats: true}
	g := startGateway(t, cfg)

	start := time.Now()
	h := hdr("Content-Type", "application/json")
	a := g.do(t, http.MethodPost, "/v1/chat/completions", h, chatBody("s", "stream please", true))
	elapsed := time.Since(start)
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, "fast/m", a.Header.Get("X-Routeguard-Target"))
	assert.Equal(t, "2", a.Header.Get("X-Routeguard-Attempts"))
	assert.True(t, strings.HasPrefix(a.Header.Get("Content-Type"), "text/event-stream"))
	assert.Contains(t, a.body, "Hello")
	assert.Contains(t, a.body, "[DONE]")
	assert.NotContains(t, a.body, "ping", "nothing of the cut stream reaches the client")
	assert.True(t, strings.HasPrefix(a.body, "data: "), a.body)
	assert.Equal(t, 1, up["slow"].Total())
	assert.Equal(t, 1, up["fast"].Total())
	assert.Greater(t, elapsed, 900*time.Millisecond, "judged after one window")
	assert.Less(t, elapsed, 5*time.Second)
}

// When every target is cooling the answer is 503 with Retry-After the
// earliest recovery, and no upstream is called.
func TestE2EAllTargetsCooling(t *testing.T) {
	up := upstreams(t, "openai")
	up["openai"].Script("sk-k1", combotest.RateLimited(7*time.Second))
	up["openai"].Script("sk-k2", combotest.RateLimited(9*time.Second))
	cfg := config([]gw.Provider{provider("openai", up["openai"], "k1", "k2")},
		gw.Combo{Name: "keys", Strategy: "priority", Targets: []gw.Target{{Provider: "openai", Model: "gpt-4o"}}})
	g := startGateway(t, cfg)

	a := g.chat(t, "keys", "hi", nil)
	assert.Equal(t, http.StatusTooManyRequests, a.StatusCode, "the last upstream answer: %s", a.body)
	assert.Equal(t, "9", a.Header.Get("Retry-After"), "the upstream's hint is passed on")
	assert.Equal(t, 2, up["openai"].Total())

	a = g.chat(t, "keys", "hi", nil)
	require.Equal(t, http.StatusServiceUnavailable, a.StatusCode, a.body)
	assert.Equal(t, "7", a.Header.Get("Retry-After"))
	assert.Equal(t, "all_targets_cooling_down", errorCode(t, a))
	assert.Contains(t, a.body, "connection_cooldown")
	assert.Equal(t, 2, up["openai"].Total(), "nothing dispatched")
}

// The admin API and the chat route refuse bad requests with the spec's
// 4xx answers, never a 500.
func TestE2EAdminAndRequestErrors(t *testing.T) {
	up := upstreams(t, "openai")
	cfg := config([]gw.Provider{provider("openai", up["openai"], "k1")})
	cfg.APIKeys = []gw.APIKey{
		{ID: "client", Key: "rk-client"},
		{ID: "managed", Key: "rk-managed", Scopes: []string{adminapi.ScopeLeaseExclusive}, AllowedConnections: []string{"k1"}},
	}
	g := startGateway(t, cfg)
	owner := leasetest.Owner('A')

	admin := "Bearer " + adminToken
	big := `{"connectionIds":["` + strings.Repeat("k", 70<<10) + `"]}`
	tests := []struct {
		name        string
		method      string
		path        string
		header      http.Header
		body        string
		status      int
		code        string
		allow       string
		contentType string // request Content-Type; "" means application/json when there is a body
	}{
		{name: "health without token is anonymous", method: "GET", path: "/api/monitoring/health", status: 200},
		{name: "lockouts without token", method: "GET", path: "/api/resilience/model-cooldowns", status: 401, code: "unauthorized"},
		{name: "cooldowns with wrong token", method: "GET", path: "/api/resilience/cooldowns",
			header: hdr("Authorization", "Bearer nope"), status: 401, code: "unauthorized"},
		{name: "cooldowns with a client key", method: "GET", path: "/api/resilience/cooldowns",
			header: hdr("Authorization", "Bearer rk-client"), status: 403, code: "forbidden"},
		{name: "reset without token", method: "POST", path: "/api/resilience/reset", status: 401, code: "unauthorized"},
		{name: "reset with a client key", method: "POST", path: "/api/resilience/reset",
			header: hdr("Authorization", "Bearer rk-client"), status: 403, code: "forbidden"},
		{name: "reset with a text body", method: "POST", path: "/api/resilience/reset", header: hdr("Authorization", admin),
			body: "now", contentType: "text/plain", status: 415, code: "unsupported_media_type"},
		{name: "health delete without token", method: "DELETE", path: "/api/monitoring/health", status: 401, code: "unauthorized"},
		{name: "cooldowns wrong content type", method: "POST", path: "/api/resilience/cooldowns", header: hdr("Authorization", admin),
			body: `{"all":true}`, contentType: "text/plain", status: 415, code: "unsupported_media_type"},
		{name: "cooldowns bad JSON", method: "POST", path: "/api/resilience/cooldowns", header: hdr("Authorization", admin),
			body: `{"all":`, status: 400, code: "invalid_json"},
		{name: "cooldowns unknown field", method: "POST", path: "/api/resilience/cooldowns", header: hdr("Authorization", admin),
			body: `{"everything":true}`, status: 400, code: "unknown_field"},
		{name: "cooldowns wrong type", method: "POST", path: "/api/resilience/cooldowns", header: hdr("Authorization", admin),
			body: `{"all":"yes"}`, status: 400, code: "invalid_json"},
		{name: "cooldowns trailing data", method: "POST", path: "/api/resilience/cooldowns", header: hdr("Authorization", admin),
			body: `{"all":true} {}`, status: 400, code: "invalid_json"},
		{name: "cooldowns empty body", method: "POST", path: "/api/resilience/cooldowns", header: hdr("Authorization", admin),
			contentType: "application/json", status: 400, code: "invalid_json"},
		{name: "cooldowns ids and all", method: "POST", path: "/api/resilience/cooldowns", header: hdr("Authorization", admin),
			body: `{"all":true,"connectionIds":["k1"]}`, status: 400, code: "invalid_request"},
		{name: "cooldowns oversized body", method: "POST", path: "/api/resilience/cooldowns", header: hdr("Authorization", admin),
			body: big, status: 413, code: "body_too_large"},
		{name: "cooldowns wrong method", method: "PUT", path: "/api/resilience/cooldowns", header: hdr("Authorization", admin),
			status: 405, code: "method_not_allowed", allow: "GET, HEAD, POST"},
		{name: "model cooldown without model", method: "DELETE", path: "/api/resilience/model-cooldowns", header: hdr("Authorization", admin),
			body: `{"provider":"openai"}`, status: 400, code: "invalid_request"},
		{name: "model cooldown unknown field", method: "DELETE", path: "/api/resilience/model-cooldowns", header: hdr("Authorization", admin),
			body: `{"provider":"openai","model":"m","connectionId":"k1"}`, status: 400, code: "unknown_field"},
		{name: "unknown admin path", method: "GET", path: "/api/nothing-here", header: hdr("Authorization", admin), status: 404, code: "not_found"},

		{name: "lease without key", method: "POST", path: adminapi.LeasePath, body: `{"action":"status","generation":1}`,
			status: 401, code: "LEASE_AUTHENTICATION_REQUIRED"},
		{name: "lease with unknown key", method: "POST", path: adminapi.LeasePath, header: hdr("Authorization", "Bearer rk-nope"),
			body: `{"action":"status","generation":1}`, status: 401, code: "LEASE_API_KEY_INVALID"},
		{name: "lease wrong content type", method: "POST", path: adminapi.LeasePath, header: hdr("Authorization", "Bearer rk-managed", lease.HeaderOwner, owner),
			body: `{"action":"acquire","model":"openai/m"}`, contentType: "text/plain", status: 415},
		{name: "lease bad JSON", method: "POST", path: adminapi.LeasePath, header: hdr("Authorization", "Bearer rk-managed", lease.HeaderOwner, owner),
			body: `{"action":`, status: 400, code: "LEASE_ACTION_INVALID"},
		{name: "lease unknown field", method: "POST", path: adminapi.LeasePath, header: hdr("Authorization", "Bearer rk-managed", lease.HeaderOwner, owner),
			body: `{"action":"acquire","model":"openai/m","ttl":5}`, status: 400, code: "LEASE_ACTION_INVALID"},
		{name: "lease oversized body", method: "POST", path: adminapi.LeasePath, header: hdr("Authorization", "Bearer rk-managed", lease.HeaderOwner, owner),
			body: big, status: 413},
		{name: "lease without owner", method: "POST", path: adminapi.LeasePath, header: hdr("Authorization", "Bearer rk-managed"),
			body: `{"action":"acquire","model":"openai/m"}`, status: 400, code: "LEASE_CONTEXT_REQUIRED"},
		{name: "lease unknown model", method: "POST", path: adminapi.LeasePath, header: hdr("Authorization", "Bearer rk-managed", lease.HeaderOwner, owner),
			body: `{"action":"acquire","model":"nowhere"}`, status: 400},
		{name: "lease stale generation", method: "POST", path: adminapi.LeasePath, header: hdr("Authorization", "Bearer rk-managed", lease.HeaderOwner, owner),
			body: `{"action":"renew","generation":7}`, status: 409, code: "LEASE_FENCE_STALE"},
		{name: "lease wrong method", method: "GET", path: adminapi.LeasePath, header: hdr("Authorization", "Bearer rk-managed"), status: 405},

		{name: "chat without key", method: "POST", path: "/v1/chat/completions", body: chatBody("openai/m", "hi", false),
			status: 401, code: "invalid_api_key"},
		{name: "chat with an unknown key", method: "POST", path: "/v1/chat/completions", header: hdr("Authorization", "Bearer rk-nope"),
			body: chatBody("openai/m", "hi", false), status: 401, code: "invalid_api_key"},
		{name: "chat with the admin token", method: "POST", path: "/v1/chat/completions", header: hdr("Authorization", admin),
			body: chatBody("openai/m", "hi", false), status: 401, code: "invalid_api_key"},
		{name: "chat bad JSON", method: "POST", path: "/v1/chat/completions", header: hdr("Authorization", "Bearer rk-client"),
			body: `{"model":`, status: 400, code: "invalid_json"},
		{name: "chat without model", method: "POST", path: "/v1/chat/completions", header: hdr("Authorization", "Bearer rk-client"),
			body: `{"messages":[]}`, status: 400, code: "model_required"},
		{name: "chat unknown model", method: "POST", path: "/v1/chat/completions", header: hdr("Authorization", "Bearer rk-client"),
			body: chatBody("nowhere/m", "hi", false), status: 404, code: "model_not_found"},
		{name: "chat wrong method", method: "GET", path: "/v1/chat/completions", header: hdr("Authorization", "Bearer rk-client"),
			status: 405, code: "method_not_allowed", allow: "POST"},
		{name: "models without key", method: "GET", path: "/v1/models", status: 401, code: "invalid_api_key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.header.Clone()
			if h == nil {
				h = http.Header{}
			}
			switch {
			case tt.contentType != "":
				h.Set("Content-Type", tt.contentType)
			case tt.body != "":
				h.Set("Content-Type", "application/json")
			}
			a := g.do(t, tt.method, tt.path, h, tt.body)
			assert.Equal(t, tt.status, a.StatusCode, a.body)
			assert.True(t, strings.HasPrefix(a.Header.Get("Content-Type"), "application/json"), a.Header.Get("Content-Type"))
			if tt.code != "" {
				assert.Equal(t, tt.code, errorCode(t, a), a.body)
			}
			if tt.allow != "" {
				assert.Equal(t, tt.allow, a.Header.Get("Allow"))
			}
		})
	}
	assert.Zero(t, up["openai"].Total(), "no refused request reached the upstream")

	// The anonymous health answer tells nothing but the status.
	a := g.do(t, http.MethodGet, "/api/monitoring/health", nil, "")
	assert.JSONEq(t, `{"status":"healthy"}`, a.body)
	a = g.do(t, http.MethodGet, "/api/monitoring/health", hdr("Authorization", admin), "")
	assert.Contains(t, a.json(t), "providerBreakers")
	a = g.do(t, http.MethodGet, "/v1/models", hdr("Authorization", "Bearer rk-client"), "")
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
}

// SIGINT lets an in-flight request finish, then the process exits 0. The
// gateway listens where -listen says, not where the configuration does.
func TestE2EShutdownFinishesInFlight(t *testing.T) {
	up := upstreams(t, "openai")
	up["openai"].Script("", combotest.OK("slow but sure").After(700*time.Millisecond))
	cfg := config([]gw.Provider{provider("openai", up["openai"], "k1")})
	cfg.Listen = "127.0.0.1:1" // overridden by the -listen flag
	g := startGateway(t, cfg)
	assert.NotEqual(t, "http://127.0.0.1:1", g.base, "-listen overrides the configured address")

	var wg sync.WaitGroup
	var a answer
	wg.Add(1)
	go func() {
		defer wg.Done()
		a = g.chat(t, "openai/m", "hi", nil)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for up["openai"].Total() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	require.Equal(t, 1, up["openai"].Total(), "the request reached the upstream")
	require.NoError(t, g.cmd.Process.Signal(syscall.SIGINT))
	wg.Wait()
	assert.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Contains(t, a.body, "slow but sure")
	assert.NoError(t, g.wait(t, 10*time.Second), "exit status")
	assert.Equal(t, 0, g.cmd.ProcessState.ExitCode())
	assert.Contains(t, g.stdout.String(), "shutting down")
}

// With no config the binary runs the demo, and the two curl commands it
// prints work as printed: their URL, headers and body are sent as they
// are.
func TestE2EDemo(t *testing.T) {
	g := startGateway(t, nil)
	var curls []string
	for _, line := range strings.Split(g.stdout.String(), "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "curl ") {
			curls = append(curls, line)
		}
	}
	require.Len(t, curls, 2, g.stdout.String())

	method, path, h, body := parseCurl(t, g.base, curls[0])
	assert.Equal(t, http.MethodPost, method)
	assert.Equal(t, "/v1/chat/completions", path)
	a := g.do(t, method, path, h, body)
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Contains(t, a.body, "Hello from")
	assert.Contains(t, []string{"flaky/fast-model", "steady/solid-model"}, a.Header.Get("X-Routeguard-Target"))

	method, path, h, body = parseCurl(t, g.base, curls[1])
	assert.Equal(t, http.MethodGet, method)
	assert.Equal(t, "/api/monitoring/health", path)
	a = g.do(t, method, path, h, body)
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Contains(t, a.json(t), "providerBreakers", "the printed admin token opens the full report")
}

// parseCurl reads a printed "curl -s URL [-H 'k: v']... [-d 'body']"
// command: its method (POST with a body), the path under base, headers
// and body.
func parseCurl(t *testing.T, base, line string) (method, path string, h http.Header, body string) {
	t.Helper()
	fields := strings.Fields(line)
	require.GreaterOrEqual(t, len(fields), 3, line)
	require.Equal(t, []string{"curl", "-s"}, fields[:2], line)
	path, ok := strings.CutPrefix(fields[2], base)
	require.True(t, ok, "the URL %q is not under %q", fields[2], base)
	rest := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(line, "curl -s "), fields[2]))
	h, method = http.Header{}, http.MethodGet
	for rest != "" {
		flag, quoted, ok := strings.Cut(rest, " '")
		require.True(t, ok, "unexpected %q in %q", rest, line)
		arg, after, ok := strings.Cut(quoted, "'")
		require.True(t, ok, "unterminated quote in %q", line)
		switch flag {
		case "-H":
			k, v, ok := strings.Cut(arg, ":")
			require.True(t, ok, "bad header %q", arg)
			h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		case "-d":
			body, method = arg, http.MethodPost
		default:
			t.Fatalf("unexpected curl flag %q in %q", flag, line)
		}
		rest = strings.TrimSpace(after)
	}
	return method, path, h, body
}

// A streamed answer reaches the client as it is produced, not at the end.
func TestE2EStreamIsRelayedAsItArrives(t *testing.T) {
	up := upstreams(t, "openai")
	up["openai"].Script("", combotest.TextStream(400*time.Millisecond, "one", " two", " three"))
	g := startGateway(t, config([]gw.Provider{provider("openai", up["openai"], "k1")}))

	req, err := http.NewRequest(http.MethodPost, g.base+"/v1/chat/completions", strings.NewReader(chatBody("openai/m", "hi", true)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := testClient(t).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	buf := make([]byte, 4096)
	n, err := resp.Body.Read(buf)
	require.NoError(t, err)
	first := time.Since(start)
	assert.Contains(t, string(buf[:n]), "one")
	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	total := time.Since(start)
	assert.Contains(t, string(rest), "three")
	assert.Less(t, first, 400*time.Millisecond, "the first chunk is flushed at once")
	assert.Greater(t, total, 1100*time.Millisecond, "the stream keeps the upstream's pace")
}

// A client that goes away mid-stream cancels the upstream call and frees
// the connection's admission slot.
func TestE2EClientGoneFreesTheSlot(t *testing.T) {
	up := upstreams(t, "openai")
	up["openai"].Handle("sk-k1", func(c combotest.Call) combotest.Reply {
		if strings.Contains(string(c.Body), `"stream":true`) {
			r := combotest.SSE(0, combotest.ChatDelta("partial"))
			r.Stream.HangAfter = true
			return r
		}
		return combotest.OK("fine")
	})
	p := provider("openai", up["openai"], "k1")
	p.Connections[0].MaxConcurrent = 1
	cfg := config([]gw.Provider{p})
	cfg.Resilience.RequestQueue.MaxQueueWaitMs = 1000
	g := startGateway(t, cfg)

	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.base+"/v1/chat/completions",
		strings.NewReader(chatBody("openai/m", "hi", true)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := testClient(t).Do(req)
	require.NoError(t, err)
	buf := make([]byte, 4096)
	n, err := resp.Body.Read(buf)
	require.NoError(t, err)
	require.Contains(t, string(buf[:n]), "partial")
	cancel()
	resp.Body.Close()

	// The only slot is free again once the gateway has seen the client go.
	var a answer
	deadline := time.Now().Add(5 * time.Second)
	for {
		a = g.chat(t, "openai/m", "again", nil)
		if a.StatusCode == http.StatusOK || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	h := g.admin(t, http.MethodGet, "/api/monitoring/health", "").json(t)
	for _, q := range h["queues"].([]any) {
		assert.EqualValues(t, 0, q.(map[string]any)["running"], h["queues"])
	}
	cd := g.admin(t, http.MethodGet, "/api/resilience/cooldowns", "")
	assert.JSONEq(t, `{"connections":[],"total":0}`, cd.body, "a client leaving is not the connection's fault")
}

// SIGTERM with a request that never ends: the process closes it after the
// grace period and exits, reporting the cut.
func TestE2EShutdownIsBounded(t *testing.T) {
	up := upstreams(t, "openai")
	up["openai"].Script("", combotest.Hang())
	g := startGateway(t, config([]gw.Provider{provider("openai", up["openai"], "k1")}), "-grace", "300ms")

	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, g.base+"/v1/chat/completions", strings.NewReader(chatBody("openai/m", "hi", false)))
		resp, err := testClient(t).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for up["openai"].Total() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	require.Equal(t, 1, up["openai"].Total())
	start := time.Now()
	require.NoError(t, g.cmd.Process.Signal(syscall.SIGTERM))
	err := g.wait(t, 5*time.Second)
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.Error(t, err, "requests were cut: the exit status says so")
	assert.Equal(t, 1, g.cmd.ProcessState.ExitCode())
	assert.Contains(t, g.stderr.String(), "grace")
	assert.Error(t, <-done, "the hanging request was closed")
}

// A configuration with a mistake is refused at start, naming the field:
// the process exits 1 before listening.
func TestE2EBadConfigRefused(t *testing.T) {
	const provider = `{"id":"openai","baseURL":"http://127.0.0.1:9/v1","connections":[{"id":"k1","apiKey":"sk-1"}]}`
	for _, tc := range []struct{ name, doc, want string }{
		{"unknown strategy", `{"providers":[` + provider + `],"combos":[{"name":"c","strategy":"fastest-first","targets":[{"provider":"openai","model":"m"}]}]}`,
			`combos[0].strategy: unknown strategy "fastest-first"`},
		{"unknown field", `{"providers":[` + provider + `],"resilience":{"requestQueue":{"maxWait":5}}}`,
			`resilience.requestQueue.maxWait: unknown field`},
		{"duplicate id", `{"providers":[` + provider + `,` + provider + `]}`,
			`providers[1].id: duplicate provider id "openai"` + "\n" +
				`config: providers[1].connections[0].id: duplicate connection id "k1" (also in provider "openai")`},
		{"unknown provider", `{"providers":[` + provider + `],"combos":[{"name":"c","targets":[{"provider":"anthropic","model":"m"}]}]}`,
			`combos[0].targets[0].provider: unknown provider "anthropic"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.json")
			require.NoError(t, os.WriteFile(path, []byte(tc.doc), 0o600))
			out, err := exec.Command(gatewayBinary(t), "-config", path, "-listen", "127.0.0.1:0").CombinedOutput()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "%s", out)
			assert.Equal(t, 1, ee.ExitCode())
			assert.Equal(t, "gateway: config: "+tc.want, strings.SplitN(strings.TrimSpace(string(out)), " (valid:", 2)[0])
			assert.NotContains(t, string(out), "listening")
		})
	}
}
