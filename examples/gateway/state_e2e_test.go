package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	adminapi "github.com/routeguard/routeguard/combo/admin"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/examples/gateway/gw"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lease/leasetest"
)

// stateFlush is the write-behind interval of the state file in these
// tests. Efficiency state (cooldowns, pins, breakers, lockouts) reaches the
// file one interval after it changed; a test waits settle before it kills
// the process.
const (
	stateFlush = 50 * time.Millisecond
	settle     = 10 * stateFlush // a generous multiple: the writer may lag under -race
)

// writeConfig writes cfg to gateway.json in a new temporary directory and
// returns its path; the default state file lies beside it.
func writeConfig(t *testing.T, cfg *gw.Config) string {
	t.Helper()
	data, err := json.Marshal(cfg)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "gateway.json")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

// crash ends the gateway with SIGKILL: nothing is flushed or closed.
func (g *gatewayProc) crash(t *testing.T) {
	t.Helper()
	require.NoError(t, g.cmd.Process.Signal(syscall.SIGKILL))
	err := g.wait(t, 10*time.Second)
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, syscall.SIGKILL, ee.Sys().(syscall.WaitStatus).Signal())
}

// cooldownList is GET /api/resilience/cooldowns by connection id.
func cooldownList(t *testing.T, g *gatewayProc) map[string]string {
	t.Helper()
	a := g.admin(t, http.MethodGet, "/api/resilience/cooldowns", "")
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	var list struct {
		Connections []struct {
			ID    string `json:"connectionId"`
			State string `json:"state"`
		} `json:"connections"`
	}
	require.NoError(t, json.Unmarshal([]byte(a.body), &list))
	out := map[string]string{}
	for _, c := range list.Connections {
		out[c.ID] = c.State
	}
	return out
}

// breakerOf returns the state and retryAfterMs of provider's breaker from
// the health report.
func breakerOf(t *testing.T, g *gatewayProc, provider string) (string, int64) {
	t.Helper()
	a := g.admin(t, http.MethodGet, "/api/monitoring/health", "")
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	var h struct {
		Breakers []struct {
			Provider     string `json:"provider"`
			State        string `json:"state"`
			RetryAfterMs int64  `json:"retryAfterMs"`
		} `json:"providerBreakers"`
	}
	require.NoError(t, json.Unmarshal([]byte(a.body), &h))
	for _, b := range h.Breakers {
		if b.Provider == provider {
			return b.State, b.RetryAfterMs
		}
	}
	return "CLOSED", 0
}

// lockList is GET /api/resilience/model-cooldowns as provider/connection/model.
func lockList(t *testing.T, g *gatewayProc) []string {
	t.Helper()
	a := g.admin(t, http.MethodGet, "/api/resilience/model-cooldowns", "")
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	var l struct {
		Lockouts []struct {
			Provider   string `json:"provider"`
			Connection string `json:"connectionId"`
			Model      string `json:"model"`
		} `json:"lockouts"`
	}
	require.NoError(t, json.Unmarshal([]byte(a.body), &l))
	out := []string{}
	for _, x := range l.Lockouts {
		out = append(out, x.Provider+"/"+x.Connection+"/"+x.Model)
	}
	return out
}

// restartConfig is the configuration of the restart tests: one provider per
// kind of state.
//
//   - main (banned, good) behind combo "keys": banned answers 401 with a
//     ban phrase; money (broke) answers 402 "insufficient credits".
//   - flaky (f1, f2, f3) answers 503 and opens its breaker (3 failures,
//     open 40 s); combo "flk" falls back to backup.
//   - lk (l1) answers 404 for model retired-1: a 60 s model lock.
//   - rr (r1, r2, r3) behind round-robin combo "rr": session pins.
//   - lp (ls1) is the connection of the managed key rk-managed; rk-client
//     is a plain key.
func restartConfig(up map[string]*combotest.Upstream) *gw.Config {
	cfg := config([]gw.Provider{
		provider("main", up["main"], "banned", "good"),
		provider("money", up["money"], "broke"),
		provider("flaky", up["flaky"], "f1", "f2", "f3"),
		provider("backup", up["backup"], "b1"),
		provider("lk", up["lk"], "l1"),
		provider("rr", up["rr"], "r1", "r2", "r3"),
		provider("lp", up["lp"], "ls1"),
	},
		gw.Combo{Name: "keys", Strategy: "priority", Targets: []gw.Target{{Provider: "main", Model: "m"}}},
		gw.Combo{Name: "flk", Strategy: "priority", Targets: []gw.Target{{Provider: "flaky", Model: "m"}, {Provider: "backup", Model: "m"}}},
		gw.Combo{Name: "rr", Strategy: "round-robin", Targets: []gw.Target{{Provider: "rr", Model: "m"}}},
	)
	cfg.Resilience.Breaker.APIKey = gw.BreakerProfile{OpenAt: 3, ResetMs: 40_000}
	cfg.Resilience.Lockout = gw.LockoutConfig{Enabled: true, ErrorCodes: []int{404}, BaseCooldownMs: 60_000}
	cfg.Resilience.SessionAffinityTTLMs = 600_000
	cfg.APIKeys = []gw.APIKey{
		{ID: "client", Key: "rk-client"},
		{ID: "managed", Key: "rk-managed", Scopes: []string{adminapi.ScopeLeaseExclusive}, AllowedConnections: []string{"ls1"}},
	}
	cfg.State.FlushIntervalMs = int(stateFlush / time.Millisecond)
	return cfg
}

// asClient is the header of a plain client key of restartConfig.
func asClient() http.Header { return hdr("Authorization", "Bearer rk-client") }

// restartUpstreams starts the fake providers of restartConfig with their
// scripts.
func restartUpstreams(t *testing.T) map[string]*combotest.Upstream {
	up := upstreams(t, "main", "money", "flaky", "backup", "lk", "rr", "lp")
	up["main"].Script("sk-banned", combotest.Error(401, "Your account has been deactivated"))
	up["money"].Script("sk-broke", combotest.Error(402, "insufficient credits"))
	up["flaky"].Script("", combotest.Error(503, "overloaded"))
	up["lk"].Handle("sk-l1", func(c combotest.Call) combotest.Reply {
		if strings.Contains(string(c.Body), `"retired-1"`) {
			return combotest.Error(404, "model not found")
		}
		return combotest.OK("fine")
	})
	return up
}

// A gateway killed with SIGKILL and started again on the same state file
// resumes where it stopped: the banned and credits-exhausted connections
// stay excluded, the open breaker stays open for what was left of its
// open period, the model lock holds, the session goes to its pinned
// connection, the lease generation 3 is still valid (1 and 2 are refused)
// and still holds its connection against another owner.
func TestE2EStateSurvivesKill9(t *testing.T) {
	up := restartUpstreams(t)
	path := writeConfig(t, restartConfig(up))
	g := startGatewayFile(t, path, nil)
	stateFile := filepath.Join(filepath.Dir(path), gw.DefaultStateFile)
	require.FileExists(t, stateFile, "the default state file lies next to the configuration")

	// Banned: one request goes past it to good. Credits exhausted: the
	// 402 reaches the client.
	a := g.chat(t, "keys", "hi", asClient())
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	require.Equal(t, "2", a.Header.Get("X-Routeguard-Attempts"))
	a = g.chat(t, "money/m", "hi", asClient())
	require.Equal(t, http.StatusPaymentRequired, a.StatusCode, a.body)
	require.Equal(t, map[string]string{"banned": "banned", "broke": "credits_exhausted"}, cooldownList(t, g))

	// The flaky provider's breaker opens for 40 s.
	a = g.chat(t, "flk", "hi", asClient())
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	require.Equal(t, "backup/m", a.Header.Get("X-Routeguard-Target"))
	state, left := breakerOf(t, g, "flaky")
	require.Equal(t, "OPEN", state)
	require.InDelta(t, 40_000, left, 2_000)

	// A model lock.
	a = g.chat(t, "lk/retired-1", "hi", asClient())
	require.Equal(t, http.StatusNotFound, a.StatusCode, a.body)
	require.Equal(t, []string{"lk/l1/retired-1"}, lockList(t, g))

	// A session pinned away from r1: an unpinned request takes r1 first,
	// so a gateway that forgot the pin would send the session to r1.
	a = g.chat(t, "rr", "warm-up", asClient())
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	session := hdr("X-Session-Id", "agent-42", "Authorization", "Bearer rk-client")
	a = g.chat(t, "rr", "turn 0", session.Clone())
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	pinned := servedBy(t, up["rr"])
	require.NotEqual(t, "r1", pinned)

	// Owner A reaches generation 3 by acquire/release cycles and holds it.
	ownerA, ownerB := leasetest.Owner('A'), leasetest.Owner('B')
	leaseCall := func(g *gatewayProc, owner, body string) answer {
		return g.do(t, http.MethodPost, adminapi.LeasePath,
			hdr("Authorization", "Bearer rk-managed", lease.HeaderOwner, owner, "Content-Type", "application/json"), body)
	}
	for gen := 1; gen <= 3; gen++ {
		acq := leaseCall(g, ownerA, `{"action":"acquire","model":"lp/m"}`)
		require.Equal(t, http.StatusOK, acq.StatusCode, acq.body)
		require.EqualValues(t, gen, acq.json(t)["generation"])
		if gen < 3 {
			rel := leaseCall(g, ownerA, `{"action":"release","generation":`+strconv.Itoa(gen)+`}`)
			require.Equal(t, http.StatusOK, rel.StatusCode, rel.body)
		}
	}
	busy := leaseCall(g, ownerB, `{"action":"acquire","model":"lp/m"}`)
	require.Equal(t, "LEASE_CAPACITY_UNAVAILABLE", errorCode(t, busy), busy.body)
	busyStatus := busy.StatusCode

	// Leases are on disk when the call returns; the efficiency state is
	// written behind, every stateFlush: wait for the writer, then crash.
	time.Sleep(settle)
	_, leftBefore := breakerOf(t, g, "flaky")
	killedAt := time.Now()
	g.crash(t)
	calls := map[string]int{}
	for id, u := range up {
		calls[id] = u.Total()
	}

	g = startGatewayFile(t, path, nil)
	restartedAt := time.Now()

	// Still excluded, and the listing says why.
	cds := cooldownList(t, g)
	assert.Equal(t, "banned", cds["banned"])
	assert.Equal(t, "credits_exhausted", cds["broke"])
	a = g.chat(t, "keys", "hi", asClient())
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, "1", a.Header.Get("X-Routeguard-Attempts"), "banned is skipped")
	assert.Equal(t, "good", servedBy(t, up["main"]))
	assert.Equal(t, 1, up["main"].Count("sk-banned"))
	a = g.chat(t, "money/m", "hi", asClient())
	assert.NotEqual(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, 1, up["money"].Count("sk-broke"), "the connection out of credits is not called")

	// Still open, with what was left of its open period.
	state, left = breakerOf(t, g, "flaky")
	assert.Equal(t, "OPEN", state)
	want := leftBefore - time.Since(killedAt).Milliseconds()
	assert.InDelta(t, want, left, float64(stateFlush/time.Millisecond)+500, "remaining open time after the restart")
	assert.Greater(t, left, int64(30_000))
	a = g.chat(t, "flk", "hi", asClient())
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, "backup/m", a.Header.Get("X-Routeguard-Target"))
	assert.Equal(t, calls["flaky"], up["flaky"].Total(), "the open provider is not called")

	// The lock holds.
	assert.Equal(t, []string{"lk/l1/retired-1"}, lockList(t, g))
	a = g.chat(t, "lk/retired-1", "hi", asClient())
	assert.Equal(t, http.StatusServiceUnavailable, a.StatusCode, a.body)
	assert.Equal(t, "all_targets_cooling_down", errorCode(t, a))
	assert.Equal(t, calls["lk"], up["lk"].Total(), "the locked model is not sent")

	// The session goes to its pinned connection.
	a = g.chat(t, "rr", "turn 1", session.Clone())
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, pinned, servedBy(t, up["rr"]))

	// Generation 3 is valid; 1 and 2 are refused; the connection is still
	// held against owner B.
	withLease := func(gen int) http.Header {
		return hdr("Authorization", "Bearer rk-managed", lease.HeaderOwner, ownerA, lease.HeaderGeneration, strconv.Itoa(gen))
	}
	st := leaseCall(g, ownerA, `{"action":"status","generation":3}`)
	require.Equal(t, http.StatusOK, st.StatusCode, st.body)
	assert.Equal(t, "ACTIVE", st.json(t)["state"])
	a = g.chat(t, "lp/m", "hi", withLease(3))
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, "ls1", servedBy(t, up["lp"]))
	for _, gen := range []int{1, 2} {
		a = g.chat(t, "lp/m", "hi", withLease(gen))
		assert.Equal(t, http.StatusConflict, a.StatusCode, "generation %d: %s", gen, a.body)
		assert.Equal(t, "LEASE_FENCE_STALE", errorCode(t, a), "generation %d", gen)
	}
	assert.Equal(t, calls["lp"]+1, up["lp"].Total(), "no upstream call for a stale generation")
	busy = leaseCall(g, ownerB, `{"action":"acquire","model":"lp/m"}`)
	assert.Equal(t, busyStatus, busy.StatusCode, busy.body)
	assert.Equal(t, "LEASE_CAPACITY_UNAVAILABLE", errorCode(t, busy), busy.body)
	t.Logf("restart took %v after the kill", restartedAt.Sub(killedAt))
}

// What the admin API resets is reset in the state file too: after POST
// reset, DELETE model-cooldowns and POST cooldowns, a crash and a restart
// bring back no open breaker, no lock and no cooling connection.
func TestE2EAdminResetsReachTheStateFile(t *testing.T) {
	up := upstreams(t, "flaky", "backup", "lk", "cool")
	up["flaky"].Script("", combotest.Error(503, "overloaded"))
	up["lk"].Script("", combotest.Error(404, "model not found"))
	up["cool"].Script("sk-c1", combotest.RateLimited(60*time.Second))
	cfg := config([]gw.Provider{
		provider("flaky", up["flaky"], "f1", "f2", "f3"),
		provider("backup", up["backup"], "b1"),
		provider("lk", up["lk"], "l1"),
		provider("cool", up["cool"], "c1", "c2"),
	},
		gw.Combo{Name: "flk", Strategy: "priority", Targets: []gw.Target{{Provider: "flaky", Model: "m"}, {Provider: "backup", Model: "m"}}},
		gw.Combo{Name: "cool", Strategy: "priority", Targets: []gw.Target{{Provider: "cool", Model: "m"}}},
	)
	cfg.Resilience.Breaker.APIKey = gw.BreakerProfile{OpenAt: 3, ResetMs: 40_000}
	cfg.Resilience.Lockout = gw.LockoutConfig{Enabled: true, ErrorCodes: []int{404}, BaseCooldownMs: 60_000}
	cfg.Resilience.Cooldown.APIKey = gw.CooldownProfile{BaseMs: 60_000}
	cfg.State.FlushIntervalMs = int(stateFlush / time.Millisecond)
	path := writeConfig(t, cfg)
	g := startGatewayFile(t, path, nil)

	require.Equal(t, http.StatusOK, g.chat(t, "flk", "hi", nil).StatusCode)
	require.Equal(t, http.StatusNotFound, g.chat(t, "lk/retired-1", "hi", nil).StatusCode)
	require.Equal(t, http.StatusOK, g.chat(t, "cool", "hi", nil).StatusCode)
	state, _ := breakerOf(t, g, "flaky")
	require.Equal(t, "OPEN", state)
	require.Equal(t, []string{"lk/l1/retired-1"}, lockList(t, g))
	require.Equal(t, "cooling", cooldownList(t, g)["c1"])

	// The state before the resets is on disk: a restart would bring it back.
	time.Sleep(settle)

	r := g.admin(t, http.MethodPost, "/api/resilience/reset", "")
	require.Equal(t, http.StatusOK, r.StatusCode, r.body)
	r = g.admin(t, http.MethodDelete, "/api/resilience/model-cooldowns", `{"provider":"lk","connection":"l1","model":"retired-1"}`)
	require.Equal(t, http.StatusOK, r.StatusCode, r.body)
	require.Equal(t, true, r.json(t)["cleared"])
	r = g.admin(t, http.MethodPost, "/api/resilience/cooldowns", `{"all":true}`)
	require.Equal(t, http.StatusOK, r.StatusCode, r.body)
	require.Empty(t, cooldownList(t, g))

	time.Sleep(settle) // the resets are written behind too
	g.crash(t)
	g = startGatewayFile(t, path, nil)

	state, _ = breakerOf(t, g, "flaky")
	assert.Equal(t, "CLOSED", state, "POST reset closed the stored breaker")
	assert.Empty(t, lockList(t, g), "DELETE model-cooldowns removed the stored lock")
	assert.Empty(t, cooldownList(t, g), "POST cooldowns lifted the stored cooldowns")
}

// -state-reset starts from an empty state file; -state memory and the demo
// write no file.
func TestE2EStateResetAndMemory(t *testing.T) {
	up := upstreams(t, "main")
	up["main"].Script("sk-banned", combotest.Error(401, "Your account has been deactivated"))
	cfg := config([]gw.Provider{provider("main", up["main"], "banned", "good")},
		gw.Combo{Name: "keys", Strategy: "priority", Targets: []gw.Target{{Provider: "main", Model: "m"}}})
	cfg.State.FlushIntervalMs = int(stateFlush / time.Millisecond)
	path := writeConfig(t, cfg)

	g := startGatewayFile(t, path, nil)
	require.Equal(t, http.StatusOK, g.chat(t, "keys", "hi", nil).StatusCode)
	require.Equal(t, map[string]string{"banned": "banned"}, cooldownList(t, g))
	time.Sleep(settle)
	g.crash(t)

	g = startGatewayFile(t, path, nil)
	assert.Equal(t, map[string]string{"banned": "banned"}, cooldownList(t, g), "kept without -state-reset")
	g.crash(t)

	g = startGatewayFile(t, path, nil, "-state-reset")
	assert.Empty(t, cooldownList(t, g), "-state-reset forgets the ban")
	g.crash(t)

	// In memory: nothing is written beside the configuration.
	memDir := filepath.Dir(writeConfig(t, cfg))
	g = startGatewayFile(t, filepath.Join(memDir, "gateway.json"), nil, "-state", "memory")
	require.Equal(t, http.StatusOK, g.chat(t, "keys", "hi", nil).StatusCode)
	require.NoError(t, g.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, g.wait(t, 10*time.Second))
	entries, err := os.ReadDir(memDir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the configuration")

	// The demo keeps its state in memory: no file in the working directory.
	_, err = os.Stat(gw.DefaultStateFile)
	require.True(t, errors.Is(err, os.ErrNotExist), "a state file left in the working directory before the demo ran")
	g = startGatewayFile(t, "", nil)
	require.NoError(t, g.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, g.wait(t, 10*time.Second))
	_, err = os.Stat(gw.DefaultStateFile)
	assert.True(t, errors.Is(err, os.ErrNotExist), "the demo wrote %s", gw.DefaultStateFile)
}

// A state file that is not a state database stops the gateway at start,
// with an error naming the file; the file is left as it was.
func TestE2ECorruptStateFileRefused(t *testing.T) {
	up := upstreams(t, "main")
	cfg := config([]gw.Provider{provider("main", up["main"], "k1")})
	path := writeConfig(t, cfg)
	stateFile := filepath.Join(filepath.Dir(path), gw.DefaultStateFile)
	garbage := []byte(strings.Repeat("not a database ", 512))
	require.NoError(t, os.WriteFile(stateFile, garbage, 0o600))

	out, err := exec.Command(gatewayBinary(t), "-config", path, "-listen", "127.0.0.1:0").CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", out)
	assert.Equal(t, 1, ee.ExitCode(), "%s", out)
	assert.Contains(t, string(out), stateFile)
	assert.NotContains(t, string(out), "routeguard gateway listening")
	data, rerr := os.ReadFile(stateFile)
	require.NoError(t, rerr)
	assert.Equal(t, garbage, data, "the file is never reset silently")
}
