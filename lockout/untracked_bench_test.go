package lockout_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/routeguard/routeguard/lockout"
)

// BenchmarkLockedAtUntracked is a router's screening: eight checks, one per
// connection of a combo, while one of the connections has a lock, then the
// success's decay on a connection with nothing to decay.
func BenchmarkLockedAtUntracked(b *testing.B) {
	l := lockout.New(lockout.Config{Enabled: true})
	l.LockAt(lockout.Failure{Provider: "p1", Connection: "c1", Model: "m", Status: 429, Cooldown: time.Minute}, t0)
	conns, providers := make([]string, 8), make([]string, 8)
	for i := range conns {
		conns[i], providers[i] = "c"+strconv.Itoa(i), "p"+strconv.Itoa(i%4)
	}
	now := t0.Add(time.Second)
	b.ReportAllocs()
	for b.Loop() {
		locked := 0
		for i, c := range conns {
			if _, _, ok := l.LockedAt(providers[i], c, "m", now); ok {
				locked++
			}
		}
		if locked != 1 {
			b.Fatalf("%d locked, want 1", locked)
		}
		l.DecayAt("p0", "c0", "m", now)
	}
}

// BenchmarkLockedAtOneLock checks, beside one lock, the locked model and a
// connection with no entry.
func BenchmarkLockedAtOneLock(b *testing.B) {
	l := lockout.New(lockout.Config{Enabled: true})
	l.LockAt(lockout.Failure{Provider: "openai", Connection: "conn-1", Model: "gpt-4o", Status: 429, Cooldown: time.Minute}, t0)
	now := t0.Add(time.Second)
	for _, c := range []struct {
		name, conn string
		want       bool
	}{{"hit", "conn-1", true}, {"untracked", "conn-2", false}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, got := l.LockedAt("openai", c.conn, "gpt-4o", now); got != c.want {
					b.Fatalf("locked = %v, want %v", got, c.want)
				}
			}
		})
	}
}
