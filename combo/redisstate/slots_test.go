package redisstate_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/routeguard/routeguard/combo/redisstate"
	"github.com/routeguard/routeguard/queue/queuetest"
	"github.com/routeguard/routeguard/queue/slotstore"
)

func slotStores(t *testing.T, n int, client func(t *testing.T) redis.UniversalClient) []slotstore.Store {
	ns := namespace()
	out := make([]slotstore.Store, n)
	for i := range out {
		out[i] = newState(t, client(t), redisstate.Config{Namespace: ns, CallerClock: true, SlotTTL: queuetest.TTL, Timeout: slowLua}).Slots()
	}
	return out
}

// TestSlotsMiniredis runs the slot conformance suite on miniredis, each
// client its own connection pool.
func TestSlotsMiniredis(t *testing.T) {
	queuetest.RunSlots(t, func(t *testing.T, n int) []slotstore.Store {
		mr, _ := newMini(t)
		return slotStores(t, n, func(t *testing.T) redis.UniversalClient {
			rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
			t.Cleanup(func() { rdb.Close() })
			return rdb
		})
	})
}

// TestSlotsRedis runs the suite on a real redis-server, across three
// clients.
func TestSlotsRedis(t *testing.T) {
	queuetest.RunSlots(t, func(t *testing.T, n int) []slotstore.Store {
		return slotStores(t, n, func(t *testing.T) redis.UniversalClient { return newReal(t) })
	})
}

// TestSlotsFallBackToLocalCaps: while Redis is down, slots are granted by
// a local cap of the same size, released locally, and Degraded says so.
func TestSlotsFallBackToLocalCaps(t *testing.T) {
	mr, rdb := newMini(t)
	var hook []bool
	st := newState(t, rdb, redisstate.Config{CallerClock: true, OnDegraded: func(d bool) { hook = append(hook, d) }})
	sl := st.Slots()
	now := queuetest.T0
	if ok, _, _, err := sl.TryAcquire(bg, "c1", 1, "remote", now); !ok || err != nil {
		t.Fatalf("remote acquire = %v, %v", ok, err)
	}
	mr.SetError("LOADING Redis is loading the dataset in memory")
	ok, held, _, err := sl.TryAcquire(bg, "c1", 1, "a", now)
	if !ok || held != 1 || err != nil || !st.Degraded() {
		t.Fatalf("acquire during outage = %v, %d, %v, degraded %v; want a local slot", ok, held, err, st.Degraded())
	}
	if ok, _, _, _ := sl.TryAcquire(bg, "c1", 1, "b", now); ok {
		t.Fatalf("local cap 1 granted a second slot")
	}
	if lost, err := sl.Renew(bg, []slotstore.Slot{{Conn: "c1", Holder: "a"}}, now); err != nil || len(lost) != 0 {
		t.Fatalf("local Renew = %v, %v", lost, err)
	}
	if err := sl.Release(bg, "c1", "a", now); err != nil {
		t.Fatalf("local Release = %v", err)
	}
	if ok, _, _, _ := sl.TryAcquire(bg, "c1", 1, "b", now); !ok {
		t.Fatalf("local slot not freed by Release")
	}
	mr.SetError("")
	// Once the breaker lets a probe through, Redis answers again; its cap
	// still counts the remote holder.
	time.Sleep(1100 * time.Millisecond)
	if ok, _, _, err := sl.TryAcquire(bg, "c1", 1, "c", now); ok || err != nil || st.Degraded() {
		t.Fatalf("acquire after recovery = %v, %v, degraded %v; want refused by the remote holder", ok, err, st.Degraded())
	}
	if len(hook) != 2 || !hook[0] || hook[1] {
		t.Fatalf("OnDegraded calls %v, want [true false]", hook)
	}
}

// TestSlotsFailClosed: with FailClosed, an outage refuses slots.
func TestSlotsFailClosed(t *testing.T) {
	mr, rdb := newMini(t)
	st := newState(t, rdb, redisstate.Config{CallerClock: true, FailClosed: true})
	mr.Close()
	ok, _, _, err := st.Slots().TryAcquire(bg, "c1", 1, "a", queuetest.T0)
	if ok || !errors.Is(err, redisstate.ErrUnavailable) {
		t.Fatalf("TryAcquire = %v, %v; want ErrUnavailable", ok, err)
	}
}
