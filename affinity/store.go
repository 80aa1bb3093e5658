package affinity

import (
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"
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
	m      map[uint64]memPin // by slot(key); lazily initialised
	spill  map[StoreKey]Pin  // pins whose slot is taken by another key; lazily initialised
	writes int               // writes since the last sweep
}

// memPin is a pin in memShard.m with the part of its key that the slot does
// not give back: the map key is a uint64, which hashes and compares faster
// than a StoreKey, and memPin stays small enough to be stored inline.
type memPin struct {
	provider string
	rest     [24]byte // Session[8:]
	pin      Pin
}

// slot returns the memShard.m key of key: the first 8 bytes of its session
// digest, which are uniformly distributed, mixed with the provider so that
// one session pinned for several providers takes several slots. Keys that
// share a slot are told apart by memPin and spill over into memShard.spill.
func slot(key StoreKey) uint64 {
	return binary.LittleEndian.Uint64(key.Session[:8]) ^ strMix(key.Provider)
}

// strMix folds a string into 64 bits: its length and its first and last
// (up to) 8 bytes, each multiplied by an odd constant. Its high bits depend
// on every byte of strings up to 16 bytes long.
func strMix(p string) uint64 {
	var head, tail uint64
	if b := unsafe.Slice(unsafe.StringData(p), len(p)); len(b) >= 8 {
		head = binary.LittleEndian.Uint64(b)
		tail = binary.LittleEndian.Uint64(b[len(b)-8:])
	} else {
		for i, c := range b {
			head |= uint64(c) << (8 * i)
		}
	}
	return (head*0x9E3779B97F4A7C15 ^ tail*0xC2B2AE3D27D4EB4F) + uint64(len(p))
}

func (e *memPin) is(key StoreKey) bool {
	return e.provider == key.Provider && e.rest == [24]byte(key.Session[8:])
}

// getInto copies the pin under key to *out and reports whether there was
// one.
func (sh *memShard) getInto(key *StoreKey, out *Pin) bool {
	if e, ok := sh.m[slot(*key)]; ok && e.is(*key) {
		*out = e.pin
		return true
	}
	if len(sh.spill) > 0 {
		p, ok := sh.spill[*key]
		*out = p
		return ok
	}
	return false
}

func (sh *memShard) get(key StoreKey) (Pin, bool) {
	if e, ok := sh.m[slot(key)]; ok && e.is(key) {
		return e.pin, true
	}
	if len(sh.spill) > 0 {
		p, ok := sh.spill[key]
		return p, ok
	}
	return Pin{}, false
}

func (sh *memShard) put(key StoreKey, pin Pin) {
	h := slot(key)
	e, ok := sh.m[h]
	switch {
	case ok && e.is(key):
		e.pin = pin
		sh.m[h] = e
		return
	case len(sh.spill) > 0:
		if _, ok := sh.spill[key]; ok {
			sh.spill[key] = pin
			return
		}
	}
	if !ok {
		if sh.m == nil {
			sh.m = make(map[uint64]memPin)
		}
		sh.m[h] = memPin{provider: key.Provider, rest: [24]byte(key.Session[8:]), pin: pin}
		return
	}
	if sh.spill == nil {
		sh.spill = make(map[StoreKey]Pin)
	}
	sh.spill[key] = pin
}

func (sh *memShard) del(key StoreKey) bool {
	h := slot(key)
	if e, ok := sh.m[h]; ok && e.is(key) {
		delete(sh.m, h)
		return true
	}
	if _, ok := sh.spill[key]; ok {
		delete(sh.spill, key)
		return true
	}
	return false
}

func (sh *memShard) len() int { return len(sh.m) + len(sh.spill) }

// each calls fn with every stored pin; fn may delete the pin it is given.
func (sh *memShard) each(fn func(StoreKey, Pin)) {
	for h, e := range sh.m {
		k := StoreKey{Provider: e.provider}
		binary.LittleEndian.PutUint64(k.Session[:8], h^strMix(e.provider))
		copy(k.Session[8:], e.rest[:])
		fn(k, e.pin)
	}
	for k, p := range sh.spill {
		fn(k, p)
	}
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
	var p Pin
	ok := s.load(&key, now, &p)
	return p, ok, nil
}

// load is Load for [Pins], with fewer copies: the live pin under key is
// written to *out.
func (s *MemoryStore) load(key *StoreKey, now time.Time, out *Pin) bool {
	sh := s.shard(*key)
	sh.mu.Lock()
	ok := sh.getInto(key, out)
	if ok && !out.Live(now) {
		sh.del(*key)
		*out, ok = Pin{}, false
	}
	sh.mu.Unlock()
	return ok
}

// Save implements [Store]. It never fails.
func (s *MemoryStore) Save(key StoreKey, pin Pin, now time.Time) error {
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.get(key); !ok {
		sh.writes++
		if sh.writes >= max(s.perShard/2, 16) {
			sh.sweep(now)
		}
		if sh.len() >= s.perShard {
			sh.sweep(now)
			if sh.len() >= s.perShard {
				sh.evictSoonest()
			}
		}
	}
	sh.put(key, pin)
	return nil
}

// sweep removes dead pins. The shard's lock must be held.
func (sh *memShard) sweep(now time.Time) {
	sh.writes = 0
	sh.each(func(k StoreKey, p Pin) {
		if !p.Live(now) {
			sh.del(k)
		}
	})
}

// evictSoonest removes the pin that expires first. The shard's lock must be
// held.
func (sh *memShard) evictSoonest() {
	var (
		victim StoreKey
		at     time.Time
		found  bool
	)
	sh.each(func(k StoreKey, p Pin) {
		if !found || p.Expires.Before(at) {
			victim, at, found = k, p.Expires, true
		}
	})
	if found {
		sh.del(victim)
	}
}

// Delete implements [Store]. It never fails.
func (s *MemoryStore) Delete(key StoreKey) (bool, error) {
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.del(key), nil
}

// DeleteIf implements [Store]. It never fails.
func (s *MemoryStore) DeleteIf(key StoreKey, connection string) (bool, error) {
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p, ok := sh.get(key)
	if !ok || p.Connection != connection {
		return false, nil
	}
	return sh.del(key), nil
}

// List implements [Store]. Entries are sorted by provider, then by expiry.
// It never fails.
func (s *MemoryStore) List(now time.Time) ([]Entry, error) {
	s.once.Do(func() { s.perShard = perShard(0) })
	var out []Entry
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.each(func(k StoreKey, p Pin) {
			if p.Live(now) {
				out = append(out, Entry{Key: k, Pin: p})
			}
		})
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
		n += sh.len()
		sh.mu.Unlock()
	}
	return n
}

// Cap returns the most pins the store holds.
func (s *MemoryStore) Cap() int {
	s.once.Do(func() { s.perShard = perShard(0) })
	return s.perShard * storeShards
}
