package cooldown

import (
	"fmt"
	"sync"
	"testing"
)

func tracked(n int) (*Tracker, []string) {
	tr := New(Config{})
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint("openai:conn-", i)
		tr.FailAt(ids[i], rateLimit, t0)
	}
	return tr, ids
}

// BenchmarkStatusAt checks one connection while n are tracked.
func BenchmarkStatusAt(b *testing.B) {
	for _, n := range []int{1, 1000, 100_000} {
		b.Run(fmt.Sprint("tracked=", n), func(b *testing.B) {
			tr, ids := tracked(n)
			id := ids[n/2]
			b.ReportAllocs()
			for b.Loop() {
				_ = tr.StatusAt(id, t0)
			}
		})
	}
}

// BenchmarkStatusAtSpread checks every tracked connection in turn, so that
// with many connections most checks miss the CPU caches.
func BenchmarkStatusAtSpread(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		b.Run(fmt.Sprint("tracked=", n), func(b *testing.B) {
			tr, ids := tracked(n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				_ = tr.StatusAt(ids[i], t0)
				if i++; i == n {
					i = 0
				}
			}
		})
	}
}

func BenchmarkStatusAtParallel(b *testing.B) {
	tr := New(Config{})
	for i := range 1000 {
		tr.FailAt(fmt.Sprint("conn-", i), rateLimit, t0)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = tr.StatusAt("conn-7", t0)
		}
	})
}

func BenchmarkFailAtAbsorbed(b *testing.B) {
	tr := New(Config{})
	tr.FailAt("k1", rateLimit, t0)
	b.ReportAllocs()
	for b.Loop() {
		_ = tr.FailAt("k1", rateLimit, t0)
	}
}

func BenchmarkSucceedAtClean(b *testing.B) {
	tr := New(Config{})
	tr.RegisterAt("k1", Options{Provider: "openai"}, t0)
	b.ReportAllocs()
	for b.Loop() {
		tr.SucceedAt("k1", t0)
	}
}

// BenchmarkBaselineMap is a naive reference: one read-locked lookup in a
// plain map of statuses, the least any status check can cost.
func BenchmarkBaselineMap(b *testing.B) {
	var mu sync.RWMutex
	m := map[string]Status{"conn-7": {State: Cooling, Until: t0}}
	b.ReportAllocs()
	for b.Loop() {
		mu.RLock()
		s := m["conn-7"]
		mu.RUnlock()
		_ = s
	}
}

// BenchmarkStatusAtRouter is the read a router makes for each candidate:
// one of eight connections, one of them cooling, the others untracked.
func BenchmarkStatusAtRouter(b *testing.B) {
	tr := New(Config{})
	ids := make([]string, 8)
	for i := range ids {
		ids[i] = fmt.Sprint("openai:conn-", i)
	}
	tr.FailAt(ids[2], rateLimit, t0)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_ = tr.StatusAt(ids[i&7], t0)
		i++
	}
}
