package breaker

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config configures a [Set]. The zero value is usable: built-in profiles,
// every provider of class APIKey, no hook.
type Config struct {
	// Settings holds the class profiles and the Set's bounds; it is
	// normalized by NewSet.
	Settings Settings
	// ClassOf returns a provider's credential class. Nil: APIKey for all.
	ClassOf func(provider string) Class
	// Profiles replaces the class profile of the named providers; each is
	// normalized with [Profile.Normalize].
	Profiles map[string]Profile
	// OnStateChange, if not nil, is called after every state change of any
	// breaker of the Set, outside every lock, from the goroutine that caused
	// or observed the change.
	OnStateChange func(Change)
}

// Set holds one [Breaker] per provider, created on first use with the
// profile of the provider's class. It keeps at most Settings.MaxBreakers
// breakers: when full, it first drops closed breakers with no counted
// failure and no failure within Settings.IdleTTL, then the closed breaker
// whose last failure is oldest, and only when every breaker is open or
// half-open the one whose last failure is oldest.
//
// A Set is safe for concurrent use; lookups of existing breakers share a
// read lock and allocate nothing.
type Set struct {
	s        Settings
	classOf  func(string) Class
	profiles map[string]Profile
	hook     func(Change)

	mu sync.RWMutex
	m  map[string]*Breaker
}

// NewSet returns an empty Set configured by cfg.
func NewSet(cfg Config) *Set {
	s := &Set{
		s:       cfg.Settings.Normalize(),
		classOf: cfg.ClassOf,
		hook:    cfg.OnStateChange,
		m:       make(map[string]*Breaker),
	}
	if len(cfg.Profiles) > 0 {
		s.profiles = make(map[string]Profile, len(cfg.Profiles))
		for name, p := range cfg.Profiles {
			s.profiles[name] = p.Normalize()
		}
	}
	return s
}

// ProfileOf returns the profile a breaker for provider has or would get.
func (s *Set) ProfileOf(provider string) Profile {
	if p, ok := s.profiles[provider]; ok {
		return p
	}
	c := APIKey
	if s.classOf != nil {
		c = s.classOf(provider)
	}
	return s.s.Profile(c)
}

// lookup returns the breaker of provider, or nil.
func (s *Set) lookup(provider string) *Breaker {
	s.mu.RLock()
	b := s.m[provider]
	s.mu.RUnlock()
	return b
}

// Get returns the breaker of provider, creating it if needed.
func (s *Set) Get(provider string) *Breaker {
	if b := s.lookup(provider); b != nil {
		return b
	}
	nb := New(provider, s.ProfileOf(provider), s.hook)
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.m[provider]; b != nil {
		return b
	}
	if len(s.m) >= s.s.MaxBreakers {
		s.evictLocked(time.Now())
	}
	s.m[provider] = nb
	return nb
}

// Allow asks provider's breaker (creating it on first use); see
// [Breaker.Allow].
func (s *Set) Allow(provider string) (done func(Outcome), err error) {
	return s.Get(provider).Allow()
}

// AllowReport asks provider's breaker (creating it on first use); see
// [Breaker.AllowReport].
func (s *Set) AllowReport(provider string) (done func(Report), err error) {
	return s.Get(provider).AllowReport()
}

// Report is [Set.ReportAt] at time.Now().
func (s *Set) Report(provider string, r Report) bool {
	return s.ReportAt(provider, r, time.Now())
}

// ReportAt accounts a report that belongs to no admission on provider's
// breaker; see [Breaker.ReportAt]. An empty provider and the provider
// "unknown" are ignored. A failure creates the breaker on first use; a
// success for a provider without a breaker changes nothing and creates
// none. It reports whether the report was accounted.
func (s *Set) ReportAt(provider string, r Report, now time.Time) bool {
	if provider == "" || provider == "unknown" {
		return false
	}
	b := s.lookup(provider)
	if b == nil {
		if r.Outcome != Failure || r.QueueTimeout {
			return false
		}
		b = s.Get(provider)
	}
	return b.ReportAt(r, now)
}

// State returns provider's state and the time until it admits a request,
// without creating a breaker: an unknown provider is Closed with zero wait.
// It does not allocate; see [Breaker.State].
func (s *Set) State(provider string) (State, time.Duration) {
	if b := s.lookup(provider); b != nil {
		return b.State()
	}
	return Closed, 0
}

// Len returns the number of breakers held.
func (s *Set) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m)
}

// breakers returns the held breakers; callers query them after the Set's
// lock is released, so hooks never run under it.
func (s *Set) breakers() []*Breaker {
	s.mu.RLock()
	list := make([]*Breaker, 0, len(s.m))
	for _, b := range s.m {
		list = append(list, b)
	}
	s.mu.RUnlock()
	return list
}

// Snapshot returns the status of every breaker, sorted by provider.
func (s *Set) Snapshot() []Status {
	list := s.breakers()
	out := make([]Status, 0, len(list))
	for _, b := range list {
		out = append(out, b.Status())
	}
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.Provider, b.Provider) })
	return out
}

// Export returns the durable state of every breaker, sorted by provider,
// for a store to keep; see [Breaker.Export].
func (s *Set) Export() []Record {
	list := s.breakers()
	out := make([]Record, 0, len(list))
	for _, b := range list {
		out = append(out, b.Export())
	}
	slices.SortFunc(out, func(a, b Record) int { return strings.Compare(a.Provider, b.Provider) })
	return out
}

// Restore restores each record into its provider's breaker, creating the
// breaker (with the provider's profile) if needed; see [Breaker.Restore].
// A record with an empty provider or one Breaker.Restore refuses is skipped
// and reported; the others are restored. The error joins one
// [*RecordError] per skipped record and matches [ErrInvalidRecord].
//
// Restoring more providers than Settings.MaxBreakers evicts as [Set.Get]
// does: idle and closed breakers go first.
func (s *Set) Restore(records []Record) error {
	var errs []error
	for _, r := range records {
		if r.Provider == "" {
			errs = append(errs, &RecordError{Reason: "no provider"})
			continue
		}
		if r.State > HalfOpen {
			errs = append(errs, &RecordError{Provider: r.Provider, Reason: "unknown state " + r.State.String()})
			continue
		}
		if err := s.Get(r.Provider).Restore(r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Summary counts breakers by state the way a health page shows them:
// Degraded breakers count as Closed.
type Summary struct {
	Open     int `json:"open"`
	HalfOpen int `json:"halfOpen"`
	Closed   int `json:"closed"`
	Total    int `json:"total"`
}

// Summarize counts the statuses of a snapshot.
func Summarize(statuses []Status) Summary {
	var sum Summary
	for _, st := range statuses {
		switch st.State {
		case Open:
			sum.Open++
		case HalfOpen:
			sum.HalfOpen++
		default:
			sum.Closed++
		}
	}
	sum.Total = len(statuses)
	return sum
}

// Reset closes provider's breaker and clears its counts; it reports whether
// the Set held one.
func (s *Set) Reset(provider string) bool {
	b := s.lookup(provider)
	if b == nil {
		return false
	}
	b.Reset()
	return true
}

// ResetAll closes every breaker and clears its counts, keeping them in the
// Set, and returns how many it reset.
func (s *Set) ResetAll() int {
	list := s.breakers()
	for _, b := range list {
		b.Reset()
	}
	return len(list)
}

// evictLocked makes room for one breaker. It reads breaker fields under
// each breaker's lock but never refreshes, so no hook runs under s.mu.
func (s *Set) evictLocked(now time.Time) {
	cut := now.Add(-s.s.IdleTTL)
	var (
		victim     string
		victimRank int
		victimLast time.Time
	)
	first := true
	for name, b := range s.m {
		b.mu.Lock()
		idle, closed, last := b.idleLocked(), b.isClosedLocked(), b.lastFailure
		b.mu.Unlock()
		if idle && !last.After(cut) {
			delete(s.m, name) // expired: drop every one found
			continue
		}
		rank := 2 // open or half-open
		switch {
		case idle:
			rank = 0
		case closed:
			rank = 1
		}
		if first || rank < victimRank || (rank == victimRank && last.Before(victimLast)) {
			victim, victimRank, victimLast, first = name, rank, last, false
		}
	}
	if len(s.m) >= s.s.MaxBreakers && !first {
		delete(s.m, victim)
	}
}
