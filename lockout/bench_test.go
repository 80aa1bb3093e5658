package lockout_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/routeguard/routeguard/lockout"
)

// populated returns a Lockout holding n locks spread over 100 connections,
// a third of each key shape.
func populated(tb testing.TB, n int) *lockout.Lockout {
	tb.Helper()
	l := lockout.New(lockout.Config{Enabled: true, MaxEntries: 2 * n})
	scopes := []lockout.Scope{lockout.ScopeFamily, lockout.ScopeModel, lockout.ScopeExact}
	for i := range n {
		l.LockAt(lockout.Failure{
			Provider:   "openai",
			Connection: "conn-" + strconv.Itoa(i%100),
			Model:      "model-" + strconv.Itoa(i),
			Scope:      scopes[i%3],
			Cooldown:   time.Hour,
		}, t0)
	}
	if l.Len() != n {
		tb.Fatalf("Len() = %d, want %d", l.Len(), n)
	}
	return l
}

func BenchmarkLockedAt(b *testing.B) {
	for _, n := range []int{10, 1000, 100_000} {
		l := populated(b, n)
		now := t0.Add(time.Minute)
		cases := []struct {
			name, provider, conn, model string
			want                        bool
		}{
			{"hit", "openai", "conn-5", "model-5", true},
			{"miss", "openai", "conn-5", "gpt-4o", false},
			{"upper-case-miss", "openai", "conn-5", "GPT-4o", false},
			{"no-connection", "openai", "other", "gpt-4o", false},
			{"codex-family", "cx", "conn-5", "gpt-5.6-sol", false},
		}
		for _, c := range cases {
			b.Run(fmt.Sprintf("entries=%d/%s", n, c.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, _, got := l.LockedAt(c.provider, c.conn, c.model, now); got != c.want {
						b.Fatalf("locked = %v, want %v", got, c.want)
					}
				}
			})
		}
	}
}

func BenchmarkLockedAtParallel(b *testing.B) {
	l := populated(b, 100_000)
	now := t0.Add(time.Minute)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.LockedAt("openai", "conn-5", "model-5", now)
		}
	})
}

func BenchmarkRecordFailureAt(b *testing.B) {
	l := lockout.New(lockout.Config{Enabled: true})
	f := lockout.Failure{Provider: "openai", Connection: "c", Model: "gpt-4o", Status: 429}
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Millisecond)
		l.RecordFailureAt(f, now)
	}
}

func BenchmarkDecayAtNothingToDecay(b *testing.B) {
	l := populated(b, 1000)
	b.ReportAllocs()
	for b.Loop() {
		l.DecayAt("openai", "other", "gpt-4o", t0)
	}
}

// BenchmarkLockedAtSpread checks every locked model in turn, and as many
// unlocked ones, so that with many entries most checks miss the CPU caches.
func BenchmarkLockedAtSpread(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			l := populated(b, n)
			now := t0.Add(time.Minute)
			type probe struct{ conn, model string }
			probes := make([]probe, 0, 2*n)
			for i := range n {
				conn := "conn-" + strconv.Itoa(i%100)
				probes = append(probes, probe{conn, "model-" + strconv.Itoa(i)}, probe{conn, "other-" + strconv.Itoa(i)})
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				p := &probes[i]
				if _, _, locked := l.LockedAt("openai", p.conn, p.model, now); locked != (i%2 == 0) {
					b.Fatalf("%+v: locked = %v", *p, locked)
				}
				if i++; i == len(probes) {
					i = 0
				}
			}
		})
	}
}
