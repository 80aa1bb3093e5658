package affinity

import (
	"encoding/hex"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/routeguard/routeguard/internal/heap"
)

// A StoreKey names one pin: a provider and the digest of a session [Key].
// It never contains the session value. StoreKey is comparable and suits a
// map key.
type StoreKey struct {
	Provider string
	Session  [32]byte // Key.Digest()
}

// String renders the key as "<provider>:<hex digest>", a form suitable for a
// shared store's key space or for logs.
func (k StoreKey) String() string {
	var h [64]byte
	hex.Encode(h[:], k.Session[:])
	return k.Provider + ":" + string(h[:])
}

// A Pin is the stored record of one session's connection.
type Pin struct {
	Connection string    // pinned connection id; never empty in a stored pin
	Created    time.Time // when this pin (to this connection) was made
	LastUsed   time.Time // last selection or success through the pin
	Expires    time.Time // the pin is dead from this instant on (sliding)
}

// Live reports whether the pin is usable at now: it names a connection and
// has not expired (Expires > now).
func (p Pin) Live(now time.Time) bool {
	return p.Connection != "" && p.Expires.After(now)
}

// An Entry is one stored pin, as listed by [Store.List].
type Entry struct {
	Key StoreKey
	Pin Pin
}

// Store keeps pins. [MemoryStore] is the in-memory default; a store shared by
// several replicas implements the same interface.
//
// Implementations must be safe for concurrent use. They own expiry: a pin is
// dead once Expires ≤ now, and a store must never return a dead pin. Errors
// are treated by [Pins] as "no pin" (affinity is a preference, never a
// requirement) and reported to [Config.OnError]. The affinitytest package
// checks an implementation against these rules.
type Store interface {
	// Load returns the live pin stored under key. A dead pin is reported
	// as absent (and may be deleted).
	Load(key StoreKey, now time.Time) (Pin, bool, error)
	// Save stores pin under key, replacing any earlier pin.
	Save(key StoreKey, pin Pin, now time.Time) error
	// Delete removes the pin under key and reports whether one existed.
	Delete(key StoreKey) (bool, error)
	// DeleteIf removes the pin under key only if it points at connection,
	// atomically, and reports whether it did.
	DeleteIf(key StoreKey, connection string) (bool, error)
	// List returns the live pins at now, in no particular order.
	List(now time.Time) ([]Entry, error)
}

// storeShards is the number of independently locked parts of a
// MemoryStore.
const storeShards = 32

// MemoryStore is the in-memory [Store]: a map from [StoreKey] to [Pin],
// split into 32 parts by the first byte of the session digest (which is
// already uniform, a SHA-256), each part with its own lock.
//
// It holds a bounded number of pins, divided evenly among the parts: a new
// pin written into a full part first removes its dead pins, then, if the part
// is still full, the pin that expires first (for pins of one lifetime, the
// least recently used). Dead pins are also removed when they are read and
// swept on every so many new pins; nothing runs in the background. Each part
// keeps its pins in expiry order as well, so a new pin costs O(log n) even in
// a full store, and a sweep visits only the pins it removes.
//
// The zero MemoryStore is ready to use and holds up to 100 000 pins.
type MemoryStore struct {
	perShard int // 0 in the zero MemoryStore: the default
	shards   [storeShards]memShard
}

type memShard struct {
	mu     sync.Mutex
	m      map[StoreKey]*pinSlot // lazily initialised
	exp    heap.Min[pinSlot]     // every pin of m, dead ones and then the one expiring first on top
	writes int                   // new pins since the last sweep
	free   []*pinSlot            // slots of removed pins, for new ones; at most maxFree
}

// maxFree bounds the slots a part keeps for reuse.
const maxFree = 64

// pinSlot is one stored pin, with its place in its part's expiry heap.
type pinSlot struct {
	key StoreKey
	pin Pin
	pos int
}

// expiryKey orders pins by expiry, on the wall clock; a pin without a
// connection is dead whatever its expiry, so it comes first.
func expiryKey(p *Pin) int64 {
	if p.Connection == "" {
		return math.MinInt64
	}
	return heap.Stamp(p.Expires)
}

func slotPos(p *pinSlot) *int { return &p.pos }

// NewMemoryStore returns a MemoryStore holding at most maxPins pins,
// rounded up to a multiple of 32 and to at least 128. maxPins ≤ 0 means
// 100 000.
func NewMemoryStore(maxPins int) *MemoryStore {
	return &MemoryStore{perShard: perShard(maxPins)}
}

func perShard(maxPins int) int {
	if maxPins <= 0 {
		maxPins = defaultMaxPins
	}
	return max((min(maxPins, maxBound)+storeShards-1)/storeShards, 4)
}

// shardCap returns the most pins one part holds.
func (s *MemoryStore) shardCap() int {
	if s.perShard == 0 {
		return perShard(0)
	}
	return s.perShard
}

// capacity returns the most pins the store holds.
func (s *MemoryStore) capacity() int { return s.shardCap() * storeShards }

func (s *MemoryStore) shard(key *StoreKey) *memShard {
	return &s.shards[key.Session[0]%storeShards]
}

// Load implements [Store]. A dead pin is deleted and reported as absent.
func (s *MemoryStore) Load(key StoreKey, now time.Time) (Pin, bool, error) {
	var p Pin
	ok := s.load(&key, now, &p)
	return p, ok, nil
}

// load is Load for [Pins], with fewer copies: the live pin under key is
// written to *out.
func (s *MemoryStore) load(key *StoreKey, now time.Time, out *Pin) bool {
	sh := s.shard(key)
	sh.mu.Lock()
	p := sh.m[*key]
	ok := p != nil
	if ok {
		if p.pin.Live(now) {
			*out = p.pin
		} else {
			sh.remove(p)
			ok = false
		}
	}
	sh.mu.Unlock()
	return ok
}

// Save implements [Store]. It never fails.
func (s *MemoryStore) Save(key StoreKey, pin Pin, now time.Time) error {
	sh := s.shard(&key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if p := sh.m[key]; p != nil {
		p.pin = pin
		sh.exp.Set(p, expiryKey(&pin))
		return nil
	}
	limit := s.shardCap()
	sh.writes++
	if sh.writes >= max(limit/2, 16) {
		sh.sweep(now)
	}
	var p *pinSlot
	if len(sh.m) >= limit {
		sh.sweep(now)
		if len(sh.m) >= limit {
			p = sh.evictSoonest()
		}
	}
	if sh.m == nil {
		sh.m = make(map[StoreKey]*pinSlot)
		sh.exp = heap.Min[pinSlot]{Pos: slotPos}
	}
	if p == nil {
		if n := len(sh.free); n > 0 {
			p, sh.free = sh.free[n-1], sh.free[:n-1]
		} else {
			p = new(pinSlot)
		}
	}
	p.key, p.pin = key, pin
	sh.m[key] = p
	sh.exp.Set(p, expiryKey(&pin))
	return nil
}

// remove deletes the pin p and keeps its slot for reuse. The part's lock
// must be held.
func (sh *memShard) remove(p *pinSlot) {
	delete(sh.m, p.key)
	sh.exp.Remove(p)
	if len(sh.free) < maxFree {
		*p = pinSlot{} // nothing outside the part refers to a slot
		sh.free = append(sh.free, p)
	}
}

// sweep removes dead pins, which are on top of the expiry heap. The part's
// lock must be held.
func (sh *memShard) sweep(now time.Time) {
	sh.writes = 0
	for p, _ := sh.exp.Top(); p != nil && !p.pin.Live(now); p, _ = sh.exp.Top() {
		sh.remove(p)
	}
}

// evictSoonest removes the pin that expires first and returns its slot for
// reuse, or nil when the part is empty. The part's lock must be held.
func (sh *memShard) evictSoonest() *pinSlot {
	p, _ := sh.exp.Top()
	if p != nil {
		delete(sh.m, p.key)
		sh.exp.Remove(p)
		*p = pinSlot{}
	}
	return p
}

// Delete implements [Store]. It never fails.
func (s *MemoryStore) Delete(key StoreKey) (bool, error) {
	sh := s.shard(&key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p := sh.m[key]
	if p != nil {
		sh.remove(p)
	}
	return p != nil, nil
}

// DeleteIf implements [Store]. It never fails.
func (s *MemoryStore) DeleteIf(key StoreKey, connection string) (bool, error) {
	sh := s.shard(&key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p := sh.m[key]
	if p == nil || p.pin.Connection != connection {
		return false, nil
	}
	sh.remove(p)
	return true, nil
}

// List implements [Store]. Entries are sorted by provider, then by expiry.
// It never fails.
func (s *MemoryStore) List(now time.Time) ([]Entry, error) {
	var out []Entry
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, p := range sh.m {
			if p.pin.Live(now) {
				out = append(out, Entry{Key: k, Pin: p.pin})
			}
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if c := strings.Compare(a.Key.Provider, b.Key.Provider); c != 0 {
			return c
		}
		return a.Pin.Expires.Compare(b.Pin.Expires)
	})
	return out, nil
}

// Len returns the number of stored pins, dead ones not yet removed included.
func (s *MemoryStore) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}
