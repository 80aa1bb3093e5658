package sqlitestate_test

import (
	"testing"
	"time"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo/sqlitestate"
	"github.com/routeguard/routeguard/lockout"
)

// countingSet is a breaker Set whose closed breakers open at 5 failures
// (degraded from 2), and whose rate-limit failures open at 2.
func countingSet(st *sqlitestate.State) *breaker.Set {
	p := breaker.Profile{OpenAt: 5, DegradedAt: 2, Reset: time.Minute}
	p.Kinds[breaker.KindRateLimit].OpenAt = 2
	return breaker.NewSet(breaker.Config{APIKey: p, OnChange: st.OnBreakerChange})
}

// TestBreakerCountsSurviveRestart: a breaker one failure below its
// threshold, and one a rate-limit failure below its kind's threshold, open
// on the next failure after a restart, as they would have without it; the
// counts reached the file without a state change (the writer reads the Set
// handed to Restore).
func TestBreakerCountsSurviveRestart(t *testing.T) {
	clk := t0.Add(5 * time.Second)
	st, path := open(t, sqlitestate.Options{Clock: fixedClock(&clk)})
	set := countingSet(st)
	if err := st.Restore(sqlitestate.Layers{Breakers: set}, t0); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		fail(set, "four", t0.Add(time.Duration(i)*time.Second))
	}
	set.ReportAt("kind", breaker.Report{Outcome: breaker.Failure, Kind: breaker.KindRateLimit}, t0)
	if s, _ := set.StateAt("four", t0.Add(5*time.Second)); s != breaker.Degraded {
		t.Fatalf("setup: %v", s)
	}
	if err := st.Flush(bg); err != nil {
		t.Fatal(err)
	}
	// A crash now: nothing after the flush, no Close.
	crashed := st
	st = reopen(t, path, sqlitestate.Options{})
	set = countingSet(st)
	now := t0.Add(10 * time.Second)
	if err := st.Restore(sqlitestate.Layers{Breakers: set}, now); err != nil {
		t.Fatal(err)
	}
	crashed.Close()
	snap := set.SnapshotAt(now)
	if len(snap) != 2 || snap[0].Provider != "four" || snap[0].Failures != 4 || snap[1].KindFailures[breaker.KindRateLimit] != 1 {
		t.Fatalf("restored records %+v", snap)
	}
	fail(set, "four", now)
	if s, _ := set.StateAt("four", now); s != breaker.Open {
		t.Errorf("breaker 4 of 5 before the restart, one failure after: %v, want open", s)
	}
	set.ReportAt("kind", breaker.Report{Outcome: breaker.Failure, Kind: breaker.KindRateLimit}, now)
	if s, _ := set.StateAt("kind", now); s != breaker.Open {
		t.Errorf("rate-limit count 1 of 2 before the restart, one after: %v, want open", s)
	}
}

// TestBreakerPollWritesOnlyChanges: the writer's read of the Set queues a
// breaker only when its record changed, and the deletion of one the Set
// reset.
func TestBreakerPollWritesOnlyChanges(t *testing.T) {
	clk := t0
	st, _ := open(t, sqlitestate.Options{Clock: fixedClock(&clk)})
	set := countingSet(st)
	if err := st.Restore(sqlitestate.Layers{Breakers: set}, t0); err != nil {
		t.Fatal(err)
	}
	fail(set, "p", t0)
	if err := st.Flush(bg); err != nil {
		t.Fatal(err)
	}
	w := st.Stats().Written
	if w != 1 {
		t.Fatalf("first flush wrote %d rows, want 1", w)
	}
	for range 3 {
		if err := st.Flush(bg); err != nil {
			t.Fatal(err)
		}
	}
	if got := st.Stats().Written; got != w {
		t.Fatalf("flushes with nothing changed wrote %d rows", got-w)
	}
	set.ResetAt("p", t0)
	if err := st.Flush(bg); err != nil {
		t.Fatal(err)
	}
	if got := st.Stats().Written; got != w+1 {
		t.Fatalf("reset wrote %d rows, want 1 (the delete)", got-w)
	}
}

// TestLockoutEscalationSurvivesRestart: a model locked for the third time
// in a row comes back locked until its end, and its next failure after the
// lock escalates to the fourth level, as without the restart; so does a
// count whose lock ended before the restart.
func TestLockoutEscalationSurvivesRestart(t *testing.T) {
	st, path := open(t, sqlitestate.Options{})
	cfg := lockout.Config{Enabled: true, OnChange: st.OnLockoutChange}
	lk := lockout.New(cfg)
	lived := lockout.New(lockout.Config{Enabled: true})
	f := lockout.Failure{Provider: "p", Connection: "c1", Model: "m", Status: 503}
	g := lockout.Failure{Provider: "p", Connection: "c2", Model: "m", Status: 503}
	at := t0
	for _, d := range []time.Duration{0, 120*time.Second + 1, 240*time.Second + 1} {
		at = at.Add(d)
		for _, l := range []*lockout.Lockout{lk, lived} {
			l.RecordFailureAt(f, at)
			l.RecordFailureAt(g, at.Add(-10*time.Minute))
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = reopen(t, path, sqlitestate.Options{})
	lk = lockout.New(lockout.Config{Enabled: true, OnChange: st.OnLockoutChange})
	now := at.Add(time.Minute) // c1 still locked (480 s), c2's lock over
	if err := st.Restore(sqlitestate.Layers{Lockouts: lk}, now); err != nil {
		t.Fatal(err)
	}
	wantUntil, _, _ := lived.LockedAt("p", "c1", "m", now)
	if until, _, locked := lk.LockedAt("p", "c1", "m", now); !locked || !until.Equal(wantUntil) {
		t.Fatalf("c1 after restart: locked %v until %v, want until %v", locked, until, wantUntil)
	}
	if _, _, locked := lk.LockedAt("p", "c2", "m", now); locked {
		t.Fatal("c2's ended lock came back")
	}
	next := at.Add(9 * time.Minute)
	for _, ff := range []lockout.Failure{f, g} {
		want := lived.RecordFailureAt(ff, next)
		got := lk.RecordFailureAt(ff, next)
		if got != want || got.FailureCount != 4 {
			t.Errorf("%s: next failure after restart %+v, want %+v (level 4)", ff.Connection, got, want)
		}
	}
}

// TestGateRestoredWithRemainingTime: a provider and a connection cooling
// before a restart cool after it until the same instants; an entry whose
// cooldown ended before the restart is not cooling; a gate handed to
// Restore has its counts written without a cooldown change.
func TestGateRestoredWithRemainingTime(t *testing.T) {
	newGate := func(st *sqlitestate.State) *breaker.Gate {
		return breaker.NewGate(breaker.GateConfig{Enabled: true, OnChange: st.OnGateChange,
			APIKey: breaker.WindowProfile{Threshold: 2, Window: time.Minute, Cooldown: 40 * time.Second}})
	}
	clk := t0.Add(time.Second)
	st, path := open(t, sqlitestate.Options{Clock: fixedClock(&clk)})
	g := newGate(st)
	if err := st.Restore(sqlitestate.Layers{Gate: g}, t0); err != nil {
		t.Fatal(err)
	}
	g.RecordFailureAt("hot", "c1", t0)
	g.RecordFailureAt("hot", "c1", t0.Add(time.Second)) // cools until t0+41 s; c1 10 s
	g.RecordFailureAt("brief", "", t0.Add(-time.Minute))
	g.RecordFailureAt("brief", "", t0.Add(-time.Minute)) // cooled until t0-20 s
	g.RecordFailureAt("window", "", t0)                  // 1 of 2: no cooldown change
	if err := st.Flush(bg); err != nil {
		t.Fatal(err)
	}
	crashed := st
	now := t0.Add(2 * time.Second)
	st = reopen(t, path, sqlitestate.Options{Clock: fixedClock(&now)})
	defer crashed.Close()
	g = newGate(st)
	if err := st.Restore(sqlitestate.Layers{Gate: g}, now); err != nil {
		t.Fatal(err)
	}
	if until, blocked := g.BlockedUntilAt("hot", "", now); !blocked || !until.Equal(t0.Add(41*time.Second)) {
		t.Errorf("provider after restart: blocked %v until %v, want until t0+41s (39 s left)", blocked, until)
	}
	if until, blocked := g.BlockedUntilAt("other", "", now); blocked {
		t.Errorf("another provider blocked until %v", until)
	}
	if _, blocked := g.BlockedUntilAt("brief", "", now); blocked {
		t.Error("an ended cooldown came back")
	}
	snap := g.SnapshotAt(now)
	var conn breaker.Record
	for _, r := range snap {
		if r.Connection == "c1" {
			conn = r
		}
	}
	if conn.Failures != 2 || !conn.Until.Equal(t0.Add(11*time.Second)) {
		t.Errorf("connection after restart %+v, want 2 failures, cooling until t0+11s", conn)
	}
	g.RecordFailureAt("window", "", now)
	if until, blocked := g.BlockedUntilAt("window", "", now); !blocked || !until.Equal(now.Add(40*time.Second)) {
		t.Errorf("provider 1 of 2 before the restart, one failure after: blocked %v until %v", blocked, until)
	}
}
