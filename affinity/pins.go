package affinity

import (
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultPriority is the priority of a connection that has none; lower
// priorities are preferred.
const DefaultPriority = 999

// A Candidate is one connection the caller has already found eligible for a
// request: not cooling down, not terminal, not locked for the model, not
// excluded for this request, and allowed for the caller.
type Candidate struct {
	Connection string // connection id, unique across providers; empty ids are ignored
	Priority   int    // lower is preferred; use DefaultPriority when unknown
}

// A Request names the session a selection is for.
type Request struct {
	Provider string
	Key      Key
	// TTL overrides the pin lifetime for this request when positive
	// (held at 24 h); otherwise [Config.TTLFor] decides.
	TTL time.Duration
}

// A Choice is the outcome of a selection.
type Choice struct {
	// Connection is the chosen candidate.
	Connection string
	// Pinned is true when Connection is the session's live pin, false when
	// it is a new choice (the least recently used candidate).
	Pinned bool
	// Dropped is the connection of a live pin that is not among the
	// candidates, or "". A committing selection removes that pin for good.
	Dropped string
}

// The reasons an [Event] gives.
const (
	reasonPinned   = "pinned"
	reasonRebound  = "rebound"
	reasonUnpinned = "unpinned"
	reasonEvicted  = "evicted"
)

// An Event reports one pin change to [Config.OnChange]: a pin made, moved
// to another connection, or removed. It carries the pin as it is after the
// change, so a listener can mirror the pins without reading the store: a
// made or moved pin has Created = LastUsed = At and expires at Until.
//
// Sliding a live pin's expiry on use is not reported, and neither is a pin
// that expires or that the store drops to stay within its bound.
type Event struct {
	Provider string
	// Session is the hex SHA-256 digest of the session key, as in
	// [PinInfo]; never the session value.
	Session string
	// Connection is the connection the session is pinned to after the
	// change; "" when Removed.
	Connection string
	// From is the connection the session was pinned to before the change;
	// "" for a new pin.
	From string
	// Reason is "pinned" (a session without a pin was pinned), "rebound"
	// (the pin moved from From to Connection), "unpinned" (removed because
	// its connection was not a candidate any more, or by [Pins.UnpinAt]) or
	// "evicted" (removed by [Pins.EvictAt]).
	Reason string
	// At is the caller's now of the change.
	At time.Time
	// Until is when the pin expires; zero when Removed.
	Until time.Time
	// Removed is true when the session has no pin any more.
	Removed bool
}

// Pins pins client sessions to connections, per provider.
//
// A pin lives for its TTL after its last use (sliding expiry, in steps of at
// most a second). Selection only ever chooses among the caller's
// candidates: a live pin whose connection is a candidate wins; a pin whose
// connection is not a candidate is dropped for good (hard rebind); otherwise
// the least recently used candidate is chosen: candidates never used first
// (lower priority first), then the one used longest ago, then the one with
// fewer consecutive uses, then lower priority, then candidate order.
//
// There are two ways to use Pins. [Pins.SelectAt] (and [Pins.ChooseAt])
// commit at once: a hit slides the pin, a new choice is pinned before the
// request is sent. Callers that want to pin only a connection that has
// served the request call [Pins.PlanAt], which changes nothing, and after a
// success [Pins.PinAt]; callers record the use of connections chosen by
// other means with [Pins.RecordUseAt].
//
// Connection use (for the least-recently-used choice) is tracked in memory,
// per Pins value. Create Pins with [New]; the zero Pins is not usable.
// Pins is safe for concurrent use; two concurrent first
// requests of one session may choose different connections, and the later
// pin wins.
type Pins struct {
	cfg      atomic.Pointer[Config] // normalised
	store    Store
	mem      *MemoryStore // store, when it is a MemoryStore
	usage    usageTable
	onChange func(Event)
	onError  func(error)
}

// New returns Pins configured by cfg, after [Config.Normalize].
func New(cfg Config) *Pins {
	cfg = cfg.Normalize()
	p := &Pins{store: cfg.Store, onChange: cfg.OnChange, onError: cfg.OnError}
	if p.store == nil {
		p.store = NewMemoryStore(cfg.MaxPins)
	}
	p.mem, _ = p.store.(*MemoryStore)
	p.cfg.Store(&cfg)
	p.usage.init(cfg.MaxConnections)
	return p
}

// SetTTL replaces the pin lifetimes in force, as [Config.TTL] and
// [Config.ProviderTTL] (normalised the same way; the map is copied). Live
// pins keep their expiry; the new lifetimes apply from their next use.
func (p *Pins) SetTTL(ttl time.Duration, providerTTL map[string]time.Duration) {
	c := *p.cfg.Load()
	c.TTL, c.ProviderTTL = ttl, providerTTL
	c = c.Normalize()
	p.cfg.Store(&c)
}

// TTLFor resolves the pin lifetime of a request, as [Config.TTLFor] with
// the lifetimes in force.
func (p *Pins) TTLFor(provider string, requested time.Duration) time.Duration {
	return p.cfg.Load().TTLFor(provider, requested)
}

// SelectAt chooses the connection for the session key among candidates and
// commits the choice: a live pin among the candidates is used and its expiry
// slides to now + TTL; a live pin outside the candidates is removed; a new
// choice is pinned. It reports false, changing nothing, when key is zero,
// there is no candidate, or affinity is disabled for provider; the caller's
// own strategy then decides. A hit allocates nothing with the default store,
// and writes the pin to the store only when it slides it by at least a
// second (a sixteenth of the TTL when that is shorter): the stored expiry of
// a busy session trails now + TTL by less than that step.
func (p *Pins) SelectAt(provider string, key Key, candidates []Candidate, now time.Time) (string, bool) {
	c, ok := p.ChooseAt(Request{Provider: provider, Key: key}, candidates, now)
	return c.Connection, ok
}

// ChooseAt is SelectAt for a [Request], which may carry a per-request TTL,
// returning the whole [Choice].
func (p *Pins) ChooseAt(r Request, candidates []Candidate, now time.Time) (Choice, bool) {
	return p.choose(r, candidates, now, true)
}

// PlanAt makes the same choice as [Pins.ChooseAt] without committing it: no
// pin is created, slid or removed, and no use is recorded (a store may still
// delete a dead pin it reads). Commit with [Pins.PinAt] once the chosen
// connection has served the request.
//
// PlanAt also serves a caller that has a connection forced on it by its
// routing strategy: a Choice with Pinned set names a live pin among the
// eligible candidates, which should be preferred over the forced one so
// that re-scoring does not silently move the session.
func (p *Pins) PlanAt(r Request, candidates []Candidate, now time.Time) (Choice, bool) {
	return p.choose(r, candidates, now, false)
}

func (p *Pins) choose(r Request, candidates []Candidate, now time.Time, commit bool) (Choice, bool) {
	ttl := p.TTLFor(r.Provider, r.TTL)
	if r.Key.IsZero() || ttl <= 0 || len(candidates) == 0 {
		return Choice{}, false
	}
	sk := StoreKey{Provider: r.Provider, Session: r.Key.sum}
	pin, ok := p.load(sk, now)
	var dropped string
	if ok {
		if i := indexOf(candidates, pin.Connection); i >= 0 {
			if commit {
				p.touch(sk, pin, now, ttl)
			}
			return Choice{Connection: pin.Connection, Pinned: true}, true
		}
		dropped = pin.Connection
	}
	i := p.leastRecentlyUsed(candidates)
	if i < 0 {
		if commit && dropped != "" {
			p.unpin(sk, dropped, reasonUnpinned, now)
		}
		return Choice{Dropped: dropped}, false
	}
	conn := candidates[i].Connection
	if commit {
		p.pin(sk, dropped, conn, now, ttl)
	}
	return Choice{Connection: conn, Dropped: dropped}, true
}

// PinAt pins the session to connection, typically after connection has
// served the request, and records the use of connection. A live pin to the
// same connection slides (keeping its creation time) in the steps described
// at [Pins.SelectAt]; a pin to another connection is replaced. It reports
// false, changing nothing, when the key is zero, connection is empty, or
// affinity is disabled for the provider.
func (p *Pins) PinAt(r Request, connection string, now time.Time) bool {
	ttl := p.TTLFor(r.Provider, r.TTL)
	if r.Key.IsZero() || connection == "" || ttl <= 0 {
		return false
	}
	sk := StoreKey{Provider: r.Provider, Session: r.Key.sum}
	pin, ok := p.load(sk, now)
	if ok && pin.Connection == connection {
		p.touch(sk, pin, now, ttl)
		return true
	}
	p.pin(sk, pin.Connection, connection, now, ttl)
	return true
}

// RecordUseAt records that connection served a request at now, for the
// least-recently-used choice of new pins. Selection and pinning record use
// themselves; call this for connections chosen without a session key.
func (p *Pins) RecordUseAt(connection string, now time.Time) {
	if connection != "" {
		p.usage.record(connection, now, false)
	}
}

// EvictAt removes the session's pin to provider only if it points at
// connection, as after that connection timed out on this session's request,
// and reports whether it did. A pin to another connection is left alone.
// now only stamps the reported [Event].
func (p *Pins) EvictAt(provider string, key Key, connection string, now time.Time) bool {
	if key.IsZero() || connection == "" {
		return false
	}
	return p.unpin(StoreKey{Provider: provider, Session: key.sum}, connection, reasonEvicted, now)
}

// UnpinAt removes the session's pin to provider, whatever it points at, and
// reports whether there was one.
func (p *Pins) UnpinAt(provider string, key Key, now time.Time) bool {
	if key.IsZero() {
		return false
	}
	sk := StoreKey{Provider: provider, Session: key.sum}
	var from string
	if p.onChange != nil {
		if pin, ok := p.load(sk, now); ok {
			from = pin.Connection
		}
	}
	ok, err := p.store.Delete(sk)
	if err != nil {
		p.fail(err)
		return false
	}
	if ok {
		p.emit(sk, Event{From: from, Reason: reasonUnpinned, At: now, Removed: true})
	}
	return ok
}

// LookupAt returns the session's live pin to provider, without using it.
func (p *Pins) LookupAt(provider string, key Key, now time.Time) (Pin, bool) {
	if key.IsZero() {
		return Pin{}, false
	}
	return p.load(StoreKey{Provider: provider, Session: key.sum}, now)
}

// PinInfo describes one live pin in a [Snapshot].
type PinInfo struct {
	Provider   string
	Session    string // hex SHA-256 digest of the session key
	Connection string
	Created    time.Time
	LastUsed   time.Time
	Expires    time.Time
	Remaining  time.Duration // Expires − now
}

// ConnectionUse describes the recorded use of one connection in a
// [Snapshot].
type ConnectionUse struct {
	Connection string
	LastUsed   time.Time
	Uses       int // consecutive uses, reset to 1 when a new pin is made to it
}

// A Snapshot lists the state of [Pins] at one instant, as plain data.
type Snapshot struct {
	At          time.Time
	Pins        []PinInfo       // sorted by provider, then expiry
	Connections []ConnectionUse // sorted by connection id
}

// SnapshotAt lists the live pins and the recorded connection use at now.
// A store error is reported to OnError and leaves Pins empty.
func (p *Pins) SnapshotAt(now time.Time) Snapshot {
	s := Snapshot{At: now}
	entries, err := p.store.List(now)
	if err != nil {
		p.fail(err)
	}
	for _, e := range entries {
		s.Pins = append(s.Pins, PinInfo{
			Provider:   e.Key.Provider,
			Session:    hex.EncodeToString(e.Key.Session[:]),
			Connection: e.Pin.Connection,
			Created:    e.Pin.Created,
			LastUsed:   e.Pin.LastUsed,
			Expires:    e.Pin.Expires,
			Remaining:  e.Pin.Expires.Sub(now),
		})
	}
	slices.SortStableFunc(s.Pins, func(a, b PinInfo) int {
		if c := strings.Compare(a.Provider, b.Provider); c != 0 {
			return c
		}
		return a.Expires.Compare(b.Expires)
	})
	s.Connections = p.usage.list()
	return s
}

func (p *Pins) load(sk StoreKey, now time.Time) (Pin, bool) {
	if p.mem != nil {
		var pin Pin
		ok := p.mem.load(&sk, now, &pin)
		return pin, ok
	}
	pin, ok, err := p.store.Load(sk, now)
	if err != nil {
		p.fail(err)
		return Pin{}, false
	}
	if !ok || !pin.Live(now) {
		return Pin{}, false
	}
	return pin, true
}

func (p *Pins) save(sk StoreKey, pin Pin, now time.Time) {
	if err := p.store.Save(sk, pin, now); err != nil {
		p.fail(err)
	}
}

// pin makes a new pin of sk to conn, replacing a pin to from (or none),
// and records the use of conn.
func (p *Pins) pin(sk StoreKey, from, conn string, now time.Time, ttl time.Duration) {
	until := now.Add(ttl)
	p.save(sk, Pin{Connection: conn, Created: now, LastUsed: now, Expires: until}, now)
	p.usage.record(conn, now, true)
	reason := reasonPinned
	if from != "" {
		reason = reasonRebound
	}
	p.emit(sk, Event{Connection: conn, From: from, Reason: reason, At: now, Until: until})
}

// unpin removes the pin of sk if it points at conn and reports whether it
// did.
func (p *Pins) unpin(sk StoreKey, conn, reason string, now time.Time) bool {
	ok, err := p.store.DeleteIf(sk, conn)
	if err != nil {
		p.fail(err)
		return false
	}
	if ok {
		p.emit(sk, Event{From: conn, Reason: reason, At: now, Removed: true})
	}
	return ok
}

// emit completes e with the key of sk and reports it.
func (p *Pins) emit(sk StoreKey, e Event) {
	if p.onChange == nil {
		return
	}
	e.Provider, e.Session = sk.Provider, hex.EncodeToString(sk.Session[:])
	p.onChange(e)
}

func (p *Pins) fail(err error) {
	if p.onError != nil {
		p.onError(err)
	}
}

// slideStep bounds how far a used pin's stored expiry may trail now + TTL:
// a use that would move the pin's expiry and last use by less than
// min(slideStep, TTL/16) leaves the stored pin as it is. A busy session thus
// writes its pin about once a second, not on every request, and its pin
// still has at least 15/16 of its TTL left after each use.
const slideStep = time.Second

// touch uses the live pin of sk, which is among the candidates: it slides
// the pin (see slideStep) and records the use of its connection.
func (p *Pins) touch(sk StoreKey, pin Pin, now time.Time, ttl time.Duration) {
	// How far a slide would move the last use and the expiry.
	step := min(slideStep, ttl/16)
	if since(now, pin.LastUsed) >= step || since(now, pin.Expires)+ttl >= step {
		p.save(sk, slide(pin, now, ttl), now)
	}
	p.usage.record(pin.Connection, now, false)
}

// since returns t − u by the wall clock, saturated at ±2³² seconds. It is
// a cheaper time.Time.Sub for deciding whether a pin needs writing.
func since(t, u time.Time) time.Duration {
	const limit = 1 << 32
	s := min(max(t.Unix()-u.Unix(), -limit), limit)
	return time.Duration(s)*time.Second + time.Duration(t.Nanosecond()-u.Nanosecond())
}

// slide extends a live pin's expiry to now + ttl. Time going backwards
// neither shortens the pin nor moves LastUsed back.
func slide(pin Pin, now time.Time, ttl time.Duration) Pin {
	if now.After(pin.LastUsed) {
		pin.LastUsed = now
	}
	if exp := now.Add(ttl); exp.After(pin.Expires) {
		pin.Expires = exp
	}
	return pin
}

func indexOf(candidates []Candidate, conn string) int {
	for i := range candidates {
		if candidates[i].Connection == conn {
			return i
		}
	}
	return -1
}

// leastRecentlyUsed returns the index of the candidate a new pin goes to,
// or -1 when no candidate has a connection id.
func (p *Pins) leastRecentlyUsed(candidates []Candidate) int {
	best := -1
	var bu usage
	var bused bool
	for i := range candidates {
		c := &candidates[i]
		if c.Connection == "" {
			continue
		}
		u, used := p.usage.get(c.Connection)
		if best < 0 || lruLess(c.Priority, u, used, candidates[best].Priority, bu, bused) {
			best, bu, bused = i, u, used
		}
	}
	return best
}

// lruLess reports whether candidate a goes before candidate b for a new pin.
func lruLess(aPrio int, a usage, aUsed bool, bPrio int, b usage, bUsed bool) bool {
	if aUsed != bUsed {
		return !aUsed
	}
	if aUsed {
		if c := a.last.Compare(b.last); c != 0 {
			return c < 0
		}
		if a.uses != b.uses {
			return a.uses < b.uses
		}
	}
	return aPrio < bPrio
}

// usage is the recorded use of one connection.
type usage struct {
	last time.Time
	uses int
}

// usageShards is the number of independently locked parts of a
// usageTable.
const usageShards = 16

// usageTable tracks connection use in bounded maps, spread over usageShards
// parts by a seeded hash of the connection id, so that concurrent requests
// on different connections seldom share a lock.
//
// A use of a connection already tracked (the common case) takes no shard
// lock and looks nothing up in a map: it finds the connection's entry
// through the shard's index, a hash table read without locks, and updates
// it under the entry's own mutex, held for a few instructions and shared
// only by uses of that connection. The entry keeps its time as a
// time.Time (monotonic reading and location included), which cannot be
// stored atomically without an allocation, hence that mutex. New
// connections and the cap's removals take the shard lock as before.
type usageTable struct {
	seeds    connSeeds
	perShard int
	shards   [usageShards]usageShard
}

type usageShard struct {
	mu sync.Mutex             // serialises changes of membership (m and idx)
	m  map[string]*usageEntry // lazily initialised; guarded by mu
	// idx holds the entries of m for lookups without mu; nil while m is
	// empty. Only holders of mu change it.
	idx atomic.Pointer[usageIndex]
	// used is the number of slots of idx not free (entries and
	// tombstones); guarded by mu.
	used int
}

// usageEntry is the recorded use of one connection. conn and hash never
// change; the rest is guarded by mu.
type usageEntry struct {
	mu   sync.Mutex
	u    usage
	gone bool // removed from its shard: a use that found it goes to the shard
	conn string
	hash uint64
}

// usageIndex is an open-addressing hash table (linear probing) of a
// shard's entries. Lookups load its slots atomically and take no lock;
// writers, holding the shard's mutex, fill free slots, put usageGone in
// the slots of removed entries and swap in a rebuilt index when fewer than
// a quarter of the slots stay free, so every probe ends at a free slot.
type usageIndex struct {
	mask  uint64
	slots []atomic.Pointer[usageEntry]
}

// usageGone fills the index slot of a removed entry; probes pass over it.
var usageGone = new(usageEntry)

// find returns conn's entry, whose hash is h, or nil. It takes no lock.
func (x *usageIndex) find(h uint64, conn string) *usageEntry {
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		e := x.slots[i].Load()
		if e == nil {
			return nil
		}
		if e.hash == h && e != usageGone && e.conn == conn {
			return e
		}
	}
}

// find returns conn's entry, whose hash is h, or nil, without a lock.
func (sh *usageShard) find(h uint64, conn string) *usageEntry {
	if x := sh.idx.Load(); x != nil {
		return x.find(h, conn)
	}
	return nil
}

// add indexes the new entry e. The caller holds sh.mu and has put e in
// sh.m.
func (sh *usageShard) add(e *usageEntry) {
	x := sh.idx.Load()
	if x == nil || 4*(sh.used+1) > 3*len(x.slots) {
		sh.reindex() // indexes sh.m, e included
		return
	}
	i := e.hash & x.mask
	for {
		switch x.slots[i].Load() {
		case nil:
			sh.used++
		case usageGone:
		default:
			i = (i + 1) & x.mask
			continue
		}
		x.slots[i].Store(e)
		return
	}
}

// reindex replaces sh's index with a fresh one that holds the entries of
// sh.m and room for as many again. The old index is left as it was, so
// lookups still walking it stay correct. The caller holds sh.mu.
func (sh *usageShard) reindex() {
	size := 8
	for size < 4*(len(sh.m)+1) {
		size <<= 1
	}
	x := &usageIndex{mask: uint64(size - 1), slots: make([]atomic.Pointer[usageEntry], size)}
	for _, e := range sh.m {
		i := e.hash & x.mask
		for x.slots[i].Load() != nil {
			i = (i + 1) & x.mask
		}
		x.slots[i].Store(e)
	}
	sh.used = len(sh.m)
	sh.idx.Store(x)
}

// drop removes e, whose mutex the caller holds, from sh: it is marked gone,
// so that a use that found it in the index goes to the shard instead. The
// caller holds sh.mu.
func (sh *usageShard) drop(e *usageEntry) {
	e.gone = true
	delete(sh.m, e.conn)
	x := sh.idx.Load()
	for i := e.hash & x.mask; ; i = (i + 1) & x.mask {
		if x.slots[i].Load() == e {
			x.slots[i].Store(usageGone)
			return
		}
	}
}

func (t *usageTable) init(maxConns int) {
	if maxConns <= 0 {
		maxConns = defaultMaxConnections
	}
	t.seeds = newConnSeeds()
	t.perShard = (maxConns + usageShards - 1) / usageShards
}

func (t *usageTable) hash(conn string) (uint64, *usageShard) {
	h := t.seeds.connHash(conn)
	// The index probes from the low bits; the shard comes from the high.
	return h, &t.shards[h>>60%usageShards]
}

func (t *usageTable) get(conn string) (usage, bool) {
	h, sh := t.hash(conn)
	e := sh.find(h, conn)
	if e == nil {
		return usage{}, false
	}
	e.mu.Lock()
	v, gone := e.u, e.gone
	e.mu.Unlock()
	if gone {
		return usage{}, false // removed since it was found: not tracked
	}
	return v, true
}

// record notes a use of conn at now. A fresh pin resets the consecutive use
// count to 1; any other use adds one. Time going backwards never moves the
// last use back.
func (t *usageTable) record(conn string, now time.Time, fresh bool) {
	h, sh := t.hash(conn)
	if e := sh.find(h, conn); e != nil {
		e.mu.Lock()
		if !e.gone {
			e.u.touch(now, fresh)
			e.mu.Unlock()
			return
		}
		e.mu.Unlock() // removed since it was found: start a new entry
	}
	sh.mu.Lock()
	e := sh.m[conn]
	if e == nil {
		if sh.m == nil {
			sh.m = make(map[string]*usageEntry)
		}
		if len(sh.m) >= t.perShard {
			sh.forgetOldest()
		}
		e = &usageEntry{conn: conn, hash: h}
		sh.m[conn] = e
		sh.add(e)
	}
	e.mu.Lock()
	e.u.touch(now, fresh)
	e.mu.Unlock()
	sh.mu.Unlock()
}

// touch notes a use at now (see usageTable.record).
func (u *usage) touch(now time.Time, fresh bool) {
	if now.After(u.last) {
		u.last = now
	}
	if fresh {
		u.uses = 1
	} else {
		u.uses++
	}
}

// forgetOldest drops the connection used longest ago. The shard's lock
// must be held. Every entry's lock is held while it chooses, so that no use
// lands between the choice and the removal, as when uses took the shard
// lock.
func (sh *usageShard) forgetOldest() {
	for _, e := range sh.m {
		e.mu.Lock()
	}
	var victim *usageEntry
	var at time.Time
	for _, e := range sh.m {
		if victim == nil || e.u.last.Before(at) {
			victim, at = e, e.u.last
		}
	}
	if victim != nil {
		sh.drop(victim)
		victim.mu.Unlock()
	}
	for _, e := range sh.m {
		e.mu.Unlock()
	}
}

func (t *usageTable) list() []ConnectionUse {
	var out []ConnectionUse
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for c, e := range sh.m {
			e.mu.Lock()
			out = append(out, ConnectionUse{Connection: c, LastUsed: e.u.last, Uses: e.u.uses})
			e.mu.Unlock()
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b ConnectionUse) int { return strings.Compare(a.Connection, b.Connection) })
	return out
}
