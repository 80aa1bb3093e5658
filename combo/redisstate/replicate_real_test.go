package redisstate_test

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/redisstate"
	"github.com/routeguard/routeguard/combo/redisstate/internal/redistest"
	"github.com/routeguard/routeguard/cooldown"
)

// TestReplicateRealServer runs two replicas (two States, two sets of
// layers) on one real Redis: a 429 with Retry-After 30 on A keeps B off
// that key until A's end; a breaker opened on A makes B's router skip the
// provider; and the propagation latency of 200 cooldowns from A's hook to
// B's apply is measured and printed.
func TestReplicateRealServer(t *testing.T) {
	rdbA, rdbB := newReal(t), newReal(t)
	ns := namespace()

	var mu sync.Mutex
	sent := map[string]time.Time{}
	var lat []time.Duration
	onApply := func(a redisstate.Applied) {
		mu.Lock()
		defer mu.Unlock()
		if t0, ok := sent[a.Key]; ok && a.Kind == "cooldown" {
			lat = append(lat, time.Since(t0))
			delete(sent, a.Key)
		}
	}
	a := newReplica(t, rdbA, ns, "a", redisstate.ReplicatorConfig{})
	b := newReplica(t, rdbB, ns, "b", redisstate.ReplicatorConfig{OnApply: onApply})
	a.start(t)
	b.start(t)
	waitFor(t, 5*time.Second, "first resyncs", func() bool { return a.rep.Stats().Resyncs == 1 && b.rep.Stats().Resyncs == 1 })

	routerB := combo.New(combo.Config{Breakers: b.set, Cooldowns: b.cd, Lockouts: b.lk, Pins: b.pins})
	routerA := combo.New(combo.Config{Breakers: a.set, Cooldowns: a.cd, Lockouts: a.lk, Pins: a.pins})
	var served []string
	var smu sync.Mutex
	send := func(status int, retryAfter string) combo.SendFunc {
		return func(_ context.Context, tg *combo.Target) (*http.Response, error) {
			smu.Lock()
			served = append(served, tg.Connection)
			smu.Unlock()
			if tg.Connection == "sk-1" {
				h := http.Header{}
				if retryAfter != "" {
					h.Set("Retry-After", retryAfter)
				}
				return reply(status, h), nil
			}
			return reply(200, nil), nil
		}
	}
	c := &combo.Combo{Name: "c", Targets: []combo.Target{
		{Provider: "openai", Connection: "sk-1", Model: "gpt-4o"},
		{Provider: "anthropic", Connection: "ak-1", Model: "claude"},
	}}

	// A 429 with Retry-After: 30 on A.
	res, err := routerA.Do(context.Background(), combo.Request{Combo: c}, send(429, "30"))
	if err != nil {
		t.Fatal(err)
	}
	res.Response.Body.Close()
	want := a.cd.StatusAt("sk-1", time.Now())
	if want.State != cooldown.Cooling {
		t.Fatalf("a: %v", want)
	}
	waitFor(t, 2*time.Second, "b does not see the cooldown", func() bool {
		return b.cd.StatusAt("sk-1", time.Now()).State == cooldown.Cooling
	})
	if got := b.cd.StatusAt("sk-1", time.Now()); !got.Until.Equal(want.Until) {
		t.Errorf("b cools sk-1 until %v, want %v", got.Until, want.Until)
	}
	if d := time.Until(want.Until); d < 25*time.Second || d > 30*time.Second {
		t.Errorf("a's cooldown ends in %v, want about 30 s", d)
	}
	served = nil
	res, err = routerB.Do(context.Background(), combo.Request{Combo: c}, send(200, ""))
	if err != nil {
		t.Fatal(err)
	}
	res.Response.Body.Close()
	if !slices.Equal(served, []string{"ak-1"}) || res.Target.Connection != "ak-1" {
		t.Errorf("b sent to %v, served by %s; want only ak-1", served, res.Target.Connection)
	}

	// A breaker opened on A: B skips the provider.
	now := time.Now()
	for range 20 {
		done, err := a.set.AllowReportAt("anthropic", now)
		if err != nil {
			break
		}
		done(breaker.Report{Outcome: breaker.Failure, At: now})
	}
	if st, _ := a.set.StateAt("anthropic", now); st != breaker.Open {
		t.Fatalf("a's breaker: %v", st)
	}
	waitFor(t, 2*time.Second, "b's breaker does not open", func() bool {
		st, _ := b.set.StateAt("anthropic", time.Now())
		return st == breaker.Open
	})
	c2 := &combo.Combo{Name: "c2", Targets: []combo.Target{
		{Provider: "anthropic", Connection: "ak-1", Model: "claude"},
		{Provider: "mistral", Connection: "mk-1", Model: "large"},
	}}
	served = nil
	res, err = routerB.Do(context.Background(), combo.Request{Combo: c2}, send(200, ""))
	if err != nil {
		t.Fatal(err)
	}
	res.Response.Body.Close()
	if !slices.Equal(served, []string{"mk-1"}) {
		t.Errorf("b sent to %v; want only mk-1 (anthropic's breaker is open on a)", served)
	}

	// Propagation latency: 200 cooldowns, one every 2 ms.
	const n = 200
	for i := range n {
		conn := "lat-" + strconv.Itoa(i)
		mu.Lock()
		sent[conn] = time.Now()
		mu.Unlock()
		a.cd.FailAt(conn, cooldown.Failure{Status: 429, RetryAfter: time.Minute}, time.Now())
		time.Sleep(2 * time.Millisecond)
	}
	waitFor(t, 10*time.Second, "not every cooldown reached b", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(lat) == n
	})
	slices.Sort(lat)
	p50, p99 := lat[n/2], lat[n*99/100]
	t.Logf("propagation A→B over %d events on loopback: p50 %v, p99 %v, max %v (goal p99 ≤ 100ms)", n, p50, p99, lat[n-1])
	st := b.rep.Stats()
	if st.Applied < n+2 || st.Staleness > 2*time.Second {
		t.Errorf("b stats %+v", st)
	}
}

// TestReplicateRealRestart restarts a private redis-server empty
// (SHUTDOWN NOSAVE) under two replicas: both resync on the new epoch and
// publish their live state again, so a cooldown set before the restart
// is back in the snapshot and a replica that starts afterwards learns it;
// then XTRIM MAXLEN 0 makes them resync again ("trim").
func TestReplicateRealRestart(t *testing.T) {
	srv := redistest.Start(t)
	client := func() *redis.Client {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		return rdb
	}
	ns := namespace()
	rc := redisstate.ReplicatorConfig{Block: 50 * time.Millisecond}
	a, b := newReplica(t, client(), ns, "a", rc), newReplica(t, client(), ns, "b", rc)
	a.start(t)
	b.start(t)
	waitFor(t, 5*time.Second, "first resyncs", func() bool { return len(a.resyncReasons()) == 1 && len(b.resyncReasons()) == 1 })
	a.cd.FailAt("sk-1", cooldown.Failure{Status: 429, RetryAfter: time.Minute}, time.Now())
	b.cd.FailAt("sk-2", cooldown.Failure{Status: 403, Permanent: true}, time.Now())
	waitFor(t, 2*time.Second, "the cooldowns cross", func() bool {
		return b.cd.StatusAt("sk-1", time.Now()).State == cooldown.Cooling && a.cd.StatusAt("sk-2", time.Now()).State == cooldown.Banned
	})

	srv.Restart(t)
	waitFor(t, 10*time.Second, "no epoch resync on both", func() bool {
		for _, x := range []*replica{a, b} {
			r := x.resyncReasons()
			if r[len(r)-1] != "epoch" {
				return false
			}
		}
		return true
	})
	c := newReplica(t, client(), ns, "c", rc)
	c.start(t)
	waitFor(t, 5*time.Second, "a replica started after the restart does not learn the live state", func() bool {
		return c.cd.StatusAt("sk-1", time.Now()).State == cooldown.Cooling && c.cd.StatusAt("sk-2", time.Now()).State == cooldown.Banned
	})
	if got, want := c.cd.StatusAt("sk-1", time.Now()).Until, a.cd.StatusAt("sk-1", time.Now()).Until; !got.Equal(want) {
		t.Errorf("c cools sk-1 until %v, want %v", got, want)
	}

	admin := client()
	if err := admin.XTrimMaxLen(context.Background(), "{"+ns+":ev}:log", 0).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "no resync after the trim", func() bool {
		r := c.resyncReasons()
		return r[len(r)-1] == "trim"
	})
	// Replication goes on after both.
	c.cd.FailAt("sk-3", cooldown.Failure{Status: 429, RetryAfter: time.Minute}, time.Now())
	waitFor(t, 2*time.Second, "a misses a cooldown after the trim", func() bool {
		return a.cd.StatusAt("sk-3", time.Now()).State == cooldown.Cooling
	})
}

// TestReplicateRealBreakerResetAndGate: on a real Redis, a breaker opened
// on A opens on B, B's reset closes it on A, and a provider cooling in A's
// gate cools in B's until the same end.
func TestReplicateRealBreakerResetAndGate(t *testing.T) {
	ns := namespace()
	a := newReplica(t, newReal(t), ns, "a", redisstate.ReplicatorConfig{})
	b := newReplica(t, newReal(t), ns, "b", redisstate.ReplicatorConfig{})
	a.start(t)
	b.start(t)
	waitFor(t, 5*time.Second, "first resyncs", func() bool { return a.rep.Stats().Resyncs == 1 && b.rep.Stats().Resyncs == 1 })
	openBreaker(t, a.set, "openai", time.Now())
	waitFor(t, 2*time.Second, "B's breaker opens", func() bool {
		st, _ := b.set.StateAt("openai", time.Now())
		return st == breaker.Open
	})
	b.set.ResetAt("openai", time.Now())
	waitFor(t, 2*time.Second, "A's breaker is reset", func() bool {
		st, _ := a.set.StateAt("openai", time.Now())
		return st == breaker.Closed
	})
	now := time.Now()
	for range 15 {
		a.gate.RecordFailureAt("anthropic", "ak-1", now)
	}
	want, _ := a.gate.BlockedUntilAt("anthropic", "", now)
	waitFor(t, 2*time.Second, "B's gate cools the provider", func() bool {
		u, ok := b.gate.BlockedUntilAt("anthropic", "", time.Now())
		return ok && u.Equal(want)
	})
}
