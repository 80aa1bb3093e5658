package breaker

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/routeguard/routeguard"
	"github.com/routeguard/routeguard/internal/heap"
)

// Config configures a [Set]. The zero value is usable: the built-in class
// profiles below, every provider of class APIKey, at most 500 breakers, no
// hook. [NewSet] normalizes it with [Config.Normalize].
//
// A provider's profile is Profiles[provider] when set, else the profile of
// its credential class ([routeguard.Class], from ClassOf). The built-in
// class profiles are:
//
//	class   degraded  opens  reset  max multiplier  escalation
//	OAuth   5         8      60 s   8               2
//	APIKey  7         12     30 s   4               3
//	Local   1         2      15 s   16              3
//
// Local's degraded level is OpenAt−1, so that Degraded is reachable. A
// provider whose class is [routeguard.Unknown] (or any value the package
// does not know) gets the APIKey profile.
type Config struct {
	// OAuth, APIKey and Local are the profiles of the three classes. A zero
	// field takes the value of the class's built-in profile (a zero Local
	// DegradedAt is OpenAt−1); then every field is clamped into the range
	// [Profile] gives.
	OAuth, APIKey, Local Profile
	// Profiles replaces the class profile of the named providers. Their
	// zero fields take the generic defaults of [Profile] (not the class's).
	Profiles map[string]Profile
	// ClassOf returns a provider's credential class. Nil: APIKey for all.
	// Unknown is treated as APIKey.
	ClassOf func(provider string) routeguard.Class
	// MaxBreakers bounds the number of breakers a Set keeps. Default 500
	// (zero); range [1, 1000000] (a negative value is 1).
	MaxBreakers int
	// IdleTTL is how long a closed breaker with no counted failures is kept
	// after its last failure before it may be dropped. Default 30 min
	// (zero); range [1 min, 24 h] (a negative value is 1 min).
	IdleTTL time.Duration
	// OnChange, if not nil, is called after every state change of any
	// breaker of the Set, and when the Set drops a breaker to make room
	// (an [Event] with Removed set). It is called synchronously, after every
	// lock of the Set and its breakers is released, from the goroutine that
	// caused or observed the change, in the order of that goroutine's
	// changes. It must not block; it may call back into the Set.
	OnChange func(Event)
}

// Set ranges and defaults.
const (
	defaultMaxBreakers = 500
	maxMaxBreakers     = 1_000_000
	defaultIdleTTL     = 30 * time.Minute
	minIdleTTL         = time.Minute
	maxIdleTTL         = 24 * time.Hour
)

// Normalize returns a copy of c with every default filled in and every
// field clamped: the class profiles as the [Config] doc says, each of
// Profiles from the generic defaults (in a new map), MaxBreakers and
// IdleTTL. It never changes c.
func (c Config) Normalize() Config {
	c.OAuth = classProfile(c.OAuth, routeguard.OAuth)
	c.APIKey = classProfile(c.APIKey, routeguard.APIKey)
	c.Local = classProfile(c.Local, routeguard.Local)
	if len(c.Profiles) > 0 {
		m := make(map[string]Profile, len(c.Profiles))
		for name, p := range c.Profiles {
			m[name] = p.normalize()
		}
		c.Profiles = m
	}
	if c.MaxBreakers == 0 {
		c.MaxBreakers = defaultMaxBreakers
	}
	c.MaxBreakers = min(max(c.MaxBreakers, 1), maxMaxBreakers)
	if c.IdleTTL == 0 {
		c.IdleTTL = defaultIdleTTL
	}
	c.IdleTTL = min(max(c.IdleTTL, minIdleTTL), maxIdleTTL)
	return c
}

// Set holds the circuit breakers of a gateway, one per provider, each
// created on first use with the profile of its provider. Ask with
// [Set.AllowReportAt] before each request and report the request's result
// through the done func it returns; record results learned elsewhere with
// [Set.ReportAt]; read a state with [Set.StateAt].
//
// It keeps at most Config.MaxBreakers breakers: when full, it first drops
// closed breakers with no counted failure and no failure within
// Config.IdleTTL, then the closed breaker whose last failure is oldest, and
// only when every breaker is open or half-open the one whose last failure
// is oldest. It keeps its breakers in that order, so a new breaker costs
// O(log n) whatever the number held.
//
// A Set is created with [NewSet]; the zero value is not usable. It is safe
// for concurrent use. Its breakers are kept twice: in a map under its lock,
// for its writers, and in an index for its readers, an open-addressing
// table of atomic pointers that only the writers change, under the lock.
// A lookup takes no lock, writes no shared memory and allocates nothing
// (it takes the read lock only for a miss that crossed a concurrent
// eviction or met another name of the same hash), so [Set.StateAt] of a closed breaker without a counting
// window takes no lock at all: BenchmarkSetStateRouter and
// BenchmarkSetState1000Parallel keep the index. A new provider costs the
// map's insert and the index's; a sync.Map in place of both inserted a new
// provider at a million breakers in 6.5 µs instead of about 2 µs
// (BenchmarkInsertAtCap/set).
type Set struct {
	cfg Config // normalized

	// idx holds every breaker of m, for lookups without the lock; it is
	// changed and replaced only under mu, and nil until the first breaker.
	idx atomic.Pointer[index]
	// classes are the normalized class profiles (OAuth, API key, local)
	// and profiles the per-provider ones, which the breakers point to, so
	// that a breaker holds a pointer rather than a copy.
	classes  [3]Profile
	profiles map[string]*Profile

	// unusual counts the held breakers whose state is not Closed (see
	// [circuit.publishQuickLocked]). While it is zero, StateAt answers
	// Closed for any provider without a lookup: the common case of a
	// healthy fleet, asked for every candidate of every request
	// (BenchmarkSetStateAllClosed).
	unusual atomic.Int64

	// mu is kept off the cache line of idx, which lookups read.
	_  [64]byte
	mu sync.RWMutex
	m  map[string]*circuit
	// order holds every breaker of m, in the heap of its eviction rank by
	// last failure (see [circuit.evictKeyLocked]), as of the last time the
	// Set read the keys; guarded by mu.
	order [3]heap.Min[circuit]

	// dirty lists the breakers whose eviction key changed since the Set
	// last read it. Breakers append to it under their own lock, so it has
	// a lock of its own, taken after theirs and after mu.
	dirtyMu sync.Mutex
	dirty   []*circuit
	// spare is the emptied list of the last re-ordering, kept for the next
	// one so that queueing a change does not allocate; guarded by mu.
	spare []*circuit
}

func setPos(b *circuit) *int { return &b.setPos }

// changed queues b, whose eviction key changed; b.mu is held.
func (s *Set) changed(b *circuit) {
	s.dirtyMu.Lock()
	s.dirty = append(s.dirty, b)
	s.dirtyMu.Unlock()
}

// maxSpareDirty bounds the list of changed breakers a Set keeps for reuse.
const maxSpareDirty = 1024

// refreshOrderLocked re-orders the breakers whose eviction key changed
// since the last call. s.mu is held for writing.
func (s *Set) refreshOrderLocked() {
	s.dirtyMu.Lock()
	list := s.dirty
	s.dirty, s.spare = s.spare, nil
	s.dirtyMu.Unlock()
	defer func() {
		if cap(list) <= maxSpareDirty {
			clear(list)
			s.spare = list[:0]
		}
	}()
	for _, b := range list {
		b.mu.Lock()
		b.queued = false
		rank, last := b.evRank, b.evLast
		b.mu.Unlock()
		if s.order[b.setRank].Has(b) {
			s.order[b.setRank].Remove(b)
			b.setRank, b.setLast = rank, last
			s.order[rank].Set(b, heap.Stamp(last))
		}
	}
}

// NewSet returns an empty Set configured by cfg (normalized with
// [Config.Normalize]).
func NewSet(cfg Config) *Set {
	s := &Set{cfg: cfg.Normalize(), m: make(map[string]*circuit)}
	s.classes = [3]Profile{s.cfg.OAuth, s.cfg.APIKey, s.cfg.Local}
	if len(s.cfg.Profiles) > 0 {
		s.profiles = make(map[string]*Profile, len(s.cfg.Profiles))
		for name, p := range s.cfg.Profiles {
			s.profiles[name] = &p
		}
	}
	for i := range s.order {
		s.order[i].Pos = setPos
	}
	return s
}

// profileOf returns the profile a breaker for provider has or would get,
// one the Set's breakers of that profile share.
func (s *Set) profileOf(provider string) *Profile {
	if p, ok := s.profiles[provider]; ok {
		return p
	}
	c := routeguard.APIKey
	if s.cfg.ClassOf != nil {
		c = s.cfg.ClassOf(provider)
	}
	switch c {
	case routeguard.OAuth:
		return &s.classes[0]
	case routeguard.Local:
		return &s.classes[2]
	}
	return &s.classes[1]
}

// hash returns the index hash of provider.
func (s *Set) hash(provider string) uint64 { return strhash(provider) }

// lookup returns the breaker of provider, or nil. It asks the index, and
// the map under the read lock only when the index's miss is not sure.
func (s *Set) lookup(provider string) *circuit {
	t := s.idx.Load()
	if t == nil {
		return nil
	}
	b, sure := t.find(s.hash(provider), provider)
	if b == nil && !sure {
		b = s.lookupLocked(provider)
	}
	return b
}

// lookupLocked returns the breaker of provider, or nil, from the map.
func (s *Set) lookupLocked(provider string) *circuit {
	s.mu.RLock()
	b := s.m[provider]
	s.mu.RUnlock()
	return b
}

// getAt returns the breaker of provider, creating it if needed. When the
// Set is full, the breakers it drops are judged at now (zero: time.Now()),
// and the hook hears of each one after the Set's lock is released.
func (s *Set) getAt(provider string, now time.Time) *circuit {
	if t := s.idx.Load(); t != nil {
		if b, _ := t.find(s.hash(provider), provider); b != nil {
			return b
		}
	}
	return s.addAt(provider, now)
}

// addAt returns the breaker of provider, creating it unless the Set holds
// one; see [Set.getAt].
func (s *Set) addAt(provider string, now time.Time) *circuit {
	h := s.hash(provider)
	nb := newCircuit(provider, s.profileOf(provider), s.cfg.OnChange)
	s.mu.Lock()
	// Under mu only another name of the same hash makes the index unsure;
	// asked first, it spares a new provider a cache miss in the map.
	t := s.idx.Load()
	var b *circuit
	if t != nil {
		var sure bool
		if b, sure = t.find(h, provider); b == nil && !sure {
			b = s.m[provider]
		}
	}
	if b != nil {
		s.mu.Unlock()
		return b
	}
	var dropped []*circuit
	if len(s.m) >= s.cfg.MaxBreakers {
		if now.IsZero() {
			now = time.Now()
		}
		dropped = s.evictLocked(now)
	}
	nb.owner = s // nb is not shared yet
	s.m[provider] = nb
	s.order[0].Set(nb, heap.Stamp(time.Time{})) // a new breaker is idle
	if t == nil || t.full(len(s.m)) {
		t = t.grown()
		t.place(h, nb)
		s.idx.Store(t)
	} else {
		t.place(h, nb)
	}
	s.mu.Unlock()
	for _, b := range dropped {
		b.removed(now)
	}
	return nb
}

// AllowReportAt asks at now whether a request may go to provider (creating
// its breaker on first use). If so, it returns a done func that must be
// called at most once with the request's [Report]; the report is accounted
// at its At time (zero: time.Now() when done is called). Not calling done
// for a half-open probe holds the probe slot until the profile's reset
// time has passed. If not, it returns a nil done and an [*Error] with code
// [CodeOpen] (matching [ErrOpen]) that carries the time until a probe is
// allowed and the kind of the last failure.
//
// The report is filtered as [Set.ReportAt] filters it (queue timeouts,
// network and per-connection deduplication), except that a probe's failure
// is never deduplicated and a probe's queue timeout only frees the probe
// slot. A zero now means time.Now(). Admitting a request to a closed
// breaker allocates nothing: its admissions share one done func while its
// state holds.
func (s *Set) AllowReportAt(provider string, now time.Time) (done func(Report), err error) {
	return s.getAt(provider, now).AllowReportAt(now)
}

// ReportAt accounts at now a report that belongs to no admission: a result
// learned outside [Set.AllowReportAt], such as a router's record of a
// failed attempt. It reports whether the report was accounted: false when
// it was Ignored, filtered out, or met an open breaker.
//
// An empty provider and the provider "unknown" are ignored. A failure
// creates the breaker on first use; a success for a provider without a
// breaker changes nothing and creates none.
//
// A failure is filtered first: a queue timeout never counts, then a
// network error within Profile.NetworkDedup of the last counted one, then
// a failure of a connection within Profile.ConnDedup of its last counted
// one. A failure that passes counts as in AllowReportAt's done func,
// except that in the half-open state it reopens the breaker (one more
// cycle) even when a probe is out; that probe's result is then ignored. An
// open breaker ignores it, so a direct report never restarts an open
// period.
//
// A success on a closed breaker lowers the count and clears the
// connection's deduplication entry; on a half-open breaker it closes it;
// an open breaker ignores it. An Ignored report changes nothing.
//
// now is the time of the report (r.At is not read; a zero now means
// time.Now()): the deduplication windows, the failure time and the open
// and probe periods are all measured with it.
func (s *Set) ReportAt(provider string, r Report, now time.Time) bool {
	if provider == "" || provider == "unknown" {
		return false
	}
	b := s.lookup(provider)
	if b == nil {
		if r.Outcome != Failure || r.QueueTimeout {
			return false
		}
		b = s.addAt(provider, now)
	}
	return b.ReportAt(r, now)
}

// StateAt returns provider's state at now and how long until it admits a
// request (zero when it admits one now; for a half-open breaker whose probe
// is out, the time until the probe slot is re-issued). It creates no
// breaker: an unknown provider is Closed with zero wait. It changes nothing
// but the lazy refreshes every call makes (an open period that has ended
// turns half-open), and it does not allocate. A zero now means time.Now().
func (s *Set) StateAt(provider string, now time.Time) (st State, wait time.Duration) {
	// While every breaker is closed (st's zero value), one load answers,
	// in a body small enough to be inlined into the caller.
	if s.unusual.Load() != 0 {
		st, wait = s.stateAt(provider, now)
	}
	return st, wait
}

// stateAt is StateAt for a Set that holds a breaker not closed.
func (s *Set) stateAt(provider string, now time.Time) (State, time.Duration) {
	if b := s.lookup(provider); b != nil {
		return b.StateAt(now)
	}
	return Closed, 0
}

// breakers returns the held breakers; callers query them after the Set's
// lock is released, so hooks never run under it.
func (s *Set) breakers() []*circuit {
	s.mu.RLock()
	list := make([]*circuit, 0, len(s.m))
	for _, b := range s.m {
		list = append(list, b)
	}
	s.mu.RUnlock()
	return list
}

// SnapshotAt returns the state of every breaker at now as a [Record],
// sorted by provider: for a health page, and for a store to keep
// ([Set.RestoreAt] puts the records back). It makes the lazy refreshes of
// [Set.StateAt] first, so an open period that has ended by now is given as
// HalfOpen (with the OpenedAt of that period). Taking a snapshot, restoring
// it and taking another at the same now gives the same records, except
// that a probe in flight is not restored (its slot comes back free). A
// zero now means time.Now().
func (s *Set) SnapshotAt(now time.Time) []Record {
	list := s.breakers()
	out := make([]Record, 0, len(list))
	for _, b := range list {
		out = append(out, b.SnapshotAt(now))
	}
	slices.SortFunc(out, func(a, b Record) int { return strings.Compare(a.Provider, b.Provider) })
	return out
}

// RestoreAt restores each record at now into its provider's breaker,
// creating the breaker (with the provider's profile) if needed, as if the
// breaker had lived through it: requests admitted before are reported
// under an older generation and ignored. A zero now means time.Now().
//
// An Open record stays open until OpenedAt (or LastFailure) plus the open
// time its profile gives for its cycles and last kind, measured on the
// caller's clock, then turns half-open, keeping OpenedAt; an Open record
// with no time at all is half-open at once, with OpenedAt now. A HalfOpen
// record is half-open with its probe slot free and its OpenedAt (or
// LastFailure, or now). A Closed or Degraded record is closed with its
// count: Degraded when the count is above the profile's degraded level,
// Closed when it is below, and the record's state when it is at the level
// (a breaker that has just come back to its level is Closed, one that has
// just reached it Degraded).
//
// RestoreAt clamps what it can: counts below zero to zero; the count to
// [0, OpenAt], and for a closed record to OpenAt−1 (so that only a new
// failure opens it); cycles to [0, 10000] and to 0 for a closed record;
// times after now to now; an unknown kind to KindNone; kind counts to
// [0, 1000]. With a counting window, restored failures count as if they
// all happened at LastFailure. RetryAfter and ProbeInFlight are not read.
//
// A record with an empty provider or an unknown State is skipped, changing
// nothing; the others are restored. The error joins one [*Error] with code
// [CodeInvalidRecord] per skipped record and matches [ErrInvalidRecord].
// Restoring more providers than Config.MaxBreakers evicts as a new
// provider does: idle and closed breakers go first.
func (s *Set) RestoreAt(records []Record, now time.Time) error {
	var errs []error
	for _, r := range records {
		if r.Provider == "" {
			errs = append(errs, recordError("", "no provider"))
			continue
		}
		if r.State > HalfOpen {
			errs = append(errs, recordError(r.Provider, "unknown state "+r.State.String()))
			continue
		}
		if err := s.getAt(r.Provider, now).RestoreAt(r, now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ResetAt closes provider's breaker and clears its count, cycles and
// failure time at now; results of requests admitted before are ignored. It
// reports whether the Set held a breaker for provider. A zero now means
// time.Now().
func (s *Set) ResetAt(provider string, now time.Time) bool {
	b := s.lookup(provider)
	if b == nil {
		return false
	}
	b.ResetAt(now)
	return true
}

// ResetAllAt closes every breaker and clears its counts at now, keeping
// them in the Set, and returns how many it reset. A zero now means
// time.Now().
func (s *Set) ResetAllAt(now time.Time) int {
	list := s.breakers()
	for _, b := range list {
		b.ResetAt(now)
	}
	return len(list)
}

// evictLocked makes room for one breaker and returns the breakers it
// dropped: every idle breaker whose last failure is IdleTTL old, then, if
// the Set is still full, the one with the least eviction key. It costs
// O(log n) per breaker re-ordered or dropped. It never refreshes a
// breaker, so no hook runs under s.mu.
func (s *Set) evictLocked(now time.Time) []*circuit {
	s.refreshOrderLocked()
	cut := now.Add(-s.cfg.IdleTTL)
	var dropped []*circuit
	tell := s.cfg.OnChange != nil
	idx := s.idx.Load()
	drop := func(b *circuit) {
		s.order[b.setRank].Remove(b)
		delete(s.m, b.name)
		idx.remove(s.hash(b.name), b) // first: once owner is nil, no lookup finds b
		b.mu.Lock()
		b.owner = nil
		if b.unusual {
			s.unusual.Add(-1)
			b.unusual = false
		}
		b.mu.Unlock()
		if tell {
			dropped = append(dropped, b)
		}
	}
	for b, _ := s.order[0].Top(); b != nil && !b.setLast.After(cut); b, _ = s.order[0].Top() {
		drop(b) // expired: every one goes
	}
	if len(s.m) < s.cfg.MaxBreakers {
		return dropped
	}
	for i := range s.order {
		if b, _ := s.order[i].Top(); b != nil {
			drop(b)
			break
		}
	}
	return dropped
}
