package otelmetrics_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
	m, reader := newMetrics(t)
	const lag, degraded = "routeguard_replication_lag_seconds", "routeguard_shared_store_degraded"
	if _, ok := value(collect(t, reader), degraded, []string{"store", "redis"}); ok {
		t.Fatal("a shared-store gauge before a store is attached")
	}
	redis, sqlite := &fakeStore{}, &fakeStore{}
	m.AttachSharedStore("redis", redis.Lag, redis.Degraded)
	m.AttachSharedStore("sqlite", nil, sqlite.Degraded) // no replication: no lag series
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
		rm := collect(t, reader)
		for _, want := range []struct {
			name  string
			store string
			v     float64
		}{{lag, "redis", s.redisLag}, {degraded, "redis", s.redisDegraded}, {degraded, "sqlite", s.sqliteDegraded}} {
			got, ok := value(rm, want.name, []string{"store", want.store})
			if !ok || got != want.v {
				t.Errorf("%s: %s{store=%q} = %v (present %v), want %v", s.name, want.name, want.store, got, ok, want.v)
			}
		}
		if _, ok := value(rm, lag, []string{"store", "sqlite"}); ok {
			t.Errorf("%s: %s{store=sqlite} exists, want none (no lag func)", s.name, lag)
		}
	}
	m.AttachSharedStore("redis", func() time.Duration { return 3 * time.Second }, func() bool { return true })
	if got, _ := value(collect(t, reader), lag, []string{"store", "redis"}); got != 3 {
		t.Errorf("after re-attach: lag %v, want 3", got)
	}
}

// TestAttemptSeriesByIdentity: equal label strings at different
// addresses, and more label sets than the fast path's table holds, still
// count each attempt once under its values.
func TestAttemptSeriesByIdentity(t *testing.T) {
	m, reader := newMetrics(t)
	rc := combo.Config{}
	m.Attach(&rc)
	const targets, rounds = 900, 3 // 1,800 series: under the SDK's default cardinality limit, past the table's 512 slots
	for r := range rounds {
		for i := range targets {
			tg := combo.Target{Provider: fmt.Sprintf("p%d", i%7), Connection: fmt.Sprintf("c%d", i), Model: fmt.Sprintf("m%d", i)}
			if r == 1 {
				tg.Provider, tg.Model = strings.Clone(tg.Provider), strings.Clone(tg.Model)
			}
			rc.OnAttempt(combo.Attempt{Target: tg, Outcome: combo.OutcomeSucceeded, Status: 200})
			rc.OnAttempt(combo.Attempt{Target: tg, Outcome: combo.OutcomeFailed, Status: 503, Code: "server_error"})
		}
	}
	rm := collect(t, reader)
	for _, i := range []int{0, 1, 511, 512, 899} {
		p, md := fmt.Sprintf("p%d", i%7), fmt.Sprintf("m%d", i)
		for _, k := range []struct{ outcome, class, reason string }{{"succeeded", "2xx", ""}, {"failed", "5xx", "server_error"}} {
			got, ok := value(rm, "routeguard_attempts_total",
				[]string{"provider", p, "model", md, "outcome", k.outcome, "status_class", k.class, "reason", k.reason})
			if !ok || got != rounds {
				t.Errorf("attempts{%s,%s,%s} = %v (present %v), want %d", p, md, k.outcome, got, ok, rounds)
			}
		}
	}
}
