package heap

import (
	stdheap "container/heap"
	"math/rand/v2"
	"strconv"
	"testing"
)

// stdElems is container/heap's binary heap over the same elements, with
// the index tracking its documentation shows (Swap keeps each index).
type stdElems []*heapElem

func (s stdElems) Len() int           { return len(s) }
func (s stdElems) Less(i, j int) bool { return s[i].key < s[j].key }
func (s stdElems) Swap(i, j int) {
	s[i], s[j] = s[j], s[i]
	s[i].pos, s[j].pos = i, j
}
func (s *stdElems) Push(x any) {
	e := x.(*heapElem)
	e.pos = len(*s)
	*s = append(*s, e)
}
func (s *stdElems) Pop() any {
	old := *s
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*s = old[:len(old)-1]
	return e
}

// BenchmarkReplaceTop measures the eviction step of a full store: the
// least element goes and a new one with a later key comes in, against
// container/heap doing the same with its documented index tracking.
func BenchmarkReplaceTop(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		r := rand.New(rand.NewPCG(1, 2))
		keys := make([]int, n)
		for i := range keys {
			keys[i] = r.IntN(n)
		}
		b.Run("impl=Min/keys="+strconv.Itoa(n), func(b *testing.B) {
			h := Min[heapElem]{Pos: func(e *heapElem) *int { return &e.pos }}
			for _, k := range keys {
				h.Set(&heapElem{key: k}, int64(k))
			}
			next := n
			b.ReportAllocs()
			for b.Loop() {
				e := h.Pop()
				e.key = next
				h.Set(e, int64(next))
				next++
			}
		})
		b.Run("impl=container-heap/keys="+strconv.Itoa(n), func(b *testing.B) {
			var h stdElems
			for _, k := range keys {
				stdheap.Push(&h, &heapElem{key: k})
			}
			next := n
			b.ReportAllocs()
			for b.Loop() {
				e := stdheap.Pop(&h).(*heapElem)
				e.key = next
				stdheap.Push(&h, e)
				next++
			}
		})
	}
}
