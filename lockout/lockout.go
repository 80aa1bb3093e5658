package lockout

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"
)

const (
	numShards = 32 // power of two
	// maxStackModel is the longest ASCII model name that is lower-cased on
	// the stack by lock checks; longer names with upper-case letters are
	// lower-cased on the heap.
	maxStackModel = 128
	maxCount      = 1 << 30
	exactPrefix   = "exact:"
)

// Config configures a [Lockout]. The zero value means the defaults listed
// next to each field.
type Config struct {
	// Settings are the tunable numbers; see [Settings.Normalize].
	Settings Settings

	// Families maps a canonical provider id to its quota-family function.
	// Nil means DefaultFamilies; providers without an entry use the model
	// itself as the family.
	Families map[string]FamilyFunc

	// Aliases maps provider aliases to canonical ids, applied to every
	// provider argument. Nil means DefaultAliases; an empty map means none.
	Aliases map[string]string

	// Location is the time zone of "local midnight", the end of a
	// quota_exhausted lock that has no exact length. Nil means time.Local.
	Location *time.Location

	// OnChange, when not nil, is called after a lock is created, extended,
	// cleared, removed by decay or evicted. It is called outside the
	// Lockout's locks, possibly from several goroutines at once.
	OnChange func(Change)
}

// Lockout tracks per-model failures and locks for provider + connection +
// model triples. A failure is written under one of three keys (see [Scope]):
// the model's quota family, the model, or the exact (trimmed, lower-cased)
// model. A check looks at all three.
//
// Use [New]. The zero value is a disabled Lockout whose settings can be set
// with [Lockout.SetSettings]; it has no quota families or aliases.
//
// The hot path is [Lockout.LockedAt]; it allocates nothing for ASCII model
// names. Failures go to [Lockout.RecordFailureAt] and successes to
// [Lockout.DecayAt]; [Lockout.SnapshotAt] and [Lockout.ClearAt] serve admin
// APIs. Expired entries are pruned lazily on writes and listings; no
// goroutine is started.
//
// A Lockout is safe for concurrent use by multiple goroutines.
type Lockout struct {
	cfg      atomic.Pointer[config]
	families map[string]FamilyFunc // read-only after New
	aliases  map[string]string     // read-only after New
	loc      *time.Location
	onChange func(Change)

	total   atomic.Int64 // entries across all shards
	evictMu sync.Mutex   // serialises cap evictions
	shards  [numShards]shard
}

type config struct {
	Settings
	codes [(maxErrorCode + 64) / 64]uint64 // bitset of Settings.ErrorCodes
}

func (c *config) hasCode(status int) bool {
	if status < 0 || status > maxErrorCode {
		return false
	}
	return c.codes[status/64]&(1<<(status%64)) != 0
}

// window is the escalation window of e, minus e's last cooldown.
func (c *config) window(e *entry) time.Duration {
	if c.EscalationWindow > 0 {
		return c.EscalationWindow
	}
	return e.resetAfter
}

type shard struct {
	mu        sync.RWMutex
	conns     map[connKey]*conn // lazily initialised
	nextSweep time.Time
	_         [64]byte // keep neighbouring shards off one cache line
}

type connKey struct{ provider, connection string }

type conn struct {
	entries map[slot]*entry
	exact   int // entries with slot.exact, so checks can skip that lookup
}

// slot is the model part of a key. Family and model keys share one
// namespace (a model's family is often the model itself).
type slot struct {
	name  string
	exact bool
}

type entry struct {
	scope    Scope
	reason   Reason
	lockedAt time.Time
	until    time.Time // zero: no lock, only a failure record

	count         int
	lastFailureAt time.Time // zero: no failure recorded (manual lock)
	resetAfter    time.Duration
	lastCooldown  time.Duration
}

// active reports whether e locks at now; a lock holds until and including
// its until.
func (e *entry) active(now time.Time) bool {
	return !e.until.IsZero() && !now.After(e.until)
}

// retainUntil is the last instant e is still useful: its lock end or the
// end of its escalation window, whichever is later.
func (e *entry) retainUntil(c *config) time.Time {
	t := e.until
	if !e.lastFailureAt.IsZero() {
		if w := e.lastFailureAt.Add(c.window(e) + e.lastCooldown); w.After(t) {
			t = w
		}
	}
	return t
}

// New returns a Lockout configured by c.
func New(c Config) *Lockout {
	l := &Lockout{loc: c.Location, onChange: c.OnChange}
	if c.Families == nil {
		l.families = DefaultFamilies()
	} else {
		l.families = make(map[string]FamilyFunc, len(c.Families))
		for k, v := range c.Families {
			if v != nil {
				l.families[k] = v
			}
		}
	}
	if c.Aliases == nil {
		l.aliases = DefaultAliases()
	} else {
		l.aliases = make(map[string]string, len(c.Aliases))
		for k, v := range c.Aliases {
			l.aliases[k] = v
		}
	}
	l.SetSettings(c.Settings)
	return l
}

// SetSettings replaces the settings; they are normalized first. Existing
// locks keep their end times. While Enabled is false every model reads as
// unlocked and nothing new is recorded.
func (l *Lockout) SetSettings(s Settings) {
	c := &config{Settings: s.Normalize()}
	for _, code := range c.ErrorCodes {
		c.codes[code/64] |= 1 << (code % 64)
	}
	l.cfg.Store(c)
}

// Settings returns the normalized settings in use.
func (l *Lockout) Settings() Settings {
	s := l.config().Settings
	s.ErrorCodes = slices.Clone(s.ErrorCodes)
	return s
}

var zeroConfig = func() *config {
	c := &config{Settings: Settings{}.Normalize()}
	for _, code := range c.ErrorCodes {
		c.codes[code/64] |= 1 << (code % 64)
	}
	return c
}()

func (l *Lockout) config() *config {
	if c := l.cfg.Load(); c != nil {
		return c
	}
	return zeroConfig
}

func (l *Lockout) canonical(provider string) string {
	if len(l.aliases) != 0 {
		if p, ok := l.aliases[provider]; ok {
			return p
		}
	}
	return provider
}

func (l *Lockout) family(provider, model string) string {
	if f := l.families[provider]; f != nil {
		return f(model)
	}
	return model
}

func (l *Lockout) shardFor(connection string) *shard {
	// FNV-1a: cheap, allocation-free and good enough to spread connections.
	h := uint32(2166136261)
	for i := 0; i < len(connection); i++ {
		h ^= uint32(connection[i])
		h *= 16777619
	}
	return &l.shards[h&(numShards-1)]
}

// exactName returns model trimmed and lower-cased. When lowering is needed
// and model is ASCII and short, the result lives in buf, so it must not
// outlive buf.
func exactName(model string, buf *[maxStackModel]byte) string {
	m := strings.TrimSpace(model)
	upper := false
	for i := 0; i < len(m); i++ {
		c := m[i]
		if c >= utf8.RuneSelf {
			return strings.ToLower(m) // allocates only if something changes
		}
		if 'A' <= c && c <= 'Z' {
			upper = true
		}
	}
	if !upper {
		return m
	}
	if len(m) > len(buf) {
		return strings.ToLower(m)
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return unsafe.String(&buf[0], len(m))
}

// exactKey returns the exact-key model part of model in memory of its own,
// for storing.
func exactKey(model string) string {
	return strings.ToLower(strings.TrimSpace(model))
}

// Locked is shorthand for LockedAt(provider, connection, model, time.Now()).
func (l *Lockout) Locked(provider, connection, model string) (until time.Time, reason Reason, locked bool) {
	return l.LockedAt(provider, connection, model, time.Now())
}

// LockedAt reports whether model is locked on provider's connection at now,
// under its family, model or exact key. When it is, until is the latest end
// of those locks (the model is locked at until itself) and reason belongs
// to that lock. A disabled Lockout reports every model unlocked.
//
// LockedAt allocates nothing unless model has non-ASCII upper-case letters
// or is longer than 128 bytes with upper-case letters, or a custom
// [FamilyFunc] allocates.
func (l *Lockout) LockedAt(provider, connection, model string, now time.Time) (until time.Time, reason Reason, locked bool) {
	c := l.cfg.Load()
	if c == nil || !c.Enabled || model == "" {
		return time.Time{}, "", false
	}
	provider = l.canonical(provider)
	fam := l.family(provider, model)
	sh := l.shardFor(connection)

	var buf [maxStackModel]byte
	sh.mu.RLock()
	cn := sh.conns[connKey{provider, connection}]
	if cn != nil {
		pick := func(e *entry) {
			if e != nil && e.active(now) && (!locked || e.until.After(until)) {
				until, reason, locked = e.until, e.reason, true
			}
		}
		pick(cn.entries[slot{name: model}])
		if fam != model {
			pick(cn.entries[slot{name: fam}])
		}
		if cn.exact > 0 {
			pick(cn.entries[slot{name: exactName(model, &buf), exact: true}])
		}
	}
	sh.mu.RUnlock()
	return until, reason, locked
}

// Check is shorthand for CheckAt(provider, connection, model, time.Now()).
func (l *Lockout) Check(provider, connection, model string) error {
	return l.CheckAt(provider, connection, model, time.Now())
}

// CheckAt returns nil when model is not locked at now, and a
// [*LockedError] (matching [ErrLocked]) when it is. Use [Lockout.LockedAt]
// where allocation matters.
func (l *Lockout) CheckAt(provider, connection, model string, now time.Time) error {
	until, reason, locked := l.LockedAt(provider, connection, model, now)
	if !locked {
		return nil
	}
	return &LockedError{
		Provider:   l.canonical(provider),
		Connection: connection,
		Model:      model,
		Reason:     reason,
		Until:      until,
		RetryAfter: until.Sub(now),
	}
}

// slotFor returns the key a write with this scope uses for model.
func (l *Lockout) slotFor(provider string, scope Scope, model string) slot {
	switch scope {
	case ScopeFamily:
		return slot{name: strings.Clone(l.family(provider, model))}
	case ScopeExact:
		return slot{name: exactKey(model), exact: true}
	}
	return slot{name: strings.Clone(model)}
}

// slotsFor returns the distinct keys a check of model looks at.
func (l *Lockout) slotsFor(provider, model string) []slot {
	s := []slot{{name: model}}
	if fam := l.family(provider, model); fam != model {
		s = append(s, slot{name: fam})
	}
	return append(s, slot{name: exactKey(model), exact: true})
}

// RecordFailure is shorthand for RecordFailureAt(f, time.Now()).
func (l *Lockout) RecordFailure(f Failure) Result { return l.RecordFailureAt(f, time.Now()) }

// RecordFailureAt records a model-level failure at now and locks the key
// its scope resolves to (see [ResolveScope]). It does nothing and returns
// a zero Result when lockout is disabled, f.Status is not one of the error
// codes, or f.Model is empty.
//
// The failure escalates the previous one on the same key when it comes
// within the escalation window (see Settings.EscalationWindow); the count
// then rises by one, otherwise it starts at 1. The lock length is
// f.Cooldown when given (capped by MaxCooldown unless f.UpstreamReset);
// the time to the next midnight in Config.Location for quota_exhausted
// without f.Cooldown (capped by MaxCooldown); otherwise
// BaseCooldown·2^min(count−1, MaxBackoffSteps), or BaseCooldown when
// FixedCooldown is set, capped by MaxCooldown. A lock that already ends
// later is kept.
func (l *Lockout) RecordFailureAt(f Failure, now time.Time) Result {
	c := l.config()
	if !c.Enabled || f.Model == "" || !c.hasCode(f.Status) {
		return Result{}
	}
	return l.write(c, f, now, true)
}

// Lock is shorthand for LockAt(f, time.Now()).
func (l *Lockout) Lock(f Failure) Result { return l.LockAt(f, time.Now()) }

// LockAt locks a key for f.Cooldown from now without counting a failure or
// consulting the error codes: the scope comes from f.Scope (or f.Status,
// see [ResolveScope]) and the reason from f.Reason (or f.Status). The
// cooldown is capped by MaxCooldown unless f.UpstreamReset is set. A lock
// that already ends later is kept. LockAt does nothing when lockout is
// disabled, f.Model is empty or f.Cooldown is not positive.
func (l *Lockout) LockAt(f Failure, now time.Time) Result {
	c := l.config()
	if !c.Enabled || f.Model == "" || f.Cooldown <= 0 {
		return Result{}
	}
	return l.write(c, f, now, false)
}

func (l *Lockout) write(c *config, f Failure, now time.Time, failure bool) Result {
	provider := strings.Clone(l.canonical(f.Provider))
	scope := ResolveScope(f.Scope, f.Status)
	reason := f.Reason
	if reason == "" {
		reason = ReasonForStatus(f.Status)
	}
	sl := l.slotFor(provider, scope, f.Model)
	resetAfter := f.ResetAfter
	if resetAfter <= 0 {
		resetAfter = DefaultResetAfter
	}
	exact, upstream := f.Cooldown, f.UpstreamReset
	if exact <= 0 {
		upstream = false
		if failure && reason == ReasonQuotaExhausted {
			exact = l.untilMidnight(now)
		}
	}

	sh := l.shardFor(f.Connection)
	var events []Change
	sh.mu.Lock()
	if sh.conns == nil {
		sh.conns = make(map[connKey]*conn)
	}
	if !now.Before(sh.nextSweep) || now.Add(defaultSweepInterval).Before(sh.nextSweep) {
		events = l.sweepLocked(sh, c, now, events)
		sh.nextSweep = now.Add(defaultSweepInterval)
	}
	ck := connKey{provider, strings.Clone(f.Connection)}
	cn := sh.conns[ck]
	if cn == nil {
		cn = &conn{entries: make(map[slot]*entry)}
		sh.conns[ck] = cn
	}
	e := cn.entries[sl]
	if e == nil {
		e = &entry{}
		cn.entries[sl] = e
		if sl.exact {
			cn.exact++
		}
		l.total.Add(1)
	}

	var cooldown time.Duration
	if failure {
		count := 1
		if e.count > 0 && !e.lastFailureAt.IsZero() {
			elapsed := max(now.Sub(e.lastFailureAt), 0) // a clock jump back counts as no time
			if elapsed <= c.window(e)+e.lastCooldown {
				count = min(e.count+1, maxCount)
			}
		}
		cooldown = cooldownFor(c, count, exact, upstream)
		e.count = count
		e.lastFailureAt = now
		e.resetAfter = resetAfter
		e.lastCooldown = cooldown
	} else {
		cooldown = exact
		if !upstream {
			cooldown = min(cooldown, c.MaxCooldown)
		}
		e.count = max(e.count, 1)
	}

	newUntil := now.Add(cooldown)
	wasActive := e.active(now)
	if !wasActive || newUntil.After(e.until) {
		if !wasActive {
			e.lockedAt = now
		}
		e.until = newUntil
		e.reason = reason
		e.scope = scope
		if l.onChange != nil {
			events = append(events, Change{Kind: Locked, Lock: infoOf(ck, sl, e, now)})
		}
	}
	res := Result{
		Locked:       true,
		Scope:        scope,
		Cooldown:     cooldown,
		Until:        e.until,
		FailureCount: e.count,
		ResetAfter:   resetAfter,
	}
	sh.mu.Unlock()

	if l.total.Load() > int64(c.MaxEntries) {
		events = l.evict(c, now, events)
	}
	l.emit(events)
	return res
}

// cooldownFor returns the lock length of the count-th consecutive failure.
func cooldownFor(c *config, count int, exact time.Duration, upstream bool) time.Duration {
	if exact > 0 {
		if upstream {
			return exact
		}
		return min(exact, c.MaxCooldown)
	}
	if c.FixedCooldown {
		return min(c.BaseCooldown, c.MaxCooldown)
	}
	// BaseCooldown ≤ 10 min and the shift ≤ 20, so this cannot overflow.
	shift := min(count-1, c.MaxBackoffSteps)
	return min(c.BaseCooldown<<shift, c.MaxCooldown)
}

// untilMidnight returns the time from now to the next midnight in the
// configured zone, at most 24 h.
func (l *Lockout) untilMidnight(now time.Time) time.Duration {
	loc := l.loc
	if loc == nil {
		loc = time.Local
	}
	t := now.In(loc)
	next := time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, loc)
	d := next.Sub(now)
	if d <= 0 || d > quotaDayGuard {
		d = quotaDayGuard
	}
	return d
}

// Decay is shorthand for DecayAt(provider, connection, model, time.Now()).
func (l *Lockout) Decay(provider, connection, model string) (count int, cleared bool) {
	return l.DecayAt(provider, connection, model, time.Now())
}

// DecayAt records a success of model on provider's connection: the failure
// count under each of the model's keys (family, model, exact) is halved,
// rounding down. A key whose count reaches 0 is removed with its lock.
// count is the highest count left under the model's keys; cleared reports
// whether this call removed at least one key.
func (l *Lockout) DecayAt(provider, connection, model string, now time.Time) (count int, cleared bool) {
	if model == "" {
		return 0, false
	}
	provider = l.canonical(provider)
	sh := l.shardFor(connection)
	sh.mu.RLock()
	cn := sh.conns[connKey{provider, connection}]
	sh.mu.RUnlock()
	if cn == nil {
		return 0, false // nothing to decay: the common success path
	}
	slots := l.slotsFor(provider, model)
	ck := connKey{provider, connection}
	var events []Change
	sh.mu.Lock()
	if cn = sh.conns[ck]; cn != nil {
		for _, s := range slots {
			e := cn.entries[s]
			if e == nil {
				continue
			}
			e.count /= 2
			if e.count > 0 {
				count = max(count, e.count)
				continue
			}
			if l.onChange != nil && e.active(now) {
				events = append(events, Change{Kind: Decayed, Lock: infoOf(ck, s, e, now)})
			}
			l.removeLocked(sh, ck, cn, s)
			cleared = true
		}
	}
	sh.mu.Unlock()
	l.emit(events)
	return count, cleared
}

// Clear is shorthand for ClearAt(provider, connection, model, time.Now()).
func (l *Lockout) Clear(provider, connection, model string) bool {
	return l.ClearAt(provider, connection, model, time.Now())
}

// ClearAt removes every lock and failure record of model on provider's
// connection, under its family, model and exact keys. A model written as
// listed by [Lockout.SnapshotAt] ("exact:<model>") also clears that exact
// key. ClearAt reports whether a lock that was active at now was removed.
func (l *Lockout) ClearAt(provider, connection, model string, now time.Time) bool {
	if model == "" {
		return false
	}
	provider = l.canonical(provider)
	slots := l.slotsFor(provider, model)
	if len(model) > len(exactPrefix) && strings.EqualFold(model[:len(exactPrefix)], exactPrefix) {
		slots = append(slots, slot{name: exactKey(model[len(exactPrefix):]), exact: true})
	}
	ck := connKey{provider, connection}
	sh := l.shardFor(connection)
	removed := false
	var events []Change
	sh.mu.Lock()
	if cn := sh.conns[ck]; cn != nil {
		for _, s := range slots {
			e := cn.entries[s]
			if e == nil {
				continue
			}
			if e.active(now) {
				removed = true
				if l.onChange != nil {
					events = append(events, Change{Kind: Cleared, Lock: infoOf(ck, s, e, now)})
				}
			}
			l.removeLocked(sh, ck, cn, s)
		}
	}
	sh.mu.Unlock()
	l.emit(events)
	return removed
}

// Reset removes every lock and failure record without reporting changes.
func (l *Lockout) Reset() {
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		for _, cn := range sh.conns {
			l.total.Add(-int64(len(cn.entries)))
		}
		sh.conns = nil
		sh.mu.Unlock()
	}
}

// Len returns the number of tracked keys, locks and failure records
// together, including expired ones not yet pruned.
func (l *Lockout) Len() int { return int(l.total.Load()) }

// Snapshot is shorthand for SnapshotAt(time.Now()).
func (l *Lockout) Snapshot() []Info { return l.SnapshotAt(time.Now()) }

// SnapshotAt prunes expired entries and returns the locks active at now,
// sorted by provider, connection and model.
func (l *Lockout) SnapshotAt(now time.Time) []Info {
	c := l.config()
	var out []Info
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		l.sweepLocked(sh, c, now, nil)
		for ck, cn := range sh.conns {
			for s, e := range cn.entries {
				if e.active(now) {
					out = append(out, infoOf(ck, s, e, now))
				}
			}
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Info) int {
		return cmp.Or(
			cmp.Compare(a.Provider, b.Provider),
			cmp.Compare(a.Connection, b.Connection),
			cmp.Compare(a.Model, b.Model),
		)
	})
	return out
}

func infoOf(ck connKey, s slot, e *entry, now time.Time) Info {
	name := s.name
	if s.exact {
		name = exactPrefix + name
	}
	return Info{
		Provider:     ck.provider,
		Connection:   ck.connection,
		Model:        name,
		Scope:        e.scope,
		Reason:       e.reason,
		Remaining:    max(e.until.Sub(now), 0),
		FailureCount: e.count,
		LockedAt:     e.lockedAt,
		Until:        e.until,
	}
}

// sweepLocked removes sh's entries that are past both their lock and their
// escalation window. Expiry is not a change worth reporting, so events is
// returned as is.
func (l *Lockout) sweepLocked(sh *shard, c *config, now time.Time, events []Change) []Change {
	for ck, cn := range sh.conns {
		for s, e := range cn.entries {
			if now.After(e.retainUntil(c)) {
				l.removeLocked(sh, ck, cn, s)
			}
		}
	}
	return events
}

// removeLocked deletes one entry, and its connection when that empties.
func (l *Lockout) removeLocked(sh *shard, ck connKey, cn *conn, s slot) {
	if _, ok := cn.entries[s]; !ok {
		return
	}
	delete(cn.entries, s)
	if s.exact {
		cn.exact--
	}
	l.total.Add(-1)
	if len(cn.entries) == 0 {
		delete(sh.conns, ck)
	}
}

// evict brings the entry count back under the cap: first every expired
// entry goes, then, if still needed, the entries closest to expiry, down to
// seven eighths of the cap so the work is amortised over many writes.
func (l *Lockout) evict(c *config, now time.Time, events []Change) []Change {
	if !l.evictMu.TryLock() {
		return events // another goroutine is already evicting
	}
	defer l.evictMu.Unlock()
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		l.sweepLocked(sh, c, now, nil)
		sh.nextSweep = now.Add(defaultSweepInterval)
		sh.mu.Unlock()
	}
	limit := int64(c.MaxEntries)
	if l.total.Load() <= limit {
		return events
	}
	type victim struct {
		shard  int
		ck     connKey
		s      slot
		e      *entry
		retain time.Time
	}
	var vs []victim
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.RLock()
		for ck, cn := range sh.conns {
			for s, e := range cn.entries {
				vs = append(vs, victim{i, ck, s, e, e.retainUntil(c)})
			}
		}
		sh.mu.RUnlock()
	}
	slices.SortFunc(vs, func(a, b victim) int { return a.retain.Compare(b.retain) })
	excess := l.total.Load() - (limit - limit/evictLowWaterFraction)
	for _, v := range vs {
		if excess <= 0 {
			break
		}
		sh := &l.shards[v.shard]
		sh.mu.Lock()
		if cn := sh.conns[v.ck]; cn != nil && cn.entries[v.s] == v.e {
			if l.onChange != nil && v.e.active(now) {
				events = append(events, Change{Kind: Evicted, Lock: infoOf(v.ck, v.s, v.e, now)})
			}
			l.removeLocked(sh, v.ck, cn, v.s)
			excess--
		}
		sh.mu.Unlock()
	}
	return events
}

func (l *Lockout) emit(events []Change) {
	if l.onChange == nil {
		return
	}
	for _, ev := range events {
		l.onChange(ev)
	}
}
