// Package heap provides the index-tracking min-heap behind the eviction
// orders of the layers' keyed stores, and the time keys they order by.
package heap

import (
	"math"
	"time"
)

// Min is a 4-ary min-heap of *T by int64 keys that keeps each element's
// place in the element itself (through Pos: 0 when the element is not in
// the heap, its index plus one when it is), so that an element anywhere
// in the heap is removed or re-keyed in O(log n). The keys are stored
// beside the elements, so ordering the heap reads only its own array; four
// children share a cache line.
//
// Pos must be set before the first call; an element is in at most one
// heap per place Pos returns. Min is not safe for concurrent use.
type Min[T any] struct {
	s []slot[T]
	// Pos returns the place in e where the heap keeps e's index.
	Pos func(e *T) *int
}

type slot[T any] struct {
	k int64
	e *T
}

// Stamp is t as a heap key: nanoseconds since the Unix epoch on the wall
// clock (monotonic readings never count), saturated far outside the years
// 1678–2261, so that the zero time is the least key.
func Stamp(t time.Time) int64 {
	const limit = math.MaxInt64/1_000_000_000 - 1
	switch s := t.Unix(); {
	case s >= limit:
		return math.MaxInt64
	case s <= -limit:
		return math.MinInt64
	default:
		return s*1e9 + int64(t.Nanosecond())
	}
}

// Len returns the number of elements.
func (h *Min[T]) Len() int { return len(h.s) }

// Top returns the element with the least key and that key; nil when the
// heap is empty.
func (h *Min[T]) Top() (*T, int64) {
	if len(h.s) == 0 {
		return nil, 0
	}
	return h.s[0].e, h.s[0].k
}

// Has reports whether e is in the heap.
func (h *Min[T]) Has(e *T) bool { return *h.Pos(e) != 0 }

// Key returns e's key; e must be in the heap.
func (h *Min[T]) Key(e *T) int64 { return h.s[*h.Pos(e)-1].k }

// Set gives e the key k, adding e when it is not in the heap.
func (h *Min[T]) Set(e *T, k int64) {
	p := *h.Pos(e)
	if p == 0 {
		h.s = append(h.s, slot[T]{k, e})
		*h.Pos(e) = len(h.s)
		h.up(len(h.s) - 1)
		return
	}
	i := p - 1
	old := h.s[i].k
	h.s[i].k = k
	switch {
	case k < old:
		h.up(i)
	case k > old:
		h.down(i)
	}
}

// Remove takes e out of the heap; it is a no-op when e is not in it.
func (h *Min[T]) Remove(e *T) {
	p := *h.Pos(e)
	if p == 0 {
		return
	}
	*h.Pos(e) = 0
	i, last := p-1, len(h.s)-1
	moved := h.s[last]
	h.s[last] = slot[T]{}
	h.s = h.s[:last]
	if i == last {
		return
	}
	h.s[i] = moved
	*h.Pos(moved.e) = i + 1
	if i > 0 && moved.k < h.s[(i-1)/4].k {
		h.up(i)
	} else {
		h.down(i)
	}
}

// Pop removes and returns the element with the least key, or nil when the
// heap is empty.
func (h *Min[T]) Pop() *T {
	e, _ := h.Top()
	if e != nil {
		h.Remove(e)
	}
	return e
}

// Clear empties the heap.
func (h *Min[T]) Clear() {
	for _, x := range h.s {
		*h.Pos(x.e) = 0
	}
	clear(h.s)
	h.s = h.s[:0]
}

func (h *Min[T]) up(i int) {
	x := h.s[i]
	for i > 0 {
		p := (i - 1) / 4
		if x.k >= h.s[p].k {
			break
		}
		h.s[i] = h.s[p]
		*h.Pos(h.s[i].e) = i + 1
		i = p
	}
	h.s[i] = x
	*h.Pos(x.e) = i + 1
}

func (h *Min[T]) down(i int) {
	x := h.s[i]
	n := len(h.s)
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for j := c + 1; j < min(c+4, n); j++ {
			if h.s[j].k < h.s[m].k {
				m = j
			}
		}
		if h.s[m].k >= x.k {
			break
		}
		h.s[i] = h.s[m]
		*h.Pos(h.s[i].e) = i + 1
		i = m
	}
	h.s[i] = x
	*h.Pos(x.e) = i + 1
}
