package redisstate_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo/redisstate"
	"github.com/routeguard/routeguard/combo/redisstate/internal/redistest"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/queue/slotstore"
)

// degradedLog records OnDegraded calls.
type degradedLog struct {
	mu  sync.Mutex
	got []bool
}

func (d *degradedLog) hook(v bool) {
	d.mu.Lock()
	d.got = append(d.got, v)
	d.mu.Unlock()
}

func (d *degradedLog) all() []bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]bool(nil), d.got...)
}

// eventually polls f every 20 ms for at most limit.
func within(t *testing.T, limit time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFaultStopCont freezes a private redis-server with SIGSTOP for 5 s
// under load: every call gives up within its timeout, the breaker opens,
// lease calls answer 503, fences keep admitting the mirrored lease,
// capped slots fall back to local caps, the goroutine count stays flat,
// and after SIGCONT the state recovers by itself.
func TestFaultStopCont(t *testing.T) {
	srv := redistest.Start(t)
	const timeout = 200 * time.Millisecond
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1, PoolSize: 16})
	defer rdb.Close()
	set := breaker.NewSet(breaker.Config{Profiles: map[string]breaker.Profile{"redis": {OpenAt: 5, Reset: time.Second, MaxMultiplier: 1}}})
	var deg degradedLog
	st := newState(t, rdb, redisstate.Config{Timeout: timeout, FenceStaleness: time.Second,
		ReleaseQuarantine: 1500 * time.Millisecond, Breaker: set, OnDegraded: deg.hook})
	ls := st.Leases()
	x := holder('X')
	lx, _, err := ls.Acquire(bg, x, "p", "c1", time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	x.Generation = lx.Generation

	base := runtime.NumGoroutine()
	srv.Signal(t, syscall.SIGSTOP)
	stopped := time.Now()
	cont := sync.OnceFunc(func() { srv.Signal(t, syscall.SIGCONT) })
	defer cont()

	const workers = 12
	var (
		wg        sync.WaitGroup
		slowest   atomic.Int64
		calls     atomic.Int64
		other     atomic.Value
		fenceFail atomic.Int64
		maxG      atomic.Int64
	)
	stop := make(chan struct{})
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := holder(byte('a' + i))
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				switch n % 3 {
				case 0:
					_, _, err := ls.Acquire(bg, h, "p", "w"+strconv.Itoa(i), time.Minute, start)
					if err != nil && !errors.Is(err, lease.ErrServiceUnavailable) {
						other.Store(err)
					}
				case 1:
					if err := ls.Fence(bg, x, "c1", start); err != nil {
						fenceFail.Add(1)
					}
				case 2:
					ok, _, _, err := st.Slots().TryAcquire(bg, "capped", 1, st.Holder("w"+strconv.Itoa(i)+"-"+strconv.Itoa(n)), start)
					if err != nil {
						other.Store(err)
					}
					if ok {
						st.Slots().Release(bg, "capped", st.Holder("w"+strconv.Itoa(i)+"-"+strconv.Itoa(n)), start)
					}
				}
				took := time.Since(start)
				calls.Add(1)
				for {
					m := slowest.Load()
					if int64(took) <= m || slowest.CompareAndSwap(m, int64(took)) {
						break
					}
				}
				if g := int64(runtime.NumGoroutine()); g > maxG.Load() {
					maxG.Store(g)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	within(t, 2*time.Second, "breaker open during SIGSTOP", func() bool {
		s, _ := set.StateAt("redis", time.Now())
		return s == breaker.Open
	})
	if !st.Degraded() {
		t.Fatalf("not degraded during SIGSTOP")
	}
	_, _, err = ls.Acquire(bg, holder('Y'), "p", "c2", time.Minute, time.Now())
	unavailable(t, "Acquire during SIGSTOP", err)
	time.Sleep(5*time.Second - time.Since(stopped))
	cont()
	close(stop)
	wg.Wait()

	if e := other.Load(); e != nil {
		t.Fatalf("a call failed with something else than unavailability: %v", e)
	}
	if n := fenceFail.Load(); n != 0 {
		t.Fatalf("%d fences of the mirrored lease refused during the outage, want 0", n)
	}
	// Each call returns within its timeout (plus scheduling slack on a
	// loaded machine): nothing waits for the frozen server.
	if s := time.Duration(slowest.Load()); s > timeout+time.Second {
		t.Fatalf("slowest call took %v, want about the %v timeout", s, timeout)
	}
	// No pile-up: the workers, and not one goroutine per abandoned call.
	if g := maxG.Load(); g > int64(base+workers+20) {
		t.Fatalf("%d goroutines during the outage, %d before with %d workers: calls pile up", g, base, workers)
	}
	t.Logf("SIGSTOP 5 s: %d calls, slowest %v, goroutines %d (base %d + %d workers)",
		calls.Load(), time.Duration(slowest.Load()), maxG.Load(), base, workers)

	// Recovery: once the breaker lets a probe through, calls succeed and
	// the state is no longer degraded.
	within(t, 5*time.Second, "lease calls succeed after SIGCONT", func() bool {
		_, _, err := ls.Acquire(bg, holder('Y'), "p", "c2", time.Minute, time.Now())
		return err == nil
	})
	if st.Degraded() {
		t.Fatalf("still degraded after recovery")
	}
	if got := deg.all(); len(got) < 2 || !got[0] || got[len(got)-1] {
		t.Fatalf("OnDegraded calls %v, want true first and false last", got)
	}
}

// TestFaultClientPauseWrite pauses writes for 2 s: lease lifecycle calls
// give up at their deadline with a 503, a fence from a fresh mirror makes
// no remote call, an older one tries Redis, fails, and is still admitted
// until the lease's local expiry; after the pause everything works again.
func TestFaultClientPauseWrite(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rdb.Close()
	var cmds atomic.Int32
	rdb.AddHook(countHook{&cmds})
	st := newState(t, rdb, redisstate.Config{Timeout: 150 * time.Millisecond, FenceStaleness: 500 * time.Millisecond,
		ReleaseQuarantine: time.Second})
	ls := st.Leases()
	x := holder('X')
	lx, _, err := ls.Acquire(bg, x, "p", "c1", time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	x.Generation = lx.Generation
	verified := time.Now()
	srv.Command(t, "CLIENT", "PAUSE", "2000", "WRITE")
	paused := time.Now()

	start := time.Now()
	_, _, err = ls.Acquire(bg, holder('Y'), "p", "c2", time.Minute, start)
	unavailable(t, "Acquire during CLIENT PAUSE WRITE", err)
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Acquire took %v, want about the 150 ms timeout", took)
	}
	cmds.Store(0)
	if err := ls.Fence(bg, x, "c1", verified.Add(100*time.Millisecond)); err != nil || cmds.Load() != 0 {
		t.Fatalf("fresh fence = %v with %d commands, want admitted with 0", err, cmds.Load())
	}
	if err := ls.Fence(bg, x, "c1", verified.Add(time.Second)); err != nil {
		t.Fatalf("fence of the mirrored lease during the pause = %v, want admitted", err)
	}
	if err := ls.Fence(bg, x, "c1", lx.ExpiresAt); !errors.Is(err, lease.ErrServiceUnavailable) {
		t.Fatalf("fence at the lease's expiry during the pause = %v, want 503", err)
	}
	if took := time.Since(paused); took > 2*time.Second {
		t.Fatalf("the checks during the pause took %v, longer than the pause", took)
	}
	within(t, 5*time.Second, "acquire after the pause", func() bool {
		_, _, err := ls.Acquire(bg, holder('Y'), "p", "c2", time.Minute, time.Now())
		return err == nil
	})
}

// TestFaultBlackholedReplicaLosesSlots puts a TCP proxy that stops
// forwarding in front of replica A: A's renewals fail, the slot whose
// confirmed expiry passed is reported lost (so its request is cancelled),
// replica B takes the capped connection once the slot expired on the
// server, and when the network heals A's renewal reports the slot lost.
func TestFaultBlackholedReplicaLosesSlots(t *testing.T) {
	srv := redistest.Start(t)
	px := redistest.NewProxy(t, srv.Addr)
	ns := namespace()
	ra := redis.NewClient(&redis.Options{Addr: px.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	rb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer ra.Close()
	defer rb.Close()
	var degA degradedLog
	cfg := redisstate.Config{Namespace: ns, SlotTTL: time.Second, ClockSkew: 300 * time.Millisecond, Timeout: 100 * time.Millisecond}
	ca, cb := cfg, cfg
	ca.Replica, cb.Replica, ca.OnDegraded = "A", "B", degA.hook
	a, b := newState(t, ra, ca), newState(t, rb, cb)
	slot := slotstore.Slot{Conn: "c1", Holder: a.Holder("1")}
	start := time.Now()
	if ok, _, _, err := a.Slots().TryAcquire(bg, "c1", 1, slot.Holder, start); !ok || err != nil {
		t.Fatalf("A's acquire = %v, %v", ok, err)
	}
	px.Blackhole(true)
	if ok, _, _, err := b.Slots().TryAcquire(bg, "c1", 1, b.Holder("1"), time.Now()); ok || err != nil {
		t.Fatalf("B's acquire while A holds c1 = %v, %v; want refused", ok, err)
	}
	// Before the confirmed expiry less the skew: the renewal fails, nothing
	// is reported lost yet.
	lost, err := a.Slots().Renew(bg, []slotstore.Slot{slot}, start.Add(100*time.Millisecond))
	if !errors.Is(err, redisstate.ErrUnavailable) || len(lost) != 0 {
		t.Fatalf("A's renew through the black hole = %v, %v; want ErrUnavailable, nothing lost", lost, err)
	}
	// From expiry − skew on, the slot is reported lost.
	lost, err = a.Slots().Renew(bg, []slotstore.Slot{slot}, start.Add(700*time.Millisecond))
	if !errors.Is(err, redisstate.ErrUnavailable) || len(lost) != 1 || lost[0] != slot {
		t.Fatalf("A's renew past expiry − skew = %v, %v; want [%v] lost with ErrUnavailable", lost, err, slot)
	}
	if got := degA.all(); len(got) == 0 || !got[0] {
		t.Fatalf("A's OnDegraded calls %v, want degraded", got)
	}
	within(t, 3*time.Second, "B takes c1 once A's slot expired", func() bool {
		ok, _, _, err := b.Slots().TryAcquire(bg, "c1", 1, b.Holder("1"), time.Now())
		return ok && err == nil
	})
	px.Blackhole(false)
	within(t, 5*time.Second, "A's renewal answers after the network heals", func() bool {
		lost, err = a.Slots().Renew(bg, []slotstore.Slot{slot}, time.Now())
		return err == nil
	})
	if len(lost) != 1 || lost[0] != slot {
		t.Fatalf("A's renew after healing lost %v, want [%v]", lost, slot)
	}
}

// TestFaultLeaseStreamTrimmed empties the lease stream (XTRIM MAXLEN 0):
// leases are unaffected, and the next event's sequence number continues,
// so a reader sees the gap.
func TestFaultLeaseStreamTrimmed(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	ns := namespace()
	st := newState(t, rdb, redisstate.Config{Namespace: ns})
	ls := st.Leases()
	x, y := holder('X'), holder('Y')
	lx, _, err := ls.Acquire(bg, x, "p", "c1", time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	x.Generation = lx.Generation
	stream := "{" + ns + ":lease}:ev"
	before, err := rdb.XRevRangeN(context.Background(), stream, "+", "-", 1).Result()
	if err != nil || len(before) != 1 {
		t.Fatalf("last event before the trim: %v, %v", before, err)
	}
	if err := rdb.XTrimMaxLen(context.Background(), stream, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := ls.Fence(bg, x, "c1", time.Now()); err != nil {
		t.Fatalf("fence after the trim = %v", err)
	}
	if _, _, err := ls.Acquire(bg, y, "p", "c2", time.Minute, time.Now()); err != nil {
		t.Fatal(err)
	}
	after, err := rdb.XRange(context.Background(), stream, "-", "+").Result()
	if err != nil || len(after) != 1 {
		t.Fatalf("stream after the trim: %v, %v; want the one new event", after, err)
	}
	prev, _ := strconv.Atoi(before[0].Values["seq"].(string))
	next, _ := strconv.Atoi(after[0].Values["seq"].(string))
	if next != prev+1 || after[0].ID <= before[0].ID {
		t.Fatalf("event after the trim has seq %d id %s, the last before seq %d id %s: want seq+1 and a later id",
			next, after[0].ID, prev, before[0].ID)
	}
}
