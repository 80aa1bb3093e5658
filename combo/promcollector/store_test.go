package promcollector_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/routeguard/routeguard/combo"
)

// fakeStore is a shared state store whose lag and degraded flag the test
// sets.
type fakeStore struct {
	lag      atomic.Int64
	degraded atomic.Bool
}

func (f *fakeStore) Lag() time.Duration { return time.Duration(f.lag.Load()) }
func (f *fakeStore) Degraded() bool     { return f.degraded.Load() }

func TestSharedStoreGauges(t *testing.T) {
	c, reg := newCollector()
	const lag, degraded = "routeguard_replication_lag_seconds", "routeguard_shared_store_degraded"
	if n := testutil.CollectAndCount(c, lag, degraded); n != 0 {
		t.Fatalf("%d shared-store series before a store is attached, want 0", n)
	}
	redis, sqlite := &fakeStore{}, &fakeStore{}
	c.AttachSharedStore("redis", redis.Lag, redis.Degraded)
	c.AttachSharedStore("sqlite", nil, sqlite.Degraded) // no replication: no lag series
	steps := []struct {
		name                          string
		set                           func()
		redisLag                      float64
		redisDegraded, sqliteDegraded float64
	}{
		{"fresh", func() {}, 0, 0, 0},
		{"lagging", func() { redis.lag.Store(int64(250 * time.Millisecond)) }, 0.25, 0, 0},
		{"degraded", func() { redis.lag.Store(int64(1500 * time.Millisecond)); redis.degraded.Store(true) }, 1.5, 1, 0},
		{"negative lag reads 0", func() { redis.lag.Store(-int64(time.Second)) }, 0, 1, 0},
		{"recovered", func() { redis.degraded.Store(false); sqlite.degraded.Store(true) }, 0, 0, 1},
	}
	for _, s := range steps {
		s.set()
		for _, want := range []struct {
			name  string
			store string
			v     float64
		}{{lag, "redis", s.redisLag}, {degraded, "redis", s.redisDegraded}, {degraded, "sqlite", s.sqliteDegraded}} {
			got, ok := value(t, reg, want.name, []string{"store", want.store})
			if !ok || got != want.v {
				t.Errorf("%s: %s{store=%q} = %v (present %v), want %v", s.name, want.name, want.store, got, ok, want.v)
			}
		}
		if _, ok := value(t, reg, lag, []string{"store", "sqlite"}); ok {
			t.Errorf("%s: %s{store=sqlite} exists, want none (no lag func)", s.name, lag)
		}
	}
	// A name given again replaces the funcs: still one series per store.
	c.AttachSharedStore("redis", func() time.Duration { return 3 * time.Second }, func() bool { return true })
	if got, _ := value(t, reg, lag, []string{"store", "redis"}); got != 3 {
		t.Errorf("after re-attach: lag %v, want 3", got)
	}
	if n := testutil.CollectAndCount(c, lag, degraded); n != 3 {
		t.Errorf("%d shared-store series, want 3 (redis lag and degraded, sqlite degraded)", n)
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP routeguard_shared_store_degraded 1 while the shared state store's last remote call failed, else 0.
# TYPE routeguard_shared_store_degraded gauge
routeguard_shared_store_degraded{store="redis"} 1
routeguard_shared_store_degraded{store="sqlite"} 1
`), degraded); err != nil {
		t.Error(err)
	}
}

// TestAttemptSeriesByIdentity: the fast path keys attempts by where their
// label strings are, so equal strings held at different addresses, and
// more label sets than the table has slots (entries replacing each
// other), must still count each attempt once on the series of its
// values.
func TestAttemptSeriesByIdentity(t *testing.T) {
	c, reg := newCollector()
	rc := combo.Config{}
	c.Attach(&rc)
	const targets, rounds = 900, 3 // 1,800 series: under the SDK's default cardinality limit, past the table's 512 slots
	for r := range rounds {
		for i := range targets {
			// A fresh copy of every string each round: new addresses.
			tg := combo.Target{Provider: fmt.Sprintf("p%d", i%7), Connection: fmt.Sprintf("c%d", i), Model: fmt.Sprintf("m%d", i)}
			out := combo.OutcomeSucceeded
			if r == 1 {
				tg.Provider, tg.Model = strings.Clone(tg.Provider), strings.Clone(tg.Model)
			}
			rc.OnAttempt(combo.Attempt{Target: tg, Outcome: out, Status: 200})
			rc.OnAttempt(combo.Attempt{Target: tg, Outcome: combo.OutcomeFailed, Status: 503, Code: "server_error"})
		}
	}
	for _, i := range []int{0, 1, 511, 512, 899} {
		p, m := fmt.Sprintf("p%d", i%7), fmt.Sprintf("m%d", i)
		for _, k := range []struct{ outcome, class, reason string }{{"succeeded", "2xx", ""}, {"failed", "5xx", "server_error"}} {
			got, ok := value(t, reg, "routeguard_attempts_total",
				[]string{"provider", p, "model", m, "outcome", k.outcome, "status_class", k.class, "reason", k.reason})
			if !ok || got != rounds {
				t.Errorf("attempts{%s,%s,%s} = %v (present %v), want %d", p, m, k.outcome, got, ok, rounds)
			}
		}
	}
	if n := testutil.CollectAndCount(c, "routeguard_attempts_total"); n != 2*targets {
		t.Errorf("%d attempt series, want %d", n, 2*targets)
	}
}
