package redisstate

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lockout"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// offline returns a replicator whose State never reaches a server (the
// tests here make no remote call), on a fixed clock.
func offline(t testing.TB, replica string, now func() time.Time) *Replicator {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { rdb.Close() })
	s, err := New(rdb, Config{Namespace: "m", Replica: replica, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return s.Replicator(ReplicatorConfig{})
}

type rec struct{ f, v string }

// drain takes every record r has queued.
func drain(r *Replicator) []rec {
	fs, items := r.ob.take(1 << 30)
	r.ob.finish(fs, items, true)
	out := make([]rec, len(fs))
	for i := range fs {
		out[i] = rec{fs[i], items[i].v}
	}
	return out
}

// testLayers is one replica's layers.
type testLayers struct {
	set   *breaker.Set
	gate  *breaker.Gate
	store cooldown.Store
	cd    *cooldown.Tracker
	lk    *lockout.Lockout
	pins  affinity.Store
}

func newTestLayers(r *Replicator) *testLayers {
	l := &testLayers{store: cooldown.NewMemoryStore()}
	l.set = breaker.NewSet(breaker.Config{OnChange: r.OnBreakerChange})
	l.gate = breaker.NewGate(breaker.GateConfig{Enabled: true, OnChange: r.OnGateChange})
	l.cd = cooldown.New(cooldown.Config{Store: l.store, OnChange: r.OnCooldownChange})
	l.lk = lockout.New(lockout.Config{Enabled: true, OnChange: r.OnLockoutChange})
	l.pins = r.Pins(affinity.NewMemoryStore(0))
	r.lay.Store(&Layers{Breakers: l.set, Gate: l.gate, Cooldowns: l.store, Lockouts: l.lk, Pins: l.pins})
	return l
}

func sessionKey(s string) affinity.StoreKey {
	return affinity.StoreKey{Provider: "openai", Session: sha256.Sum256([]byte(s))}
}

// mergeEvents builds the records of three replicas that race on the same
// keys: cooldowns, a clear and a reset, terminal states, breaker open
// periods, lockouts and a clear, pins and a deletion.
func mergeEvents(t testing.TB) []rec {
	now := func() time.Time { return t0 }
	a, b, c := offline(t, "a", now), offline(t, "b", now), offline(t, "c", now)
	var out []rec
	take := func(r *Replicator) { out = append(out, drain(r)...) }
	ev := func(conn string, act cooldown.Action, st cooldown.State, until time.Duration, reason string) cooldown.Event {
		e := cooldown.Event{Conn: conn, Action: act, State: st, Reason: reason, At: t0, Level: 1}
		if until > 0 {
			e.Until = t0.Add(until)
		}
		return e
	}
	a.OnCooldownChange(ev("c1", cooldown.Episode, cooldown.Cooling, 30*time.Second, "rate_limited"))
	take(a)
	b.OnCooldownChange(ev("c1", cooldown.Extended, cooldown.Cooling, 60*time.Second, "rate_limited"))
	take(b)
	c.OnCooldownChange(ev("c1", cooldown.Cleared, cooldown.Available, 0, ""))
	clr := drain(c)
	out = append(out, clr...)
	newTestLayers(b)
	b.apply(clr[0].f, clr[0].v, 0, true) // b has seen the clear
	drain(b)
	b.OnCooldownChange(ev("c1", cooldown.Episode, cooldown.Cooling, 20*time.Second, "overloaded"))
	take(b)

	a.OnCooldownChange(ev("c2", cooldown.Terminated, cooldown.Banned, 0, "banned"))
	take(a)
	b.OnCooldownChange(ev("c2", cooldown.Reset, cooldown.Available, 0, ""))
	take(b)
	a.OnCooldownChange(ev("c3", cooldown.Terminated, cooldown.CreditsExhausted, time.Hour, "credits"))
	take(a)
	c.OnCooldownChange(ev("c3", cooldown.Terminated, cooldown.Expired, 0, "expired"))
	take(c)
	a.OnCooldownChange(ev("c4", cooldown.Episode, cooldown.Cooling, 45*time.Second, "rate_limited"))
	c.OnCooldownChange(ev("c4", cooldown.Episode, cooldown.Cooling, 45*time.Second, "overloaded"))
	take(a)
	take(c)

	a.OnBreakerChange(breaker.Event{Provider: "p1", To: breaker.Open, At: t0, Until: t0.Add(10 * time.Second), Failures: 5})
	take(a)
	b.OnBreakerChange(breaker.Event{Provider: "p1", To: breaker.Open, At: t0, Until: t0.Add(40 * time.Second), Failures: 5, OpenCycles: 2})
	take(b)
	// p2: a's open period, then c's reset; a opens p3 again after it saw
	// c's reset of p3, and b, which did not see it, opens p3 for longer.
	a.OnBreakerChange(breaker.Event{Provider: "p2", To: breaker.Open, At: t0, Until: t0.Add(30 * time.Second), Failures: 5})
	take(a)
	c.OnBreakerChange(breaker.Event{Provider: "p2", From: breaker.Open, To: breaker.Closed, At: t0, Cause: breakerReset})
	take(c)
	b.OnBreakerChange(breaker.Event{Provider: "p2", From: breaker.HalfOpen, To: breaker.Closed, At: t0}) // a probe: local
	take(b)
	c.OnBreakerChange(breaker.Event{Provider: "p3", From: breaker.Open, To: breaker.Closed, At: t0, Cause: breakerReset})
	rst := drain(c)
	out = append(out, rst...)
	newTestLayers(a)
	a.apply(rst[0].f, rst[0].v, 0, true)
	drain(a)
	a.OnBreakerChange(breaker.Event{Provider: "p3", To: breaker.Open, At: t0, Until: t0.Add(20 * time.Second), Failures: 5})
	take(a)
	b.OnBreakerChange(breaker.Event{Provider: "p3", To: breaker.Open, At: t0, Until: t0.Add(50 * time.Second), Failures: 5})
	take(b)

	// Gate cooldowns: the later end wins.
	gt := func(conn string, until time.Duration, failures int) breaker.Event {
		return breaker.Event{Provider: "p1", Connection: conn, To: breaker.Open, At: t0, Until: t0.Add(until), Failures: failures, LastFailure: t0}
	}
	a.OnGateChange(gt("", 60*time.Second, 15))
	take(a)
	b.OnGateChange(gt("", 90*time.Second, 15))
	take(b)
	a.OnGateChange(gt("k1", 20*time.Second, 3))
	take(a)
	c.OnGateChange(gt("k1", 5*time.Second, 1))
	take(c)

	lk := func(model string, until time.Duration) lockout.Event {
		return lockout.Event{Kind: lockout.EventLocked, Provider: "openai", Connection: "k1", Model: model,
			Scope: lockout.ScopeModel, At: t0, Reason: lockout.ReasonRateLimited, FailureCount: 1, LockedAt: t0, Until: t0.Add(until)}
	}
	a.OnLockoutChange(lk("gpt-4o", 30*time.Second))
	take(a)
	b.OnLockoutChange(lk("gpt-4o", 90*time.Second))
	take(b)
	a.OnLockoutChange(lk("gpt-5", 50*time.Second))
	take(a)
	c.OnLockoutChange(lockout.Event{Kind: lockout.EventCleared, Provider: "openai", Connection: "k1", Model: "gpt-5", At: t0, Removed: true})
	take(c)

	pin := func(conn string, used time.Duration) affinity.Pin {
		return affinity.Pin{Connection: conn, Created: t0, LastUsed: t0.Add(used), Expires: t0.Add(used + time.Hour)}
	}
	pa, pb, pc := a.Pins(affinity.NewMemoryStore(0)), b.Pins(affinity.NewMemoryStore(0)), c.Pins(affinity.NewMemoryStore(0))
	pa.Save(sessionKey("s1"), pin("kA", time.Second), t0)
	take(a)
	pb.Save(sessionKey("s1"), pin("kB", 2*time.Second), t0)
	take(b)
	pa.Save(sessionKey("s2"), pin("kA", time.Second), t0)
	take(a)
	pc.Save(sessionKey("s2"), pin("kC", time.Second), t0)
	take(c)
	pb.Save(sessionKey("s3"), pin("kB", time.Second), t0)
	take(b)
	// c deletes s3 later than b made it.
	pc.Save(sessionKey("s3"), pin("kB", time.Second), t0)
	drain(c)
	c.s.cfg.Now = func() time.Time { return t0.Add(3 * time.Second) }
	pc.Delete(sessionKey("s3"))
	take(c)
	return out
}

// finalState renders a replica's layers at t0 for comparison.
func finalState(l *testLayers) string {
	var sb strings.Builder
	for _, c := range []string{"c1", "c2", "c3", "c4"} {
		s := l.cd.StatusAt(c, t0)
		fmt.Fprintf(&sb, "%s %v %v %s|", c, s.State, since(s.Until), s.Reason)
	}
	for _, p := range []string{"p1", "p2", "p3"} {
		st, retry := l.set.StateAt(p, t0)
		fmt.Fprintf(&sb, "%s %v %v|", p, st, retry)
	}
	pu, _ := l.gate.BlockedUntilAt("p1", "", t0)
	fmt.Fprintf(&sb, "gate p1 %v k1 %v|", since(pu), since(gateUntil(l.gate, "p1", "k1", t0)))
	for _, m := range []string{"gpt-4o", "gpt-5"} {
		u, _, locked := l.lk.LockedAt("openai", "k1", m, t0)
		fmt.Fprintf(&sb, "%s %v %v|", m, locked, since(u))
	}
	for _, s := range []string{"s1", "s2", "s3"} {
		p, ok, _ := l.pins.Load(sessionKey(s), t0)
		fmt.Fprintf(&sb, "%s %v %s|", s, ok, p.Connection)
	}
	return sb.String()
}

func since(t time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return t.Sub(t0)
}

// applyAll applies recs in the order order (indexes, repeats allowed) to a
// fresh replica and returns its final state.
func applyAll(t testing.TB, recs []rec, order []int) string {
	r := offline(t, "z", func() time.Time { return t0 })
	l := newTestLayers(r)
	for _, i := range order {
		r.apply(recs[i].f, recs[i].v, 0, false)
	}
	return finalState(l)
}

func TestMergeJoinRules(t *testing.T) {
	recs := mergeEvents(t)
	order := make([]int, len(recs))
	for i := range order {
		order[i] = i
	}
	got := applyAll(t, recs, order)
	want := "c1 cooling 20s overloaded|" + // cleared, then cooled again after the clear
		"c2 available 0s |" + // reset beats the ban
		"c3 expired 0s expired|" + // untimed terminal beats a timed one
		"c4 cooling 45s overloaded|" + // equal ends: the greater replica id's record
		"p1 open 40s|" + // the later open period
		"p2 closed 0s|" + // a reset closes an open period it follows; a closing probe is not shared
		"p3 open 20s|" + // an open period after the reset beats a longer one from before it
		"gate p1 1m30s k1 20s|" + // the later gate cooldowns
		"gpt-4o true 1m30s|gpt-5 false 0s|" + // a lockout never shortens; a clear lifts it
		"s1 true kB|s2 true kC|s3 false |" // last writer by (time, replica); a later deletion wins
	if got != want {
		t.Errorf("merged state\n got %s\nwant %s", got, want)
	}
}

// FuzzMergeOrder checks that every order and duplication of the records
// gives the same local state: the merge is idempotent and commutative.
func FuzzMergeOrder(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21})
	f.Add([]byte{21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 5, 5, 5})
	recs := mergeEvents(f)
	base := make([]int, len(recs))
	for i := range base {
		base[i] = i
	}
	want := applyAll(f, recs, base)
	f.Fuzz(func(t *testing.T, data []byte) {
		// data permutes the records (Fisher–Yates driven by its bytes),
		// and its tail repeats some of them.
		order := append([]int(nil), base...)
		for i := len(order) - 1; i > 0 && len(data) > 0; i-- {
			j := int(data[0]) % (i + 1)
			data = data[1:]
			order[i], order[j] = order[j], order[i]
		}
		for _, d := range data {
			order = append(order, int(d)%len(recs))
		}
		if got := applyAll(t, recs, order); got != want {
			t.Fatalf("order %v:\n got %s\nwant %s", order, got, want)
		}
	})
}

// FuzzDecodeValue feeds arbitrary values, as read back from Redis, to the
// decoder and to apply: nothing may panic, and a decoded value encodes
// back to a value that decodes the same.
func FuzzDecodeValue(f *testing.F) {
	for _, r := range mergeEvents(f) {
		f.Add(r.f, r.v)
	}
	f.Add("b:x", "zz")
	f.Add("p:openai\x00ab", strings.Repeat("0", orderWidth)+"a\n{}")
	r := offline(f, "z", func() time.Time { return t0 })
	newTestLayers(r)
	f.Fuzz(func(t *testing.T, field, v string) {
		r.apply(field, v, 0, false)
		d, err := decodeValue(v)
		if err != nil {
			return
		}
		if strings.ContainsRune(d.replica, '\n') {
			t.Fatalf("replica %q has a newline", d.replica)
		}
		again, err := decodeValue(encodeValue(d.n, d.replica, d.payload))
		if err != nil || again != d {
			t.Fatalf("round trip of %q: %+v, %v", v, again, err)
		}
	})
}

// TestPruneSeen: records of ended state are forgotten after Retention,
// terminal states and resets are kept.
func TestPruneSeen(t *testing.T) {
	recs := mergeEvents(t)
	r := offline(t, "z", func() time.Time { return t0 })
	newTestLayers(r)
	for _, x := range recs {
		r.apply(x.f, x.v, 0, false)
	}
	r.prune(t0.Add(3 * time.Hour)) // every timed record ended over an hour ago
	var kept []string
	for f := range r.seen {
		kept = append(kept, strings.ReplaceAll(f, "\x00", "/"))
	}
	slices.Sort(kept)
	want := []string{"b:p2", "cc:c2", "ct:c2", "ct:c3", "l:openai/k1/gpt-5"} // resets and terminal states
	if !slices.Equal(kept, want) {
		t.Errorf("kept %q, want %q", kept, want)
	}
}

func TestReplicatorConfigNormalize(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in, out ReplicatorConfig
	}{
		{"zero", ReplicatorConfig{}, ReplicatorConfig{OutboxSize: 10000, MaxBatch: 128, StreamLen: 100000,
			Block: 500 * time.Millisecond, Retention: time.Hour, PinScan: 15 * time.Second}},
		{"low", ReplicatorConfig{OutboxSize: 1, MaxBatch: -1, StreamLen: 5, Block: time.Millisecond, Retention: time.Second, PinScan: time.Millisecond},
			ReplicatorConfig{OutboxSize: 16, MaxBatch: 128, StreamLen: 1000, Block: 10 * time.Millisecond, Retention: time.Minute, PinScan: time.Second}},
		{"high", ReplicatorConfig{OutboxSize: 1 << 30, MaxBatch: 5000, StreamLen: 1 << 30, Block: time.Minute, Retention: 30 * 24 * time.Hour, PinScan: time.Hour},
			ReplicatorConfig{OutboxSize: 1000000, MaxBatch: 1000, StreamLen: 10000000, Block: 5 * time.Second, Retention: 7 * 24 * time.Hour, PinScan: 10 * time.Minute}},
	} {
		if got := tc.in.Normalize(); fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", tc.out) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.out)
		}
	}
}
