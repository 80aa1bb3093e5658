package combo

import (
	"testing"
	"testing/synctest"
	"time"
)

// nowFrom, on the wall clock, reads the same instant as time.Now: between
// two readings taken around it, whether its anchor carries a monotonic
// reading or not, lies ahead or behind; in a synctest bubble it is the
// bubble's time exactly; with Config.Now it is that clock's reading.
func TestNowFromReadsTheRoutersClock(t *testing.T) {
	r := New(Config{})
	for _, anchor := range []time.Time{
		time.Now().Add(10 * time.Minute),
		time.Now().Add(-time.Hour),
		time.Now().Add(10 * time.Minute).Round(0), // no monotonic reading
		{},
	} {
		before := time.Now()
		got := r.nowFrom(anchor)
		after := time.Now()
		if got.Before(before) || got.After(after) {
			t.Errorf("nowFrom(%v) = %v, not within [%v, %v]", anchor, got, before, after)
		}
		if d := r.since(before); d < 0 {
			t.Errorf("since = %v, want >= 0", d)
		}
	}
	synctest.Test(t, func(t *testing.T) {
		anchor := time.Now().Add(10 * time.Minute)
		time.Sleep(3 * time.Second)
		if got, want := r.nowFrom(anchor), time.Now(); !got.Equal(want) {
			t.Errorf("in a bubble nowFrom = %v, want %v", got, want)
		}
		if got := r.since(anchor); got != -(10*time.Minute - 3*time.Second) {
			t.Errorf("since = %v, want %v", got, -(10*time.Minute - 3*time.Second))
		}
	})
	fixed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rc := New(Config{Now: func() time.Time { return fixed }})
	if got := rc.nowFrom(time.Now()); !got.Equal(fixed) {
		t.Errorf("with Config.Now nowFrom = %v, want %v", got, fixed)
	}
	if got := rc.since(fixed.Add(-time.Second)); got != time.Second {
		t.Errorf("with Config.Now since = %v, want 1s", got)
	}
}
