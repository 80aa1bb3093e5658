package cooldown

import (
	"runtime"
	"strconv"
	"testing"
	"time"
)

// BenchmarkInsertAtCap measures a new connection's failure written into a
// full store of cooling connections. The store is filled once per size,
// outside the timer.
func BenchmarkInsertAtCap(b *testing.B) {
	for _, n := range []int{1000, 100_000, 1_000_000} {
		b.Run("keys="+strconv.Itoa(n), func(b *testing.B) {
			tr := New(Config{MaxEntries: n})
			f := Failure{Status: 503, Reason: "server_error", Cooldown: time.Hour}
			now := t0
			for i := range n {
				now = now.Add(time.Microsecond)
				tr.FailAt("c"+strconv.Itoa(i), f, now)
			}
			i := n
			runtime.GC() // the build's garbage is not the insert's
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Microsecond)
				tr.FailAt("c"+strconv.Itoa(i), f, now)
				i++
			}
		})
	}
}
