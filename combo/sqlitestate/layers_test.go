package sqlitestate_test

import (
	"testing"
	"time"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo/sqlitestate"
	"github.com/routeguard/routeguard/lockout"
)

func newSet(st *sqlitestate.State) *breaker.Set {
	return breaker.NewSet(breaker.Config{
		APIKey:   breaker.Profile{OpenAt: 2, Reset: time.Minute},
		OnChange: st.OnBreakerChange,
	})
}

func fail(set *breaker.Set, provider string, at time.Time) {
	set.ReportAt(provider, breaker.Report{Outcome: breaker.Failure}, at)
}

// TestOpenBreakerKeepsRemainingOpenTime: an open breaker restored after a
// restart stays open for what was left of its open period, a degraded one
// comes back degraded, one whose open period ended before the restart starts
// closed, and a breaker that closed has no row.
func TestOpenBreakerKeepsRemainingOpenTime(t *testing.T) {
	st, path := open(t, sqlitestate.Options{})
	set := newSet(st)
	fail(set, "open", t0)
	fail(set, "open", t0.Add(time.Second)) // opens at T0+1s for 1 min
	fail(set, "degraded", t0)
	fail(set, "short", t0)
	fail(set, "short", t0) // opens at T0 for 1 min
	fail(set, "closed", t0)
	fail(set, "closed", t0)
	set.ReportAt("closed", breaker.Report{Outcome: breaker.Success}, t0.Add(2*time.Minute)) // half-open probe succeeds
	if s, wait := set.StateAt("open", t0.Add(10*time.Second)); s != breaker.Open || wait != 51*time.Second {
		t.Fatalf("setup: open breaker %v, wait %v", s, wait)
	}
	if s, _ := set.StateAt("degraded", t0); s != breaker.Degraded {
		t.Fatalf("setup: degraded breaker %v", s)
	}
	if s, _ := set.StateAt("closed", t0.Add(2*time.Minute)); s != breaker.Closed {
		t.Fatalf("setup: closed breaker %v", s)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = reopen(t, path, sqlitestate.Options{})
	set = newSet(st)
	now := t0.Add(60 * time.Second) // 1s before the open period ends
	if err := st.Restore(sqlitestate.Layers{Breakers: set}, now); err != nil {
		t.Fatal(err)
	}
	if s, wait := set.StateAt("open", now); s != breaker.Open || wait != time.Second {
		t.Errorf("open breaker after restart: %v, wait %v; want open for the remaining 1s", s, wait)
	}
	if s, _ := set.StateAt("open", t0.Add(61*time.Second)); s != breaker.HalfOpen {
		t.Errorf("restored open breaker at the end of its period: %v, want half-open", s)
	}
	if s, _ := set.StateAt("degraded", now); s != breaker.Degraded {
		t.Errorf("degraded breaker after restart: %v", s)
	}
	if s, _ := set.StateAt("short", now.Add(time.Minute)); s != breaker.Closed {
		t.Errorf("breaker whose open period ended before the restore: %v, want closed", s)
	}
	if s, _ := set.StateAt("closed", now); s != breaker.Closed {
		t.Errorf("closed breaker after restart: %v", s)
	}
}

// TestModelLockoutRestoredUntilItsEnd: model, family and exact locks come
// back with their end and reason; a lock that ended before the restart
// does not, and a cleared one does not.
func TestModelLockoutRestoredUntilItsEnd(t *testing.T) {
	st, path := open(t, sqlitestate.Options{})
	cfg := lockout.Config{Enabled: true, OnChange: st.OnLockoutChange}
	lk := lockout.New(cfg)
	model := lk.RecordFailureAt(lockout.Failure{Provider: "p", Connection: "c1", Model: "m-404", Status: 404}, t0)
	family := lk.RecordFailureAt(lockout.Failure{Provider: "codex", Connection: "c1", Model: "gpt-5-mini", Status: 429, Cooldown: time.Hour}, t0)
	exact := lk.RecordFailureAt(lockout.Failure{Provider: "p", Connection: "c1", Model: " Big-Model ", Status: 503}, t0)
	lk.RecordFailureAt(lockout.Failure{Provider: "p", Connection: "c2", Model: "gone", Status: 404}, t0)
	lk.ClearAt("p", "c2", "gone", t0)
	short := lk.LockAt(lockout.Failure{Provider: "p", Connection: "c3", Model: "brief", Status: 404, Cooldown: 10 * time.Second}, t0)
	if !model.Locked || !family.Locked || !exact.Locked || !short.Locked {
		t.Fatalf("setup: %+v %+v %+v %+v", model, family, exact, short)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = reopen(t, path, sqlitestate.Options{})
	lk = lockout.New(lockout.Config{Enabled: true, OnChange: st.OnLockoutChange})
	now := t0.Add(30 * time.Second)
	if err := st.Restore(sqlitestate.Layers{Lockouts: lk}, now); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		provider, conn, model string
		want                  lockout.Result
		reason                lockout.Reason
	}{
		{"p", "c1", "m-404", model, lockout.ReasonForStatus(404)},
		{"codex", "c1", "gpt-5-mini", family, lockout.ReasonForStatus(429)},
		{"p", "c1", "big-model", exact, lockout.ReasonForStatus(503)},
	} {
		until, reason, locked := lk.LockedAt(c.provider, c.conn, c.model, now)
		if !locked || !until.Equal(c.want.Until) || reason != c.reason {
			t.Errorf("%s/%s after restart: locked %v until %v (%s); want until %v (%s)", c.provider, c.model, locked, until, reason, c.want.Until, c.reason)
		}
		if _, _, locked := lk.LockedAt(c.provider, c.conn, c.model, c.want.Until.Add(time.Nanosecond)); locked {
			t.Errorf("%s/%s still locked after its end", c.provider, c.model)
		}
	}
	if _, _, locked := lk.LockedAt("p", "c2", "gone", now); locked {
		t.Errorf("a cleared lock came back")
	}
	if _, _, locked := lk.LockedAt("p", "c3", "brief", now); locked {
		t.Errorf("a lock that ended before the restart came back")
	}
}
