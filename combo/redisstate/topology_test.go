package redisstate_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/routeguard/routeguard/combo/redisstate"
	"github.com/routeguard/routeguard/combo/redisstate/internal/redistest"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lease/leasetest"
	"github.com/routeguard/routeguard/queue/queuetest"
	"github.com/routeguard/routeguard/queue/slotstore"
)

// topologySuite runs the lease and slot conformance suites and a
// replication round trip through clients made by client: each
// script's keys must live in one hash slot (Cluster answers CROSSSLOT
// otherwise), and every call must go through the client's routing.
func topologySuite(t *testing.T, client func(t *testing.T) redis.UniversalClient) {
	t.Run("Leases", func(t *testing.T) {
		rdb := client(t)
		leasetest.Run(t, func(t *testing.T) lease.Store {
			return newState(t, rdb, redisstate.Config{CallerClock: true}).Leases()
		})
	})
	t.Run("Slots", func(t *testing.T) {
		queuetest.RunSlots(t, func(t *testing.T, n int) []slotstore.Store {
			return slotStores(t, n, client)
		})
	})
	t.Run("SlotsReseed", func(t *testing.T) {
		// A lost slot set (its marker deleted, as a restart would) is
		// stored again by its holder, and the epoch key works.
		rdb := client(t)
		ns := namespace()
		st := newState(t, rdb, redisstate.Config{Namespace: ns, CallerClock: true, SlotTTL: 10 * time.Second})
		now := queuetest.T0
		slot := slotstore.Slot{Conn: "c1", Holder: "A:1"}
		if ok, _, _, err := st.Slots().TryAcquire(bg, "c1", 1, slot.Holder, now); !ok || err != nil {
			t.Fatalf("acquire = %v, %v", ok, err)
		}
		if err := rdb.Del(bg, "{"+ns+":sem:c1}", "{"+ns+":sem:c1}:m").Err(); err != nil {
			t.Fatal(err)
		}
		if lost, err := st.Slots().Renew(bg, []slotstore.Slot{slot}, now.Add(time.Second)); len(lost) != 0 || err != nil {
			t.Fatalf("renew after the loss = %v, %v; want re-seeded", lost, err)
		}
		if n := rdb.ZCard(bg, "{"+ns+":sem:c1}").Val(); n != 1 {
			t.Fatalf("c1 holds %d slots, want 1", n)
		}
	})
	t.Run("Replication", func(t *testing.T) {
		ns := namespace()
		a := newReplica(t, client(t), ns, "a", redisstate.ReplicatorConfig{Block: 100 * time.Millisecond})
		b := newReplica(t, client(t), ns, "b", redisstate.ReplicatorConfig{Block: 100 * time.Millisecond})
		a.start(t)
		b.start(t)
		waitFor(t, 5*time.Second, "first resyncs", func() bool { return a.rep.Stats().Resyncs == 1 && b.rep.Stats().Resyncs == 1 })
		now := time.Now()
		a.cd.FailAt("sk-1", cooldown.Failure{Status: 429, RetryAfter: 30 * time.Second}, now)
		openBreaker(t, a.set, "openai", now)
		for range 15 {
			a.gate.RecordFailureAt("anthropic", "ak-1", now)
		}
		waitFor(t, 3*time.Second, "b sees a's cooldown, breaker and gate", func() bool {
			n := time.Now()
			st, _ := b.set.StateAt("openai", n)
			_, gated := b.gate.BlockedUntilAt("anthropic", "", n)
			return b.cd.StatusAt("sk-1", n).State == cooldown.Cooling && st.String() == "open" && gated
		})
		if s := a.rep.Stats(); s.Errors != 0 {
			t.Errorf("a's replicator: %d errors", s.Errors)
		}
	})
}

// TestClusterClient runs the stores and the replicator through
// redis.NewClusterClient on a private one-node cluster.
func TestClusterClient(t *testing.T) {
	addr := redistest.StartCluster(t)
	topologySuite(t, func(t *testing.T) redis.UniversalClient {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		return rdb
	})
}

// TestSentinelClient runs them through redis.NewFailoverClient, which
// finds the master from a private Sentinel.
func TestSentinelClient(t *testing.T) {
	sentinel, _ := redistest.StartSentinel(t, "rgmaster")
	topologySuite(t, func(t *testing.T) redis.UniversalClient {
		rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "rgmaster", SentinelAddrs: []string{sentinel},
			ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		return rdb
	})
}
