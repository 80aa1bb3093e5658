package breaker

import (
	"runtime"
	"strconv"
	"testing"
	"time"
)

// capSizes are the store sizes of the insert-at-cap benchmarks.
var capSizes = []int{1000, 100_000, 1_000_000}

// BenchmarkInsertAtCap measures one new key written into a store that is
// already full: a new connection failing on the Gate, and a new provider
// failing on the Set. The store is filled once per size, outside the timer.
func BenchmarkInsertAtCap(b *testing.B) {
	for _, n := range capSizes {
		b.Run("gate/keys="+strconv.Itoa(n), func(b *testing.B) {
			g := NewGate(GateConfig{Enabled: true, MaxEntries: n})
			now := t0
			for i := range n {
				now = now.Add(time.Microsecond)
				g.RecordFailureAt("p", "c"+strconv.Itoa(i), now)
			}
			i := n
			runtime.GC() // the build's garbage is not the insert's
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Microsecond)
				g.RecordFailureAt("p", "c"+strconv.Itoa(i), now)
				i++
			}
		})
	}
	for _, n := range capSizes {
		b.Run("set/keys="+strconv.Itoa(n), func(b *testing.B) {
			s := NewSet(Config{MaxBreakers: n})
			now := t0
			fail := Report{Outcome: Failure}
			for i := range n {
				now = now.Add(time.Microsecond)
				s.ReportAt("p"+strconv.Itoa(i), fail, now)
			}
			i := n
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
