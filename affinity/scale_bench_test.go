package affinity

import (
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"github.com/routeguard/routeguard/internal/benchscale"
)

// benchKey returns a distinct session key for i without hashing, its
// digest spread like a SHA-256.
func benchKey(i int) Key {
	k := Key{name: "bench"}
	x := uint64(i)*0x9E3779B97F4A7C15 + 1
	binary.LittleEndian.PutUint64(k.sum[:], x)
	binary.LittleEndian.PutUint64(k.sum[8:], uint64(i))
	return k
}

// BenchmarkInsertAtCap measures a new session pinned into a full store: a
// hostile stream of distinct session ids. The store is filled once per
// size, outside the timer.
func BenchmarkInsertAtCap(b *testing.B) {
	for _, size := range benchscale.Sizes() {
		n := size.N
		b.Run(size.Name, func(b *testing.B) {
			p := New(Config{TTL: time.Hour, MaxPins: n})
			c := cands("A", "B", "C", "D")
			cap := p.mem.capacity()
			now := t0
			for i := range cap {
				now = now.Add(time.Microsecond)
				p.SelectAt("openai", benchKey(i), c, now)
			}
			p.SelectAt("openai", benchKey(cap), c, now) // the first eviction settles the fill
			i := cap + 1
			runtime.GC() // the build's garbage is not the insert's
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Microsecond)
				p.SelectAt("openai", benchKey(i), c, now)
				i++
			}
		})
	}
}
