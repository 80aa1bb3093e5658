package redisstate_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/routeguard/routeguard/combo/redisstate"
	"github.com/routeguard/routeguard/combo/redisstate/internal/redistest"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lease/leasetest"
)

func holder(c byte) lease.Holder {
	return lease.Holder{Owner: lease.HashOwner(leasetest.Owner(c)), APIKeyID: "k"}
}

// losses records OnDataLoss calls.
type losses struct {
	mu  sync.Mutex
	got []redisstate.DataLoss
}

func (l *losses) hook(e redisstate.DataLoss) {
	l.mu.Lock()
	l.got = append(l.got, e)
	l.mu.Unlock()
}

func (l *losses) all() []redisstate.DataLoss {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]redisstate.DataLoss(nil), l.got...)
}

// retry runs f until it returns something other than a 503 (Redis coming
// back), for at most 5 s.
func retry[T any](t *testing.T, step string, f func() (T, error)) (T, error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, err := f()
		if !errors.Is(err, lease.ErrServiceUnavailable) || time.Now().After(deadline) {
			return v, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// epochScenario runs the lost-dataset scenario on two replicas A and B of
// one Redis; lose empties it.
func epochScenario(t *testing.T, newClient func() redis.UniversalClient, lose func(), now func() time.Time, wait func(time.Duration), cfg redisstate.Config) {
	ns := namespace()
	var lossA, lossB losses
	var degradedA []bool
	ca, cb := cfg, cfg
	ca.Namespace, cb.Namespace = ns, ns
	ca.Replica, cb.Replica = "A", "B"
	ca.OnDataLoss, cb.OnDataLoss = lossA.hook, lossB.hook
	ca.OnDegraded = func(d bool) { degradedA = append(degradedA, d) }
	a := newState(t, newClient(), ca).Leases()
	b := newState(t, newClient(), cb).Leases()
	x, y, z, w := holder('X'), holder('Y'), holder('Z'), holder('W')
	lx, _, err := a.Acquire(bg, x, "p", "c1", time.Minute, now())
	if err != nil {
		t.Fatal(err)
	}
	// Generations rise: X's second lease has generation 2.
	x.Generation = lx.Generation
	if _, _, err := a.Release(bg, x, lease.ReasonOwnerExit, now()); err != nil {
		t.Fatal(err)
	}
	if lx, _, err = a.Acquire(bg, x, "p", "c1", time.Minute, now()); err != nil || lx.Generation != 2 {
		t.Fatalf("X's second acquire = %+v, %v; want generation 2", lx, err)
	}
	x.Generation = 2
	ly, _, err := a.Acquire(bg, y, "p", "c2", time.Minute, now())
	if err != nil {
		t.Fatal(err)
	}
	y.Generation = ly.Generation
	lz, _, err := b.Acquire(bg, z, "p", "c3", time.Minute, now())
	if err != nil {
		t.Fatal(err)
	}
	z.Generation = lz.Generation

	lose()

	// B notices first (on an acquire for W of A's connection c1): it
	// re-seeds Z, and refuses W, since A has not re-seeded c1 yet.
	_, err = retry(t, "B acquires c1 for W", func() (lease.Lease, error) {
		l, _, err := b.Acquire(bg, w, "p", "c1", time.Minute, now())
		return l, err
	})
	if !errors.Is(err, lease.ErrCapacityUnavailable) {
		t.Fatalf("B's acquire of c1 after the loss = %v, want CAPACITY_UNAVAILABLE (the hold)", err)
	}
	if got := lossB.all(); len(got) != 1 || got[0].Reseeded != 1 || got[0].Conflicts != 0 || got[0].Previous == got[0].Epoch || got[0].Err != nil {
		t.Fatalf("B's OnDataLoss = %+v, want one loss with 1 lease re-seeded", got)
	}
	// A notices on X's renew: X and Y are back, same generations.
	l, err := retry(t, "A renews X", func() (lease.Lease, error) { return a.Renew(bg, x, time.Minute, now()) })
	if err != nil || l.Generation != 2 || l.Connection != "c1" {
		t.Fatalf("A's renew of X after the loss = %+v, %v; want generation 2 on c1", l, err)
	}
	if got := lossA.all(); len(got) != 1 || got[0].Reseeded != 2 || got[0].Conflicts != 0 {
		t.Fatalf("A's OnDataLoss = %+v, want one loss with 2 leases re-seeded", got)
	}
	if len(degradedA) < 2 || !degradedA[0] || degradedA[len(degradedA)-1] {
		t.Fatalf("A's OnDegraded calls %v, want true first and false last", degradedA)
	}
	for _, c := range []struct {
		conn  string
		owner lease.Holder
	}{{"c1", x}, {"c2", y}, {"c3", z}} {
		occ, ok, err := b.Occupant(bg, c.conn, now())
		if err != nil || !ok || occ.Owner != c.owner.Owner || occ.Generation != c.owner.Generation {
			t.Fatalf("Occupant(%s) = %+v, %v, %v; want the re-seeded lease of generation %d", c.conn, occ, ok, err, c.owner.Generation)
		}
	}
	// No double grant: c1 stays X's, and Y's renewal works on its own
	// generation only.
	if _, _, err := b.Acquire(bg, w, "p", "c1", time.Minute, now()); !errors.Is(err, lease.ErrCapacityUnavailable) {
		t.Fatalf("acquire of re-seeded c1 by W = %v, want CAPACITY_UNAVAILABLE", err)
	}
	stale := y
	stale.Generation = 1 + y.Generation
	if err := b.Fence(bg, stale, "c2", now()); !errors.Is(err, lease.ErrFenceStale) {
		t.Fatalf("fence of Y with a wrong generation = %v, want FENCE_STALE", err)
	}
	if err := b.Fence(bg, y, "c2", now()); err != nil {
		t.Fatalf("fence of re-seeded Y = %v", err)
	}
	// A new owner starts above every generation the replicas had seen.
	wait(cfg.ReleaseQuarantine)
	if lw, _, err := b.Acquire(bg, w, "p", "c4", time.Minute, now()); err != nil || lw.Generation <= 2 {
		t.Fatalf("W's first acquire after the loss = %+v, %v; want a generation above 2", lw, err)
	}
}

// TestEpochReseedMiniredis: a dataset emptied under two replicas is
// noticed on each one's next call; each re-seeds the leases it holds, new
// leases wait for the hold, and no connection is granted twice.
func TestEpochReseedMiniredis(t *testing.T) {
	mr, _ := newMini(t)
	clock := leasetest.T0
	epochScenario(t, func() redis.UniversalClient {
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		return rdb
	}, func() { mr.FlushAll() }, func() time.Time { return clock }, func(d time.Duration) { clock = clock.Add(d) },
		redisstate.Config{CallerClock: true, Timeout: slowLua, FenceStaleness: time.Second, ReleaseQuarantine: 1500 * time.Millisecond})
}

// TestEpochReseedRealRestart: the same on a private redis-server that is
// shut down without saving and started again, empty, on its port.
func TestEpochReseedRealRestart(t *testing.T) {
	srv := redistest.Start(t)
	epochScenario(t, func() redis.UniversalClient {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { rdb.Close() })
		return rdb
	}, func() { srv.Restart(t) }, time.Now, time.Sleep,
		redisstate.Config{ReleaseQuarantine: 300 * time.Millisecond, Timeout: time.Second})
}
