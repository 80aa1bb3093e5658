package lease_test

import (
	"testing"

	"github.com/routeguard/routeguard/lease"
)

// BenchmarkHeldAtNothingHeld is a router's screening of eight connections
// while no lease is held anywhere, the usual state of a gateway without
// managed keys.
func BenchmarkHeldAtNothingHeld(b *testing.B) {
	m := lease.New(lease.Config{})
	conns := []string{"c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7"}
	b.ReportAllocs()
	for b.Loop() {
		for _, c := range conns {
			if _, held, err := m.HeldAt(ctx, c, T0); held || err != nil {
				b.Fatalf("HeldAt(%s) = %v, %v", c, held, err)
			}
		}
	}
}
