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

// DefaultMaxConnections is the number of connections whose use is tracked
// when [Config.MaxConnections] is not positive.
const DefaultMaxConnections = 10_000

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
	// (clamped to MaxTTL); otherwise [Settings.TTLFor] decides.
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

// A ChangeKind says what happened to a pin.
type ChangeKind int

// The kinds of pin change reported to [Config.OnChange].
const (
	// Pinned: a session without a pin was pinned to a connection.
	Pinned ChangeKind = iota + 1
	// Rebound: a session's pin moved to another connection.
	Rebound
	// Unpinned: a pin was removed because its connection was not a
	// candidate any more, or by [Pins.Unpin].
	Unpinned
	// Evicted: a pin was removed by [Pins.Evict].
	Evicted
)

var kindNames = [...]string{"", "pinned", "rebound", "unpinned", "evicted"}

// String returns "pinned", "rebound", "unpinned" or "evicted".
func (k ChangeKind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return "unknown"
	}
	return kindNames[k]
}

// A Change reports one pin change to [Config.OnChange].
type Change struct {
	Kind     ChangeKind
	Provider string
	Session  string // redacted session key, as Key.String
	From     string // previous connection ("" for Pinned)
	To       string // new connection ("" for Unpinned and Evicted)
	At       time.Time
}

// Config configures [New]. The zero Config is usable: affinity disabled
// until settings with a positive TTL are given, an in-memory store.
type Config struct {
	// Settings decide pin lifetimes; they are normalised by New.
	Settings Settings
	// Store keeps the pins. nil means NewMemoryStore(MaxPins).
	Store Store
	// MaxPins is the capacity of the default store; ≤ 0 means
	// DefaultMaxPins. Ignored when Store is set.
	MaxPins int
	// MaxConnections bounds how many connections' last use is remembered
	// for the least-recently-used choice; ≤ 0 means
	// DefaultMaxConnections. When full, the connection used longest ago is
	// forgotten (and so counts as never used).
	MaxConnections int
	// OnChange, if set, is called after each pin change, outside any lock
	// of this package.
	OnChange func(Change)
	// OnError, if set, is called with each error returned by Store. The
	// operation goes on as if there were no pin.
	OnError func(error)
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
	settings atomic.Pointer[Settings]
	store    Store
	mem      *MemoryStore // store, when it is a MemoryStore
	usage    usageTable
	onChange func(Change)
	onError  func(error)
}

// New returns Pins configured by cfg.
func New(cfg Config) *Pins {
	p := &Pins{store: cfg.Store, onChange: cfg.OnChange, onError: cfg.OnError}
	if p.store == nil {
		p.store = NewMemoryStore(cfg.MaxPins)
	}
	p.mem, _ = p.store.(*MemoryStore)
	p.SetSettings(cfg.Settings)
	p.usage.init(cfg.MaxConnections)
	return p
}

// Settings returns the settings in force.
func (p *Pins) Settings() Settings { return *p.settings.Load() }

// SetSettings replaces the settings in force, after normalising them. Live
// pins keep their expiry; the new lifetimes apply from their next use.
func (p *Pins) SetSettings(s Settings) {
	s = s.Normalize()
	p.settings.Store(&s)
}

// TTLFor resolves the pin lifetime of a request, as [Settings.TTLFor] with
// the settings in force.
func (p *Pins) TTLFor(provider string, requested time.Duration) time.Duration {
	return p.settings.Load().TTLFor(provider, requested)
}

// Select is shorthand for SelectAt(provider, key, candidates, time.Now()).
func (p *Pins) Select(provider string, key Key, candidates []Candidate) (string, bool) {
	return p.SelectAt(provider, key, candidates, time.Now())
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

// Choose is shorthand for ChooseAt(r, candidates, time.Now()).
func (p *Pins) Choose(r Request, candidates []Candidate) (Choice, bool) {
	return p.ChooseAt(r, candidates, time.Now())
}

// ChooseAt is SelectAt for a [Request], which may carry a per-request TTL,
// returning the whole [Choice].
func (p *Pins) ChooseAt(r Request, candidates []Candidate, now time.Time) (Choice, bool) {
	return p.choose(r, candidates, now, true)
}

// Plan is shorthand for PlanAt(r, candidates, time.Now()).
func (p *Pins) Plan(r Request, candidates []Candidate) (Choice, bool) {
	return p.PlanAt(r, candidates, time.Now())
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
			p.unpin(sk, r.Key, dropped, Unpinned, now)
		}
		return Choice{Dropped: dropped}, false
	}
	conn := candidates[i].Connection
	if commit {
		p.save(sk, Pin{Connection: conn, Created: now, LastUsed: now, Expires: now.Add(ttl)}, now)
		p.usage.record(conn, now, true)
		if dropped != "" {
			p.emit(Rebound, r, dropped, conn, now)
		} else {
			p.emit(Pinned, r, "", conn, now)
		}
	}
	return Choice{Connection: conn, Dropped: dropped}, true
}

// Pin is shorthand for PinAt(r, connection, time.Now()).
func (p *Pins) Pin(r Request, connection string) bool {
	return p.PinAt(r, connection, time.Now())
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
	p.save(sk, Pin{Connection: connection, Created: now, LastUsed: now, Expires: now.Add(ttl)}, now)
	p.usage.record(connection, now, true)
	if ok {
		p.emit(Rebound, r, pin.Connection, connection, now)
	} else {
		p.emit(Pinned, r, "", connection, now)
	}
	return true
}

// RecordUse is shorthand for RecordUseAt(connection, time.Now()).
func (p *Pins) RecordUse(connection string) { p.RecordUseAt(connection, time.Now()) }

// RecordUseAt records that connection served a request at now, for the
// least-recently-used choice of new pins. Selection and pinning record use
// themselves; call this for connections chosen without a session key.
func (p *Pins) RecordUseAt(connection string, now time.Time) {
	if connection != "" {
		p.usage.record(connection, now, false)
	}
}

// Evict is shorthand for EvictAt(provider, key, connection, time.Now()).
func (p *Pins) Evict(provider string, key Key, connection string) bool {
	return p.EvictAt(provider, key, connection, time.Now())
}

// EvictAt removes the session's pin to provider only if it points at
// connection, as after that connection timed out on this session's request,
// and reports whether it did. A pin to another connection is left alone.
// now only stamps the reported [Change].
func (p *Pins) EvictAt(provider string, key Key, connection string, now time.Time) bool {
	if key.IsZero() || connection == "" {
		return false
	}
	sk := StoreKey{Provider: provider, Session: key.sum}
	ok, err := p.store.DeleteIf(sk, connection)
	if err != nil {
		p.fail(err)
		return false
	}
	if ok {
		p.emit(Evicted, Request{Provider: provider, Key: key}, connection, "", now)
	}
	return ok
}

// Unpin is shorthand for UnpinAt(provider, key, time.Now()).
func (p *Pins) Unpin(provider string, key Key) bool {
	return p.UnpinAt(provider, key, time.Now())
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
		p.emit(Unpinned, Request{Provider: provider, Key: key}, from, "", now)
	}
	return ok
}

// Lookup is shorthand for LookupAt(provider, key, time.Now()).
func (p *Pins) Lookup(provider string, key Key) (Pin, bool) {
	return p.LookupAt(provider, key, time.Now())
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

// Snapshot is shorthand for SnapshotAt(time.Now()).
func (p *Pins) Snapshot() Snapshot { return p.SnapshotAt(time.Now()) }

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

func (p *Pins) unpin(sk StoreKey, key Key, conn string, kind ChangeKind, now time.Time) {
	ok, err := p.store.DeleteIf(sk, conn)
	if err != nil {
		p.fail(err)
		return
	}
	if ok {
		p.emit(kind, Request{Provider: sk.Provider, Key: key}, conn, "", now)
	}
}

func (p *Pins) emit(kind ChangeKind, r Request, from, to string, now time.Time) {
	if p.onChange == nil {
		return
	}
	p.onChange(Change{Kind: kind, Provider: r.Provider, Session: r.Key.String(), From: from, To: to, At: now})
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

const (
	usageShardBits = 4
	usageShards    = 1 << usageShardBits
)

// usageTable tracks connection use in bounded, sharded maps.
type usageTable struct {
	perShard int
	shards   [usageShards]usageShard
}

type usageShard struct {
	mu sync.Mutex
	m  map[string]*usage // lazily initialised
}

func (t *usageTable) init(maxConns int) {
	if maxConns <= 0 {
		maxConns = DefaultMaxConnections
	}
	t.perShard = (maxConns + usageShards - 1) / usageShards
}

func (t *usageTable) shard(conn string) *usageShard {
	// Any spread will do here: the shard only divides lock traffic, and
	// the map within it has a seeded hash of its own.
	return &t.shards[strMix(conn)>>(64-usageShardBits)]
}

func (t *usageTable) get(conn string) (usage, bool) {
	sh := t.shard(conn)
	sh.mu.Lock()
	u := sh.m[conn]
	var v usage
	if u != nil {
		v = *u
	}
	sh.mu.Unlock()
	return v, u != nil
}

// record notes a use of conn at now. A fresh pin resets the consecutive use
// count to 1; any other use adds one. Time going backwards never moves the
// last use back.
func (t *usageTable) record(conn string, now time.Time, fresh bool) {
	sh := t.shard(conn)
	sh.mu.Lock()
	u := sh.m[conn]
	if u == nil {
		if sh.m == nil {
			sh.m = make(map[string]*usage)
		}
		if len(sh.m) >= t.perShard {
			sh.forgetOldest()
		}
		u = new(usage)
		sh.m[conn] = u
	}
	if now.After(u.last) {
		u.last = now
	}
	if fresh {
		u.uses = 1
	} else {
		u.uses++
	}
	sh.mu.Unlock()
}

// forgetOldest drops the connection used longest ago. The lock must be held.
func (sh *usageShard) forgetOldest() {
	var victim string
	var at time.Time
	found := false
	for c, u := range sh.m {
		if !found || u.last.Before(at) {
			victim, at, found = c, u.last, true
		}
	}
	if found {
		delete(sh.m, victim)
	}
}

func (t *usageTable) list() []ConnectionUse {
	var out []ConnectionUse
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for c, u := range sh.m {
			out = append(out, ConnectionUse{Connection: c, LastUsed: u.last, Uses: u.uses})
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b ConnectionUse) int { return strings.Compare(a.Connection, b.Connection) })
	return out
}
