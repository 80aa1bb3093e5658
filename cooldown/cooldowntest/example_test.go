package cooldowntest_test

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/routeguard/routeguard/cooldown"
)

// countingStore is a custom store: here it wraps the in-memory one and counts
// writes. It forwards the optional Sweeper too, so that the Tracker keeps
// pruning. A test of its package would check it with
//
//	cooldowntest.Run(t, func() cooldown.Store { return newCountingStore() })
type countingStore struct {
	cooldown.Store
	cooldown.Sweeper
	writes atomic.Int64 // a store must be safe for concurrent use
}

func newCountingStore() *countingStore {
	mem := cooldown.NewMemoryStore()
	return &countingStore{Store: mem, Sweeper: mem.(cooldown.Sweeper)}
}

func (c *countingStore) Update(conn string, fn func(*cooldown.Entry, bool) bool) {
	c.writes.Add(1)
	c.Store.Update(conn, fn)
}

func Example() {
	store := newCountingStore()
	cd := cooldown.New(cooldown.Config{Store: store})
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cd.FailAt("k1", cooldown.Failure{Status: 503, Reason: "server_error", Backoff: true}, now)
	cd.FailAt("k1", cooldown.Failure{Status: 503, Reason: "server_error", Backoff: true}, now) // absorbed: no write
	fmt.Println(cd.StatusAt("k1", now).State, store.writes.Load())
	// Output: cooling 1
}
