package sqlitestate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/affinity/affinitytest"
	"github.com/routeguard/routeguard/combo/sqlitestate"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/cooldown/cooldowntest"
)

func TestCooldownStoreConformance(t *testing.T) {
	cooldowntest.Run(t, func() cooldown.Store {
		st, _ := open(t, sqlitestate.Options{})
		return st.Cooldowns()
	})
}

func TestAffinityStoreConformance(t *testing.T) {
	affinitytest.Run(t, func() affinity.Store {
		st, _ := open(t, sqlitestate.Options{})
		return st.Pins()
	})
}

// fixedClock returns a clock reading *at.
func fixedClock(at *time.Time) func() time.Time { return func() time.Time { return *at } }

// TestCooldownsRestoredWithRemainingTime: a cooling connection keeps its
// end, a banned one stays banned, credits with a recovery time keep it,
// and an entry whose cooldown is over is not restored.
func TestCooldownsRestoredWithRemainingTime(t *testing.T) {
	now := t0
	o := sqlitestate.Options{Clock: fixedClock(&now)}
	st, path := open(t, o)
	cd := cooldown.New(cooldown.Config{Store: st.Cooldowns()})
	cd.FailAt("cooling", cooldown.Failure{Status: 503, Cooldown: time.Minute}, t0)
	cd.FailAt("banned", cooldown.Failure{Status: 403, Permanent: true}, t0)
	cd.FailAt("credits", cooldown.Failure{Status: 402, CreditsExhausted: true, RecoverAt: t0.Add(time.Hour)}, t0)
	cd.FailAt("short", cooldown.Failure{Status: 503, Cooldown: time.Second}, t0)
	want := map[string]cooldown.Status{}
	for _, c := range []string{"cooling", "banned", "credits"} {
		want[c] = cd.StatusAt(c, t0.Add(10*time.Second))
	}
	if want["cooling"].State != cooldown.Cooling || want["banned"].State != cooldown.Banned || want["credits"].State != cooldown.CreditsExhausted {
		t.Fatalf("setup: statuses %+v", want)
	}
	if err := st.Close(); err != nil { // flushes the outbox
		t.Fatal(err)
	}

	now = t0.Add(10 * time.Second)
	st = reopen(t, path, o)
	cd = cooldown.New(cooldown.Config{Store: st.Cooldowns()})
	for c, w := range want {
		got := cd.StatusAt(c, now)
		if got.State != w.State || !got.Until.Equal(w.Until) || got.Reason != w.Reason || got.Level != w.Level {
			t.Errorf("%s after restart = %v, want %v", c, got, w)
		}
	}
	if got := cd.StatusAt("cooling", now); got.Wait(now) != 50*time.Second {
		t.Errorf("cooling connection waits %v after restart, want the remaining 50s", got.Wait(now))
	}
	if _, ok := st.Cooldowns().Load("short"); ok {
		t.Errorf("an entry whose cooldown ended before the restart was restored")
	}
	if err := cd.CheckAt("banned", now.Add(365*24*time.Hour)); !errors.Is(err, cooldown.ErrUnavailable) {
		t.Errorf("banned connection a year later = %v, want ErrUnavailable", err)
	}
}

// TestCooldownResetAndForgetDeleteRows: a reset that leaves nothing, or
// ForgetAt, deletes the connection's row.
func TestCooldownResetAndForgetDeleteRows(t *testing.T) {
	now := t0
	o := sqlitestate.Options{Clock: fixedClock(&now)}
	st, path := open(t, o)
	cd := cooldown.New(cooldown.Config{Store: st.Cooldowns()})
	cd.FailAt("a", cooldown.Failure{Status: 403, Permanent: true}, t0)
	cd.FailAt("b", cooldown.Failure{Status: 403, Permanent: true}, t0)
	if err := st.Flush(bg); err != nil {
		t.Fatal(err)
	}
	cd.ResetAt(cooldown.Selector{IDs: []string{"a"}}, t0)
	cd.ForgetAt("b", t0)
	st.Close()
	st = reopen(t, path, o)
	for _, c := range []string{"a", "b"} {
		if e, ok := st.Cooldowns().Load(c); ok {
			t.Errorf("%s restored after reset/forget: %+v", c, e)
		}
	}
}

// TestPinsRestoredUntilExpiry: live pins come back with their times, dead
// ones do not, and an unpinned session stays unpinned.
func TestPinsRestoredUntilExpiry(t *testing.T) {
	now := t0
	o := sqlitestate.Options{Clock: fixedClock(&now)}
	st, path := open(t, o)
	pins := affinity.New(affinity.Config{TTL: time.Hour, Store: st.Pins()})
	short := affinity.New(affinity.Config{TTL: time.Minute, Store: st.Pins()})
	keyA, _ := affinity.NewKey("header", "session-a")
	keyB, _ := affinity.NewKey("header", "session-b")
	keyC, _ := affinity.NewKey("header", "session-c")
	cands := []affinity.Candidate{{Connection: "c1", Priority: 1}, {Connection: "c2", Priority: 2}}
	connA, _ := pins.SelectAt("p", keyA, cands, t0)
	short.SelectAt("p", keyB, cands, t0)
	pins.SelectAt("p", keyC, cands, t0)
	pins.UnpinAt("p", keyC, t0)
	before, _ := pins.LookupAt("p", keyA, t0)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	now = t0.Add(2 * time.Minute)
	st = reopen(t, path, o)
	pins = affinity.New(affinity.Config{TTL: time.Hour, Store: st.Pins()})
	got, ok := pins.LookupAt("p", keyA, now)
	if !ok || got.Connection != connA || !got.Expires.Equal(before.Expires) || !got.Created.Equal(before.Created) || !got.LastUsed.Equal(before.LastUsed) {
		t.Fatalf("pin A after restart = %+v, %v; want %+v", got, ok, before)
	}
	if _, ok := pins.LookupAt("p", keyB, now); ok {
		t.Fatalf("pin B, expired before the restart, was restored")
	}
	if _, ok := pins.LookupAt("p", keyC, now); ok {
		t.Fatalf("pin C, removed before the restart, was restored")
	}
}

// TestOutboxCoalescesPerKey: many changes of one connection are one row in
// the outbox and one row written.
func TestOutboxCoalescesPerKey(t *testing.T) {
	st, _ := open(t, sqlitestate.Options{})
	cd := cooldown.New(cooldown.Config{Store: st.Cooldowns()})
	for i := range 500 {
		at := t0.Add(time.Duration(i) * time.Minute)
		cd.FailAt("c1", cooldown.Failure{Status: 503, Cooldown: time.Second}, at)
		cd.SucceedAt("c1", at.Add(2*time.Second))
		cd.FailAt("c1", cooldown.Failure{Status: 503, Cooldown: time.Second}, at.Add(3*time.Second))
	}
	if p := st.Stats().Pending; p != 1 {
		t.Fatalf("pending = %d after 1500 changes of one connection, want 1", p)
	}
	if err := st.Flush(bg); err != nil {
		t.Fatal(err)
	}
	if s := st.Stats(); s.Written != 1 || s.Batches != 1 || s.Pending != 0 {
		t.Fatalf("stats after flush = %+v, want 1 row in 1 batch", s)
	}
}

// TestOutboxBoundedDropsNewKeys: without a writer, the outbox holds at most
// MaxPending keys; further keys are dropped and counted, while changes of
// pending keys still coalesce.
func TestOutboxBoundedDropsNewKeys(t *testing.T) {
	st, _ := open(t, sqlitestate.Options{MaxPending: 16})
	cd := cooldown.New(cooldown.Config{Store: st.Cooldowns()})
	for i := range 40 {
		cd.FailAt(string(rune('A'+i)), cooldown.Failure{Status: 403, Permanent: true}, t0)
	}
	cd.FailAt("A", cooldown.Failure{Status: 401, Expired: true}, t0) // already terminal: no change
	if s := st.Stats(); s.Pending != 16 || s.Dropped != 24 {
		t.Fatalf("stats = %+v, want 16 pending and 24 dropped", s)
	}
}

// TestOutboxBatches: a flush of more than MaxBatch rows uses several
// transactions.
func TestOutboxBatches(t *testing.T) {
	st, _ := open(t, sqlitestate.Options{MaxBatch: 10})
	cd := cooldown.New(cooldown.Config{Store: st.Cooldowns()})
	for i := range 25 {
		cd.FailAt(string(rune('A'+i)), cooldown.Failure{Status: 403, Permanent: true}, t0)
	}
	if err := st.Flush(bg); err != nil {
		t.Fatal(err)
	}
	if s := st.Stats(); s.Written != 25 || s.Batches != 3 {
		t.Fatalf("stats = %+v, want 25 rows in 3 batches", s)
	}
}

// TestRunWritesBehindAndCloseJoins: Run writes changes within its interval,
// refuses a second Run, and Close stops it and waits for it (goleak checks
// nothing is left).
func TestRunWritesBehindAndCloseJoins(t *testing.T) {
	st, path := open(t, sqlitestate.Options{FlushInterval: 5 * time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- st.Run(context.Background()) }()
	cd := cooldown.New(cooldown.Config{Store: st.Cooldowns()})
	cd.FailAt("c1", cooldown.Failure{Status: 403, Permanent: true}, t0)
	deadline := time.Now().Add(5 * time.Second)
	for st.Stats().Written == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Run wrote nothing within 5s")
		}
		time.Sleep(time.Millisecond)
	}
	// A second Run is refused while the first runs.
	if err := st.Run(context.Background()); !errors.Is(err, sqlitestate.ErrRunning) {
		t.Fatalf("second Run = %v, want ErrRunning", err)
	}
	cd.FailAt("c2", cooldown.Failure{Status: 403, Permanent: true}, t0)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil after Close", err)
	}
	if err := st.Run(context.Background()); !errors.Is(err, sqlitestate.ErrClosed) {
		t.Fatalf("Run after Close = %v, want ErrClosed", err)
	}
	st = reopen(t, path, sqlitestate.Options{})
	for _, c := range []string{"c1", "c2"} {
		if e, ok := st.Cooldowns().Load(c); !ok || e.State != cooldown.Banned {
			t.Fatalf("%s after Close and reopen = %+v, %v; want banned", c, e, ok)
		}
	}
}

// TestRunStopsWithContext: cancelling ctx stops Run after a last flush.
func TestRunStopsWithContext(t *testing.T) {
	st, _ := open(t, sqlitestate.Options{FlushInterval: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- st.Run(ctx) }()
	cd := cooldown.New(cooldown.Config{Store: st.Cooldowns()})
	cd.FailAt("c1", cooldown.Failure{Status: 403, Permanent: true}, t0)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if s := st.Stats(); s.Written != 1 || s.Pending != 0 {
		t.Fatalf("stats after Run returned = %+v, want the change written", s)
	}
}

// TestSweepDropsExpiredRows: the sweep deletes efficiency rows that have
// expired at the clock's now and keeps terminal ones.
func TestSweepDropsExpiredRows(t *testing.T) {
	now := t0
	st, _ := open(t, sqlitestate.Options{Clock: fixedClock(&now)})
	cd := cooldown.New(cooldown.Config{Store: st.Cooldowns()})
	pins := affinity.New(affinity.Config{TTL: time.Minute, Store: st.Pins()})
	key, _ := affinity.NewKey("header", "s")
	pins.SelectAt("p", key, []affinity.Candidate{{Connection: "c1"}}, t0)
	cd.FailAt("cool", cooldown.Failure{Status: 503, Cooldown: 30 * time.Second}, t0)
	cd.FailAt("ban", cooldown.Failure{Status: 403, Permanent: true}, t0)
	if err := st.Flush(bg); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Sweep(bg); err != nil || n != 0 {
		t.Fatalf("sweep at T0 = %d, %v; want 0", n, err)
	}
	now = t0.Add(2 * time.Minute)
	if n, err := st.Sweep(bg); err != nil || n != 2 {
		t.Fatalf("sweep at T0+2m = %d, %v; want 2 (the cooldown and the pin)", n, err)
	}
}
