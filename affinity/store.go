package affinity

import (
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"time"
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
// requirement) and reported to [Config.OnError].
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

// DefaultMaxPins is the capacity of a [MemoryStore] created with a
// non-positive size.
const DefaultMaxPins = 100_000

const storeShards = 32

// MemoryStore is the in-memory [Store]. It is split into shards, each with
// its own lock, and holds at most a fixed number of pins: a write into a
// full shard first removes dead pins, then, if the shard is still full, the
// pin that expires first. Dead pins are also removed on read and swept
// periodically on write; nothing runs in the background.
//
// The zero MemoryStore is ready to use with capacity [DefaultMaxPins].
type MemoryStore struct {
	once     sync.Once
	perShard int
	shards   [storeShards]memShard
}

type memShard struct {
	mu     sync.Mutex
	m      map[StoreKey]Pin // lazily initialised
	writes int              // writes since the last sweep
}

// NewMemoryStore returns a MemoryStore holding at most maxPins pins,
// rounded up to a multiple of 32 and to at least 128. maxPins ≤ 0 means
// [DefaultMaxPins].
func NewMemoryStore(maxPins int) *MemoryStore {
	s := &MemoryStore{}
	s.once.Do(func() { s.perShard = perShard(maxPins) })
	return s
}

func perShard(maxPins int) int {
	if maxPins <= 0 {
		maxPins = DefaultMaxPins
	}
	return max((maxPins+storeShards-1)/storeShards, 4)
}

func (s *MemoryStore) shard(key StoreKey) *memShard {
	s.once.Do(func() { s.perShard = perShard(0) })
	return &s.shards[int(key.Session[0])%storeShards]
}

// Load implements [Store]. A dead pin is deleted and reported as absent.
func (s *MemoryStore) Load(key StoreKey, now time.Time) (Pin, bool, error) {
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p, ok := sh.m[key]
	if !ok {
		return Pin{}, false, nil
	}
	if !p.Live(now) {
		delete(sh.m, key)
		return Pin{}, false, nil
	}
	return p, true, nil
}

// Save implements [Store]. It never fails.
func (s *MemoryStore) Save(key StoreKey, pin Pin, now time.Time) error {
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m == nil {
		sh.m = make(map[StoreKey]Pin)
	}
	if _, ok := sh.m[key]; !ok {
		sh.writes++
		if sh.writes >= max(s.perShard/2, 16) {
			sh.sweep(now)
		}
		if len(sh.m) >= s.perShard {
			sh.sweep(now)
			if len(sh.m) >= s.perShard {
				sh.evictSoonest()
			}
		}
	}
	sh.m[key] = pin
	return nil
}

// sweep removes dead pins. The shard's lock must be held.
func (sh *memShard) sweep(now time.Time) {
	sh.writes = 0
	for k, p := range sh.m {
		if !p.Live(now) {
			delete(sh.m, k)
		}
	}
}

// evictSoonest removes the pin that expires first. The shard's lock must be
// held.
func (sh *memShard) evictSoonest() {
	var (
		victim StoreKey
		at     time.Time
		found  bool
	)
	for k, p := range sh.m {
		if !found || p.Expires.Before(at) {
			victim, at, found = k, p.Expires, true
		}
	}
	if found {
		delete(sh.m, victim)
	}
}

// Delete implements [Store]. It never fails.
func (s *MemoryStore) Delete(key StoreKey) (bool, error) {
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	_, ok := sh.m[key]
	delete(sh.m, key)
	return ok, nil
}

// DeleteIf implements [Store]. It never fails.
func (s *MemoryStore) DeleteIf(key StoreKey, connection string) (bool, error) {
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p, ok := sh.m[key]
	if !ok || p.Connection != connection {
		return false, nil
	}
	delete(sh.m, key)
	return true, nil
}

// List implements [Store]. Entries are sorted by provider, then by expiry.
// It never fails.
func (s *MemoryStore) List(now time.Time) ([]Entry, error) {
	s.once.Do(func() { s.perShard = perShard(0) })
	var out []Entry
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, p := range sh.m {
			if p.Live(now) {
				out = append(out, Entry{Key: k, Pin: p})
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

// Cap returns the most pins the store holds.
func (s *MemoryStore) Cap() int {
	s.once.Do(func() { s.perShard = perShard(0) })
	return s.perShard * storeShards
}
