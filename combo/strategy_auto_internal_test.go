package combo

import (
	"testing"
	"time"
)

// The auto strategy's latency cache is per router: one router's scoring
// fills its own cache and leaves another router's untouched.
func TestAutoLatencyCacheIsPerRouter(t *testing.T) {
	r1, r2 := New(Config{}), New(Config{})
	s1, _ := r1.Strategy(strategyAuto)
	s2, _ := r2.Strategy(strategyAuto)
	a1, a2 := s1.(*autoStrategy), s2.(*autoStrategy)
	if a1 == a2 {
		t.Fatal("two routers share one auto strategy")
	}
	avg := 250 * time.Millisecond
	want := latencyFactor(avg)
	if got := a1.lat.get(avg); got != want {
		t.Fatalf("factor = %v, want %v", got, want)
	}
	cached := func(a *autoStrategy) bool {
		for i := range a.lat.slots {
			if a.lat.slots[i].avg.Load() == int64(avg) {
				return true
			}
		}
		return false
	}
	if !cached(a1) {
		t.Fatal("the first router did not remember the factor")
	}
	if cached(a2) {
		t.Fatal("the second router's cache holds the first router's factor")
	}
	if got := a1.lat.get(avg); got != want {
		t.Fatalf("cached factor = %v, want %v", got, want)
	}
}
