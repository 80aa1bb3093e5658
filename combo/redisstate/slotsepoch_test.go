package redisstate_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo/redisstate"
	"github.com/routeguard/routeguard/combo/redisstate/internal/redistest"
	"github.com/routeguard/routeguard/queue/queuetest"
	"github.com/routeguard/routeguard/queue/slotstore"
)

// TestSlotsReseedAfterLoss empties miniredis (a restart without data)
// while replica A holds the one slot of c1: B, which knew the dataset,
// is refused while A still holds; A's next renewal stores its slot again
// with its old expiry; after A releases, new holders wait for the hold
// (SlotTTL + ClockSkew after the loss was seen) and are then served.
func TestSlotsReseedAfterLoss(t *testing.T) {
	mr, _ := newMini(t)
	ns := namespace()
	cfg := redisstate.Config{Namespace: ns, CallerClock: true, SlotTTL: 10 * time.Second, ClockSkew: time.Second}
	client := func() *redis.Client {
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		return rdb
	}
	a, b := newState(t, client(), cfg), newState(t, client(), cfg)
	t0 := queuetest.T0
	slot := slotstore.Slot{Conn: "c1", Holder: "A:1"}
	if ok, _, _, err := a.Slots().TryAcquire(bg, "c1", 1, slot.Holder, t0); !ok || err != nil {
		t.Fatalf("A's acquire = %v, %v", ok, err)
	}
	if ok, held, retry, err := b.Slots().TryAcquire(bg, "c1", 1, "B:1", t0); ok || held != 1 || !retry.Equal(t0.Add(10*time.Second)) || err != nil {
		t.Fatalf("B's acquire before the loss = %v, %d, %v, %v; want refused until %v", ok, held, retry, err, t0.Add(10*time.Second))
	}
	mr.FlushAll()

	t1 := t0.Add(2 * time.Second)
	hold := t1.Add(11 * time.Second) // SlotTTL + ClockSkew after B saw the loss
	ok, held, retry, err := b.Slots().TryAcquire(bg, "c1", 1, "B:1", t1)
	if ok || held != 0 || !retry.Equal(hold) || err != nil {
		t.Fatalf("B's acquire after the loss = %v, %d, %v, %v; want refused until %v", ok, held, retry, err, hold)
	}
	t2 := t0.Add(3 * time.Second)
	if lost, err := a.Slots().Renew(bg, []slotstore.Slot{slot}, t2); len(lost) != 0 || err != nil {
		t.Fatalf("A's renew after the loss = %v, %v; want its slot re-seeded", lost, err)
	}
	if got := mr.Exists("{" + ns + ":sem:c1}"); !got {
		t.Fatalf("c1's set was not re-seeded")
	}
	if score, err := mr.ZScore("{"+ns+":sem:c1}", slot.Holder); err != nil || score != float64(t2.Add(10*time.Second).UnixMilli()) {
		t.Fatalf("A's slot score %v, %v; want renewed to %d", score, err, t2.Add(10*time.Second).UnixMilli())
	}
	if ok, held, _, err := b.Slots().TryAcquire(bg, "c1", 1, "B:1", t2); ok || held != 1 || err != nil {
		t.Fatalf("B's acquire while A's re-seeded slot lives = %v, %d, %v; want refused", ok, held, err)
	}
	if err := a.Slots().Release(bg, "c1", slot.Holder, t2); err != nil {
		t.Fatal(err)
	}
	if ok, held, retry, err := b.Slots().TryAcquire(bg, "c1", 1, "B:1", hold.Add(-time.Millisecond)); ok || held != 0 || !retry.Equal(hold) || err != nil {
		t.Fatalf("B's acquire just before the hold ends = %v, %d, %v, %v; want refused until %v", ok, held, retry, err, hold)
	}
	if ok, held, _, err := b.Slots().TryAcquire(bg, "c1", 1, "B:1", hold); !ok || held != 1 || err != nil {
		t.Fatalf("B's acquire when the hold ends = %v, %d, %v; want granted", ok, held, err)
	}
	// A connection first used during the hold is held off too.
	if ok, _, _, err := b.Slots().TryAcquire(bg, "c9", 1, "B:2", t2); ok || err != nil {
		t.Fatalf("c9 during the hold = %v, %v; want refused (the hold covers every set)", ok, err)
	}
}

// TestSlotsReseedKeepsExpiry: a slot re-seeded by an acquire of its
// holder's process keeps the expiry it had, one that expired in the
// meantime is not stored again, and one that no longer fits is reported
// lost.
func TestSlotsReseedKeepsExpiry(t *testing.T) {
	mr, rdb := newMini(t)
	ns := namespace()
	a := newState(t, rdb, redisstate.Config{Namespace: ns, CallerClock: true, SlotTTL: 10 * time.Second, ClockSkew: time.Second})
	t0 := queuetest.T0
	for i, c := range []string{"c1", "c2"} {
		if ok, _, _, err := a.Slots().TryAcquire(bg, c, 2, "A:"+c, t0.Add(time.Duration(i)*5*time.Second)); !ok || err != nil {
			t.Fatalf("acquire %s = %v, %v", c, ok, err)
		}
	}
	mr.FlushAll()
	// At t0+12s the slot of c1 (expiry t0+10s) is gone for good; c2's
	// (t0+15s) is stored again, before A's new slot on c3 is considered.
	now := t0.Add(12 * time.Second)
	if ok, _, _, err := a.Slots().TryAcquire(bg, "c3", 1, "A:c3", now); ok || err != nil {
		t.Fatalf("A's acquire of c3 during the hold = %v, %v; want refused", ok, err)
	}
	if mr.Exists("{" + ns + ":sem:c1}") {
		t.Fatalf("c1's expired slot was re-seeded")
	}
	if score, err := mr.ZScore("{"+ns+":sem:c2}", "A:c2"); err != nil || score != float64(t0.Add(15*time.Second).UnixMilli()) {
		t.Fatalf("c2's re-seeded score %v, %v; want its old expiry %d", score, err, t0.Add(15*time.Second).UnixMilli())
	}
	lost, err := a.Slots().Renew(bg, []slotstore.Slot{{Conn: "c1", Holder: "A:c1"}, {Conn: "c2", Holder: "A:c2"}}, now)
	if err != nil || !slices.Equal(lost, []slotstore.Slot{{Conn: "c1", Holder: "A:c1"}}) {
		t.Fatalf("Renew after the re-seed = %v, %v; want c1's slot lost", lost, err)
	}

	// A process that never saw the old dataset cannot know it was lost
	// and takes a free slot; the holder's re-seed finds no room, and its
	// renewal reports the slot lost so that its request is cancelled.
	mr.FlushAll()
	rf := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rf.Close()
	f := newState(t, rf, redisstate.Config{Namespace: ns, CallerClock: true, SlotTTL: 10 * time.Second})
	for _, h := range []string{"F:1", "F:2"} { // c2's limit is 2
		if ok, _, _, err := f.Slots().TryAcquire(bg, "c2", 2, h, now); !ok || err != nil {
			t.Fatalf("a fresh process's acquire = %v, %v; want granted", ok, err)
		}
	}
	c2 := slotstore.Slot{Conn: "c2", Holder: "A:c2"}
	if lost, err := a.Slots().Renew(bg, []slotstore.Slot{c2}, now.Add(time.Second)); err != nil || !slices.Equal(lost, []slotstore.Slot{c2}) {
		t.Fatalf("A's renew after the fresh process took c2 = %v, %v; want its slot lost", lost, err)
	}
}

// TestSlotsReseedRealRestart: on a private redis-server restarted empty
// (SHUTDOWN NOSAVE), replica B, refused c1 (cap 1) while A holds it, is
// still refused after the restart, before and after A's renewal stores
// the slot again, and past the hold; B gets c1 once A released it.
func TestSlotsReseedRealRestart(t *testing.T) {
	srv := redistest.Start(t)
	ns := namespace()
	cfg := redisstate.Config{Namespace: ns, SlotTTL: 2 * time.Second, ClockSkew: 100 * time.Millisecond, FailClosed: true}
	ra := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	rb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer ra.Close()
	defer rb.Close()
	ca, cb := cfg, cfg
	ca.Replica, cb.Replica = "A", "B"
	a, b := newState(t, ra, ca), newState(t, rb, cb)
	slot := slotstore.Slot{Conn: "c1", Holder: a.Holder("1")}
	if ok, _, _, err := a.Slots().TryAcquire(bg, "c1", 1, slot.Holder, time.Now()); !ok || err != nil {
		t.Fatalf("A's acquire = %v, %v", ok, err)
	}
	if ok, _, _, err := b.Slots().TryAcquire(bg, "c1", 1, b.Holder("1"), time.Now()); ok || err != nil {
		t.Fatalf("B's acquire before the restart = %v, %v; want refused", ok, err)
	}
	if lost, err := a.Slots().Renew(bg, []slotstore.Slot{slot}, time.Now()); len(lost) != 0 || err != nil {
		t.Fatalf("A's renewal = %v, %v", lost, err)
	}
	srv.Restart(t)
	lossSeen := time.Now()
	acquireB := func() (bool, error) {
		var ok bool
		var err error
		for range 50 { // until the breaker lets calls through again
			if ok, _, _, err = b.Slots().TryAcquire(bg, "c1", 1, b.Holder("1"), time.Now()); !errors.Is(err, redisstate.ErrUnavailable) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		return ok, err
	}
	if ok, err := acquireB(); ok || err != nil {
		t.Fatalf("B's acquire after the restart, before A renewed = %v, %v; want refused", ok, err)
	}
	within(t, 3*time.Second, "A's renewal re-seeds its slot", func() bool {
		lost, err := a.Slots().Renew(bg, []slotstore.Slot{slot}, time.Now())
		if len(lost) != 0 {
			t.Fatalf("A's renewal lost %v", lost)
		}
		return err == nil
	})
	if n := rb.ZCard(bg, "{"+ns+":sem:c1}").Val(); n != 1 {
		t.Fatalf("c1 holds %d slots after the re-seed, want 1", n)
	}
	// Past the hold, A's live slot alone keeps B out.
	for time.Since(lossSeen) < 2200*time.Millisecond {
		time.Sleep(300 * time.Millisecond)
		if lost, err := a.Slots().Renew(bg, []slotstore.Slot{slot}, time.Now()); len(lost) != 0 || err != nil {
			t.Fatalf("A's renewal = %v, %v", lost, err)
		}
	}
	if ok, err := acquireB(); ok || err != nil {
		t.Fatalf("B's acquire while A holds = %v, %v; want refused", ok, err)
	}
	if err := a.Slots().Release(bg, "c1", slot.Holder, time.Now()); err != nil {
		t.Fatal(err)
	}
	if ok, err := acquireB(); !ok || err != nil {
		t.Fatalf("B's acquire after A released = %v, %v; want granted", ok, err)
	}
}

// fakeUpstream counts the requests in flight and the most seen at once.
type fakeUpstream struct{ inflight, peak atomic.Int64 }

// call is one request that takes d, or ends when ctx does.
func (u *fakeUpstream) call(ctx context.Context, d time.Duration) {
	n := u.inflight.Add(1)
	for p := u.peak.Load(); n > p && !u.peak.CompareAndSwap(p, n); p = u.peak.Load() {
	}
	defer u.inflight.Add(-1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// TestSlotsCapHeldAcrossRealRestart: two replicas, four workers each,
// take turns on a connection with cap 1; each request takes 1 s on a
// fake upstream while its slot is renewed every 100 ms (SlotTTL 1 s), and
// a lost slot cancels it. The server restarts empty in the middle. The
// upstream never sees more than one request in flight, and requests are
// served again after the restart.
func TestSlotsCapHeldAcrossRealRestart(t *testing.T) {
	srv := redistest.Start(t)
	ns := namespace()
	cfg := redisstate.Config{Namespace: ns, SlotTTL: time.Second, ClockSkew: 100 * time.Millisecond, FailClosed: true}
	var up fakeUpstream
	var served, servedAfter, cancelled atomic.Int64
	var restarted atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for r := range 2 {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
		defer rdb.Close()
		c := cfg
		c.Replica = "R" + strconv.Itoa(r)
		// A breaker that does not open: calls go through as soon as the
		// server is back, while requests from before the restart still
		// run.
		c.Breaker = breaker.NewSet(breaker.Config{Profiles: map[string]breaker.Profile{"redis": {OpenAt: 1000, Reset: time.Second}}})
		st := newState(t, rdb, c)
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					holder := st.Holder(strconv.Itoa(w) + "-" + strconv.Itoa(i))
					ok, _, _, err := st.Slots().TryAcquire(bg, "c1", 1, holder, time.Now())
					if !ok || err != nil {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					req, stop := context.WithCancel(context.Background())
					var lost atomic.Bool
					renewed := make(chan struct{})
					go func() { // the renewal loop of this attempt
						defer close(renewed)
						slot := []slotstore.Slot{{Conn: "c1", Holder: holder}}
						tick := time.NewTicker(100 * time.Millisecond)
						defer tick.Stop()
						for {
							select {
							case <-req.Done():
								return
							case <-tick.C:
								if l, _ := st.Slots().Renew(bg, slot, time.Now()); len(l) > 0 {
									lost.Store(true)
									stop() // a lost slot cancels its request
									return
								}
							}
						}
					}()
					up.call(req, time.Second)
					stop()
					<-renewed
					served.Add(1)
					if lost.Load() {
						cancelled.Add(1)
						continue
					}
					if restarted.Load() {
						servedAfter.Add(1)
					}
					st.Slots().Release(bg, "c1", holder, time.Now())
				}
			}()
		}
	}
	time.Sleep(1500 * time.Millisecond)
	r0 := time.Now()
	srv.Restart(t)
	restarted.Store(true)
	t.Logf("restart took %v", time.Since(r0))
	time.Sleep(4 * time.Second)
	cancel()
	wg.Wait()
	if p := up.peak.Load(); p != 1 {
		t.Fatalf("peak in flight %d, want 1 (served %d, %d cancelled)", p, served.Load(), cancelled.Load())
	}
	if servedAfter.Load() == 0 {
		t.Fatalf("no request served after the restart (served %d, %d cancelled)", served.Load(), cancelled.Load())
	}
	t.Logf("served %d, %d after the restart, %d cancelled by a lost slot", served.Load(), servedAfter.Load(), cancelled.Load())
}
