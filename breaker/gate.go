package breaker

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// WindowProfile configures the provider-level window gate of one class.
// Zero fields take the class's built-in values (see [DefaultWindowProfile]).
type WindowProfile struct {
	// Threshold is the number of failures inside Window that starts a
	// cooldown. Range [1, 1000].
	Threshold int
	// Window is the length of the sliding window: a failure exactly Window
	// old is outside it. Range [1 s, 24 h].
	Window time.Duration
	// Cooldown is how long the provider cools after the failure that
	// reached the threshold. Range [1 s, 24 h].
	Cooldown time.Duration
}

// DefaultWindowProfile returns the built-in window-gate profile of a class:
// OAuth 10 failures in 15 min → 5 min; APIKey 15 in 30 min → 10 min; Local 2
// in 5 min → 1 min.
func DefaultWindowProfile(c Class) WindowProfile {
	switch c {
	case OAuth:
		return WindowProfile{Threshold: 10, Window: 15 * time.Minute, Cooldown: 5 * time.Minute}
	case Local:
		return WindowProfile{Threshold: 2, Window: 5 * time.Minute, Cooldown: time.Minute}
	}
	return WindowProfile{Threshold: 15, Window: 30 * time.Minute, Cooldown: 10 * time.Minute}
}

func fillWindow(w WindowProfile, c Class) WindowProfile {
	d := DefaultWindowProfile(c)
	if w.Threshold == 0 {
		w.Threshold = d.Threshold
	}
	if w.Window == 0 {
		w.Window = d.Window
	}
	if w.Cooldown == 0 {
		w.Cooldown = d.Cooldown
	}
	w.Threshold = clampInt(w.Threshold, 1, 1000)
	w.Window = clampDur(w.Window, time.Second, 24*time.Hour)
	w.Cooldown = clampDur(w.Cooldown, time.Second, 24*time.Hour)
	return w
}

// GateSettings configures a [Gate]. The zero value is a disabled gate with
// the built-in defaults.
type GateSettings struct {
	// Enabled turns the gate on. Off, a Gate records nothing and never
	// blocks.
	Enabled bool
	// MinRetryCooldown is a connection's first cooldown. Default 5 s; range
	// [1 ms, 1 h] (zero means the default, so 1 ms is the smallest).
	MinRetryCooldown time.Duration
	// MaxRetryCooldown caps a connection's cooldown. Default 5 min; range
	// [MinRetryCooldown, 24 h].
	MaxRetryCooldown time.Duration
	// OAuth, APIKey and Local are the provider-level window profiles.
	OAuth, APIKey, Local WindowProfile
	// MaxEntries bounds the provider and connection entries kept (each map
	// separately). Default 10000; range [1, 1000000].
	MaxEntries int
}

// Gate defaults and ranges.
const (
	defaultMinRetry   = 5 * time.Second
	minMinRetry       = time.Millisecond
	maxMinRetry       = time.Hour
	defaultMaxRetry   = 5 * time.Minute
	maxMaxRetry       = 24 * time.Hour
	defaultMaxEntries = 10000
	gateRetention     = 30 * time.Minute
	maxConnExponent   = 4
	pruneEvery        = 64
)

// Normalize returns s with defaults filled in and every field clamped. A
// MaxRetryCooldown below MinRetryCooldown is raised to it; use
// [GateSettings.Validate] to refuse that instead.
func (s GateSettings) Normalize() GateSettings {
	if s.MinRetryCooldown == 0 {
		s.MinRetryCooldown = defaultMinRetry
	}
	s.MinRetryCooldown = clampDur(s.MinRetryCooldown, minMinRetry, maxMinRetry)
	if s.MaxRetryCooldown == 0 {
		s.MaxRetryCooldown = defaultMaxRetry
	}
	s.MaxRetryCooldown = clampDur(s.MaxRetryCooldown, s.MinRetryCooldown, maxMaxRetry)
	s.OAuth = fillWindow(s.OAuth, OAuth)
	s.APIKey = fillWindow(s.APIKey, APIKey)
	s.Local = fillWindow(s.Local, Local)
	if s.MaxEntries == 0 {
		s.MaxEntries = defaultMaxEntries
	}
	s.MaxEntries = clampInt(s.MaxEntries, 1, 1_000_000)
	return s
}

// Validate refuses settings an operator most likely mistyped: a non-zero
// MaxRetryCooldown below a non-zero MinRetryCooldown. The error is a
// [*SettingsError] (HTTP 400).
func (s GateSettings) Validate() error {
	if s.MinRetryCooldown > 0 && s.MaxRetryCooldown > 0 && s.MaxRetryCooldown < s.MinRetryCooldown {
		return &SettingsError{Name: "MaxRetryCooldown", Value: s.MaxRetryCooldown.String(),
			Reason: "below MinRetryCooldown " + s.MinRetryCooldown.String()}
	}
	return nil
}

// Window returns the normalized window profile of class c.
func (s GateSettings) Window(c Class) WindowProfile {
	switch c {
	case OAuth:
		return fillWindow(s.OAuth, OAuth)
	case Local:
		return fillWindow(s.Local, Local)
	}
	return fillWindow(s.APIKey, APIKey)
}

// GateConfig configures a [Gate].
type GateConfig struct {
	// Settings is normalized by NewGate.
	Settings GateSettings
	// ClassOf returns a provider's class. Nil: APIKey for all.
	ClassOf func(provider string) Class
}

// Gate is the opt-in provider cooldown tracker. It answers two questions
// before dispatch: is a provider cooling because too many failures fell
// inside its class's sliding window ([Gate.BlockedUntilAt]), and is one
// connection of it cooling after its own recent failures
// ([Gate.ConnBlockedUntilAt]; the cooldown is MinRetryCooldown·2^(n−1) for n
// failures, the exponent capped at 4, the whole capped at
// MaxRetryCooldown).
//
// Empty providers and the provider "unknown" are never recorded. Entries
// whose last failure is older than the longest of 30 min, MaxRetryCooldown
// and the class windows and cooldowns are dropped on later writes.
//
// A Gate is safe for concurrent use; its checks allocate nothing.
type Gate struct {
	s         GateSettings
	classOf   func(string) Class
	retention time.Duration

	mu     sync.RWMutex
	prov   map[string]*provEntry
	conns  map[connKey]*connEntry
	writes int
	// entries is len(prov)+len(conns), stored after every write so that a
	// gate with nothing recorded answers its checks without the lock.
	entries atomic.Int64
}

type provEntry struct {
	times []time.Time // failures inside the window, oldest first, at most Threshold
	until time.Time   // cooling until (exclusive)
	last  time.Time
}

type connKey struct{ provider, conn string }

type connEntry struct {
	count int
	last  time.Time
}

// NewGate returns an empty Gate configured by cfg.
func NewGate(cfg GateConfig) *Gate {
	s := cfg.Settings.Normalize()
	g := &Gate{s: s, classOf: cfg.ClassOf, prov: map[string]*provEntry{}, conns: map[connKey]*connEntry{}}
	g.retention = max(gateRetention, s.MaxRetryCooldown)
	for _, w := range []WindowProfile{s.OAuth, s.APIKey, s.Local} {
		g.retention = max(g.retention, w.Window, w.Cooldown)
	}
	return g
}

// Enabled reports whether the gate is on.
func (g *Gate) Enabled() bool { return g.s.Enabled }

// Settings returns the normalized settings.
func (g *Gate) Settings() GateSettings { return g.s }

func (g *Gate) window(provider string) WindowProfile {
	c := APIKey
	if g.classOf != nil {
		c = g.classOf(provider)
	}
	return g.s.Window(c)
}

func skipProvider(p string) bool { return p == "" || p == "unknown" }

// RecordFailureAt records a failure of provider (and, when conn is not
// empty, of that connection) at now. It is a no-op when the gate is off.
func (g *Gate) RecordFailureAt(provider, conn string, now time.Time) {
	if !g.s.Enabled || skipProvider(provider) {
		return
	}
	w := g.window(provider)
	g.mu.Lock()
	defer g.mu.Unlock()
	defer g.countEntries()
	g.maybePruneLocked(now)
	e := g.prov[provider]
	if e == nil {
		if len(g.prov) >= g.s.MaxEntries {
			evictOldest(g.prov, func(e *provEntry) time.Time { return e.last })
		}
		e = &provEntry{}
		g.prov[provider] = e
	}
	if now.Before(e.last) {
		now = e.last // a clock step backwards: no time has passed
	}
	e.last = now
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
	if conn == "" {
		return
	}
	k := connKey{provider, conn}
	c := g.conns[k]
	if c == nil {
		if len(g.conns) >= g.s.MaxEntries {
			evictOldest(g.conns, func(e *connEntry) time.Time { return e.last })
		}
		c = &connEntry{}
		g.conns[k] = c
	}
	c.count++
	c.last = now
}

// RecordFailure is RecordFailureAt at time.Now().
func (g *Gate) RecordFailure(provider, conn string) { g.RecordFailureAt(provider, conn, time.Now()) }

// RecordSuccessAt clears provider's window and cooldown and, when conn is not
// empty, sets that connection's failure count to zero (keeping the entry).
// It is a no-op when the gate is off.
func (g *Gate) RecordSuccessAt(provider, conn string, now time.Time) {
	if !g.s.Enabled || skipProvider(provider) {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	defer g.countEntries()
	g.maybePruneLocked(now)
	if e := g.prov[provider]; e != nil {
		e.times, e.until = e.times[:0], time.Time{}
	}
	if conn != "" {
		if c := g.conns[connKey{provider, conn}]; c != nil {
			c.count = 0
		}
	}
}

// RecordSuccess is RecordSuccessAt at time.Now().
func (g *Gate) RecordSuccess(provider, conn string) { g.RecordSuccessAt(provider, conn, time.Now()) }

// BlockedUntilAt reports whether provider is cooling at now and until when
// (exclusive). A disabled gate never blocks.
func (g *Gate) BlockedUntilAt(provider string, now time.Time) (until time.Time, blocked bool) {
	if !g.s.Enabled || g.entries.Load() == 0 {
		return time.Time{}, false
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	if e := g.prov[provider]; e != nil && now.Before(e.until) {
		return e.until, true
	}
	return time.Time{}, false
}

// BlockedUntil is BlockedUntilAt at time.Now().
func (g *Gate) BlockedUntil(provider string) (time.Time, bool) {
	return g.BlockedUntilAt(provider, time.Now())
}

// ConnCooldown returns the cooldown after n failures of one connection:
// min(MinRetryCooldown·2^min(n−1, 4), MaxRetryCooldown), zero for n ≤ 0.
func (g *Gate) ConnCooldown(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	d := g.s.MinRetryCooldown << min(n-1, maxConnExponent)
	return min(d, g.s.MaxRetryCooldown)
}

// ConnBlockedUntilAt reports whether the connection conn of provider is
// cooling at now and until when (exclusive). A disabled gate never blocks.
func (g *Gate) ConnBlockedUntilAt(provider, conn string, now time.Time) (until time.Time, blocked bool) {
	if !g.s.Enabled || g.entries.Load() == 0 {
		return time.Time{}, false
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	c := g.conns[connKey{provider, conn}]
	if c == nil || c.count == 0 {
		return time.Time{}, false
	}
	until = c.last.Add(g.ConnCooldown(c.count))
	if now.Before(until) {
		return until, true
	}
	return time.Time{}, false
}

// ConnBlockedUntil is ConnBlockedUntilAt at time.Now().
func (g *Gate) ConnBlockedUntil(provider, conn string) (time.Time, bool) {
	return g.ConnBlockedUntilAt(provider, conn, time.Now())
}

// Clear forgets every entry.
func (g *Gate) Clear() {
	g.mu.Lock()
	defer g.mu.Unlock()
	defer g.countEntries()
	clear(g.prov)
	clear(g.conns)
}

// GateStatus is one gate entry as plain data.
type GateStatus struct {
	Provider string `json:"provider"`
	// Connection is empty for a provider-level entry.
	Connection string `json:"connection,omitempty"`
	// Failures is the number of failures in the window (provider level)
	// or since the last success (connection level).
	Failures    int       `json:"failures"`
	LastFailure time.Time `json:"lastFailure"`
	// Until is the end of the cooldown; zero when not cooling at the
	// snapshot's time.
	Until time.Time `json:"until"`
}

// SnapshotAt lists every entry as seen at now, provider entries first, each
// group sorted by name.
func (g *Gate) SnapshotAt(now time.Time) []GateStatus {
	g.mu.RLock()
	out := make([]GateStatus, 0, len(g.prov)+len(g.conns))
	for p, e := range g.prov {
		st := GateStatus{Provider: p, Failures: len(e.times), LastFailure: e.last}
		if now.Before(e.until) {
			st.Until = e.until
		}
		out = append(out, st)
	}
	nprov := len(out)
	for k, c := range g.conns {
		st := GateStatus{Provider: k.provider, Connection: k.conn, Failures: c.count, LastFailure: c.last}
		if c.count > 0 {
			if u := c.last.Add(g.ConnCooldown(c.count)); now.Before(u) {
				st.Until = u
			}
		}
		out = append(out, st)
	}
	g.mu.RUnlock()
	cmp := func(a, b GateStatus) int {
		if c := strings.Compare(a.Provider, b.Provider); c != 0 {
			return c
		}
		return strings.Compare(a.Connection, b.Connection)
	}
	slices.SortFunc(out[:nprov], cmp)
	slices.SortFunc(out[nprov:], cmp)
	return out
}

// Snapshot is SnapshotAt at time.Now().
func (g *Gate) Snapshot() []GateStatus { return g.SnapshotAt(time.Now()) }

// maybePruneLocked drops idle entries every pruneEvery writes.
func (g *Gate) maybePruneLocked(now time.Time) {
	g.writes++
	if g.writes%pruneEvery != 0 {
		return
	}
	g.pruneLocked(now)
}

// pruneLocked drops entries whose last failure is older than the retention
// and which are not cooling.
func (g *Gate) pruneLocked(now time.Time) {
	cut := now.Add(-g.retention)
	for k, e := range g.prov {
		if e.last.Before(cut) && !now.Before(e.until) {
			delete(g.prov, k)
		}
	}
	for k, c := range g.conns {
		if c.last.Before(cut) {
			delete(g.conns, k)
		}
	}
}

// PruneAt drops every entry idle for longer than the retention at now. Writes
// call it now and then; it is exported for callers that want memory back
// sooner.
func (g *Gate) PruneAt(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	defer g.countEntries()
	g.pruneLocked(now)
}

// countEntries publishes the number of entries; call it with g.mu held.
func (g *Gate) countEntries() { g.entries.Store(int64(len(g.prov) + len(g.conns))) }

func evictOldest[K comparable, V any](m map[K]V, last func(V) time.Time) {
	var (
		victim K
		oldest time.Time
		found  bool
	)
	for k, v := range m {
		if t := last(v); !found || t.Before(oldest) {
			victim, oldest, found = k, t, true
		}
	}
	if found {
		delete(m, victim)
	}
}
