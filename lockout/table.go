package lockout

import "sync/atomic"

// table is an open-addressing hash table of entries (linear probing) whose
// reads need no lock: lookups load slots atomically, while writers, holding
// their shard's mutex, publish entries into free slots, replace removed ones
// with the tombstone, and swap in a rebuilt table when too few slots stay
// free. At most three eighths of the slots are ever in use, which keeps
// probes short and makes every probe end at a free slot.
//
// The table stays, instead of sync.Map or a mutex-guarded map, because of
// BenchmarkLockedAtStandard, which runs LockedAt beside the same check over
// both standard layouts (a sync.Map keyed by the entry's key, and maps
// under sharded sync.RWMutex with hash/maphash for the shard), filled with
// the same entries, in one run. The standard layouts cost three to five
// times the instructions of the table (a hit about 1,200–1,800 against
// 490; a miss 2,100–3,400 against 720) and 150–400 ns a check against
// 20–70 ns, above the 50 ns a check may cost; the sharded read lock also
// makes parallel checks of one connection write to a shared cache line
// (BenchmarkLockedAtParallel).
type table struct {
	mask  uint64
	slots []slot
}

// slot holds an entry and a copy of its hash, so that a probe passes over
// the slots of other hashes without reading their entries. The hash is
// stored before the entry; a lookup that sees an entry then sees its hash
// (or, racing with a reuse of the slot, a newer one, which at worst makes
// it check the entry's key in full).
type slot struct {
	e    atomic.Pointer[entry]
	hash atomic.Uint64
}

// holds reports whether s holds a live entry that may have hash h; the
// caller has loaded e from s.
func (s *slot) holds(e *entry, h uint64) bool {
	return s.hash.Load() == h && e != tombstone
}

func (s *slot) store(e *entry) {
	s.hash.Store(e.hash)
	s.e.Store(e)
}

// tombstone fills the slot of a removed entry; probes pass over it.
var tombstone = new(entry)

const minTableSize = 16

func newTable(size int) *table {
	return &table{mask: uint64(size - 1), slots: make([]slot, size)}
}

// tableSizeFor returns the table size that keeps n entries at a quarter of
// the slots.
func tableSizeFor(n int) int {
	size := minTableSize
	for size < 4*n {
		size <<= 1
	}
	return size
}

// find returns the entry stored under k, whose hash is h, or nil. It is
// safe without the shard's lock.
func (t *table) find(h uint64, k key) *entry {
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		e := s.e.Load()
		if e == nil {
			return nil
		}
		if s.holds(e, h) && e.hash == h && e.key == k {
			return e
		}
	}
}

// insert publishes e, which must not be present yet. The caller holds the
// shard's lock.
func (sh *shard) insert(e *entry) {
	t := sh.tab.Load()
	if t == nil || 8*(sh.used+1) > 3*len(t.slots) {
		t = sh.rebuild(int(sh.live.Load()) + 1)
	}
	for i := e.hash & t.mask; ; i = (i + 1) & t.mask {
		switch t.slots[i].e.Load() {
		case nil:
			sh.used++
		case tombstone:
		default:
			continue
		}
		t.slots[i].store(e)
		sh.live.Add(1)
		if e.exact {
			sh.exact.Add(1)
		}
		return
	}
}

// rebuild replaces sh's table with a fresh one, sized for n entries, that
// holds the live entries and no tombstones. The old table is left as it
// was, so lookups still walking it stay correct. The caller holds the
// shard's lock.
func (sh *shard) rebuild(n int) *table {
	old := sh.tab.Load()
	t := newTable(tableSizeFor(max(n, int(sh.live.Load()))))
	used := 0
	if old != nil {
		for i := range old.slots {
			e := old.slots[i].e.Load()
			if e == nil || e == tombstone {
				continue
			}
			j := e.hash & t.mask
			for t.slots[j].e.Load() != nil {
				j = (j + 1) & t.mask
			}
			t.slots[j].store(e)
			used++
		}
	}
	sh.used = used
	sh.tab.Store(t)
	return t
}

// remove unlinks e from sh and reports whether it was present. The caller
// holds the shard's lock.
func (sh *shard) remove(e *entry) bool {
	t := sh.tab.Load()
	if t == nil {
		return false
	}
	for i := e.hash & t.mask; ; i = (i + 1) & t.mask {
		switch t.slots[i].e.Load() {
		case nil:
			return false
		case e:
			t.slots[i].e.Store(tombstone)
			e.view.Store(nil) // readers of an older table see it unlocked
			sh.live.Add(-1)
			if e.exact {
				sh.exact.Add(-1)
			}
			return true
		}
	}
}

// each calls fn for every entry of sh; fn may remove the entry it is given.
// The caller holds the shard's lock.
func (sh *shard) each(fn func(*entry)) {
	t := sh.tab.Load()
	if t == nil {
		return
	}
	for i := range t.slots {
		if e := t.slots[i].e.Load(); e != nil && e != tombstone {
			fn(e)
		}
	}
}

// compact shrinks sh's table after removals left it mostly empty or full
// of tombstones. The caller holds the shard's lock.
func (sh *shard) compact() {
	t := sh.tab.Load()
	if t == nil {
		return
	}
	live := int(sh.live.Load())
	if live == 0 {
		sh.tab.Store(nil)
		sh.used = 0
		return
	}
	if len(t.slots) > minTableSize && (tableSizeFor(live) < len(t.slots)/4 || sh.used > 2*live+len(t.slots)/8) {
		sh.rebuild(live)
	}
}
