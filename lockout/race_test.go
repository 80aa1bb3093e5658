package lockout_test

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/routeguard/routeguard/lockout"
)

// TestConcurrentUse hammers one Lockout from several goroutines; run it with
// -race. Every goroutine works on its own connection, so its view must stay
// exact while the others write, list, clear and evict around it.
func TestConcurrentUse(t *testing.T) {
	var changes atomic.Int64
	l := lockout.New(lockout.Config{
		Enabled: true, MaxEntries: 64,
		OnChange: func(lockout.Event) { changes.Add(1) },
	})
	const workers, rounds = 8, 300
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			conn := "c" + strconv.Itoa(w)
			now := t0
			for i := range rounds {
				now = now.Add(time.Second)
				m := "m" + strconv.Itoa(i%5)
				switch i % 4 {
				case 0:
					l.RecordFailureAt(lockout.Failure{Provider: "p", Connection: conn, Model: m, Status: 503}, now)
				case 1:
					l.LockedAt("p", conn, m, now)
				case 2:
					l.DecayAt("p", conn, m, now)
				case 3:
					l.SnapshotAt(now)
				}
			}
			// Final, checked state for this connection.
			res := l.LockAt(lockout.Failure{Provider: "p", Connection: conn, Model: "final", Scope: lockout.ScopeModel, Cooldown: time.Hour}, now)
			if _, _, locked := l.LockedAt("p", conn, "final", now); res.Locked && !locked && l.Len() < 64 {
				t.Errorf("%s: final lock not visible", conn)
			}
			if l.ClearAt("p", conn, "final", now) {
				if _, _, locked := l.LockedAt("p", conn, "final", now); locked {
					t.Errorf("%s: locked after clear", conn)
				}
			}
		})
	}
	wg.Wait()
	if n := l.Len(); n > 64 {
		t.Errorf("Len() = %d, want ≤ 64", n)
	}
	if changes.Load() == 0 {
		t.Error("no change was reported")
	}
}

// TestChecksDuringRebuilds keeps checking locks that never change while
// another goroutine writes and clears thousands of other keys of the same
// connections, so that the tables the checks read are grown, filled with
// tombstones and rebuilt under them. The checks must never miss a lock.
func TestChecksDuringRebuilds(t *testing.T) {
	l := lockout.New(lockout.Config{Enabled: true, MaxEntries: 1 << 20})
	conns := []string{"a", "b", "c", "d"}
	for _, c := range conns {
		l.LockAt(lockout.Failure{Provider: "p", Connection: c, Model: "Fixed-Model", Scope: lockout.ScopeExact, Cooldown: time.Hour}, t0)
		l.LockAt(lockout.Failure{Provider: "p", Connection: c, Model: "fixed", Scope: lockout.ScopeModel, Cooldown: time.Hour}, t0)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				c := conns[(i+r)%len(conns)]
				for _, m := range []string{"fixed", "fixed-model", "FIXED-MODEL", " Fixed-Model "} {
					if _, _, locked := l.LockedAt("p", c, m, t0); !locked {
						t.Errorf("%s/%q read unlocked", c, m)
						return
					}
				}
			}
		})
	}
	for i := range 6000 {
		c := conns[i%len(conns)]
		m := "m" + strconv.Itoa(i)
		l.LockAt(lockout.Failure{Provider: "p", Connection: c, Model: m, Scope: lockout.Scope(1 + i%3), Cooldown: time.Minute}, t0)
		if i%3 == 0 {
			l.ClearAt("p", c, m, t0)
		}
	}
	stop.Store(true)
	wg.Wait()
}

// TestChecksWhileTwinComesAndGoes checks a model key under a long lock
// while its exact twin (the exact key of the same name) is inserted,
// swept and inserted again in front of it. A check must never stop at the
// twin: the model key's lock, the later one, must always win.
func TestChecksWhileTwinComesAndGoes(t *testing.T) {
	l := lockout.New(lockout.Config{Enabled: true})
	const p, c, m = "p", "c", "m"
	// The twin first, so it takes the home slot and the model key the next.
	l.LockAt(lockout.Failure{Provider: p, Connection: c, Model: m, Scope: lockout.ScopeExact, Cooldown: time.Millisecond}, t0)
	want := l.LockAt(lockout.Failure{Provider: p, Connection: c, Model: m, Scope: lockout.ScopeModel,
		Cooldown: 1000 * time.Hour, UpstreamReset: true}, t0).Until
	check := t0.Add(time.Minute)
	var stop atomic.Bool
	var bad atomic.Int64
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for !stop.Load() {
				if until, _, locked := l.LockedAt(p, c, m, check); !locked || !until.Equal(want) {
					bad.Add(1)
				}
			}
		})
	}
	for i := 1; i <= 5000; i++ {
		now := t0.Add(time.Duration(i) * 16 * time.Second)
		// A write past the sweep interval sweeps the expired twin away ...
		l.LockAt(lockout.Failure{Provider: p, Connection: c, Model: "other", Scope: lockout.ScopeModel, Cooldown: time.Millisecond}, now)
		// ... and this one puts it back, into the slot it left.
		l.LockAt(lockout.Failure{Provider: p, Connection: c, Model: m, Scope: lockout.ScopeExact, Cooldown: time.Millisecond}, now)
	}
	stop.Store(true)
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Errorf("%d checks missed the model key's lock", n)
	}
}
