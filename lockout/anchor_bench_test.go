package lockout_test

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkEligibility puts LockedAt, the per-candidate eligibility check,
// beside its anchor, a lookup in a plain map of the same number of locks
// by a key built beforehand, in one run.
func BenchmarkEligibility(b *testing.B) {
	const n = 1000
	l := populated(b, n)
	now := t0.Add(time.Minute)
	b.Run("lockout=LockedAt/hit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, ok := l.LockedAt("openai", "conn-5", "model-5", now); !ok {
				b.Fatal("not locked")
			}
		}
	})
	b.Run("lockout=LockedAt/miss", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, ok := l.LockedAt("openai", "conn-5", "gpt-4o", now); ok {
				b.Fatal("locked")
			}
		}
	})
	m := make(map[string]time.Time, n)
	for i := range n {
		m["openai\x00conn-"+strconv.Itoa(i%100)+"\x00model-"+strconv.Itoa(i)] = t0.Add(time.Hour)
	}
	hit, miss := "openai\x00conn-5\x00model-5", "openai\x00conn-5\x00gpt-4o"
	b.Run("anchor=map/hit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if until, ok := m[hit]; !ok || !until.After(now) {
				b.Fatal("not locked")
			}
		}
	})
	b.Run("anchor=map/miss", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := m[miss]; ok {
				b.Fatal("locked")
			}
		}
	})
}
