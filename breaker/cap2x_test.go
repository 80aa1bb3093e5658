package breaker

import (
	"strconv"
	"testing"
	"time"
)

// Twice MaxBreakers distinct failing providers leave the Set at
// MaxBreakers breakers at every step, the closed breaker whose last
// failure is oldest going first.
func TestSetStaysWithinCapAfterTwiceTheCap(t *testing.T) {
	const limit = 64
	s := NewSet(Config{MaxBreakers: limit})
	now := t0
	fail := Report{Outcome: Failure}
	for i := range 2 * limit {
		now = now.Add(time.Millisecond)
		s.ReportAt("p"+strconv.Itoa(i), fail, now)
		n := s.Len()
		if n > limit {
			t.Fatalf("after provider %d the Set holds %d breakers, cap %d", i, n, limit)
		}
	}
	for i := range 2 * limit {
		if want := i >= limit; (s.lookup("p"+strconv.Itoa(i)) != nil) != want {
			t.Fatalf("provider %d held = %v, want %v (the oldest last failure goes)", i, !want, want)
		}
	}
}
