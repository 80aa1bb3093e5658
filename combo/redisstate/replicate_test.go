package redisstate_test

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo/redisstate"
	"github.com/routeguard/routeguard/combo/redisstate/internal/redistest"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lockout"
)

// replica is one gateway replica's layers and replicator.
type replica struct {
	rep   *redisstate.Replicator
	set   *breaker.Set
	gate  *breaker.Gate
	store cooldown.Store
	cd    *cooldown.Tracker
	lk    *lockout.Lockout
	pins  *affinity.Pins
	pinSt affinity.Store

	mu       sync.Mutex
	resyncs  []redisstate.Resync
	appliedN int
	stop     func()
}

func newReplica(t testing.TB, rdb redis.UniversalClient, ns, name string, rc redisstate.ReplicatorConfig) *replica {
	t.Helper()
	st := newState(t, rdb, redisstate.Config{Namespace: ns, Replica: name})
	x := &replica{}
	onResync, onApply := rc.OnResync, rc.OnApply
	rc.OnResync = func(r redisstate.Resync) {
		x.mu.Lock()
		x.resyncs = append(x.resyncs, r)
		x.mu.Unlock()
		if onResync != nil {
			onResync(r)
		}
	}
	rc.OnApply = func(a redisstate.Applied) {
		x.mu.Lock()
		x.appliedN++
		x.mu.Unlock()
		if onApply != nil {
			onApply(a)
		}
	}
	x.rep = st.Replicator(rc)
	x.set = breaker.NewSet(breaker.Config{OnChange: x.rep.OnBreakerChange})
	x.gate = breaker.NewGate(breaker.GateConfig{Enabled: true, OnChange: x.rep.OnGateChange})
	x.store = cooldown.NewMemoryStore()
	x.cd = cooldown.New(cooldown.Config{Store: x.store, OnChange: x.rep.OnCooldownChange})
	x.lk = lockout.New(lockout.Config{Enabled: true, OnChange: x.rep.OnLockoutChange})
	x.pinSt = x.rep.Pins(affinity.NewMemoryStore(0))
	x.pins = affinity.New(affinity.Config{TTL: time.Hour, Store: x.pinSt})
	return x
}

func (x *replica) layers() redisstate.Layers {
	return redisstate.Layers{Breakers: x.set, Gate: x.gate, Cooldowns: x.store, Lockouts: x.lk, Pins: x.pinSt}
}

// start runs the replicator until the test ends (or stop is called).
func (x *replica) start(t testing.TB) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		x.rep.Run(ctx, x.layers())
	}()
	var once sync.Once
	x.stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(x.stop)
}

func (x *replica) resyncReasons() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []string
	for _, r := range x.resyncs {
		out = append(out, r.Reason)
	}
	return out
}

// miniClient returns a client of m that dials it in memory (usable inside
// a synctest bubble).
func miniClient(t testing.TB, m *miniredis.Miniredis) *redis.Client {
	rdb := redis.NewClient(&redis.Options{
		Addr:                  "127.0.0.1:6379", // not dialed; an address that needs no lookup
		Dialer:                func(context.Context, string, string) (net.Conn, error) { return m.Dial() },
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
	})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// waitFor waits (on the bubble's clock) until cond holds, up to d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// inBubble runs fn in a synctest bubble with a fresh miniredis and two
// replicas a and b on it.
func inBubble(t *testing.T, fn func(t *testing.T, m *miniredis.Miniredis, a, b *replica), block ...time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		m := miniredis.NewMiniRedis()
		t.Cleanup(m.Close)
		ns := namespace()
		rc := redisstate.ReplicatorConfig{Block: 100 * time.Millisecond}
		if len(block) > 0 {
			rc.Block = block[0]
		}
		a := newReplica(t, miniClient(t, m), ns, "a", rc)
		b := newReplica(t, miniClient(t, m), ns, "b", rc)
		a.start(t)
		b.start(t)
		fn(t, m, a, b)
		a.stop()
		b.stop()
	})
}

func TestReplicateCooldownRetryAfter(t *testing.T) {
	inBubble(t, func(t *testing.T, _ *miniredis.Miniredis, a, b *replica) {
		now := time.Now()
		a.cd.FailAt("sk-1", cooldown.Failure{Status: 429, RetryAfter: 30 * time.Second}, now)
		want := a.cd.StatusAt("sk-1", now)
		if want.State != cooldown.Cooling || want.Until != now.Add(30*time.Second) {
			t.Fatalf("a: %v", want)
		}
		waitFor(t, time.Second, "b does not see the cooldown", func() bool {
			return b.cd.StatusAt("sk-1", time.Now()).State == cooldown.Cooling
		})
		got := b.cd.StatusAt("sk-1", time.Now())
		if !got.Until.Equal(want.Until) || got.Reason != want.Reason {
			t.Errorf("b: %v, want until %v reason %q", got, want.Until, want.Reason)
		}
		if err := b.cd.CheckAt("sk-1", time.Now()); err == nil {
			t.Error("b admits the cooling key")
		}
		// b's cooldown ends when a's does, on b's own clock.
		time.Sleep(time.Until(want.Until))
		if s := b.cd.StatusAt("sk-1", time.Now()); s.State != cooldown.Available {
			t.Errorf("b after the end: %v", s)
		}
	})
}

func TestReplicateBreakerOpen(t *testing.T) {
	inBubble(t, func(t *testing.T, _ *miniredis.Miniredis, a, b *replica) {
		now := time.Now()
		for range 12 { // the default profile opens at 12 failures
			done, err := a.set.AllowReportAt("openai", now)
			if err != nil {
				break
			}
			done(breaker.Report{Outcome: breaker.Failure, At: now})
		}
		st, retry := a.set.StateAt("openai", now)
		if st != breaker.Open {
			t.Fatalf("a: %v", st)
		}
		until := now.Add(retry)
		waitFor(t, time.Second, "b's breaker does not open", func() bool {
			st, _ := b.set.StateAt("openai", time.Now())
			return st == breaker.Open
		})
		n := time.Now()
		if _, err := b.set.AllowReportAt("openai", n); err == nil {
			t.Error("b admits a request to the provider a opened")
		}
		if _, r := b.set.StateAt("openai", n); !n.Add(r).Equal(until) {
			t.Errorf("b open until %v, want %v", n.Add(r), until)
		}
		// At the end b probes on its own: half-open admits one request.
		time.Sleep(time.Until(until))
		if st, _ := b.set.StateAt("openai", time.Now()); st != breaker.HalfOpen {
			t.Errorf("b after the open period: %v", st)
		}
	})
}

// openBreaker fails provider on set until it opens at now and returns the
// end of the open period.
func openBreaker(t *testing.T, set *breaker.Set, provider string, now time.Time) time.Time {
	t.Helper()
	for range 12 { // the default profile opens at 12 failures
		done, err := set.AllowReportAt(provider, now)
		if err != nil {
			break
		}
		done(breaker.Report{Outcome: breaker.Failure, At: now})
	}
	st, retry := set.StateAt(provider, now)
	if st != breaker.Open {
		t.Fatalf("breaker of %s: %v, want open", provider, st)
	}
	return now.Add(retry)
}

// TestReplicateBreakerReset: a breaker opened on a is open on b; a reset
// on b closes it on a too, and a closing probe is not a reset: after a
// new open period on a, b's probe that closes b's breaker leaves a's open.
func TestReplicateBreakerReset(t *testing.T) {
	inBubble(t, func(t *testing.T, _ *miniredis.Miniredis, a, b *replica) {
		openBreaker(t, a.set, "openai", time.Now())
		waitFor(t, time.Second, "b's breaker does not open", func() bool {
			st, _ := b.set.StateAt("openai", time.Now())
			return st == breaker.Open
		})
		b.set.ResetAt("openai", time.Now())
		waitFor(t, time.Second, "a's breaker is not reset", func() bool {
			st, _ := a.set.StateAt("openai", time.Now())
			return st == breaker.Closed
		})
		if st, _ := b.set.StateAt("openai", time.Now()); st != breaker.Closed {
			t.Fatalf("b after its reset: %v", st)
		}
		// Opened again after the reset: the new period reaches b.
		until := openBreaker(t, a.set, "openai", time.Now())
		waitFor(t, time.Second, "b's breaker does not open again", func() bool {
			st, _ := b.set.StateAt("openai", time.Now())
			return st == breaker.Open
		})
		// b's own probe closes b's breaker; that stays local.
		time.Sleep(time.Until(until))
		done, err := b.set.AllowReportAt("openai", time.Now())
		if err != nil {
			t.Fatalf("b's probe refused: %v", err)
		}
		done(breaker.Report{Outcome: breaker.Success, At: time.Now()})
		if st, _ := b.set.StateAt("openai", time.Now()); st != breaker.Closed {
			t.Fatalf("b after its probe: %v", st)
		}
		time.Sleep(500 * time.Millisecond)
		if st, _ := a.set.StateAt("openai", time.Now()); st != breaker.HalfOpen {
			t.Fatalf("a after b's closing probe: %v, want half-open (its own probe decides)", st)
		}
	})
}

// TestReplicateGate: a provider and a connection cooling in a's gate cool
// in b's until the same ends; an extension on b reaches a; an earlier end
// never shortens it.
func TestReplicateGate(t *testing.T) {
	inBubble(t, func(t *testing.T, _ *miniredis.Miniredis, a, b *replica) {
		now := time.Now()
		for range 15 { // the APIKey window: 15 failures cool the provider 10 min
			a.gate.RecordFailureAt("openai", "sk-1", now)
		}
		pu, ok := a.gate.BlockedUntilAt("openai", "", now)
		if !ok || !pu.Equal(now.Add(10*time.Minute)) {
			t.Fatalf("a's provider: %v %v", pu, ok)
		}
		a.gate.RecordFailureAt("anthropic", "ak-1", now) // one failure: the connection cools 5 s
		waitFor(t, time.Second, "b's gate does not cool", func() bool {
			_, p := b.gate.BlockedUntilAt("openai", "", time.Now())
			_, c := b.gate.BlockedUntilAt("anthropic", "ak-1", time.Now())
			return p && c
		})
		n := time.Now()
		if u, _ := b.gate.BlockedUntilAt("openai", "", n); !u.Equal(pu) {
			t.Errorf("b's provider cools until %v, want %v", u, pu)
		}
		if u, _ := b.gate.BlockedUntilAt("anthropic", "ak-1", n); !u.Equal(now.Add(5 * time.Second)) {
			t.Errorf("b's connection cools until %v, want %v", u, now.Add(5*time.Second))
		}
		// A second failure on b doubles the connection's cooldown: a
		// follows.
		b.gate.RecordFailureAt("anthropic", "ak-1", n)
		want := n.Add(10 * time.Second)
		waitFor(t, time.Second, "a's connection cooldown is not extended", func() bool {
			u, _ := a.gate.BlockedUntilAt("anthropic", "ak-1", time.Now())
			return u.Equal(want)
		})
		// A replay of the first, shorter record changes nothing.
		a.rep.OnGateChange(breaker.Event{Provider: "anthropic", Connection: "ak-1", To: breaker.Open,
			At: now, Until: now.Add(5 * time.Second), Failures: 1, LastFailure: now})
		time.Sleep(300 * time.Millisecond)
		for _, x := range []*replica{a, b} {
			if u, _ := x.gate.BlockedUntilAt("anthropic", "ak-1", time.Now()); !u.Equal(want) {
				t.Errorf("after a replay: until %v, want %v", u, want)
			}
		}
	})
}

func TestReplicateTerminalUntilReset(t *testing.T) {
	inBubble(t, func(t *testing.T, _ *miniredis.Miniredis, a, b *replica) {
		a.cd.FailAt("sk-2", cooldown.Failure{Status: 403, Permanent: true}, time.Now())
		waitFor(t, time.Second, "b does not see the ban", func() bool {
			return b.cd.StatusAt("sk-2", time.Now()).State == cooldown.Banned
		})
		time.Sleep(3 * time.Hour) // terminal: kept past any retention
		if s := b.cd.StatusAt("sk-2", time.Now()); s.State != cooldown.Banned {
			t.Fatalf("b after 3 h: %v", s)
		}
		b.cd.ResetAt(cooldown.Selector{IDs: []string{"sk-2"}}, time.Now())
		waitFor(t, time.Second, "a keeps the ban after b's reset", func() bool {
			return a.cd.StatusAt("sk-2", time.Now()).State == cooldown.Available
		})
		// A new ban after the reset wins again.
		a.cd.FailAt("sk-2", cooldown.Failure{Status: 403, Permanent: true}, time.Now())
		waitFor(t, time.Second, "b misses the second ban", func() bool {
			return b.cd.StatusAt("sk-2", time.Now()).State == cooldown.Banned
		})
	}, 5*time.Second)
}

func TestReplicateLockoutAndPin(t *testing.T) {
	inBubble(t, func(t *testing.T, _ *miniredis.Miniredis, a, b *replica) {
		now := time.Now()
		res := a.lk.LockAt(lockout.Failure{Provider: "openai", Connection: "sk-1", Model: "gpt-4o",
			Reason: lockout.ReasonRateLimited, Cooldown: 40 * time.Second, UpstreamReset: true}, now)
		waitFor(t, time.Second, "b does not see the lockout", func() bool {
			_, _, ok := b.lk.LockedAt("openai", "sk-1", "gpt-4o", time.Now())
			return ok
		})
		if u, _, _ := b.lk.LockedAt("openai", "sk-1", "gpt-4o", time.Now()); !u.Equal(res.Until) {
			t.Errorf("b locked until %v, want %v", u, res.Until)
		}
		// A shorter lock on b does not shorten a's.
		b.lk.LockAt(lockout.Failure{Provider: "openai", Connection: "sk-1", Model: "gpt-4o",
			Reason: lockout.ReasonRateLimited, Cooldown: 5 * time.Second, UpstreamReset: true}, time.Now())
		time.Sleep(50 * time.Millisecond)
		if u, _, _ := a.lk.LockedAt("openai", "sk-1", "gpt-4o", time.Now()); !u.Equal(res.Until) {
			t.Errorf("a locked until %v after b's shorter lock, want %v", u, res.Until)
		}
		b.lk.ClearAt("openai", "sk-1", "gpt-4o", time.Now())
		waitFor(t, time.Second, "a keeps the lockout b cleared", func() bool {
			_, _, ok := a.lk.LockedAt("openai", "sk-1", "gpt-4o", time.Now())
			return !ok
		})

		key, _ := affinity.NewKey("session", "conversation-1")
		cands := []affinity.Candidate{{Connection: "sk-1"}, {Connection: "sk-2"}}
		a.pins.PinAt(affinity.Request{Provider: "openai", Key: key}, "sk-2", time.Now())
		waitFor(t, time.Second, "b does not see the pin", func() bool {
			p, ok := b.pins.LookupAt("openai", key, time.Now())
			return ok && p.Connection == "sk-2"
		})
		if c, ok := b.pins.SelectAt("openai", key, cands, time.Now()); !ok || c != "sk-2" {
			t.Errorf("b selects %q %v, want the pinned sk-2", c, ok)
		}
		a.pins.UnpinAt("openai", key, time.Now())
		waitFor(t, time.Second, "b keeps the pin a removed", func() bool {
			_, ok := b.pins.LookupAt("openai", key, time.Now())
			return !ok
		})
	})
}

// TestReplicateOwnEventsIgnored: a replica's own records come back on the
// stream and change nothing; only the other replica applies them.
func TestReplicateOwnEventsIgnored(t *testing.T) {
	inBubble(t, func(t *testing.T, _ *miniredis.Miniredis, a, b *replica) {
		a.cd.FailAt("sk-1", cooldown.Failure{Status: 429, RetryAfter: 30 * time.Second}, time.Now())
		waitFor(t, time.Second, "b does not apply", func() bool { return b.rep.Stats().Applied == 1 })
		time.Sleep(time.Second)
		sa, sb := a.rep.Stats(), b.rep.Stats()
		if sa.Published != 1 || sa.Applied != 0 || sb.Published != 0 || sb.Applied != 1 {
			t.Errorf("a %+v\nb %+v", sa, sb)
		}
	})
}

// TestReplicateResync: a trimmed stream, a sequence gap and a dataset
// lost by Redis each make the replica resync from the snapshot; after the
// loss both replicas publish their live state again.
func TestReplicateResync(t *testing.T) {
	inBubble(t, func(t *testing.T, m *miniredis.Miniredis, a, b *replica) {
		waitFor(t, time.Second, "no start resync", func() bool { return len(b.resyncReasons()) == 1 })
		ns := ""
		for _, k := range m.Keys() {
			if len(k) > 4 && k[len(k)-4:] == ":log" {
				ns = k[:len(k)-4]
			}
		}
		a.cd.FailAt("sk-1", cooldown.Failure{Status: 429, RetryAfter: 30 * time.Second}, time.Now())
		waitFor(t, time.Second, "b misses the cooldown", func() bool {
			return b.cd.StatusAt("sk-1", time.Now()).State == cooldown.Cooling
		})
		if ns == "" {
			for _, k := range m.Keys() {
				if len(k) > 4 && k[len(k)-4:] == ":log" {
					ns = k[:len(k)-4]
				}
			}
		}

		// Trim: the stream loses what b read.
		if err := miniClient(t, m).XTrimMaxLen(context.Background(), ns+":log", 0).Err(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 3*time.Second, "no resync after the trim", func() bool {
			r := b.resyncReasons()
			return len(r) == 2 && r[1] == "trim"
		})

		// Gap: an event b never sees (the sequence jumps).
		m.Incr(ns+":seq", 1)
		a.cd.FailAt("sk-3", cooldown.Failure{Status: 429, RetryAfter: 20 * time.Second}, time.Now())
		waitFor(t, 3*time.Second, "no resync after the gap", func() bool {
			r := b.resyncReasons()
			return len(r) >= 3 && r[2] == "gap"
		})
		if s := b.cd.StatusAt("sk-3", time.Now()); s.State != cooldown.Cooling {
			t.Errorf("b after the gap: %v", s)
		}

		// Data loss: Redis comes back empty.
		m.FlushAll()
		waitFor(t, 3*time.Second, "no epoch resync", func() bool {
			for _, x := range []*replica{a, b} {
				r := x.resyncReasons()
				if len(r) == 0 || r[len(r)-1] != "epoch" {
					return false
				}
			}
			return true
		})
		waitFor(t, 3*time.Second, "live state not republished", func() bool {
			return m.Exists(ns+":snap") && len(hkeys(m, ns+":snap")) >= 2
		})
		fields := hkeys(m, ns+":snap")
		want := map[string]bool{"cc:sk-1": true, "cc:sk-3": true}
		for _, f := range fields {
			delete(want, f)
		}
		if len(want) != 0 {
			t.Errorf("snapshot after the loss has %q, misses %v", fields, want)
		}
	})
}

func hkeys(m *miniredis.Miniredis, k string) []string {
	ks, _ := m.HKeys(k)
	return ks
}

// TestReplicateOutage: while Redis refuses writes (CLIENT PAUSE WRITE on
// a private redis-server) the layers keep working, the outbox keeps one
// record per key (a full outbox drops and counts the changes of new keys),
// the state reports degraded; when Redis serves again the outbox is
// written and the other replica catches up.
func TestReplicateOutage(t *testing.T) {
	srv := redistest.Start(t)
	client := func() *redis.Client {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		return rdb
	}
	ns := namespace()
	rc := redisstate.ReplicatorConfig{Block: 20 * time.Millisecond, OutboxSize: 16}
	a, b := newReplica(t, client(), ns, "a", rc), newReplica(t, client(), ns, "b", rc)
	a.start(t)
	b.start(t)
	waitFor(t, 2*time.Second, "first resyncs", func() bool { return a.rep.Stats().Resyncs == 1 && b.rep.Stats().Resyncs == 1 })

	srv.Command(t, "CLIENT", "PAUSE", "1500", "WRITE")
	now := time.Now()
	for i := range 20 { // 20 keys, 16 fit
		for d := range 3 { // each key changed 3 times: one record per key
			a.cd.FailAt("sk-"+strconv.Itoa(i), cooldown.Failure{Status: 429, RetryAfter: time.Duration(30+d) * time.Second}, now)
		}
	}
	if s := a.cd.StatusAt("sk-0", now); s.State != cooldown.Cooling {
		t.Fatalf("a's own state during the outage: %v", s)
	}
	waitFor(t, time.Second, "a not degraded", func() bool { return a.rep.Stats().Degraded })
	st := a.rep.Stats()
	if st.Pending != 16 || st.Dropped != 12 || st.Published != 0 {
		t.Fatalf("during the outage: %+v, want 16 pending, 12 dropped (4 keys × 3 changes), 0 published", st)
	}

	waitFor(t, 10*time.Second, "the outbox is not written after the outage", func() bool { return a.rep.Stats().Pending == 0 })
	waitFor(t, 5*time.Second, "b does not catch up", func() bool {
		return b.cd.StatusAt("sk-0", time.Now()).State == cooldown.Cooling
	})
	if got, want := b.cd.StatusAt("sk-0", time.Now()).Until, now.Add(32*time.Second); !got.Equal(want) {
		t.Errorf("b cools sk-0 until %v, want the latest record's %v", got, want)
	}
	waitFor(t, 3*time.Second, "a still degraded", func() bool { return !a.rep.Stats().Degraded })
	if st := a.rep.Stats(); st.Published != 16 {
		t.Errorf("after the outage: %+v, want 16 published", st)
	}
}

// TestReplicatePinsUnwrapped: pins shared through OnPinChange with an
// unwrapped MemoryStore: a pin and its removal reach the other replica,
// and a pin kept in use slides there too (found by the scan).
func TestReplicatePinsUnwrapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := miniredis.NewMiniRedis()
		t.Cleanup(m.Close)
		ns := namespace()
		rc := redisstate.ReplicatorConfig{Block: 5 * time.Second, PinScan: 10 * time.Second}
		var xs [2]*replica
		for i, name := range []string{"a", "b"} {
			x := newReplica(t, miniClient(t, m), ns, name, rc)
			x.pinSt = affinity.NewMemoryStore(0)
			x.pins = affinity.New(affinity.Config{TTL: time.Hour, Store: x.pinSt, OnChange: x.rep.OnPinChange})
			x.start(t)
			xs[i] = x
		}
		a, b := xs[0], xs[1]
		key, _ := affinity.NewKey("session", "conversation-2")
		cands := []affinity.Candidate{{Connection: "sk-1"}, {Connection: "sk-2"}}
		a.pins.PinAt(affinity.Request{Provider: "openai", Key: key}, "sk-2", time.Now())
		first, _ := a.pins.LookupAt("openai", key, time.Now())
		waitFor(t, time.Second, "b does not see the pin", func() bool {
			p, ok := b.pins.LookupAt("openai", key, time.Now())
			return ok && p.Connection == "sk-2" && p.Expires.Equal(first.Expires)
		})
		// a uses the pin for 50 minutes, b never: b's copy slides with a's.
		for range 50 {
			time.Sleep(time.Minute)
			if c, ok := a.pins.SelectAt("openai", key, cands, time.Now()); !ok || c != "sk-2" {
				t.Fatalf("a selects %q", c)
			}
		}
		time.Sleep(15 * time.Second) // a scan
		slid, _ := a.pins.LookupAt("openai", key, time.Now())
		p, ok := b.pins.LookupAt("openai", key, time.Now())
		if !ok || !p.Expires.After(first.Expires.Add(30*time.Minute)) || p.Expires.After(slid.Expires) {
			t.Fatalf("b's pin %v %+v after a's slides to %v (first %v)", ok, p, slid.Expires, first.Expires)
		}
		a.pins.UnpinAt("openai", key, time.Now())
		waitFor(t, time.Second, "b keeps the pin a removed", func() bool {
			_, ok := b.pins.LookupAt("openai", key, time.Now())
			return !ok
		})
		a.stop()
		b.stop()
	})
}
