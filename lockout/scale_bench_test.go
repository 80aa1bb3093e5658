package lockout_test

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/routeguard/routeguard/internal/benchscale"
	"github.com/routeguard/routeguard/lockout"
)

// BenchmarkInsertAtCap measures a new model lock written into a full
// Lockout. The Lockout is filled once per size, outside the timer.
func BenchmarkInsertAtCap(b *testing.B) {
	for _, size := range benchscale.Sizes() {
		n := size.N
		b.Run(size.Name, func(b *testing.B) {
			l := lockout.New(lockout.Config{Enabled: true, MaxEntries: n})
			now := t0
			lock := func(i int) {
				l.LockAt(lockout.Failure{Provider: "openai", Connection: "conn-" + strconv.Itoa(i%100),
					Model: "model-" + strconv.Itoa(i), Scope: lockout.ScopeModel, Cooldown: time.Hour}, now)
			}
			for i := range n {
				now = now.Add(time.Microsecond)
				lock(i)
			}
			lock(n) // the first eviction settles the fill
			i := n + 1
			runtime.GC() // the build's garbage is not the insert's
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Microsecond)
				lock(i)
				i++
			}
		})
	}
}
