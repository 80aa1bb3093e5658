package cooldowntest_test

import (
	"fmt"
	"time"

	"github.com/routeguard/routeguard/cooldown"
)

// countingStore is a custom store: here it wraps the in-memory one and counts
// writes. A test of its package would check it with
//
//	cooldowntest.Run(t, func() cooldown.Store { return newCountingStore() })
type countingStore struct {
	*cooldown.MemoryStore
	writes int
}

func (c *countingStore) Update(conn string, fn func(*cooldown.Entry, bool) bool) {
	c.writes++
	c.MemoryStore.Update(conn, fn)
}

func Example() {
	store := &countingStore{MemoryStore: cooldown.NewMemoryStore()}
	cd := cooldown.New(cooldown.Config{Store: store})
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cd.FailAt("k1", cooldown.Failure{Status: 503, Reason: "server_error", Backoff: true}, now)
	cd.FailAt("k1", cooldown.Failure{Status: 503, Reason: "server_error", Backoff: true}, now) // absorbed: no write
	fmt.Println(cd.StatusAt("k1", now).State, store.writes)
	// Output: cooling 1
}
