package queue_test

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/routeguard/routeguard/internal/benchscale"
	"github.com/routeguard/routeguard/queue"
)

// BenchmarkInsertAtCap measures a new key taken into a queue that already
// keeps MaxKeys idle keys. The queue is filled once per size, outside the
// timer.
func BenchmarkInsertAtCap(b *testing.B) {
	for _, size := range benchscale.Sizes() {
		n := size.N
		b.Run(size.Name, func(b *testing.B) {
			q := queue.New(queue.Config{MaxKeys: n})
			now := t0
			for i := range n {
				now = now.Add(time.Microsecond)
				release, _ := q.TryAcquireAt("k"+strconv.Itoa(i), now)
				release()
			}
			// The first eviction settles the fill's releases; the loop
			// measures the steady state.
			release, _ := q.TryAcquireAt("k"+strconv.Itoa(n), now)
			release()
			i := n + 1
			runtime.GC() // the build's garbage is not the insert's
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Microsecond)
				release, ok := q.TryAcquireAt("k"+strconv.Itoa(i), now)
				if !ok {
					b.Fatal("refused")
				}
				release()
				i++
			}
		})
	}
}
