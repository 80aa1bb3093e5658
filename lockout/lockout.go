package lockout

import (
	"cmp"
	"encoding/binary"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/routeguard/routeguard/internal/heap"
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

// Lockout tracks per-model failures and locks for provider + connection +
// model triples. A failure is written under one of three keys (see [Scope]):
// the model's quota family, the model, or the exact (trimmed, lower-cased)
// model. A check looks at all three.
//
// Use [New]. The zero value is a disabled Lockout that [Lockout.SetConfig]
// can configure.
//
// The hot path is [Lockout.LockedAt]; it allocates nothing for ASCII model
// names. Failures go to [Lockout.RecordFailureAt] and successes to
// [Lockout.DecayAt]; [Lockout.SnapshotAt] and [Lockout.ClearAt] serve admin
// APIs. Expired entries are pruned lazily on writes and listings; no
// goroutine is started.
//
// A Lockout is safe for concurrent use by multiple goroutines. Checks take
// no lock and write nothing, so they scale with the number of readers;
// writes are serialised per group of connections. A check that races with
// writes sees each of the model's keys either before or after a write.
//
// The entries live in a lock-free hash table of the package's own rather
// than in sync.Map or a mutex-guarded map: with those, the checks of
// BenchmarkLockedAtStandard took three to five times as long, above the
// 50 ns a check may cost (table.go has the details).
type Lockout struct {
	cfg     atomic.Pointer[conf]
	total   atomic.Int64 // entries across all shards
	evictMu sync.Mutex   // serialises cap evictions
	// conns counts the entries by a cheap unseeded digest of their
	// connection (see connBucket), so that a check or a decay of a
	// connection with no entries answers before hashing anything. A count
	// rises before its entry is published and falls after it is unlinked,
	// so it never reads lower than the entries a lookup could find.
	conns  [connBuckets]atomic.Int32
	shards [numShards]shard
}

// connBuckets is the number of counts in Lockout.conns (a power of two).
const connBuckets = 256

// connBucket returns the place of connection's count in Lockout.conns:
// its length and its last four bytes (the first, middle and last when
// shorter), where connection ids usually differ, mixed by a multiplicative
// hash. It is not seeded: a crafted id can only share a count with
// another, which makes its checks take the full lookup.
func connBucket(connection string) uint64 {
	n := len(connection)
	x := uint64(n)
	switch {
	case n >= 4:
		// unsafe: the last four bytes in one load, without a copy.
		x |= uint64(*(*uint32)(unsafe.Pointer(unsafe.StringData(connection[n-4:])))) << 8
	case n > 0:
		x |= uint64(connection[0])<<8 | uint64(connection[n/2])<<16 | uint64(connection[n-1])<<24
	}
	hi, lo := bits.Mul64(x, 0x9E3779B97F4A7C15)
	return (hi ^ lo) % connBuckets
}

// insertLocked stores the new entry e in sh. The caller holds sh.mu.
func (l *Lockout) insertLocked(sh *shard, e *entry) {
	l.conns[connBucket(e.connection)].Add(1) // before lookups can find e
	sh.insert(e)
	l.total.Add(1)
}

// shard holds the entries of the connections that hash to it. Lookups take
// no lock (see [table]); writers hold mu.
type shard struct {
	mu        sync.Mutex            // serialises writers
	tab       atomic.Pointer[table] // nil while the shard is empty
	live      atomic.Int64          // entries in tab
	exact     atomic.Int64          // entries with exact keys, so checks can skip that lookup
	used      int                   // slots of tab not free (entries and tombstones); guarded by mu
	nextSweep time.Time             // guarded by mu
	// order holds the shard's entries by the time they may be pruned
	// (their retainUntil under keyed, the configuration the keys were
	// computed with), soonest first; guarded by mu. Sweeps and the cap
	// take their victims from its top.
	order heap.Min[entry]
	keyed *conf
	_     [64]byte // keep neighbouring shards off one cache line
}

// key identifies one entry. Family and model keys share one namespace (a
// model's family is often the model itself); exact keys have their own.
type key struct {
	provider, connection, name string
	exact                      bool
}

// keyHash mixes the hashes of a key's connection and name. Connection ids
// rarely repeat across providers, so the provider is left to the full
// comparison. An exact key and a model key with the same name share a hash,
// so a check of an already lower-case model finds both in one lookup.
func keyHash(hc, hn uint64) uint64 { return hc*0x9E3779B97F4A7C15 ^ hn }

// lookup returns the entry stored under k, whose hash is h, or nil.
func (sh *shard) lookup(h uint64, k key) *entry {
	if t := sh.tab.Load(); t != nil {
		return t.find(h, k)
	}
	return nil
}

// entry is the state of one key. Its key and hash never change once it is
// stored; view is what lookups read; the other fields belong to writers and
// are guarded by the shard's mutex.
type entry struct {
	// What lookups read comes first, to share as few cache lines as the
	// entry allows.
	hash uint64
	view atomic.Pointer[lockView] // nil: no lock
	key
	first     lockView // the first view, stored with the entry; never changed once used
	firstUsed bool

	scope    Scope
	reason   Reason
	lockedAt time.Time
	until    time.Time // zero: no lock, only a failure record

	count         int
	lastFailureAt time.Time // zero: no failure recorded (manual lock)
	resetAfter    time.Duration
	lastCooldown  time.Duration

	orderPos int // place in the shard's order heap; guarded by the shard's mu
}

func entryPos(e *entry) *int { return &e.orderPos }

// publish stores e's lock for lookups. The caller holds the shard's lock.
func (e *entry) publish() {
	v := &e.first
	if e.firstUsed {
		v = new(lockView)
	}
	e.firstUsed = true
	*v = lockView{until: e.until, reason: e.reason}
	e.view.Store(v)
}

// lockView is the lock of an entry as lookups see it. A new one is stored
// whenever the lock changes, so a lookup sees until and reason together.
type lockView struct {
	until  time.Time
	reason Reason
}

// later returns whichever of best and v locks at now and ends later; best
// wins a tie. Either may be nil.
func later(best, v *lockView, now time.Time) *lockView {
	if v == nil || now.After(v.until) {
		return best
	}
	if best == nil || v.until.After(best.until) {
		return v
	}
	return best
}

// active reports whether e locks at now; a lock holds until and including
// its until.
func (e *entry) active(now time.Time) bool {
	return !e.until.IsZero() && !now.After(e.until)
}

// retainUntil is the last instant e is still useful: its lock end or the
// end of its escalation window, whichever is later.
func (e *entry) retainUntil(c *conf) time.Time {
	t := e.until
	if !e.lastFailureAt.IsZero() {
		if w := e.lastFailureAt.Add(c.window(e) + e.lastCooldown); w.After(t) {
			t = w
		}
	}
	return t
}

// New returns a Lockout configured by c (normalized first).
func New(c Config) *Lockout {
	l := &Lockout{}
	l.SetConfig(c)
	return l
}

// SetConfig replaces the configuration; it is normalized first. Existing
// locks keep their end times. While Enabled is false every model reads as
// unlocked and nothing new is recorded.
func (l *Lockout) SetConfig(c Config) { l.cfg.Store(newConf(c)) }

// Config returns the normalized configuration in use.
func (l *Lockout) Config() Config {
	c := l.conf().Config
	c.ErrorCodes = slices.Clone(c.ErrorCodes)
	c.MaxBackoffSteps = new(*c.MaxBackoffSteps)
	return c
}

var zeroConf = newConf(Config{})

func (l *Lockout) conf() *conf {
	if c := l.cfg.Load(); c != nil {
		return c
	}
	return zeroConf
}

func (l *Lockout) shard(hc uint64) *shard {
	return &l.shards[(hc>>32^hc)&(numShards-1)]
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
	// unsafe: the lowered name is used only for a lookup while buf is
	// live, and building a string of it would allocate on every check of an
	// upper-case model with white space (TestLockedAtAllocatesNothing).
	return unsafe.String(&buf[0], len(m))
}

// exactKey returns the exact-key model part of model in memory of its own,
// for storing.
func exactKey(model string) string {
	return strings.Clone(strings.ToLower(strings.TrimSpace(model)))
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
// LockedAt takes no lock. It allocates nothing unless model has non-ASCII
// upper-case letters, or is longer than 128 bytes with both upper-case
// letters and surrounding white space, or a custom [FamilyFunc] allocates.
func (l *Lockout) LockedAt(provider, connection, model string, now time.Time) (until time.Time, reason Reason, locked bool) {
	c := l.cfg.Load()
	if c == nil || !c.Enabled || model == "" || l.conns[connBucket(connection)].Load() == 0 {
		// Disabled, or no entry of this connection: the common answer,
		// before anything is hashed (BenchmarkLockedAtUntracked).
		return time.Time{}, "", false
	}
	hc := strhash(connection)
	sh := l.shard(hc)
	t := sh.tab.Load()
	if t == nil {
		return time.Time{}, "", false // nothing is tracked near this connection
	}
	provider = c.canonical(provider)
	// exactKeys: model may have an exact key of its own; exactForm: that
	// key's name is model itself.
	exactKeys := sh.exact.Load() > 0
	form := formOther
	if exactKeys {
		form = modelForm(model)
	}
	exactForm := form == formExact

	// One probe finds the model key and, when the model is already in exact
	// form, the exact key too: both have the same hash.
	var best *lockView
	h := keyHash(hc, strhash(model))
	// A table holds at most one entry per key, so the probe can stop after
	// one match, or two when the exact key may match as well. It must not
	// stop at one on the strength of a count of such pairs: a table that
	// was rebuilt since it was loaded can still hold an entry removed since,
	// which no count includes.
	matches, most := 0, 1
	if exactForm {
		most = 2
	}
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		e := s.e.Load()
		if e == nil {
			break
		}
		if s.holds(e, h) && e.hash == h && e.name == model && e.connection == connection &&
			e.provider == provider && (!e.exact || exactForm) {
			if v := e.view.Load(); v != nil && !now.After(v.until) && (best == nil || v.until.After(best.until)) {
				best = v
			}
			if matches++; matches == most {
				break
			}
		}
	}
	if fn := c.familyFunc(provider); fn != nil {
		if fam := fn(model); fam != model {
			if e := t.find(keyHash(hc, strhash(fam)), key{provider, connection, fam, false}); e != nil {
				best = later(best, e.view.Load(), now)
			}
		}
	}
	switch {
	case !exactKeys || exactForm:
	case form == formASCII:
		best = later(best, lockedExactASCII(t, hc, provider, connection, model), now)
	default:
		best = later(best, lockedExact(t, hc, provider, connection, model), now)
	}
	if best == nil {
		return time.Time{}, "", false
	}
	return best.until, best.reason, true
}

// Forms of a model name, as far as its exact key is concerned.
const (
	formOther = iota // anything else: see exactName
	formExact        // ASCII, trimmed and lower-case: its own exact key
	formASCII        // ASCII and trimmed, with upper-case letters
)

// modelForm returns the form of model.
func modelForm(model string) int {
	n := len(model)
	if n == 0 || asciiSpace(model[0]) || asciiSpace(model[n-1]) {
		return formOther
	}
	// unsafe: a read-only view of model's bytes, classified a word at a time
	// without copying (BenchmarkLockedAt/upper-case-miss).
	b := unsafe.Slice(unsafe.StringData(model), n)
	var high, upper uint64
	switch {
	case n < 4:
		for _, c := range b {
			if c >= utf8.RuneSelf {
				return formOther
			}
			if 'A' <= c && c <= 'Z' {
				upper = 1
			}
		}
	case n < 8:
		// The first and last four bytes, overlapping, in one word.
		w := uint64(binary.LittleEndian.Uint32(b)) | uint64(binary.LittleEndian.Uint32(b[n-4:]))<<32
		high, upper = w&highBits, upper8(w)
	default:
		// Eight bytes at a time; the last word may overlap the one before.
		for i := 0; ; i += 8 {
			i = min(i, n-8)
			w := binary.LittleEndian.Uint64(b[i:])
			high |= w & highBits
			upper |= upper8(w)
			if i == n-8 {
				break
			}
		}
	}
	switch {
	case high != 0:
		return formOther
	case upper != 0:
		return formASCII
	}
	return formExact
}

// asciiSpace reports whether c is ASCII white space as strings.TrimSpace
// sees it.
func asciiSpace(c byte) bool { return c == ' ' || '\t' <= c && c <= '\r' }

// lockedExactASCII is lockedExact for a model of formASCII, whose exact
// key is the model with its letters lowered: it hashes and compares the
// model as lowered without building the lowered name.
func lockedExactASCII(t *table, hc uint64, provider, connection, model string) *lockView {
	h := keyHash(hc, strhashLower(model))
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		e := s.e.Load()
		if e == nil {
			return nil
		}
		if s.holds(e, h) && e.hash == h && e.exact && e.connection == connection &&
			e.provider == provider && equalLower(e.name, model) {
			return e.view.Load()
		}
	}
}

// lockedExact returns the lock view of model's exact key in t.
func lockedExact(t *table, hc uint64, provider, connection, model string) *lockView {
	var buf [maxStackModel]byte
	ex := exactName(model, &buf)
	if e := t.find(keyHash(hc, strhash(ex)), key{provider, connection, ex, true}); e != nil {
		return e.view.Load()
	}
	return nil
}

// visit calls fn with each entry stored under one of model's keys: the
// model, its family and its exact form. fn may remove the entry it is given.
// visit only reads; with fn writing, the caller holds sh.mu.
func (l *Lockout) visit(c *conf, sh *shard, hc uint64, provider, connection, model string, fn func(*entry)) {
	t := sh.tab.Load()
	if t == nil {
		return
	}
	var buf [maxStackModel]byte
	ex := model
	if sh.exact.Load() > 0 {
		ex = exactName(model, &buf)
	}
	// One probe finds the model key and, when the model is already in exact
	// form, the exact key too.
	h := keyHash(hc, strhash(model))
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		e := s.e.Load()
		if e == nil {
			break
		}
		if s.holds(e, h) && e.hash == h && e.name == model && e.connection == connection &&
			e.provider == provider && (!e.exact || ex == model) {
			fn(e)
		}
	}
	if fam := c.family(provider, model); fam != model {
		if e := t.find(keyHash(hc, strhash(fam)), key{provider, connection, fam, false}); e != nil {
			fn(e)
		}
	}
	if ex != model {
		if e := t.find(keyHash(hc, strhash(ex)), key{provider, connection, ex, true}); e != nil {
			fn(e)
		}
	}
}

// CheckAt returns nil when model is not locked at now, and an [*Error] with
// [CodeLocked] (matching [ErrLocked]) when it is. Use [Lockout.LockedAt]
// where allocation matters.
func (l *Lockout) CheckAt(provider, connection, model string, now time.Time) error {
	until, reason, locked := l.LockedAt(provider, connection, model, now)
	if !locked {
		return nil
	}
	return lockedError(l.conf().canonical(provider), connection, model, reason, until, now)
}

// keyFor returns the key a write with this scope uses for model, and its
// hash. The key may share memory with the arguments and with buf; see
// [key.own].
func keyFor(c *conf, provider, connection string, scope Scope, model string, buf *[maxStackModel]byte) (key, uint64) {
	return keyForHash(c, strhash(connection), provider, connection, scope, model, buf)
}

// keyForHash is keyFor for a connection whose hash hc the caller has.
func keyForHash(c *conf, hc uint64, provider, connection string, scope Scope, model string, buf *[maxStackModel]byte) (key, uint64) {
	k := key{provider: provider, connection: connection}
	switch scope {
	case ScopeFamily:
		k.name = c.family(provider, model)
	case ScopeExact:
		k.name, k.exact = exactName(model, buf), true
	default:
		k.name = model
	}
	return k, keyHash(hc, strhash(k.name))
}

// own returns k in memory of its own, for storing: a stored key must not
// pin a caller's larger string or point into a stack buffer. The three
// strings share one allocation, so that a lookup comparing them reads
// adjacent memory.
func (k key) own() key {
	p, c := len(k.provider), len(k.provider)+len(k.connection)
	var b strings.Builder
	b.Grow(c + len(k.name))
	b.WriteString(k.provider)
	b.WriteString(k.connection)
	b.WriteString(k.name)
	s := b.String()
	return key{s[:p], s[p:c], s[c:], k.exact}
}

// RecordFailureAt records a model-level failure at now and locks the key
// its scope resolves to (see [ResolveScope]). It does nothing and returns
// a zero Result when lockout is disabled, f.Status is not one of the error
// codes, or f.Model is empty.
//
// The failure escalates the previous one on the same key when it comes
// within the escalation window (see Config.EscalationWindow); the count
// then rises by one, otherwise it starts at 1. The lock length is
// f.Cooldown when given (capped by MaxCooldown unless f.UpstreamReset);
// the time to the next midnight in Config.Location for quota_exhausted
// without f.Cooldown (capped by MaxCooldown); otherwise
// BaseCooldown·2^min(count−1, MaxBackoffSteps), or BaseCooldown when
// FixedCooldown is set, capped by MaxCooldown. A lock that already ends
// later is kept.
func (l *Lockout) RecordFailureAt(f Failure, now time.Time) Result {
	c := l.conf()
	if !c.Enabled || f.Model == "" || !c.codes.has(f.Status) {
		return Result{}
	}
	return l.write(c, f, now, true)
}

// LockAt locks a key for f.Cooldown from now without counting a failure or
// consulting the error codes: the scope comes from f.Scope (or f.Status,
// see [ResolveScope]) and the reason from f.Reason (or f.Status). The
// cooldown is capped by MaxCooldown unless f.UpstreamReset is set. A lock
// that already ends later is kept. LockAt does nothing when lockout is
// disabled, f.Model is empty or f.Cooldown is not positive.
func (l *Lockout) LockAt(f Failure, now time.Time) Result {
	c := l.conf()
	if !c.Enabled || f.Model == "" || f.Cooldown <= 0 {
		return Result{}
	}
	return l.write(c, f, now, false)
}

func (l *Lockout) write(c *conf, f Failure, now time.Time, failure bool) Result {
	provider := c.canonical(f.Provider)
	scope := ResolveScope(f.Scope, f.Status)
	reason := f.Reason
	if reason == "" {
		reason = ReasonForStatus(f.Status)
	}
	var buf [maxStackModel]byte
	hc := strhash(f.Connection)
	k, h := keyForHash(c, hc, provider, f.Connection, scope, f.Model, &buf)
	resetAfter := f.ResetAfter
	if resetAfter <= 0 {
		resetAfter = defaultResetAfter
	}
	exact, upstream := f.Cooldown, f.UpstreamReset
	if exact <= 0 {
		upstream = false
		if failure && reason == ReasonQuotaExhausted {
			exact = untilMidnight(c.loc, now)
		}
	}

	sh := l.shard(hc)
	var events []Event
	sh.mu.Lock()
	if !now.Before(sh.nextSweep) || now.Add(defaultSweepInterval).Before(sh.nextSweep) {
		l.sweepLocked(sh, c, now)
		sh.nextSweep = now.Add(defaultSweepInterval)
	}
	e := sh.lookup(h, k)
	if e == nil {
		e = &entry{key: k.own(), hash: h}
		l.insertLocked(sh, e)
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
		e.publish()
		if c.OnChange != nil {
			events = append(events, e.event(EventLocked, now, false))
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
	l.keyLocked(sh, c, e)
	sh.mu.Unlock()

	if l.total.Load() > int64(c.MaxEntries) {
		events = l.evict(c, now, e, events)
	}
	emit(c, events)
	return res
}

// cooldownFor returns the lock length of the count-th consecutive failure.
func cooldownFor(c *conf, count int, exact time.Duration, upstream bool) time.Duration {
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
	shift := min(count-1, c.steps)
	return min(c.BaseCooldown<<shift, c.MaxCooldown)
}

// untilMidnight returns the time from now to the next midnight in loc, at
// most 24 h.
func untilMidnight(loc *time.Location, now time.Time) time.Duration {
	t := now.In(loc)
	next := time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, loc)
	d := next.Sub(now)
	if d <= 0 || d > quotaDayGuard {
		d = quotaDayGuard
	}
	return d
}

// DecayAt records a success of model on provider's connection: the failure
// count under each of the model's keys (family, model, exact) is halved,
// rounding down. A key whose count reaches 0 is removed with its lock.
// count is the highest count left under the model's keys; cleared reports
// whether this call removed at least one key. DecayAt allocates nothing
// when the model has no keys to decay.
func (l *Lockout) DecayAt(provider, connection, model string, now time.Time) (count int, cleared bool) {
	if model == "" || l.conns[connBucket(connection)].Load() == 0 {
		return 0, false // the common success path: nothing to decay
	}
	c := l.conf()
	provider = c.canonical(provider)
	hc := strhash(connection)
	sh := l.shard(hc)
	found := false
	l.visit(c, sh, hc, provider, connection, model, func(*entry) { found = true })
	if !found {
		return 0, false // the common success path: nothing to decay
	}
	var events []Event
	sh.mu.Lock()
	l.visit(c, sh, hc, provider, connection, model, func(e *entry) {
		e.count /= 2
		if e.count > 0 {
			count = max(count, e.count)
			return
		}
		if c.OnChange != nil && e.active(now) {
			events = append(events, e.event(EventDecayed, now, true))
		}
		l.removeLocked(sh, e)
		cleared = true
	})
	sh.mu.Unlock()
	emit(c, events)
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
	c := l.conf()
	provider = c.canonical(provider)
	hc := strhash(connection)
	sh := l.shard(hc)
	removed := false
	var events []Event
	clear := func(e *entry) {
		if e.active(now) {
			removed = true
			if c.OnChange != nil {
				events = append(events, e.event(EventCleared, now, true))
			}
		}
		l.removeLocked(sh, e)
	}
	sh.mu.Lock()
	l.visit(c, sh, hc, provider, connection, model, clear)
	if len(model) > len(exactPrefix) && strings.EqualFold(model[:len(exactPrefix)], exactPrefix) {
		// The listed name of an exact key.
		k := key{provider, connection, exactKey(model[len(exactPrefix):]), true}
		if e := sh.lookup(keyHash(hc, strhash(k.name)), k); e != nil {
			clear(e)
		}
	}
	sh.mu.Unlock()
	emit(c, events)
	return removed
}

// Reset removes every lock and failure record without reporting changes.
func (l *Lockout) Reset() {
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		sh.each(func(e *entry) { l.removeLocked(sh, e) })
		sh.tab.Store(nil)
		sh.used = 0
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
	c := l.conf()
	var out []Info
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		l.sweepLocked(sh, c, now)
		sh.each(func(e *entry) {
			if e.active(now) {
				out = append(out, e.info(now))
			}
		})
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

// listedName is e's model part as listings show it.
func (e *entry) listedName() string {
	if e.exact {
		return exactPrefix + e.name
	}
	return e.name
}

func (e *entry) event(kind EventKind, now time.Time, removed bool) Event {
	ev := Event{
		Kind:       kind,
		Provider:   e.provider,
		Connection: e.connection,
		Model:      e.listedName(),
		Scope:      e.scope,
		At:         now,
		Removed:    removed,
	}
	if !removed {
		ev.Reason, ev.FailureCount, ev.LockedAt, ev.Until = e.reason, e.count, e.lockedAt, e.until
	}
	return ev
}

func (e *entry) info(now time.Time) Info {
	return Info{
		Provider:     e.provider,
		Connection:   e.connection,
		Model:        e.listedName(),
		Scope:        e.scope,
		Reason:       e.reason,
		Remaining:    max(e.until.Sub(now), 0),
		FailureCount: e.count,
		LockedAt:     e.lockedAt,
		Until:        e.until,
	}
}

// sweepLocked removes sh's entries that are past both their lock and their
// escalation window. They are on top of the shard's order, so a sweep costs
// O(log n) per entry it removes. The caller holds sh.mu.
func (l *Lockout) sweepLocked(sh *shard, c *conf, now time.Time) {
	l.rekeyLocked(sh, c)
	for e, _ := sh.order.Top(); e != nil && now.After(e.retainUntil(c)); e, _ = sh.order.Top() {
		l.removeLocked(sh, e)
	}
	sh.compact()
}

// keyLocked places e in sh's order by its retention under c. The caller
// holds sh.mu.
func (l *Lockout) keyLocked(sh *shard, c *conf, e *entry) {
	if sh.keyed != c {
		l.rekeyLocked(sh, c)
	}
	if sh.order.Pos == nil {
		sh.order.Pos = entryPos
	}
	sh.order.Set(e, heap.Stamp(e.retainUntil(c)))
}

// rekeyLocked re-orders sh's entries when the configuration changed since
// their keys were computed (the retention depends on EscalationWindow).
// The caller holds sh.mu.
func (l *Lockout) rekeyLocked(sh *shard, c *conf) {
	if sh.keyed == c {
		return
	}
	sh.keyed = c
	if sh.order.Pos == nil {
		sh.order.Pos = entryPos
	}
	sh.each(func(e *entry) { sh.order.Set(e, heap.Stamp(e.retainUntil(c))) })
}

// removeLocked removes e from sh. It reports whether e was present. The
// caller holds sh.mu.
func (l *Lockout) removeLocked(sh *shard, e *entry) bool {
	if !sh.remove(e) {
		return false
	}
	l.conns[connBucket(e.connection)].Add(-1) // after lookups lost e
	sh.order.Remove(e)
	l.total.Add(-1)
	return true
}

// evict brings the entry count back under the cap: first every expired
// entry goes, then, if still needed, the entries closest to expiry (ties in
// key order), down to seven eighths of the cap so that evictions are rare.
// The entry just written, keep, is spared: the write reports it locked.
// Each entry removed costs O(log n) and a look at the 32 shards' tops; the
// other entries are not visited. Writers wait while it runs; lookups do
// not.
func (l *Lockout) evict(c *conf, now time.Time, keep *entry, events []Event) []Event {
	l.evictMu.Lock()
	defer l.evictMu.Unlock()
	limit := int64(c.MaxEntries)
	if l.total.Load() <= limit {
		return events // another goroutine evicted meanwhile
	}
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		l.sweepLocked(sh, c, now)
		sh.nextSweep = now.Add(defaultSweepInterval)
		sh.mu.Unlock()
	}
	if l.total.Load() <= limit {
		return events
	}
	// Writers hold one shard at a time, so taking every shard in order
	// cannot deadlock.
	for i := range l.shards {
		l.shards[i].mu.Lock()
	}
	defer func() {
		for i := range l.shards {
			l.shards[i].mu.Unlock()
		}
	}()
	for i := range l.shards {
		l.rekeyLocked(&l.shards[i], c)
	}
	var keepShard *shard
	var keepKey int64
	if keep != nil && keep.orderPos != 0 {
		keepShard = l.shard(strhash(keep.connection))
		keepKey = keepShard.order.Key(keep)
		keepShard.order.Remove(keep)
	}
	type victim struct {
		sh *shard
		e  *entry
	}
	var group []victim
	excess := l.total.Load() - (limit - limit/evictLowWaterFraction)
	for excess > 0 {
		// The entries closest to expiry, from every shard, and among them
		// the first in key order, so that eviction does not depend on
		// where the hash seeds placed the entries.
		least, found := int64(0), false
		for i := range l.shards {
			if e, k := l.shards[i].order.Top(); e != nil && (!found || k < least) {
				least, found = k, true
			}
		}
		if !found {
			break
		}
		group = group[:0]
		for i := range l.shards {
			sh := &l.shards[i]
			for e, k := sh.order.Top(); e != nil && k == least; e, k = sh.order.Top() {
				sh.order.Remove(e)
				group = append(group, victim{sh, e})
			}
		}
		slices.SortFunc(group, func(a, b victim) int {
			return cmp.Or(cmp.Compare(a.e.provider, b.e.provider),
				cmp.Compare(a.e.connection, b.e.connection),
				cmp.Compare(a.e.name, b.e.name),
				cmpBool(a.e.exact, b.e.exact))
		})
		for _, v := range group {
			if excess <= 0 {
				v.sh.order.Set(v.e, least) // not needed: back in its place
				continue
			}
			if l.removeLocked(v.sh, v.e) {
				if c.OnChange != nil && v.e.active(now) {
					events = append(events, v.e.event(EventEvicted, now, true))
				}
				excess--
			}
		}
	}
	if keepShard != nil {
		keepShard.order.Set(keep, keepKey)
	}
	for i := range l.shards {
		l.shards[i].compact()
	}
	return events
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func emit(c *conf, events []Event) {
	if c.OnChange == nil {
		return
	}
	for _, ev := range events {
		c.OnChange(ev)
	}
}
