package heap

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

type heapElem struct {
	key, pos int
}

// TestMinHeapAgainstSortedModel drives the heap with random insertions,
// re-keyings, removals and pops and checks it against a sorted slice after
// every step.
func TestMinAgainstSortedModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	h := Min[heapElem]{Pos: func(e *heapElem) *int { return &e.pos }}
	var in []*heapElem
	least := func() int {
		ks := make([]int, 0, len(in))
		for _, e := range in {
			ks = append(ks, e.key)
		}
		return slices.Min(ks)
	}
	for step := range 20000 {
		switch op := r.IntN(5); {
		case op == 0 || len(in) == 0:
			e := &heapElem{key: r.IntN(50)}
			h.Set(e, int64(e.key))
			in = append(in, e)
		case op == 1:
			e := in[r.IntN(len(in))]
			e.key = r.IntN(50)
			h.Set(e, int64(e.key))
		case op == 2:
			i := r.IntN(len(in))
			h.Remove(in[i])
			if h.Has(in[i]) {
				t.Fatal("removed element still in the heap")
			}
			in = slices.Delete(in, i, i+1)
		default:
			want := least()
			e := h.Pop()
			if e.key != want {
				t.Fatalf("step %d: Pop = %d, want %d", step, e.key, want)
			}
			in = slices.DeleteFunc(in, func(x *heapElem) bool { return x == e })
		}
		if h.Len() != len(in) {
			t.Fatalf("step %d: Len = %d, want %d", step, h.Len(), len(in))
		}
		if len(in) > 0 {
			if top, k := h.Top(); int64(top.key) != k || top.key != least() {
				t.Fatalf("step %d: Top = %d (key %d), want %d", step, top.key, k, least())
			}
		}
		for i, x := range h.s {
			if x.e.pos != i+1 || h.Key(x.e) != int64(x.e.key) {
				t.Fatalf("step %d: element at %d has pos %d", step, i, x.e.pos)
			}
		}
	}
	h.Clear()
	if e, _ := h.Top(); h.Len() != 0 || e != nil || h.Pop() != nil {
		t.Fatal("Clear left elements")
	}
}

func TestStamp(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	cases := []struct {
		t    time.Time
		want int64
	}{
		{time.Time{}, math.MinInt64},
		{time.Unix(0, 0), 0},
		{t0, t0.UnixNano()},
		{t0.Add(time.Nanosecond), t0.UnixNano() + 1},
		{time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), math.MaxInt64},
	}
	for _, c := range cases {
		if got := Stamp(c.t); got != c.want {
			t.Errorf("Stamp(%v) = %d, want %d", c.t, got, c.want)
		}
	}
	if Stamp(time.Now()) >= Stamp(time.Now().Add(time.Millisecond)) {
		t.Error("stamp does not follow the clock")
	}
}
