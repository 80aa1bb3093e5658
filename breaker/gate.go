package breaker

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/routeguard/routeguard"
	"github.com/routeguard/routeguard/internal/config"
	"github.com/routeguard/routeguard/internal/heap"
)

// WindowProfile configures the provider-level window gate of one class.
// A zero field takes the class's built-in value (see [GateConfig]).
type WindowProfile struct {
	// Threshold is the number of failures inside Window that starts a
	// cooldown. Range [1, 1000] (a negative value is 1).
	Threshold int
	// Window is the length of the sliding window: a failure exactly Window
	// old is outside it. Range [1 s, 24 h] (a negative value is 1 s).
	Window time.Duration
	// Cooldown is how long the provider cools after the failure that
	// reached the threshold, that instant included. Range [1 s, 24 h] (a
	// negative value is 1 s).
	Cooldown time.Duration
}

// defaultWindowProfile returns the built-in window-gate profile of a class
// (the table in [GateConfig]); Unknown and any other value get APIKey's.
func defaultWindowProfile(c routeguard.Class) WindowProfile {
	switch c {
	case routeguard.OAuth:
		return WindowProfile{Threshold: 10, Window: 15 * time.Minute, Cooldown: 5 * time.Minute}
	case routeguard.Local:
		return WindowProfile{Threshold: 2, Window: 5 * time.Minute, Cooldown: time.Minute}
	}
	return WindowProfile{Threshold: 15, Window: 30 * time.Minute, Cooldown: 10 * time.Minute}
}

// fillWindow sets w's zero fields from class c's built-in profile and
// clamps every field.
func fillWindow(w WindowProfile, c routeguard.Class) WindowProfile {
	d := defaultWindowProfile(c)
	if w.Threshold == 0 {
		w.Threshold = d.Threshold
	}
	if w.Window == 0 {
		w.Window = d.Window
	}
	if w.Cooldown == 0 {
		w.Cooldown = d.Cooldown
	}
	w.Threshold = min(max(w.Threshold, 1), 1000)
	w.Window = min(max(w.Window, time.Second), 24*time.Hour)
	w.Cooldown = min(max(w.Cooldown, time.Second), 24*time.Hour)
	return w
}

// GateConfig configures a [Gate]. The zero value is a disabled gate with
// the built-in defaults. [NewGate] normalizes it with
// [GateConfig.Normalize].
//
// The built-in window profiles are:
//
//	class   threshold  window  cooldown
//	OAuth   10         15 min  5 min
//	APIKey  15         30 min  10 min
//	Local   2          5 min   1 min
//
// A provider whose class is [routeguard.Unknown] (or any value the package
// does not know) gets the APIKey profile.
type GateConfig struct {
	// Enabled turns the gate on. Off, a Gate records nothing and never
	// blocks.
	Enabled bool
	// MinRetry is a connection's first cooldown (minRetryCooldownMs).
	// Default 5 s (nil); range [0, 1 h]: a set value is clamped (a
	// negative one to 0). Zero is a real value: a failed connection does
	// not cool at all.
	MinRetry *time.Duration
	// MaxRetry caps a connection's cooldown (maxRetryCooldownMs). Default
	// 5 min (zero); range [the minimum, 24 h], and at least 1 ms: a value
	// below the minimum is raised to it ([GateConfig.Validate] refuses it
	// instead).
	MaxRetry time.Duration
	// OAuth, APIKey and Local are the provider-level window profiles; a
	// zero field takes the class's built-in value.
	OAuth, APIKey, Local WindowProfile
	// MaxEntries bounds the provider and connection entries kept (each map
	// separately). Default 10000 (zero); range [1, 1000000] (a negative
	// value is 1).
	MaxEntries int
	// ClassOf returns a provider's credential class. Nil: APIKey for all.
	// Unknown is treated as APIKey.
	ClassOf func(provider string) routeguard.Class
	// OnChange, if not nil, is called when an entry starts cooling, when
	// its cooldown is extended or ends, and when an entry the hook has
	// heard of is removed (see [Event]). The end of a cooldown is observed
	// by the next write that touches the entry, or by the pruning writes
	// make now and then. It is called synchronously, after the gate's lock
	// is released, from the goroutine that made the change, in the order of
	// that goroutine's changes. It must not block; it may call back into
	// the gate.
	OnChange func(Event)
}

// Gate defaults and ranges.
const (
	defaultMinRetry   = 5 * time.Second
	minMaxRetry       = time.Millisecond
	maxMinRetry       = time.Hour
	defaultMaxRetry   = 5 * time.Minute
	maxMaxRetry       = 24 * time.Hour
	defaultMaxEntries = 10000
	maxMaxEntries     = 1_000_000
	gateRetention     = 30 * time.Minute
	maxConnExponent   = 4
	pruneEvery        = 64
)

// Normalize returns a copy of c with every default filled in and every
// field clamped. MinRetry is always set afterwards, to a new pointer (the
// caller's is never written or shared). A MaxRetry below the minimum is
// raised to it; use [GateConfig.Validate] to refuse that instead. It
// never changes c.
func (c GateConfig) Normalize() GateConfig {
	m := config.DurOpt(c.MinRetry, defaultMinRetry, 0, maxMinRetry)
	c.MinRetry = &m
	if c.MaxRetry == 0 {
		c.MaxRetry = defaultMaxRetry
	}
	c.MaxRetry = min(max(c.MaxRetry, m, minMaxRetry), maxMaxRetry)
	c.OAuth = fillWindow(c.OAuth, routeguard.OAuth)
	c.APIKey = fillWindow(c.APIKey, routeguard.APIKey)
	c.Local = fillWindow(c.Local, routeguard.Local)
	if c.MaxEntries == 0 {
		c.MaxEntries = defaultMaxEntries
	}
	c.MaxEntries = min(max(c.MaxEntries, 1), maxMaxEntries)
	return c
}

// Validate refuses settings an operator most likely mistyped: a non-zero
// MaxRetry below an explicitly set MinRetry (as clamped). The error is an
// [*Error] with code [CodeInvalidConfig] (HTTP 400) and Field "MaxRetry".
func (c GateConfig) Validate() error {
	if c.MinRetry == nil {
		return nil
	}
	if m := config.DurOpt(c.MinRetry, defaultMinRetry, 0, maxMinRetry); c.MaxRetry > 0 && c.MaxRetry < m {
		return configError("MaxRetry", c.MaxRetry.String(), "below MinRetry "+m.String())
	}
	return nil
}

// window returns the normalized window profile of class cl; c must be
// normalized.
func (c *GateConfig) window(cl routeguard.Class) WindowProfile {
	switch cl {
	case routeguard.OAuth:
		return c.OAuth
	case routeguard.Local:
		return c.Local
	}
	return c.APIKey
}

// Gate is the opt-in provider cooldown tracker. It answers, before
// dispatch, whether a provider is cooling because too many failures fell
// inside its class's sliding window, and whether one connection of it is
// cooling after its own recent failures (the cooldown is MinRetry·2^(n−1)
// for n failures, the exponent capped at 4, the whole capped at MaxRetry):
// [Gate.BlockedUntilAt]. Feed it with [Gate.RecordFailureAt] and
// [Gate.RecordSuccessAt].
//
// A provider cools from the failure that reached its class's threshold
// until that failure's time plus the cooldown, both ends included: with a
// 5 min cooldown and the tripping failure at T, it is cooling at T+5 min
// and not at any instant after. A connection cools while less than its
// cooldown has passed since its last failure, so a zero cooldown never
// cools it.
//
// Empty providers and the provider "unknown" are never recorded. Entries
// whose last failure is older than the longest of 30 min, MaxRetry and the
// class windows and cooldowns are dropped on later writes. At most
// MaxEntries entries of each kind are kept: a new one in a full gate drops
// the entry whose last failure is oldest. The entries are kept in that
// order, so a write costs O(log n) whatever the number of entries.
//
// A Gate is created with [NewGate]; the zero value is not usable. It is
// safe for concurrent use, and its checks allocate nothing.
type Gate struct {
	cfg       GateConfig // normalized
	retention time.Duration

	mu     sync.RWMutex
	prov   map[string]*provEntry
	conns  map[connKey]*connEntry
	writes int
	// provOld and connOld order the entries by last failure, oldest first:
	// the cap and the retention drop from their tops. provCool and
	// connCool hold the entries whose reported cooldown has not been
	// reported ended yet, soonest end first (only with a hook).
	provOld, provCool heap.Min[provEntry]
	connOld, connCool heap.Min[connEntry]
	// entries is len(prov)+len(conns), stored after every write so that a
	// gate with nothing recorded answers its checks without the lock.
	entries atomic.Int64
}

type provEntry struct {
	name  string
	times []time.Time // failures inside the window, oldest first, at most Threshold
	until time.Time   // cooling until (inclusive); zero: not cooling
	last  time.Time
	note
}

// coolingAt reports whether e is cooling at now: until is set and now is
// not after it.
func (e *provEntry) coolingAt(now time.Time) bool {
	return !e.until.IsZero() && !now.After(e.until)
}

type connKey struct{ provider, conn string }

type connEntry struct {
	key   connKey
	count int
	last  time.Time
	note
}

// note is what the hook was last told of an entry, and the entry's places
// in the gate's heaps.
type note struct {
	told     bool      // the hook has heard of the entry
	reported time.Time // the cooldown end last reported; zero: not cooling
	oldPos   int       // place in provOld or connOld
	coolPos  int       // place in provCool or connCool
}

func provOldPos(e *provEntry) *int  { return &e.oldPos }
func connOldPos(e *connEntry) *int  { return &e.oldPos }
func provCoolPos(e *provEntry) *int { return &e.coolPos }
func connCoolPos(e *connEntry) *int { return &e.coolPos }

// NewGate returns an empty Gate configured by cfg (normalized with
// [GateConfig.Normalize]).
func NewGate(cfg GateConfig) *Gate {
	c := cfg.Normalize()
	g := &Gate{cfg: c, prov: map[string]*provEntry{}, conns: map[connKey]*connEntry{}}
	g.provOld = heap.Min[provEntry]{Pos: provOldPos}
	g.provCool = heap.Min[provEntry]{Pos: provCoolPos}
	g.connOld = heap.Min[connEntry]{Pos: connOldPos}
	g.connCool = heap.Min[connEntry]{Pos: connCoolPos}
	g.retention = max(gateRetention, c.MaxRetry)
	for _, w := range []WindowProfile{c.OAuth, c.APIKey, c.Local} {
		g.retention = max(g.retention, w.Window, w.Cooldown)
	}
	return g
}

func (g *Gate) window(provider string) WindowProfile {
	c := routeguard.APIKey
	if g.cfg.ClassOf != nil {
		c = g.cfg.ClassOf(provider)
	}
	return g.cfg.window(c)
}

func skipProvider(p string) bool { return p == "" || p == "unknown" }

// RecordFailureAt records a failure of provider (and, when conn is not
// empty, of that connection) at now. A time earlier than the provider's
// last failure is taken as that time (a clock that steps backwards means no
// time has passed). It is a no-op when the gate is off.
func (g *Gate) RecordFailureAt(provider, conn string, now time.Time) {
	if !g.cfg.Enabled || skipProvider(provider) {
		return
	}
	w := g.window(provider)
	g.mu.Lock()
	evs := g.maybePruneLocked(now, nil)
	e := g.prov[provider]
	if e == nil {
		e, evs = g.addProvLocked(evs, provider, now)
	}
	if now.Before(e.last) {
		now = e.last // a clock step backwards: no time has passed
	}
	e.last = now
	g.provOld.Set(e, heap.Stamp(e.last))
	cut := now.Add(-w.Window)
	i := 0
	for i < len(e.times) && !e.times[i].After(cut) {
		i++
	}
	e.times = e.times[:copy(e.times, e.times[i:])]
	if len(e.times) >= w.Threshold {
		e.times = e.times[:copy(e.times, e.times[len(e.times)-w.Threshold+1:])]
	}
	e.times = append(e.times, now)
	if len(e.times) >= w.Threshold {
		e.until = now.Add(w.Cooldown)
	}
	evs = g.provNoteLocked(evs, provider, e, now)
	if conn != "" {
		k := connKey{provider, conn}
		c := g.conns[k]
		if c == nil {
			c, evs = g.addConnLocked(evs, k, now)
		}
		c.count++
		c.last = now
		g.connOld.Set(c, heap.Stamp(c.last))
		evs = g.connNoteLocked(evs, k, c, now)
	}
	g.countEntries()
	g.mu.Unlock()
	g.fire(evs)
}

// RecordSuccessAt clears provider's window and cooldown and, when conn is not
// empty, sets that connection's failure count to zero (keeping the entry).
// It is a no-op when the gate is off.
func (g *Gate) RecordSuccessAt(provider, conn string, now time.Time) {
	if !g.cfg.Enabled || skipProvider(provider) {
		return
	}
	g.mu.Lock()
	evs := g.maybePruneLocked(now, nil)
	if e := g.prov[provider]; e != nil {
		e.times, e.until = e.times[:0], time.Time{}
		evs = g.provNoteLocked(evs, provider, e, now)
	}
	if conn != "" {
		k := connKey{provider, conn}
		if c := g.conns[k]; c != nil {
			c.count = 0
			evs = g.connNoteLocked(evs, k, c, now)
		}
	}
	g.countEntries()
	g.mu.Unlock()
	g.fire(evs)
}

// BlockedUntilAt reports whether provider is cooling at now or, when conn
// is not empty, whether that connection of it is, and until when. The
// provider's cooldown is asked first; its until is the last instant of the
// cooldown (inclusive), so the wait until.Sub(now) is zero at that instant
// and the provider is still cooling. A connection's until is the first
// instant after its cooldown. A disabled gate never blocks. It does not
// allocate.
func (g *Gate) BlockedUntilAt(provider, conn string, now time.Time) (until time.Time, blocked bool) {
	// An empty gate answers in a body small enough to be inlined.
	if g.entries.Load() != 0 {
		until, blocked = g.blockedUntilAt(provider, conn, now)
	}
	return until, blocked
}

// blockedUntilAt is BlockedUntilAt for a gate that holds entries.
func (g *Gate) blockedUntilAt(provider, conn string, now time.Time) (until time.Time, blocked bool) {
	if !g.cfg.Enabled {
		return time.Time{}, false
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	if e := g.prov[provider]; e != nil && e.coolingAt(now) {
		return e.until, true
	}
	if conn == "" {
		return time.Time{}, false
	}
	if c := g.conns[connKey{provider, conn}]; c != nil {
		if u, ok := g.connUntil(c, now); ok {
			return u, true
		}
	}
	return time.Time{}, false
}

// connCooldown returns the cooldown after n failures of one connection:
// min(MinRetry·2^min(n−1, 4), MaxRetry), zero for n ≤ 0.
func (g *Gate) connCooldown(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	d := *g.cfg.MinRetry << min(n-1, maxConnExponent)
	return min(d, g.cfg.MaxRetry)
}

// connUntil returns the end (exclusive) of c's cooldown and whether it is
// cooling at now.
func (g *Gate) connUntil(c *connEntry, now time.Time) (time.Time, bool) {
	if c.count == 0 {
		return time.Time{}, false
	}
	u := c.last.Add(g.connCooldown(c.count))
	return u, now.Before(u)
}

// SnapshotAt lists every entry as seen at now as a [Record] (see there for
// the fields a gate entry fills), provider entries first, each group
// sorted by name; [Gate.RestoreAt] puts them back. A disabled gate has no
// entries.
func (g *Gate) SnapshotAt(now time.Time) []Record {
	g.mu.RLock()
	out := make([]Record, 0, len(g.prov)+len(g.conns))
	for p, e := range g.prov {
		st := Record{Provider: p, Failures: len(e.times), LastFailure: e.last}
		if e.coolingAt(now) {
			st.State, st.Until = Open, e.until
		}
		out = append(out, st)
	}
	nprov := len(out)
	for k, c := range g.conns {
		st := Record{Provider: k.provider, Connection: k.conn, Failures: c.count, LastFailure: c.last}
		if u, ok := g.connUntil(c, now); ok {
			st.State, st.Until = Open, u
		}
		out = append(out, st)
	}
	g.mu.RUnlock()
	cmp := func(a, b Record) int {
		if c := strings.Compare(a.Provider, b.Provider); c != 0 {
			return c
		}
		return strings.Compare(a.Connection, b.Connection)
	}
	slices.SortFunc(out[:nprov], cmp)
	slices.SortFunc(out[nprov:], cmp)
	return out
}

// maybePruneLocked drops idle entries every pruneEvery writes.
func (g *Gate) maybePruneLocked(now time.Time, evs []Event) []Event {
	g.writes++
	if g.writes%pruneEvery != 0 {
		return evs
	}
	return g.pruneLocked(now, evs)
}

// pruneLocked drops entries whose last failure is older than the
// retention and which are not cooling, and notes the cooldowns that have
// ended. It costs O(log n) per entry dropped or noted: the heaps give the
// entries in order, so the others are never visited.
func (g *Gate) pruneLocked(now time.Time, evs []Event) []Event {
	cut := now.Add(-g.retention)
	// An entry whose last failure is older than the retention is never
	// cooling: its cooldown ended at most a cooldown (≤ the retention)
	// after that failure.
	for e, _ := g.provOld.Top(); e != nil && e.last.Before(cut) && !e.coolingAt(now); e, _ = g.provOld.Top() {
		evs = g.dropProvLocked(evs, e, now)
	}
	for e, _ := g.provCool.Top(); e != nil && now.After(e.reported); e, _ = g.provCool.Top() {
		if evs = g.provNoteLocked(evs, e.name, e, now); e.coolPos == 1 {
			break // still cooling, at a later end
		}
	}
	for c, _ := g.connOld.Top(); c != nil && c.last.Before(cut); c, _ = g.connOld.Top() {
		evs = g.dropConnLocked(evs, c, now)
	}
	for c, _ := g.connCool.Top(); c != nil && !now.Before(c.reported); c, _ = g.connCool.Top() {
		if evs = g.connNoteLocked(evs, c.key, c, now); c.coolPos == 1 {
			break // still cooling, at a later end
		}
	}
	return evs
}

// dropProvLocked removes the provider entry e and appends its removal.
func (g *Gate) dropProvLocked(evs []Event, e *provEntry, now time.Time) []Event {
	delete(g.prov, e.name)
	g.provOld.Remove(e)
	g.provCool.Remove(e)
	return g.removedLocked(evs, e.name, "", &e.note, e.last, now)
}

// dropConnLocked removes the connection entry c and appends its removal.
func (g *Gate) dropConnLocked(evs []Event, c *connEntry, now time.Time) []Event {
	delete(g.conns, c.key)
	g.connOld.Remove(c)
	g.connCool.Remove(c)
	return g.removedLocked(evs, c.key.provider, c.key.conn, &c.note, c.last, now)
}

// pruneAt drops every entry idle for longer than the retention at now.
func (g *Gate) pruneAt(now time.Time) {
	g.mu.Lock()
	evs := g.pruneLocked(now, nil)
	g.countEntries()
	g.mu.Unlock()
	g.fire(evs)
}

// countEntries publishes the number of entries; call it with g.mu held.
func (g *Gate) countEntries() { g.entries.Store(int64(len(g.prov) + len(g.conns))) }

// provNoteLocked appends the event of a change of e's cooldown since the
// hook last heard of it, if any.
func (g *Gate) provNoteLocked(evs []Event, provider string, e *provEntry, now time.Time) []Event {
	var u time.Time
	if e.coolingAt(now) {
		u = e.until
	}
	evs = g.noteLocked(evs, provider, "", &e.note, u, len(e.times), e.last, now)
	if e.reported.IsZero() {
		g.provCool.Remove(e)
	} else {
		g.provCool.Set(e, heap.Stamp(e.reported))
	}
	return evs
}

// connNoteLocked is provNoteLocked for a connection entry.
func (g *Gate) connNoteLocked(evs []Event, k connKey, c *connEntry, now time.Time) []Event {
	u, ok := g.connUntil(c, now)
	if !ok {
		u = time.Time{}
	}
	evs = g.noteLocked(evs, k.provider, k.conn, &c.note, u, c.count, c.last, now)
	if c.reported.IsZero() {
		g.connCool.Remove(c)
	} else {
		g.connCool.Set(c, heap.Stamp(c.reported))
	}
	return evs
}

// noteLocked appends an event when until, the entry's cooldown end at now
// (zero: not cooling), differs from what the hook last heard.
func (g *Gate) noteLocked(evs []Event, provider, conn string, n *note, until time.Time, failures int, last, now time.Time) []Event {
	if g.cfg.OnChange == nil || until.Equal(n.reported) {
		return evs
	}
	ev := Event{Provider: provider, Connection: conn, From: coolState(n.reported), To: coolState(until),
		At: now, Until: until, Failures: failures, LastFailure: last}
	n.told, n.reported = true, until
	return append(evs, ev)
}

// removedLocked appends the removal of an entry the hook has heard of.
func (g *Gate) removedLocked(evs []Event, provider, conn string, n *note, last, now time.Time) []Event {
	if g.cfg.OnChange == nil || !n.told {
		return evs
	}
	return append(evs, Event{Provider: provider, Connection: conn, From: coolState(n.reported), To: Closed,
		At: now, LastFailure: last, Removed: true})
}

// coolState is the state of an entry cooling until until (zero: not
// cooling): Open or Closed.
func coolState(until time.Time) State {
	if until.IsZero() {
		return Closed
	}
	return Open
}

// fire calls the hook with evs, outside the lock.
func (g *Gate) fire(evs []Event) {
	for _, ev := range evs {
		g.cfg.OnChange(ev)
	}
}

// addProvLocked adds an entry for provider, first dropping the provider
// entry whose last failure is oldest when the gate holds MaxEntries; the
// drop's events are appended to evs. g.mu is held.
func (g *Gate) addProvLocked(evs []Event, provider string, now time.Time) (*provEntry, []Event) {
	if len(g.prov) >= g.cfg.MaxEntries {
		if v, _ := g.provOld.Top(); v != nil {
			evs = g.dropProvLocked(evs, v, now)
		}
	}
	e := &provEntry{name: provider}
	g.prov[provider] = e
	return e, evs
}

// addConnLocked is addProvLocked for a connection entry.
func (g *Gate) addConnLocked(evs []Event, k connKey, now time.Time) (*connEntry, []Event) {
	if len(g.conns) >= g.cfg.MaxEntries {
		if v, _ := g.connOld.Top(); v != nil {
			evs = g.dropConnLocked(evs, v, now)
		}
	}
	c := &connEntry{key: k}
	g.conns[k] = c
	return c, evs
}
