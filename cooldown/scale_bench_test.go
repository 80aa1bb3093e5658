package cooldown

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/routeguard/routeguard/internal/benchscale"
)

// BenchmarkInsertAtCap measures a new connection's failure written into a
// full store of cooling connections. The store is filled once per size,
// outside the timer.
func BenchmarkInsertAtCap(b *testing.B) {
	for _, size := range benchscale.Sizes() {
		n := size.N
		b.Run(size.Name, func(b *testing.B) {
			tr := New(Config{MaxEntries: n})
			f := Failure{Status: 503, Reason: "server_error", Cooldown: time.Hour}
			now := t0
			for i := range n {
				now = now.Add(time.Microsecond)
				tr.FailAt("c"+strconv.Itoa(i), f, now)
			}
			tr.FailAt("c"+strconv.Itoa(n), f, now) // the first eviction settles the fill
			i := n + 1
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
