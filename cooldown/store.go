package cooldown

import (
	"sync"
	"sync/atomic"
	"time"
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
// information any more and to enforce [Config.MaxEntries].
type Sweeper interface {
	// Len returns the number of entries.
	Len() int
	// Sweep deletes every entry for which drop returns true and returns
	// how many it deleted. drop is called from one goroutine at a time; it
	// must neither modify e nor call back into the store.
	Sweep(drop func(conn string, e *Entry) bool) int
}

const numShards = 64

// MemoryStore is the in-memory [Store]: a sharded map with one read-write
// mutex per shard. The zero value is not usable; call [NewMemoryStore].
type MemoryStore struct {
	count  atomic.Int64
	shards [numShards]memShard
}

type memShard struct {
	mu sync.RWMutex
	m  map[string]*Entry // protected by mu; entries are mutated only under mu
	_  [40]byte          // keeps shards on separate cache lines
}

var (
	_ Store   = (*MemoryStore)(nil)
	_ Sweeper = (*MemoryStore)(nil)
)

// NewMemoryStore returns an empty in-memory store.
func NewMemoryStore() *MemoryStore {
	s := &MemoryStore{}
	for i := range s.shards {
		s.shards[i].m = make(map[string]*Entry)
	}
	return s
}

// shard picks conn's shard from its length and its last four bytes, where
// connection ids usually differ, mixed by a multiplicative hash.
func (s *MemoryStore) shard(conn string) *memShard {
	h := uint32(len(conn)) << 27
	for i := max(0, len(conn)-4); i < len(conn); i++ {
		h ^= uint32(conn[i]) << (8 * uint(len(conn)-1-i))
	}
	return &s.shards[(h*0x9E3779B1)>>(32-6)]
}

// Load returns a copy of conn's entry. It does not allocate.
func (s *MemoryStore) Load(conn string) (Entry, bool) {
	sh := s.shard(conn)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	if p := sh.m[conn]; p != nil {
		return *p, true
	}
	return Entry{}, false
}

// statusAt is the hot path of [Tracker.StatusAt]: it writes conn's status
// at now into the zero Status st without copying the entry.
func (s *MemoryStore) statusAt(conn string, now time.Time, st *Status) {
	sh := s.shard(conn)
	sh.mu.RLock()
	if p := sh.m[conn]; p != nil {
		p.statusInto(now, st)
	}
	sh.mu.RUnlock()
}

// Update runs fn on conn's entry under the entry's shard lock.
func (s *MemoryStore) Update(conn string, fn func(e *Entry, found bool) bool) {
	sh := s.shard(conn)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p, found := sh.m[conn]
	if !found {
		p = new(Entry)
	}
	switch keep := fn(p, found); {
	case keep && !found:
		sh.m[conn] = p
		s.count.Add(1)
	case !keep && found:
		delete(sh.m, conn)
		s.count.Add(-1)
	}
}

// Range calls fn with every entry, one shard at a time; fn runs outside the
// shard's lock.
func (s *MemoryStore) Range(fn func(conn string, e Entry) bool) {
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
			buf = append(buf, kv{k, *p})
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
func (s *MemoryStore) Len() int { return int(s.count.Load()) }

// Sweep deletes every entry for which drop returns true.
func (s *MemoryStore) Sweep(drop func(conn string, e *Entry) bool) int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, p := range sh.m {
			if drop(k, p) {
				delete(sh.m, k)
				n++
			}
		}
		sh.mu.Unlock()
	}
	s.count.Add(int64(-n))
	return n
}
