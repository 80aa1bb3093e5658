package breaker

import (
	"sync/atomic"

	"github.com/routeguard/routeguard/internal/seedhash"
)

// index is the read side of a [Set]: its breakers by provider name, for
// lookups that take no lock and write nothing. It is an open-addressing
// hash table with linear probing over a power-of-two array of slots, each
// an atomic (hash, breaker) pair, kept at most half full.
//
// Only the Set's writers change a table, under the Set's lock; readers load
// its slots atomically and compare the name on the breaker itself, so a
// hit is a breaker of that provider that the Set held at some moment of
// the lookup, never another provider's. A removal shifts back the entries
// that follow the removed one (no tombstones, so a table at a steady size
// never needs rebuilding), and a reader probing across such a shift may
// miss an entry that is there: a miss is sure only when the table's moves
// counter was even and the same before and after the probe; otherwise the
// caller asks the Set's map under its lock. A table that would become more
// than half full is replaced by one twice as large, published with one
// pointer store; the old one is never written again, so a reader still
// probing it sees the Set as it was at the replacement.
type index struct {
	// moves is odd while a removal shifts entries, and counts the shifts.
	moves atomic.Uint64
	slots []slot
}

// slot is one entry of an index: nil b is free. hash is the hash of b's
// name; a reader may see the two of different entries while a writer
// changes the slot, and then it does not trust its miss.
type slot struct {
	hash atomic.Uint64
	b    atomic.Pointer[circuit]
}

// minIndexSlots is the size of a new Set's table.
const minIndexSlots = 8

// newIndex returns an empty table of n slots, a power of two.
func newIndex(n int) *index {
	return &index{slots: make([]slot, n)}
}

// find returns the breaker named name, whose hash is h, or nil; on nil,
// sure reports that the table held no such breaker at some moment of the
// call. A miss is not sure when the probe crossed a shift, or met an
// entry with h's hash but another name (while a writer changed the slot,
// or two names of the same hash); the caller then asks the map. It takes
// no lock and allocates nothing.
func (t *index) find(h uint64, name string) (b *circuit, sure bool) {
	m := t.moves.Load()
	slots := t.slots
	mask := uint64(len(slots) - 1)
	for i, n := h&mask, len(slots); n > 0; i, n = (i+1)&mask, n-1 {
		s := &slots[i]
		b := s.b.Load()
		if b == nil {
			return nil, m&1 == 0 && t.moves.Load() == m
		}
		if s.hash.Load() == h {
			// Nothing but b is needed after the comparison, which keeps
			// the probe's registers from being saved around it
			// (BenchmarkSetStateRouter).
			if b.name == name {
				return b, true
			}
			return nil, false
		}
	}
	return nil, false // only while writers keep shifting entries
}

// full reports whether the table would be more than half full with n
// entries.
func (t *index) full(n int) bool { return 2*n > len(t.slots) }

// grown returns a copy of t twice as large, not yet shared; for a nil t,
// an empty table of minIndexSlots. The Set's lock is held.
func (t *index) grown() *index {
	if t == nil {
		return newIndex(minIndexSlots)
	}
	nt := newIndex(2 * len(t.slots))
	for i := range t.slots {
		if b := t.slots[i].b.Load(); b != nil {
			nt.place(t.slots[i].hash.Load(), b)
		}
	}
	return nt
}

// place adds b, whose name hashes to h and which t does not hold, in the
// first free slot from h's; t must have one (it is at most half full).
// The Set's lock is held.
func (t *index) place(h uint64, b *circuit) {
	mask := uint64(len(t.slots) - 1)
	for i := h; ; i++ {
		s := &t.slots[i&mask]
		if s.b.Load() == nil {
			s.hash.Store(h)
			s.b.Store(b) // published last: a reader that sees b sees h
			return
		}
	}
}

// remove takes b, whose name hashes to h, out of t, then moves back every
// entry of the probe run that the freed slot would cut off from its home
// slot (backward-shift deletion). It changes nothing if t does not hold b.
// The Set's lock is held.
func (t *index) remove(h uint64, b *circuit) {
	mask := uint64(len(t.slots) - 1)
	hole := h & mask
	for n := 0; t.slots[hole].b.Load() != b; n++ {
		if n == len(t.slots) || t.slots[hole].b.Load() == nil {
			return
		}
		hole = (hole + 1) & mask
	}
	moved := false
	for j := (hole + 1) & mask; ; j = (j + 1) & mask {
		e := t.slots[j].b.Load()
		if e == nil {
			break
		}
		eh := t.slots[j].hash.Load()
		// e may fill the hole unless its home lies after the hole, in
		// (hole, j]: its distance from home must reach back to the hole.
		if (j-eh)&mask < (j-hole)&mask {
			continue
		}
		if !moved {
			moved = true
			t.moves.Add(1) // odd: misses are not sure until the shift ends
		}
		t.slots[hole].hash.Store(eh)
		t.slots[hole].b.Store(e) // e is in two slots until j is filled or freed
		hole = j
	}
	t.slots[hole].b.Store(nil)
	t.slots[hole].hash.Store(0)
	if moved {
		t.moves.Add(1)
	}
}

// The index hashes names with internal/seedhash rather than with
// maphash.String, which took about 65 instructions a short name, more than
// the probe, where seedhash takes about 30 (BenchmarkSetStateRouter and
// BenchmarkSetState1000, counted with callgrind). The seed is drawn at
// start-up, so where a name lands cannot be predicted from outside the
// process.
var hashSeed = seedhash.New()

// strhash returns the seeded 64-bit hash of s.
func strhash(s string) uint64 { return hashSeed.String(s) }
