package metricscore

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/routeguard/routeguard/combo"
)

// ident names a string by where its bytes are and how many there are.
// Two strings with the same ident are equal; equal strings may have
// different idents (then they take two entries of an identTable).
type ident struct {
	p *byte
	n int
}

func identOf(s string) ident { return ident{unsafe.StringData(s), len(s)} }

// key is the label values of a counter series and its family, by ident,
// in five words: the strings by where their bytes are, their lengths
// packed in one word, and the family.
type key struct {
	p    [3]*byte
	lens uint64 // 16 bits each
	n    uint64
}

func (k *key) slot() int {
	return spread((addr(k.p[0])*31+addr(k.p[1]))*31 + addr(k.p[2]) ^ k.n<<56)
}

// eq is k == *o, field by field (the compiler's == calls memequal).
func (k *key) eq(o *key) bool {
	return k.p[0] == o.p[0] && k.p[1] == o.p[1] && k.p[2] == o.p[2] && k.lens == o.lens && k.n == o.n
}

func addr(p *byte) uint64 { return uint64(uintptr(unsafe.Pointer(p))) }

// setCounter makes k the key of the counter series of family f with
// labels l; it reports false when a label is too long to be part of one.
func (k *key) setCounter(f Family, l *[3]string) bool {
	if (len(l[0])|len(l[1])|len(l[2]))>>16 != 0 {
		return false
	}
	k.p = [3]*byte{unsafe.StringData(l[0]), unsafe.StringData(l[1]), unsafe.StringData(l[2])}
	k.lens = uint64(len(l[0])) | uint64(len(l[1]))<<16 | uint64(len(l[2]))<<32
	k.n = uint64(f)
	return true
}

// identSlots is the size of a table: a router names a few dozen label
// sets at most; past that, colliding entries replace each other and the
// slow path (a map lookup by value) answers.
const identSlots = 512

// table maps keys to the counter series their values name, with one
// atomic load and no hashing of the strings' bytes, which a map keyed by
// the label values would cost (about 440 instructions per lookup for the
// label values of an attempt). attemptTable and requestTable do the same
// for attempts and requests.
// An entry holds the strings its key points into, so their bytes cannot
// be freed and reused for other strings while it lives (a string whose
// bytes change under it, made with unsafe from a reused buffer, would
// break this as it breaks a map key). Entries are immutable; a slot is
// replaced whole.
type table[V any] struct {
	slots [identSlots]atomic.Pointer[entry[V]]
}

type entry[V any] struct {
	key  key
	hold [3]string
	v    V
}

// get returns the value stored for k, checking its slot and the next one.
func (t *table[V]) get(k *key) (V, bool) {
	i := k.slot()
	if e := t.slots[i].Load(); e != nil && e.key.eq(k) {
		return e.v, true
	}
	return t.next(k, i)
}

// next is get's second probe, out of line so that get stays small.
func (t *table[V]) next(k *key, i int) (v V, ok bool) {
	if e := t.slots[(i+1)%identSlots].Load(); e != nil && e.key.eq(k) {
		return e.v, true
	}
	return v, false
}

// put stores v for k, whose strings hold holds, in a free slot of the
// two, else in the first.
func (t *table[V]) put(k *key, hold [3]string, v V) {
	putSlot(&t.slots, k.slot(), &entry[V]{key: *k, hold: hold, v: v})
}

// putSlot stores e in slot i of slots when it is free, else in the next
// one when that is free, else in slot i.
func putSlot[E any](slots *[identSlots]atomic.Pointer[E], i int, e *E) {
	if slots[i].CompareAndSwap(nil, e) || slots[(i+1)%identSlots].CompareAndSwap(nil, e) {
		return
	}
	slots[i].Store(e)
}

// same reports whether a and b are the same string: the same bytes in
// the same place.
func same(a, b string) bool { return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b) }

// spread turns h into a slot index of identSlots.
func spread(h uint64) int {
	h ^= h >> 29
	h *= 0x9e3779b97f4a7c15
	return int(h >> 55) // 9 bits: identSlots
}

// attemptTable is a table for the series of attempts, keyed by what an
// attempt's series depends on: its target's provider, model and
// connection, its reason (the skip reason or the failure code), its
// outcome and its status. A lookup reads them from the attempt itself,
// hashing the strings' addresses and comparing each string's address and
// length with the entry's: it builds no key.
type attemptTable[V any] struct {
	slots [identSlots]atomic.Pointer[attemptEntry[V]]
}

type attemptEntry[V any] struct {
	provider, model, conn, reason, outcome string
	status                                 int
	v                                      V
}

func attemptSlot(a *combo.Attempt, reason string) int {
	h := addr(unsafe.StringData(a.Target.Provider)) ^ addr(unsafe.StringData(a.Target.Model))<<9 ^
		addr(unsafe.StringData(a.Target.Connection))<<18 ^ addr(unsafe.StringData(reason))<<27 ^
		addr(unsafe.StringData(string(a.Outcome)))<<36 ^ uint64(a.Status)<<45
	return spread(h)
}

// get returns the value stored for a with reason, checking its slot and
// the next one.
func (t *attemptTable[V]) get(a *combo.Attempt, reason string) (v V, ok bool) {
	i := attemptSlot(a, reason)
	if e := t.slots[i].Load(); e != nil && e.status == a.Status && same(e.provider, a.Target.Provider) &&
		same(e.model, a.Target.Model) && same(e.conn, a.Target.Connection) && same(e.reason, reason) &&
		same(e.outcome, string(a.Outcome)) {
		return e.v, true
	}
	return t.next(a, reason, i)
}

// next is get's second probe, out of line so that get stays small.
func (t *attemptTable[V]) next(a *combo.Attempt, reason string, i int) (v V, ok bool) {
	if e := t.slots[(i+1)%identSlots].Load(); e != nil && e.status == a.Status && same(e.provider, a.Target.Provider) &&
		same(e.model, a.Target.Model) && same(e.conn, a.Target.Connection) && same(e.reason, reason) &&
		same(e.outcome, string(a.Outcome)) {
		return e.v, true
	}
	return v, false
}

func (t *attemptTable[V]) put(a *combo.Attempt, reason string, v V) {
	e := &attemptEntry[V]{provider: a.Target.Provider, model: a.Target.Model, conn: a.Target.Connection,
		reason: reason, outcome: string(a.Outcome), status: a.Status, v: v}
	putSlot(&t.slots, attemptSlot(a, reason), e)
}

// shapeExclusions is how many exclusions a request's series can count
// with it; a request with more counts each exclusion on its own.
const shapeExclusions = 4

// requestTable is a table for the series of requests, keyed by what a
// request's series depends on: its combo, the attempts it made and the
// reasons of the exclusions it counts with it (none when it counts them
// one by one). A lookup reads them from the request itself, as
// attemptTable does.
type requestTable[V any] struct {
	slots [identSlots]atomic.Pointer[requestEntry[V]]
}

type requestEntry[V any] struct {
	combo   string
	made, n int
	reasons [shapeExclusions]combo.Reason
	v       V
}

// requestSlot is the slot of the series of combo name's requests that
// made attempts and count the exclusions x with them.
func requestSlot(name string, made int, x []combo.Exclusion) int {
	h := addr(unsafe.StringData(name)) ^ uint64(made)<<40 ^ uint64(len(x))<<56
	for i := range x {
		h = bits.RotateLeft64(h, 9) ^ addr(unsafe.StringData(string(x[i].Reason)))
	}
	return spread(h)
}

func (e *requestEntry[V]) is(name string, made int, x []combo.Exclusion) bool {
	if e.made != made || e.n != len(x) || !same(e.combo, name) {
		return false
	}
	for i := range x {
		if !same(string(e.reasons[i]), string(x[i].Reason)) {
			return false
		}
	}
	return true
}

// get returns the value stored for the requests of combo name that made
// attempts and count the exclusions x with them (at most
// shapeExclusions), checking its slot and the next one.
func (t *requestTable[V]) get(name string, made int, x []combo.Exclusion) (v V, ok bool) {
	i := requestSlot(name, made, x)
	if e := t.slots[i].Load(); e != nil && e.is(name, made, x) {
		return e.v, true
	}
	if e := t.slots[(i+1)%identSlots].Load(); e != nil && e.is(name, made, x) {
		return e.v, true
	}
	return v, false
}

func (t *requestTable[V]) put(name string, made int, x []combo.Exclusion, v V) {
	e := &requestEntry[V]{combo: name, made: made, n: len(x), v: v}
	for i := range x {
		e.reasons[i] = x[i].Reason
	}
	putSlot(&t.slots, requestSlot(name, made, x), e)
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

// Len returns how many values the Cache holds.
func (c *Cache[K, V]) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.keys)
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
// two words: the exclusion series of the requests whose exclusions are
// counted one by one. It keys by where the string is, as identTable does,
// so that no lookup hashes the string's bytes.
type strTable[V any] struct {
	slots [identSlots]atomic.Pointer[strEntry[V]]
}

type strEntry[V any] struct {
	key  ident
	hold string
	v    V
}

func (k ident) slot() int {
	h := addr(k.p)*31 + uint64(k.n)
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
	putSlot(&t.slots, k.slot(), &strEntry[V]{key: k, hold: s, v: v})
}
