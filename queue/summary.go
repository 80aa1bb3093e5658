package queue

import (
	"math/bits"
	"math/rand/v2"
	"sync/atomic"
)

// The summary lets [Queue.CheckAt] answer Admit without the lock on a
// queue that limits something, when what it reads settles the answer.
//
// Every key hashes to one of a fixed number of buckets. A bucket is one
// word: in its high half the number of hot gates (see heatLocked) whose
// keys hash to it, in its low half the requests running on them. A key
// whose bucket counts no hot gate has no waiters, no block, no rate limiter,
// spacing or reservoir, so the locked answer is Admit when the key has room
// under its cap, and the bucket's running count is at least the key's. A
// gate's changes reach its bucket in the same critical section, in an order
// that never shows a state more admitting than the gate's: a gate turns hot
// before it loses a running request, and a running request is counted
// before a gate cools down.
//
// The answer for a key the queue does not keep depends on room for a new
// key, which the summary knows only as "fewer keys than MaxKeys": the low
// bit of keys. Its next bit is set while every kept key is hot, when only
// a key not kept could be admitted here and the check goes straight to the
// lock. The high bits count the changes of the two, so a check that reads
// the same word before and after its bucket read both at one moment.
type summary struct {
	buckets []atomic.Uint64 // length a power of two
	shift   uint8           // 64 − log2(len(buckets))
	seed    uint64
	keys    atomic.Uint64 // changes<<2 | every key hot<<1 | fewer keys than MaxKeys
}

const (
	hotUnit     = 1 << 32
	runningMask = hotUnit - 1
	maxBuckets  = 1024
)

// init sizes the summary for a queue keeping at most maxKeys keys.
func (m *summary) init(maxKeys int) {
	n := 8
	for n < maxKeys && n < maxBuckets {
		n <<= 1
	}
	m.buckets = make([]atomic.Uint64, n)
	m.shift = uint8(64 - bits.TrailingZeros(uint(n)))
	m.seed = rand.Uint64() | 1
	m.keys.Store(1) // no key yet, and MaxKeys ≥ 1
}

// bucket returns key's bucket index.
//
// The hash reads the key's length and at most 24 of its bytes: the first,
// middle and last eight (all of a shorter key). hash/maphash.String costs
// about twice its instructions (about 64 against 32 on a short key), which
// every check pays, on the lock-free answer (BenchmarkCheckScreenOverrides)
// and on top of the locked one alike. Keys alike in the bytes read
// share a bucket, which costs only lock-free answers, never a wrong one.
func (m *summary) bucket(key string) uint32 {
	const k1, k2 = 0x9e3779b97f4a7c15, 0xbf58476d1ce4e5b9
	n := len(key)
	h := m.seed ^ uint64(n)*k1
	switch {
	case n >= 8:
		h = (h ^ le64(key[:8])) * k2
		h = (h ^ le64(key[n/2-4:])) * k2
		h ^= le64(key[n-8:])
	case n >= 4:
		h ^= le32(key[:4]) | le32(key[n-4:])<<32
	case n > 0:
		h ^= uint64(key[0]) | uint64(key[n/2])<<8 | uint64(key[n-1])<<16
	}
	h *= k1
	h ^= h >> 29
	h *= k2
	return uint32(h >> m.shift)
}

// le32 reads the first four bytes of s, which has at least four.
func le32(s string) uint64 {
	_ = s[3]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
}

// le64 reads the first eight bytes of s, which has at least eight.
func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// admits reports whether the summary alone shows that a request on key,
// under a concurrency cap of cap (0: none), would be admitted now. It reads
// atomics only.
func (m *summary) admits(key string, cap int) bool {
	if m.buckets == nil {
		return false
	}
	k := m.keys.Load()
	if k&3 != 1 {
		return false // a new key may find no room, or every key is hot
	}
	b := m.buckets[m.bucket(key)].Load()
	if m.keys.Load() != k {
		return false
	}
	return b>>32 == 0 && (cap <= 0 || b&runningMask < uint64(cap))
}

// setKeys records whether the queue keeps fewer keys than its cap, and
// whether every key it keeps is hot. q.mu is held for writing.
func (m *summary) setKeys(room, allHot bool) {
	if m.buckets == nil {
		return
	}
	var bits uint64
	if room {
		bits |= 1
	}
	if allHot {
		bits |= 2
	}
	if k := m.keys.Load(); k&3 != bits {
		m.keys.Store((k>>2+1)<<2 | bits)
	}
}

// addRunning changes the running count of g by d (±1), in g and in its
// bucket. q.mu is held for writing.
func (q *Queue) addRunning(g *gate, d int) {
	g.running += d
	if q.sum.buckets != nil {
		q.sum.buckets[g.bucket].Add(uint64(int64(d)))
	}
}

// addHot counts g in its bucket as hot (d = 1) or no longer (d = -1).
// q.mu is held for writing.
func (q *Queue) addHot(g *gate, d int) {
	q.hot += d
	if q.sum.buckets != nil {
		q.sum.buckets[g.bucket].Add(uint64(int64(d) * hotUnit))
	}
}
