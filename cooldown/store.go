package cooldown

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/routeguard/routeguard/internal/heap"
)

// Store holds the [Entry] of every tracked connection. Implementations must
// be safe for concurrent use. A shared store (for several gateway replicas)
// can replace the in-memory default without changing callers.
type Store interface {
	// Load returns a copy of conn's entry and whether it exists. It is on
	// the hot path of every request and should not allocate.
	Load(conn string) (Entry, bool)
	// Update runs fn on conn's entry atomically with respect to every other
	// Update of conn. fn receives the zero Entry and found == false when
	// conn has none; it returns whether the (possibly modified) entry is
	// kept: false deletes it. fn must not call back into the store.
	Update(conn string, fn func(e *Entry, found bool) (keep bool))
	// Range calls fn with a copy of every entry until fn returns false. It
	// need not be a consistent snapshot across connections, and fn may
	// call Update.
	Range(fn func(conn string, e Entry) bool)
}

// Sweeper is implemented by stores that can drop entries in bulk. A
// [Tracker] uses it, when present, to prune entries that carry no
// information any more and to enforce [Config.MaxEntries]; a store without
// it keeps every entry until the Tracker deletes it through Update. A store
// that wraps another should forward it.
type Sweeper interface {
	// Len returns the number of entries.
	Len() int
	// Sweep deletes every entry for which drop returns true and returns
	// how many it deleted. drop is called from one goroutine at a time; it
	// must neither modify e nor call back into the store.
	Sweep(drop func(conn string, e *Entry) bool) int
}

const numShards = 64

// memoryStore is the in-memory [Store]: a sharded map with one read-write
// mutex per shard. Reads take only their shard's read lock, and none at
// all for a connection whose shard holds no entry. Writes are
// serialised by wmu, which also guards the eviction order: once a Tracker
// is attached, every entry sits in the heaps its state gives, so that the
// entry caps and the idle prune find their victims in O(log n) without
// visiting the others.
type memoryStore struct {
	count  atomic.Int64
	shards [numShards]memShard

	wmu sync.Mutex // taken before any shard lock by every write
	// t is the Tracker whose caps and idle rule the store keeps; nil until
	// one is attached. Guarded by wmu.
	t *Tracker
	// idle holds the entries that become idle at their key (see
	// [Tracker.idleAt]), avail the entries whose State is Available by
	// Until, term the terminal entries by TerminalAt. Guarded by wmu.
	idle, avail, term heap.Min[slot]
	// spare holds the slots of entries dropped for the caps, for the next
	// new entries, so that a store at its cap allocates no slot; at most
	// what one eviction drops. Guarded by wmu.
	spare []*slot
}

type memShard struct {
	mu sync.RWMutex
	m  map[string]*slot // protected by mu; entries are mutated only under mu
	// n is len(m), stored under mu, so that a read of a connection in an
	// empty shard (most connections, most of the time) takes no lock.
	n atomic.Int32
	_ [36]byte // keeps shards on separate cache lines
}

// slot is one stored entry, with its places in the store's heaps (guarded
// by the store's wmu).
type slot struct {
	Entry
	conn                       string
	idlePos, availPos, termPos int
}

func idlePos(p *slot) *int  { return &p.idlePos }
func availPos(p *slot) *int { return &p.availPos }
func termPos(p *slot) *int  { return &p.termPos }

var (
	_ Store   = (*memoryStore)(nil)
	_ Sweeper = (*memoryStore)(nil)
)

// NewMemoryStore returns an empty in-memory store, the default of
// [Config.Store]: a sharded map with one read-write mutex per shard. It also
// implements [Sweeper], and its Load does not allocate. A Tracker reads it
// without copying entries when it is given the store itself rather than a
// wrapper.
func NewMemoryStore() Store {
	s := &memoryStore{}
	for i := range s.shards {
		s.shards[i].m = make(map[string]*slot)
	}
	s.idle.Pos, s.avail.Pos, s.term.Pos = idlePos, availPos, termPos
	return s
}

// shard picks conn's shard from its length and its last four bytes (the
// first, middle and last of a shorter id), where connection ids usually
// differ, mixed by a multiplicative hash. It takes no loop and is small
// enough to inline, so that the shard of a read costs a few instructions.
func (s *memoryStore) shard(conn string) *memShard {
	n := len(conn)
	h := uint32(n) << 27
	switch {
	case n >= 4:
		// unsafe: the last four bytes in one load, without a copy.
		h ^= *(*uint32)(unsafe.Pointer(unsafe.StringData(conn[n-4:])))
	case n > 0:
		h ^= uint32(conn[0])<<16 | uint32(conn[n/2])<<8 | uint32(conn[n-1])
	}
	return &s.shards[(h*0x9E3779B1)>>(32-6)]
}

// Load returns a copy of conn's entry. It does not allocate.
func (s *memoryStore) Load(conn string) (Entry, bool) {
	sh := s.shard(conn)
	if sh.n.Load() == 0 {
		return Entry{}, false
	}
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	if p := sh.m[conn]; p != nil {
		return p.Entry, true
	}
	return Entry{}, false
}

// statusIn is the hot path of [Tracker.StatusAt] for a connection whose
// shard sh holds entries (Tracker.statusInto answers the others without a
// lock): it writes conn's status at now into the zero Status st without
// copying the entry.
func (s *memoryStore) statusIn(sh *memShard, conn string, now time.Time, st *Status) {
	sh.mu.RLock()
	if p := sh.m[conn]; p != nil {
		p.statusInto(now, st)
	}
	sh.mu.RUnlock()
}

// dirty reports whether conn has an entry that is not clean (see
// [Entry.clean]), without copying it: the hot path of [Tracker.SucceedAt].
func (s *memoryStore) dirty(conn string) bool {
	sh := s.shard(conn)
	if sh.n.Load() == 0 {
		return false
	}
	sh.mu.RLock()
	p := sh.m[conn]
	d := p != nil && !p.clean()
	sh.mu.RUnlock()
	return d
}

// Update runs fn on conn's entry under the entry's shard lock. It keeps
// the eviction order but not the caps, which the attached Tracker keeps on
// its own writes.
func (s *memoryStore) Update(conn string, fn func(e *Entry, found bool) bool) {
	s.wmu.Lock()
	s.updateLocked(conn, fn)
	s.wmu.Unlock()
}

// updateAt is Update for the attached Tracker's write at now: afterwards it
// brings the store back within the caps, sparing conn, and returns the
// events of the entries it dropped (none without OnChange).
func (s *memoryStore) updateAt(conn string, now time.Time, fn func(e *Entry, found bool) bool) []Event {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.updateLocked(conn, fn)
	return s.capLocked(conn, now)
}

func (s *memoryStore) updateLocked(conn string, fn func(e *Entry, found bool) bool) {
	sh := s.shard(conn)
	sh.mu.Lock()
	p, found := sh.m[conn]
	if !found {
		if n := len(s.spare); n > 0 {
			p, s.spare = s.spare[n-1], s.spare[:n-1]
			p.conn = conn
		} else {
			p = &slot{conn: conn}
		}
	}
	keep := fn(&p.Entry, found)
	switch {
	case keep && !found:
		sh.m[conn] = p
		sh.n.Add(1)
		s.count.Add(1)
	case !keep && found:
		delete(sh.m, conn)
		sh.n.Add(-1)
		s.count.Add(-1)
	}
	sh.mu.Unlock()
	if keep {
		s.indexLocked(p)
	} else {
		s.unindexLocked(p)
	}
}

// attach makes the store keep t's caps and idle rule, ordering the entries
// it already holds.
func (s *memoryStore) attach(t *Tracker) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.t = t
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.RLock()
		for _, p := range sh.m {
			s.indexLocked(p)
		}
		sh.mu.RUnlock()
	}
}

// indexLocked puts p in the heaps its entry's state gives. s.wmu is held.
func (s *memoryStore) indexLocked(p *slot) {
	if s.t == nil {
		return
	}
	e := &p.Entry
	if at, ok := s.t.idleAt(e); ok {
		s.idle.Set(p, at)
	} else {
		s.idle.Remove(p)
	}
	if e.State == Available {
		s.avail.Set(p, heap.Stamp(e.Until))
	} else {
		s.avail.Remove(p)
	}
	if e.State.Terminal() {
		s.term.Set(p, heap.Stamp(e.TerminalAt))
	} else {
		s.term.Remove(p)
	}
}

func (s *memoryStore) unindexLocked(p *slot) {
	s.idle.Remove(p)
	s.avail.Remove(p)
	s.term.Remove(p)
}

// dropLocked deletes p's entry for the caps or the idle prune and appends
// its event when the Tracker has a hook. s.wmu is held.
func (s *memoryStore) dropLocked(p *slot, now time.Time, cause string, evs []Event) []Event {
	sh := s.shard(p.conn)
	sh.mu.Lock()
	if sh.m[p.conn] == p {
		delete(sh.m, p.conn)
		sh.n.Add(-1)
		s.count.Add(-1)
	}
	sh.mu.Unlock()
	s.unindexLocked(p)
	if s.t.cfg.OnChange != nil {
		evs = append(evs, dropped(p.conn, p.Options.Provider, p.status(now).State, now, cause))
	}
	if len(s.spare) <= s.t.cfg.MaxEntries/10 {
		*p = slot{} // no reader holds it: it left the map under the shard lock
		s.spare = append(s.spare, p)
	}
	return evs
}

// topExcept returns the least entry of h other than keep's, or nil.
func topExcept(h *heap.Min[slot], keep string) *slot {
	p, k := h.Top()
	if p == nil || p.conn != keep {
		return p
	}
	h.Remove(p)
	next, _ := h.Top()
	h.Set(p, k)
	return next
}

// capLocked keeps the caps after a write of keep at now. When more than
// MaxEntries entries are not terminal, it drops every idle entry, then, if
// still over, every available entry whose cooldown has ended, then the
// available entries whose cooldown ends first, down to nine tenths of the
// cap (so that the next writes do not evict again); keep is never dropped.
// When more than MaxTerminal entries are terminal, it drops those that
// became terminal first, down to the cap, sparing keep. Each drop costs
// O(log n). s.wmu is held.
func (s *memoryStore) capLocked(keep string, now time.Time) []Event {
	t := s.t
	if t == nil {
		return nil
	}
	var evs []Event
	live := func() int { return int(s.count.Load()) - s.term.Len() }
	if live() > t.cfg.MaxEntries {
		evs = s.pruneIdleLocked(now, evs)
	}
	if live() > t.cfg.MaxEntries {
		for p := topExcept(&s.avail, keep); p != nil && !now.Before(p.Until); p = topExcept(&s.avail, keep) {
			evs = s.dropLocked(p, now, causeMaxEntries, evs)
		}
		for low := t.cfg.MaxEntries * 9 / 10; live() > low; {
			p := topExcept(&s.avail, keep)
			if p == nil {
				break
			}
			evs = s.dropLocked(p, now, causeMaxEntries, evs)
		}
	}
	for s.term.Len() > t.cfg.MaxTerminal {
		p := topExcept(&s.term, keep)
		if p == nil {
			break
		}
		evs = s.dropLocked(p, now, causeMaxTerminal, evs)
	}
	return evs
}

// pruneIdle drops every entry that is idle at now and returns their events.
func (s *memoryStore) pruneIdle(now time.Time) []Event {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.t == nil {
		return nil
	}
	return s.pruneIdleLocked(now, nil)
}

// pruneIdleLocked drops the idle entries, which are on top of the idle
// heap. s.wmu is held.
func (s *memoryStore) pruneIdleLocked(now time.Time, evs []Event) []Event {
	for p, at := s.idle.Top(); p != nil && at <= heap.Stamp(now) && s.t.idle(&p.Entry, now); p, at = s.idle.Top() {
		evs = s.dropLocked(p, now, causeIdle, evs)
	}
	return evs
}

// Range calls fn with every entry, one shard at a time; fn runs outside the
// shard's lock.
func (s *memoryStore) Range(fn func(conn string, e Entry) bool) {
	type kv struct {
		k string
		e Entry
	}
	var buf []kv
	for i := range s.shards {
		sh := &s.shards[i]
		buf = buf[:0]
		sh.mu.RLock()
		for k, p := range sh.m {
			buf = append(buf, kv{k, p.Entry})
		}
		sh.mu.RUnlock()
		for _, x := range buf {
			if !fn(x.k, x.e) {
				return
			}
		}
	}
}

// Len returns the number of entries.
func (s *memoryStore) Len() int { return int(s.count.Load()) }

// Sweep deletes every entry for which drop returns true.
func (s *memoryStore) Sweep(drop func(conn string, e *Entry) bool) int {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, p := range sh.m {
			if drop(k, &p.Entry) {
				delete(sh.m, k)
				s.unindexLocked(p)
				n++
			}
		}
		sh.n.Store(int32(len(sh.m)))
		sh.mu.Unlock()
	}
	s.count.Add(int64(-n))
	return n
}
