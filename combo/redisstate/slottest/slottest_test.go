package slottest_test

import (
	"testing"

	"github.com/routeguard/routeguard/combo/redisstate"
	"github.com/routeguard/routeguard/combo/redisstate/slottest"
)

func TestMemorySlots(t *testing.T) {
	slottest.Run(t, func(t *testing.T, n int) []redisstate.SlotStore {
		s := redisstate.NewMemorySlots(slottest.TTL)
		out := make([]redisstate.SlotStore, n)
		for i := range out {
			out[i] = s
		}
		return out
	})
}
