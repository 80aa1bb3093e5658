package queuetest_test

import (
	"testing"

	"github.com/routeguard/routeguard/queue/queuetest"
	"github.com/routeguard/routeguard/queue/slotstore"
)

// TestMemorySlots: the in-process reference passes the suite, its three
// clients sharing one store.
func TestMemorySlots(t *testing.T) {
	queuetest.RunSlots(t, func(t *testing.T, n int) []slotstore.Store {
		s := slotstore.NewMemory(queuetest.TTL)
		out := make([]slotstore.Store, n)
		for i := range out {
			out[i] = s
		}
		return out
	})
}
