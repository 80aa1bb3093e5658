package gw_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// replRig is a gateway with Redis attached and its replicator running,
// its state in statePath (gw.StateMemory: memory only).
type replRig struct {
	*rig
	st   *gw.State
	stop func() // stops the replicator, the gateway and the State; idempotent
}

func newReplRig(t *testing.T, cfg *gw.Config, statePath string, ups map[string]*combotest.Upstream) *replRig {
	t.Helper()
	cfg.AdminToken = rigAdminToken
	st, err := gw.OpenState(statePath, gw.StateOptions{})
	require.NoError(t, err)
	require.NoError(t, st.AttachRedis("", cfg.Redis, nil))
	s, err := gw.New(cfg, gw.Options{State: st})
	require.NoError(t, err)
	r := &rig{t: t, gw: s, ups: ups}
	r.srv = httptest.NewServer(s)
	r.tr = &http.Transport{}
	r.client = &http.Client{Transport: r.tr}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.RunReplication(ctx) }()
	stateDone := make(chan error, 1)
	go func() { stateDone <- st.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		r.close()
		cancel()
		assert.NoError(t, <-done)
		assert.NoError(t, <-stateDone)
		assert.NoError(t, st.Close())
	}
	t.Cleanup(stop)
	return &replRig{rig: r, st: st, stop: stop}
}

// waitUntil polls cond every few milliseconds until it holds, failing the
// test after d.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// redisEnvAddr names the variable that gives the address of a real Redis
// server to test against (CI sets it).
const redisEnvAddr = "ROUTEGUARD_REDIS_ADDR"

// realRedis returns the address of a real Redis for t: the one at
// ROUTEGUARD_REDIS_ADDR, else a redis-server (no persistence) started on
// a free loopback port and stopped at t's cleanup. Without either it
// fails t when CI is set and skips it otherwise.
func realRedis(t *testing.T) string {
	t.Helper()
	if a := os.Getenv(redisEnvAddr); a != "" {
		return a
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Redis: %s is unset and redis-server is not installed", redisEnvAddr)
		}
		t.Skipf("no Redis: set %s or install redis-server", redisEnvAddr)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--logfile", "")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := "127.0.0.1:" + port
	waitUntil(t, 5*time.Second, "redis-server answers", func() bool {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return addr
}

// onEachRedis runs test on miniredis and on a real Redis (see realRedis),
// each time with a namespace of its own.
func onEachRedis(t *testing.T, test func(t *testing.T, rc gw.RedisConfig)) {
	backends := []struct {
		name string
		addr func(t *testing.T) string
	}{
		{"miniredis", func(t *testing.T) string { return miniredis.RunT(t).Addr() }},
		{"redis-server", realRedis},
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			b := make([]byte, 6)
			rand.Read(b)
			test(t, gw.RedisConfig{URL: "redis://" + be.addr(t), Namespace: "repl-" + hex.EncodeToString(b)})
		})
	}
}

// A 429 with Retry-After: 30 that connection p-1 answers through gateway A
// cools p-1 on gateway B too, to the same end: B's next request goes to
// p-2 at once, p-1 never sees it. B also keeps a state file, and the
// cooldown it learnt from A is in that file (a restart of B on the file
// alone still skips p-1).
func TestReplicationSharesCooldownAcrossGateways(t *testing.T) {
	onEachRedis(t, func(t *testing.T, rc gw.RedisConfig) {
		up := combotest.New()
		up.Script("sk-p-1", combotest.RateLimited(30*time.Second))
		up.Script("sk-p-2", combotest.OK("served"))
		mk := func() *gw.Config {
			cfg := &gw.Config{Providers: []gw.Provider{provider("p", up, 2)},
				Combos: []gw.Combo{{Name: "c", Strategy: "priority", Targets: []gw.Target{
					{Provider: "p", Connection: "p-1", Model: rigModel}, {Provider: "p", Connection: "p-2", Model: rigModel}}}},
				Redis: rc}
			cfg.Resilience.ComboCooldownWait.Disabled = true
			return cfg
		}
		file := filepath.Join(t.TempDir(), "b.db")
		a := newReplRig(t, mk(), gw.StateMemory, map[string]*combotest.Upstream{"p": up})
		b := newReplRig(t, mk(), file, nil)

		res := a.chat("c", false, 10*time.Second)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, 1, up.Count("sk-p-1"))
		require.Equal(t, 1, up.Count("sk-p-2"))
		at := a.gw.Layers().Cooldowns.StatusAt("p-1", time.Now())
		require.Equal(t, cooldown.Cooling, at.State)

		t0 := time.Now()
		waitUntil(t, 10*time.Second, "B learns p-1's cooldown", func() bool {
			return b.gw.Layers().Cooldowns.StatusAt("p-1", time.Now()).State == cooldown.Cooling
		})
		t.Logf("learnt after %v", time.Since(t0))
		bt := b.gw.Layers().Cooldowns.StatusAt("p-1", time.Now())
		assert.True(t, at.Until.Equal(bt.Until), "B's cooldown ends when A's does: %v, %v", at.Until, bt.Until)
		assert.InDelta(t, 30*time.Second, time.Until(bt.Until), float64(5*time.Second))

		res = b.chat("c", false, 10*time.Second)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		assert.Equal(t, "p/"+rigModel, res.Target)
		assert.Equal(t, "1", res.Header.Get("X-Routeguard-Attempts"), "B went to p-2 first")
		assert.Equal(t, 1, up.Count("sk-p-1"), "B never called p-1")
		assert.Equal(t, 2, up.Count("sk-p-2"))

		// One record crossed: A's cooldown. B's successful request and
		// the cooldown it applied published nothing.
		sa, ok := a.gw.ReplicationStats()
		require.True(t, ok)
		sb, _ := b.gw.ReplicationStats()
		assert.Equal(t, [4]int64{1, 0, 0, 0}, [4]int64{sa.Published, sa.Applied, sa.Dropped, sa.Errors}, "A: published, applied, dropped, errors")
		assert.Equal(t, [4]int64{0, 1, 0, 0}, [4]int64{sb.Published, sb.Applied, sb.Dropped, sb.Errors}, "B: published, applied, dropped, errors")
		// B's file holds what B learnt from A.
		b.stop()
		rt := reopen(t, file, mk()).Layers().Cooldowns.StatusAt("p-1", time.Now())
		assert.Equal(t, cooldown.Cooling, rt.State)
		assert.True(t, at.Until.Equal(rt.Until), "%v, %v", at.Until, rt.Until)
	})
}

// reopen starts a gateway without Redis on the state file of a stopped
// one, for what the file kept.
func reopen(t *testing.T, file string, cfg *gw.Config) *gw.Server {
	t.Helper()
	cfg.Redis = gw.RedisConfig{}
	cfg.AdminToken = rigAdminToken
	st, err := gw.OpenState(file, gw.StateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	s, err := gw.New(cfg, gw.Options{State: st})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// A breaker opened through gateway A (three connections of p answer 503)
// is open on gateway B, reloaded meanwhile, until about the same end: B's
// request goes to q at once, without touching p, and B's state file keeps
// the open breaker.
func TestReplicationSharesBreakerAcrossGateways(t *testing.T) {
	onEachRedis(t, func(t *testing.T, rc gw.RedisConfig) {
		up, uq := combotest.New(), combotest.New()
		up.Script("", combotest.Error(503, "overloaded"))
		uq.Script("", combotest.OK("served"))
		mk := func() *gw.Config {
			cfg := &gw.Config{Providers: []gw.Provider{provider("p", up, 3), provider("q", uq, 1)},
				Combos: []gw.Combo{comboOf("c", 0, "p", "q")},
				Redis:  rc}
			cfg.Resilience.ComboCooldownWait.Disabled = true
			cfg.Resilience.Breaker.APIKey = gw.BreakerProfile{OpenAt: 3, ResetMs: 60_000}
			return cfg
		}
		file := filepath.Join(t.TempDir(), "b.db")
		a := newReplRig(t, mk(), gw.StateMemory, map[string]*combotest.Upstream{"p": up, "q": uq})
		b := newReplRig(t, mk(), file, nil)
		// A reload keeps the layers the replicator applies to.
		next := mk()
		next.AdminToken = rigAdminToken
		_, err := b.gw.Reload(next)
		require.NoError(t, err)

		res := a.chat("c", false, 10*time.Second)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		assert.Equal(t, "q/"+rigModel, res.Target)
		require.Equal(t, 3, up.Total())
		st, retryA := a.gw.Layers().Breakers.StateAt("p", time.Now())
		require.Equal(t, breaker.Open, st)

		waitUntil(t, 10*time.Second, "B's breaker of p opens", func() bool {
			st, _ := b.gw.Layers().Breakers.StateAt("p", time.Now())
			return st == breaker.Open
		})
		_, retryB := b.gw.Layers().Breakers.StateAt("p", time.Now())
		assert.InDelta(t, float64(retryA), float64(retryB), float64(5*time.Second), "open until about the same end")

		res = b.chat("c", false, 10*time.Second)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		assert.Equal(t, "q/"+rigModel, res.Target)
		assert.Equal(t, "1", res.Header.Get("X-Routeguard-Attempts"), "B skipped p")
		assert.Equal(t, 3, up.Total(), "B never called p")
		assert.Equal(t, 2, uq.Total())

		// B's file holds the open breaker B learnt from A.
		b.stop()
		st, _ = reopen(t, file, mk()).Layers().Breakers.StateAt("p", time.Now())
		assert.Equal(t, breaker.Open, st)
	})
}

// A session pinned through gateway A is pinned on gateway B to the same
// connection, B serves that session's next requests there, and B's state
// file keeps the pin.
func TestReplicationSharesPinsAcrossGateways(t *testing.T) {
	onEachRedis(t, func(t *testing.T, rc gw.RedisConfig) {
		up := combotest.New()
		up.Script("", combotest.OK("served"))
		mk := func() *gw.Config {
			cfg := &gw.Config{Providers: []gw.Provider{provider("p", up, 2)},
				Combos: []gw.Combo{{Name: "c", Strategy: "round-robin", Targets: []gw.Target{{Provider: "p", Model: rigModel}}}},
				Redis:  rc}
			cfg.Resilience.ComboCooldownWait.Disabled = true
			cfg.Resilience.SessionAffinityTTLMs = 600_000
			return cfg
		}
		file := filepath.Join(t.TempDir(), "b.db")
		a := newReplRig(t, mk(), gw.StateMemory, map[string]*combotest.Upstream{"p": up})
		b := newReplRig(t, mk(), file, nil)
		session := func(r *replRig) result {
			req, err := http.NewRequest(http.MethodPost, r.srv.URL+"/v1/chat/completions",
				strings.NewReader(`{"model":"c","messages":[{"role":"user","content":"hi"}]}`))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Session-Id", "conversation-42")
			return r.send(req)
		}

		res := session(a)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		pinsA := a.gw.Layers().Pins.SnapshotAt(time.Now()).Pins
		require.Len(t, pinsA, 1)
		conn := pinsA[0].Connection

		waitUntil(t, 10*time.Second, "B learns the pin", func() bool {
			return len(b.gw.Layers().Pins.SnapshotAt(time.Now()).Pins) == 1
		})
		pinsB := b.gw.Layers().Pins.SnapshotAt(time.Now()).Pins
		assert.Equal(t, pinsA[0].Session, pinsB[0].Session)
		assert.Equal(t, conn, pinsB[0].Connection)
		assert.True(t, pinsA[0].Expires.Equal(pinsB[0].Expires), "%v, %v", pinsA[0].Expires, pinsB[0].Expires)

		before := up.Count("sk-" + conn)
		for range 3 {
			res = session(b)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		}
		assert.Equal(t, before+3, up.Count("sk-"+conn), "B keeps the session on %s", conn)
		assert.Equal(t, 4, up.Total())

		// B's file holds the session's pin.
		b.stop()
		kept := reopen(t, file, mk()).Layers().Pins.SnapshotAt(time.Now()).Pins
		require.Len(t, kept, 1)
		assert.Equal(t, pinsA[0].Session, kept[0].Session)
		assert.Equal(t, conn, kept[0].Connection)
	})
}

// Without Redis there is nothing to replicate: RunReplication returns at
// once and there are no replication stats.
func TestReplicationOffWithoutRedis(t *testing.T) {
	up := combotest.New()
	defer up.Close()
	s, err := gw.New(&gw.Config{AdminToken: rigAdminToken, Providers: []gw.Provider{provider("p", up, 1)}}, gw.Options{})
	require.NoError(t, err)
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	assert.NoError(t, s.RunReplication(ctx)) // ctx still live: it did not wait for it
	_, ok := s.ReplicationStats()
	assert.False(t, ok)
}

// A connection cooling in gateway A's provider cooldown gate cools in
// gateway B's gate too, to the same end, and B's state file keeps it.
func TestReplicationSharesGateAcrossGateways(t *testing.T) {
	onEachRedis(t, func(t *testing.T, rc gw.RedisConfig) {
		up := combotest.New()
		up.Script("", combotest.OK("served"))
		mk := func() *gw.Config {
			cfg := &gw.Config{Providers: []gw.Provider{provider("p", up, 2)},
				Combos: []gw.Combo{{Name: "c", Strategy: "priority", Targets: []gw.Target{
					{Provider: "p", Connection: "p-1", Model: rigModel}, {Provider: "p", Connection: "p-2", Model: rigModel}}}},
				Redis: rc}
			cfg.Resilience.ComboCooldownWait.Disabled = true
			cfg.Resilience.ProviderCooldown = gw.GateConfig{Enabled: true, MinRetryCooldownMs: 60_000, MaxRetryCooldownMs: 120_000}
			return cfg
		}
		file := filepath.Join(t.TempDir(), "b.db")
		a := newReplRig(t, mk(), gw.StateMemory, map[string]*combotest.Upstream{"p": up})
		b := newReplRig(t, mk(), file, nil)

		now := time.Now()
		a.gw.Layers().Gate.RecordFailureAt("p", "p-1", now)
		untilA, blocked := a.gw.Layers().Gate.BlockedUntilAt("p", "p-1", now)
		require.True(t, blocked)
		require.Equal(t, now.Add(time.Minute), untilA)

		waitUntil(t, 10*time.Second, "B's gate cools p-1", func() bool {
			_, blocked := b.gw.Layers().Gate.BlockedUntilAt("p", "p-1", time.Now())
			return blocked
		})
		untilB, _ := b.gw.Layers().Gate.BlockedUntilAt("p", "p-1", time.Now())
		assert.True(t, untilA.Equal(untilB), "B's gate cools p-1 until A's end: %v, %v", untilA, untilB)
		_, blocked = b.gw.Layers().Gate.BlockedUntilAt("p", "p-2", time.Now())
		assert.False(t, blocked, "p-2 is not cooling")

		res := b.chat("c", false, 10*time.Second)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		assert.Equal(t, "1", res.Header.Get("X-Routeguard-Attempts"), "B went to p-2 first")
		assert.Equal(t, 0, up.Count("sk-p-1"), "B never called p-1")
		assert.Equal(t, 1, up.Count("sk-p-2"))

		b.stop()
		untilR, blocked := reopen(t, file, mk()).Layers().Gate.BlockedUntilAt("p", "p-1", time.Now())
		assert.True(t, blocked, "B's file keeps the gate entry learnt from A")
		assert.True(t, untilA.Equal(untilR), "%v, %v", untilA, untilR)
	})
}
