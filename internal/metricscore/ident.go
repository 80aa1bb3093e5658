package metricscore

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// ident names a string by where its bytes are and how many there are.
// Two strings with the same ident are equal; equal strings may have
// different idents (then they take two entries of an identTable).
type ident struct {
	p *byte
	n int
}

func identOf(s string) ident { return ident{unsafe.StringData(s), len(s)} }

// identKey is up to five strings and an int, by ident.
type identKey struct {
	a, b, c, d, e ident
	n             int
}

// identSlots is the size of an identTable: a router names a few dozen
// label sets at most; past that, colliding entries replace each other and
// the slow path (a map lookup by value) answers.
const identSlots = 512

// identTable maps label strings, by ident, to the series their values
// name, with one atomic load and no hashing of the strings' bytes: it
// keeps the per-request recording cost within its budget
// (BenchmarkDoOverhead in both metrics packages, BenchmarkRouterOverhead
// in examples/gateway), which a map keyed by the six label values (about
// 440 instructions per lookup) does not. An entry holds the strings its
// key points into, so their bytes cannot be freed and reused for other
// strings while it lives (a string whose bytes change under it, made with
// unsafe from a reused buffer, would break this as it breaks a map key).
// Entries are immutable; a slot is replaced whole.
type identTable[V any] struct {
	slots [identSlots]atomic.Pointer[identEntry[V]]
}

type identEntry[V any] struct {
	key  identKey
	hold [5]string
	v    V
}

func (k *identKey) slot() int {
	h := uint64(uintptr(unsafe.Pointer(k.a.p)))
	h = h*31 + uint64(uintptr(unsafe.Pointer(k.b.p)))
	h = h*31 + uint64(uintptr(unsafe.Pointer(k.c.p)))
	h = h*31 + uint64(uintptr(unsafe.Pointer(k.d.p)))
	h = h*31 + uint64(uintptr(unsafe.Pointer(k.e.p)))
	h = h*31 + uint64(k.n)
	h ^= h >> 29
	h *= 0x9e3779b97f4a7c15
	return int(h >> 55) // 9 bits: identSlots
}

// eq is k == *o, field by field (the compiler's == calls memequal).
func (k *identKey) eq(o *identKey) bool {
	return k.a == o.a && k.b == o.b && k.c == o.c && k.d == o.d && k.e == o.e && k.n == o.n
}

// get returns the value stored for k, checking its slot and the next one.
func (t *identTable[V]) get(k *identKey) (V, bool) {
	i := k.slot()
	if e := t.slots[i].Load(); e != nil && e.key.eq(k) {
		return e.v, true
	}
	return t.next(k, i)
}

// next is get's second probe, out of line so that get stays small.
func (t *identTable[V]) next(k *identKey, i int) (v V, ok bool) {
	if e := t.slots[(i+1)%identSlots].Load(); e != nil && e.key.eq(k) {
		return e.v, true
	}
	return v, false
}

// put stores v for k in a free slot of the two, else in the first.
func (t *identTable[V]) put(k identKey, hold [5]string, v V) {
	i := k.slot()
	e := &identEntry[V]{key: k, hold: hold, v: v}
	if t.slots[i].CompareAndSwap(nil, e) {
		return
	}
	if t.slots[(i+1)%identSlots].CompareAndSwap(nil, e) {
		return
	}
	t.slots[i].Store(e)
}

// Cache keeps one value per key, made on first use: the sinks' series by
// label values, on their slow path.
type Cache[K comparable, V any] struct {
	mu   sync.RWMutex
	m    map[K]V
	keys []K // in the order made
	make func(K) V
}

// NewCache returns a Cache whose values mk makes.
func NewCache[K comparable, V any](mk func(K) V) *Cache[K, V] {
	return &Cache[K, V]{m: map[K]V{}, make: mk}
}

// Get returns the value of k, made by the Cache's func on first use.
func (c *Cache[K, V]) Get(k K) V {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok = c.m[k]; !ok {
		v = c.make(k)
		c.m[k] = v
		c.keys = append(c.keys, k)
	}
	return v
}

// Values returns every value, in the order they were made.
func (c *Cache[K, V]) Values() []V {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]V, len(c.keys))
	for i, k := range c.keys {
		out[i] = c.m[k]
	}
	return out
}

// strTable is an identTable for keys of one string, whose lookup compares
// two words: the request and exclusion series, looked up once per
// request and per exclusion. It keys by where the string is, as
// identTable does, so that no lookup hashes the string's bytes
// (BenchmarkRecord in combo/promcollector measures the path: about 26
// instructions per lookup).
type strTable[V any] struct {
	slots [identSlots]atomic.Pointer[strEntry[V]]
}

type strEntry[V any] struct {
	key  ident
	hold string
	v    V
}

func (k ident) slot() int {
	h := uint64(uintptr(unsafe.Pointer(k.p)))*31 + uint64(k.n)
	h ^= h >> 29
	h *= 0x9e3779b97f4a7c15
	return int(h >> 55) // 9 bits: identSlots
}

// get returns the value stored for s, checking its slot and the next one.
func (t *strTable[V]) get(s string) (v V, ok bool) {
	k := identOf(s)
	i := k.slot()
	if e := t.slots[i].Load(); e != nil && e.key == k {
		return e.v, true
	}
	if e := t.slots[(i+1)%identSlots].Load(); e != nil && e.key == k {
		return e.v, true
	}
	return v, false
}

// put stores v for s in a free slot of the two, else in the first.
func (t *strTable[V]) put(s string, v V) {
	k := identOf(s)
	i := k.slot()
	e := &strEntry[V]{key: k, hold: s, v: v}
	if t.slots[i].CompareAndSwap(nil, e) {
		return
	}
	if t.slots[(i+1)%identSlots].CompareAndSwap(nil, e) {
		return
	}
	t.slots[i].Store(e)
}
