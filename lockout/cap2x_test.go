package lockout_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/routeguard/routeguard/lockout"
)

// Twice MaxEntries distinct model locks leave the Lockout within
// MaxEntries at every step; the locks closest to expiry go first, so the
// newest (the latest to expire) are all kept.
func TestLocksStayWithinCapAfterTwiceTheCap(t *testing.T) {
	const limit = 64
	l := lockout.New(lockout.Config{Enabled: true, MaxEntries: limit})
	now := t0
	lock := func(i int) {
		l.LockAt(lockout.Failure{Provider: "openai", Connection: "conn", Model: "model-" + strconv.Itoa(i),
			Scope: lockout.ScopeModel, Cooldown: time.Hour}, now)
	}
	for i := range 2 * limit {
		now = now.Add(time.Millisecond)
		lock(i)
		if n := l.Len(); n > limit {
			t.Fatalf("after lock %d the Lockout holds %d entries, cap %d", i, n, limit)
		}
	}
	for i := range 2 * limit {
		_, _, locked := l.LockedAt("openai", "conn", "model-"+strconv.Itoa(i), now)
		if i >= 2*limit-limit*7/8 && !locked {
			t.Fatalf("lock %d, among the latest to expire, was evicted", i)
		}
		if i < limit && locked {
			t.Fatalf("lock %d, among the first to expire, was kept", i)
		}
	}
}
