package breaker

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/routeguard/routeguard/internal/benchscale"
)

// BenchmarkInsertAtCap measures one new key written into a store that is
// already full: a new connection failing on the Gate, and a new provider
// failing on the Set. The store is filled once per size, outside the timer.
func BenchmarkInsertAtCap(b *testing.B) {
	for _, size := range benchscale.Sizes() {
		n := size.N
		b.Run("gate/"+size.Name, func(b *testing.B) {
			g := NewGate(GateConfig{Enabled: true, MaxEntries: n})
			now := t0
			for i := range n {
				now = now.Add(time.Microsecond)
				g.RecordFailureAt("p", "c"+strconv.Itoa(i), now)
			}
			g.RecordFailureAt("p", "c"+strconv.Itoa(n), now) // the first eviction settles the fill
			i := n + 1
			runtime.GC() // the build's garbage is not the insert's
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Microsecond)
				g.RecordFailureAt("p", "c"+strconv.Itoa(i), now)
				i++
			}
		})
	}
	for _, size := range benchscale.Sizes() {
		n := size.N
		b.Run("set/"+size.Name, func(b *testing.B) {
			s := NewSet(Config{MaxBreakers: n})
			now := t0
			fail := Report{Outcome: Failure}
			for i := range n {
				now = now.Add(time.Microsecond)
				s.ReportAt("p"+strconv.Itoa(i), fail, now)
			}
			s.ReportAt("p"+strconv.Itoa(n), fail, now) // the first eviction settles the fill
			i := n + 1
			runtime.GC() // the build's garbage is not the insert's
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Microsecond)
				s.ReportAt("p"+strconv.Itoa(i), fail, now)
				i++
			}
		})
	}
}
