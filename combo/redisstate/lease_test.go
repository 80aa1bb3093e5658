package redisstate_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/routeguard/routeguard/combo/redisstate"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lease/leasetest"
)

var bg = context.Background()

// slowLua is the call timeout of suites that race 100 scripts on
// miniredis, whose Lua is interpreted in Go (and slower under -race).
const slowLua = 10 * time.Second

// TestLeaseStoreMiniredis runs the lease conformance suite on miniredis,
// the scripts following the caller's clock.
func TestLeaseStoreMiniredis(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) lease.Store {
		_, rdb := newMini(t)
		return newState(t, rdb, redisstate.Config{CallerClock: true, Timeout: slowLua}).Leases()
	})
}

// serverClock sets miniredis' clock to each call's now, so that the
// scripts read the scenario's time from the server's TIME.
type serverClock struct {
	lease.Store
	mr *miniredis.Miniredis
}

func (s serverClock) at(now time.Time) { s.mr.SetTime(now) }

func (s serverClock) Acquire(ctx context.Context, h lease.Holder, p, c string, ttl time.Duration, now time.Time) (lease.Lease, bool, error) {
	s.at(now)
	return s.Store.Acquire(ctx, h, p, c, ttl, now)
}
func (s serverClock) Transition(ctx context.Context, h lease.Holder, p, c string, r lease.Reason, ttl time.Duration, now time.Time) (lease.Lease, lease.Lease, error) {
	s.at(now)
	return s.Store.Transition(ctx, h, p, c, r, ttl, now)
}
func (s serverClock) Renew(ctx context.Context, h lease.Holder, ttl time.Duration, now time.Time) (lease.Lease, error) {
	s.at(now)
	return s.Store.Renew(ctx, h, ttl, now)
}
func (s serverClock) Release(ctx context.Context, h lease.Holder, r lease.Reason, now time.Time) (lease.Lease, bool, error) {
	s.at(now)
	return s.Store.Release(ctx, h, r, now)
}
func (s serverClock) Invalidate(ctx context.Context, h lease.Holder, r lease.Reason, now time.Time) (lease.Lease, error) {
	s.at(now)
	return s.Store.Invalidate(ctx, h, r, now)
}
func (s serverClock) Fence(ctx context.Context, h lease.Holder, c string, now time.Time) error {
	s.at(now)
	return s.Store.Fence(ctx, h, c, now)
}
func (s serverClock) Owned(ctx context.Context, o lease.OwnerHash, now time.Time) (lease.Lease, bool, error) {
	s.at(now)
	return s.Store.Owned(ctx, o, now)
}
func (s serverClock) Occupant(ctx context.Context, c string, now time.Time) (lease.Lease, bool, error) {
	s.at(now)
	return s.Store.Occupant(ctx, c, now)
}
func (s serverClock) Reconcile(ctx context.Context, now time.Time) ([]lease.Lease, error) {
	s.at(now)
	return s.Store.Reconcile(ctx, now)
}
func (s serverClock) List(ctx context.Context, now time.Time) ([]lease.Lease, error) {
	s.at(now)
	return s.Store.List(ctx, now)
}

// TestLeaseStoreMiniredisServerClock runs the suite with the scripts on
// the server's TIME (the default), miniredis' clock set to each call's
// now; a now that goes backwards is the server's clock going backwards.
func TestLeaseStoreMiniredisServerClock(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) lease.Store {
		mr, rdb := newMini(t)
		return serverClock{newState(t, rdb, redisstate.Config{Timeout: slowLua}).Leases(), mr}
	})
}

// TestLeaseStoreRedis runs the suite on a real redis-server.
func TestLeaseStoreRedis(t *testing.T) {
	rdb := newReal(t)
	leasetest.Run(t, func(t *testing.T) lease.Store {
		return newState(t, rdb, redisstate.Config{CallerClock: true}).Leases()
	})
}

// TestServerClockOnRedis: on the default clock a lease's times are the
// server's, whatever now the caller passes.
func TestServerClockOnRedis(t *testing.T) {
	rdb := newReal(t)
	st := newState(t, rdb, redisstate.Config{}).Leases()
	srv, err := rdb.Time(bg).Result()
	if err != nil {
		t.Fatal(err)
	}
	owner := lease.HashOwner(leasetest.Owner('A'))
	l, _, err := st.Acquire(bg, lease.Holder{Owner: owner, APIKeyID: "k"}, "p", "c1", time.Minute, leasetest.T0)
	if err != nil {
		t.Fatal(err)
	}
	if d := l.AcquiredAt.Sub(srv.Truncate(time.Millisecond)); d < 0 || d > 2*time.Second {
		t.Fatalf("AcquiredAt %v, want the server's time %v", l.AcquiredAt, srv)
	}
	if l.ExpiresAt.Sub(l.AcquiredAt) != time.Minute {
		t.Fatalf("ExpiresAt − AcquiredAt = %v, want 1m", l.ExpiresAt.Sub(l.AcquiredAt))
	}
	if err := st.Fence(bg, lease.Holder{Owner: owner, APIKeyID: "k", Generation: 1}, "c1", leasetest.T0); err != nil {
		t.Fatalf("Fence = %v", err)
	}
}

// TestManagerOverRedis: the lease Manager runs its lifecycle over the
// Redis store.
func TestManagerOverRedis(t *testing.T) {
	_, rdb := newMini(t)
	m := lease.New(lease.Config{Store: newState(t, rdb, redisstate.Config{CallerClock: true}).Leases()})
	owner := lease.HashOwner(leasetest.Owner('A'))
	l, err := m.AcquireAt(bg, lease.Holder{Owner: owner, APIKeyID: "k1"}, "p", []string{"c1", "c2"}, leasetest.T0)
	if err != nil || l.Connection != "c1" || l.Generation != 1 {
		t.Fatalf("AcquireAt = %+v, %v", l, err)
	}
	other := lease.HashOwner(leasetest.Owner('B'))
	l2, err := m.AcquireAt(bg, lease.Holder{Owner: other, APIKeyID: "k1"}, "p", []string{"c1", "c2"}, leasetest.T0)
	if err != nil || l2.Connection != "c2" {
		t.Fatalf("second AcquireAt = %+v, %v; want c2", l2, err)
	}
	if err := m.FenceAt(bg, lease.Holder{Owner: owner, APIKeyID: "k1", Generation: 1}, "c1", leasetest.T0.Add(time.Second)); err != nil {
		t.Fatalf("FenceAt = %v", err)
	}
	_, err = m.AcquireAt(bg, lease.Holder{Owner: lease.HashOwner(leasetest.Owner('C')), APIKeyID: "k1"}, "p", []string{"c1", "c2"}, leasetest.T0.Add(time.Second))
	var le *lease.Error
	if !errors.As(err, &le) || le.Code != lease.CodeCapacityUnavailable || le.Status != 429 || le.RetryAfter != 119*time.Second {
		t.Fatalf("third AcquireAt = %v, want 429 capacity, Retry-After 119 s", err)
	}
}

// TestGenerationPrecision: generations are exact up to MaxGeneration, and
// passing it is refused with 503 (generation exhausted), on miniredis and
// a real server.
func TestGenerationPrecision(t *testing.T) {
	for name, rdbf := range map[string]func(t *testing.T) redisstate.Config{
		"miniredis": func(t *testing.T) redisstate.Config { return redisstate.Config{} },
		"redis":     func(t *testing.T) redisstate.Config { return redisstate.Config{} },
	} {
		t.Run(name, func(t *testing.T) {
			var st *redisstate.State
			ns := namespace()
			cfg := rdbf(t)
			cfg.Namespace, cfg.CallerClock = ns, true
			if name == "miniredis" {
				_, rdb := newMini(t)
				st = newState(t, rdb, cfg)
				preset(t, rdb.Set, ns)
			} else {
				rdb := newReal(t)
				st = newState(t, rdb, cfg)
				preset(t, rdb.Set, ns)
			}
			owner := lease.HashOwner(leasetest.Owner('A'))
			h := lease.Holder{Owner: owner, APIKeyID: "k"}
			l, _, err := st.Leases().Acquire(bg, h, "p", "c1", time.Minute, leasetest.T0)
			if err != nil || l.Generation != lease.MaxGeneration {
				t.Fatalf("Acquire = gen %d, %v; want %d", l.Generation, err, lease.MaxGeneration)
			}
			h.Generation = lease.MaxGeneration
			if _, _, err := st.Leases().Release(bg, h, lease.ReasonOwnerExit, leasetest.T0); err != nil {
				t.Fatal(err)
			}
			_, _, err = st.Leases().Acquire(bg, h, "p", "c1", time.Minute, leasetest.T0)
			var le *lease.Error
			if !errors.As(err, &le) || le.Code != lease.CodeServiceUnavailable || le.Detail != "lease generation exhausted" {
				t.Fatalf("Acquire past MaxGeneration = %v, want generation exhausted", err)
			}
		})
	}
}

// preset writes an owner record whose highest generation is
// MaxGeneration − 1.
func preset[T any](t *testing.T, set func(context.Context, string, any, time.Duration) T, ns string) {
	owner := lease.HashOwner(leasetest.Owner('A'))
	set(bg, "{"+ns+":lease}:o:"+owner.String(), `{"m":"`+strconv.FormatUint(lease.MaxGeneration-1, 10)+`"}`, time.Hour)
}

// TestForgottenOwnerStartsAboveFloor: an owner forgotten after Retention
// never gets a generation it had before.
func TestForgottenOwnerStartsAboveFloor(t *testing.T) {
	mr, rdb := newMini(t)
	st := newState(t, rdb, redisstate.Config{CallerClock: true, Retention: time.Minute}).Leases()
	a := lease.Holder{Owner: lease.HashOwner(leasetest.Owner('A')), APIKeyID: "k"}
	b := lease.Holder{Owner: lease.HashOwner(leasetest.Owner('B')), APIKeyID: "k"}
	for g := uint64(1); g <= 3; g++ {
		l, _, err := st.Acquire(bg, a, "p", "c1", time.Second, leasetest.T0)
		if err != nil || l.Generation != g {
			t.Fatalf("Acquire %d = %d, %v", g, l.Generation, err)
		}
		a.Generation = g
		if _, _, err := st.Release(bg, a, lease.ReasonOwnerExit, leasetest.T0); err != nil {
			t.Fatal(err)
		}
	}
	mr.FastForward(2 * time.Minute) // A's record is gone
	later := leasetest.T0.Add(2 * time.Minute)
	if _, _, err := st.Acquire(bg, b, "p", "c2", time.Second, later); err != nil {
		t.Fatal(err)
	}
	l, _, err := st.Acquire(bg, a, "p", "c1", time.Second, later)
	if err != nil || l.Generation != 4 {
		t.Fatalf("forgotten owner's Acquire = gen %d, %v; want 4", l.Generation, err)
	}
}

// TestReleaseQuarantine: with Q, a freed connection goes to another owner
// only Q after the end; its owner may take it back at once.
func TestReleaseQuarantine(t *testing.T) {
	_, rdb := newMini(t)
	st := newState(t, rdb, redisstate.Config{CallerClock: true, ReleaseQuarantine: 2 * time.Second}).Leases()
	a := lease.Holder{Owner: lease.HashOwner(leasetest.Owner('A')), APIKeyID: "k", Generation: 1}
	b := lease.Holder{Owner: lease.HashOwner(leasetest.Owner('B')), APIKeyID: "k"}
	if _, _, err := st.Acquire(bg, a, "p", "c1", time.Minute, leasetest.T0); err != nil {
		t.Fatal(err)
	}
	_, _, err := st.Acquire(bg, b, "p", "c1", time.Minute, leasetest.T0)
	var le *lease.Error
	if !errors.As(err, &le) || !le.Until.Equal(leasetest.T0.Add(time.Minute+2*time.Second)) {
		t.Fatalf("busy = %v, want until expiry + Q", err)
	}
	end := leasetest.T0.Add(10 * time.Second)
	if _, _, err := st.Release(bg, a, lease.ReasonOwnerExit, end); err != nil {
		t.Fatal(err)
	}
	_, _, err = st.Acquire(bg, b, "p", "c1", time.Minute, end.Add(time.Second))
	if !errors.As(err, &le) || le.Code != lease.CodeCapacityUnavailable || !le.Until.Equal(end.Add(2*time.Second)) {
		t.Fatalf("Acquire by B 1 s after the release = %v, want busy until release + 2 s", err)
	}
	if _, _, err := st.Acquire(bg, b, "p", "c1", time.Minute, end.Add(2*time.Second)); err != nil {
		t.Fatalf("Acquire by B at release + Q = %v", err)
	}
	// The owner itself is not quarantined.
	if _, _, err := st.Release(bg, lease.Holder{Owner: b.Owner, APIKeyID: "k", Generation: 1}, lease.ReasonOwnerExit, end.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Acquire(bg, b, "p", "c1", time.Minute, end.Add(3*time.Second)); err != nil {
		t.Fatalf("owner re-acquires at once = %v", err)
	}
}
