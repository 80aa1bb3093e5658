package redisstate_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo/redisstate"
	"github.com/routeguard/routeguard/combo/redisstate/internal/redistest"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lease/leasetest"
)

func unavailable(t *testing.T, step string, err error) {
	t.Helper()
	var le *lease.Error
	if !errors.As(err, &le) || le.Code != lease.CodeServiceUnavailable || le.Status != 503 || !errors.Is(err, lease.ErrServiceUnavailable) {
		t.Fatalf("%s: %v, want a 503 LEASE_SERVICE_UNAVAILABLE *lease.Error", step, err)
	}
}

// TestLeaseOutageAnswers503AndOpensBreaker: with Redis gone every lease
// call is a 503 LEASE_SERVICE_UNAVAILABLE, the state is degraded, and
// after 5 failures the breaker refuses calls without trying Redis.
func TestLeaseOutageAnswers503AndOpensBreaker(t *testing.T) {
	mr, rdb := newMini(t)
	set := breaker.NewSet(breaker.Config{})
	var dials atomic.Int32
	rdb.AddHook(countHook{&dials})
	st := newState(t, rdb, redisstate.Config{CallerClock: true, Breaker: set, BreakerName: "redis-test"})
	m := lease.New(lease.Config{Store: st.Leases()})
	mr.Close()
	h := lease.Holder{Owner: lease.HashOwner(leasetest.Owner('A')), APIKeyID: "k", Generation: 1}
	for i := range 12 {
		_, err := m.AcquireAt(bg, h, "p", []string{"c1"}, leasetest.T0)
		unavailable(t, "AcquireAt", err)
		if i == 0 && !st.Degraded() {
			t.Fatalf("not degraded after a failed call")
		}
	}
	_, err := m.RenewAt(bg, h, leasetest.T0)
	unavailable(t, "RenewAt", err)
	_, err = m.ReleaseAt(bg, h, "", leasetest.T0)
	unavailable(t, "ReleaseAt", err)
	unavailable(t, "FenceAt", m.FenceAt(bg, h, "c1", leasetest.T0))
	if s, _ := set.StateAt("redis-test", time.Now()); s != breaker.Open {
		t.Fatalf("breaker state %v, want open", s)
	}
	// APIKey profile: opens at 12 counted failures; nothing was sent after.
	if n := dials.Load(); n != 12 {
		t.Fatalf("%d commands reached the client, want 12 (the breaker refuses the rest)", n)
	}
}

type countHook struct{ n *atomic.Int32 }

func (countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int32(len(cmds)))
		return next(ctx, cmds)
	}
}

// TestFenceMirror: with FenceStaleness, a lease verified less than S ago
// admits without a remote call, an older one is asked again, a refusal is
// always re-checked, and during an outage the mirror admits until the
// lease's local expiry, then fails closed.
func TestFenceMirror(t *testing.T) {
	mr, rdb := newMini(t)
	var cmds atomic.Int32
	rdb.AddHook(countHook{&cmds})
	st := newState(t, rdb, redisstate.Config{CallerClock: true, FenceStaleness: time.Second, ReleaseQuarantine: 1500 * time.Millisecond}).Leases()
	h := lease.Holder{Owner: lease.HashOwner(leasetest.Owner('A')), APIKeyID: "k", Generation: 1}
	if _, _, err := st.Acquire(bg, h, "p", "c1", time.Minute, leasetest.T0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Owned(bg, h.Owner, leasetest.T0); err != nil { // loads the status script
		t.Fatal(err)
	}
	fence := func(step string, h lease.Holder, at time.Duration, want error, wantCmds int32) {
		t.Helper()
		cmds.Store(0)
		err := st.Fence(bg, h, "c1", leasetest.T0.Add(at))
		if want == lease.ErrServiceUnavailable {
			unavailable(t, step, err)
		} else if !errors.Is(err, want) && err != want {
			t.Fatalf("%s: Fence = %v, want %v", step, err, want)
		}
		if n := cmds.Load(); n != wantCmds {
			t.Fatalf("%s: %d remote commands, want %d", step, n, wantCmds)
		}
	}
	fence("fresh", h, 500*time.Millisecond, nil, 0)
	stale := h
	stale.Generation = 2
	fence("refusal is re-checked", stale, 600*time.Millisecond, lease.ErrFenceStale, 1)
	// The re-check verified the lease again at T0+600ms.
	fence("fresh after the re-check", h, 1500*time.Millisecond, nil, 0)
	fence("S old", h, 1600*time.Millisecond, nil, 1)
	mr.Close()
	fence("outage, verified at T0+1.6s", h, 2500*time.Millisecond, nil, 0)
	// Redis is asked, fails, and the mirrored lease is honoured until its
	// local expiry: T0+1min less the 500 ms ClockSkew.
	fence("outage, S old", h, 2600*time.Millisecond, nil, 1)
	fence("outage, before local expiry", h, time.Minute-501*time.Millisecond, nil, 1)
	fence("outage, local expiry", h, time.Minute-500*time.Millisecond, lease.ErrServiceUnavailable, 1)
}

// TestFenceMirrorNeedsQuarantine: S > 0 without Q ≥ S + skew is refused.
func TestFenceMirrorNeedsQuarantine(t *testing.T) {
	_, rdb := newMini(t)
	_, err := redisstate.New(rdb, redisstate.Config{FenceStaleness: time.Second, ReleaseQuarantine: 1400 * time.Millisecond})
	if !errors.Is(err, redisstate.ErrInvalidConfig) {
		t.Fatalf("New = %v, want ErrInvalidConfig", err)
	}
}

// TestClientPauseTimesOut: with the server paused for writes, lease calls
// give up at their deadline with a 503, whether or not the client honours
// context deadlines itself.
func TestClientPauseTimesOut(t *testing.T) {
	srv := redistest.Start(t)
	for _, honours := range []bool{true, false} {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: honours})
		st := newState(t, rdb, redisstate.Config{CallerClock: true, Timeout: 200 * time.Millisecond})
		h := lease.Holder{Owner: lease.HashOwner(leasetest.Owner('A')), APIKeyID: "k"}
		if _, _, err := st.Leases().Acquire(bg, h, "p", "c1", time.Minute, leasetest.T0); err != nil {
			t.Fatal(err)
		}
		srv.Command(t, "CLIENT", "PAUSE", "1000", "WRITE")
		start := time.Now()
		_, _, err := st.Leases().Acquire(bg, lease.Holder{Owner: lease.HashOwner(leasetest.Owner('B')), APIKeyID: "k"}, "p", "c2", time.Minute, leasetest.T0)
		took := time.Since(start)
		unavailable(t, "Acquire during CLIENT PAUSE", err)
		if took > 400*time.Millisecond {
			t.Fatalf("ContextTimeoutEnabled %v: Acquire took %v, want about the 200 ms deadline", honours, took)
		}
		srv.Command(t, "CLIENT", "UNPAUSE")
		time.Sleep(100 * time.Millisecond) // let an abandoned call finish
		rdb.Close()
	}
}
