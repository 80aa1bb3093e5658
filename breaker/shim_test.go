package breaker

import (
	"time"

	"github.com/routeguard/routeguard"
)

// Test shorthands. The package's API has only the explicit-time forms of
// the Set; most tests drive a single breaker inside a synctest bubble, on
// the bubble's wall clock. These wrappers call the explicit forms with a
// zero time, which the package reads as time.Now(), so that those tests
// read as they did. TestZeroTimeIsWallClock proves the zero time is the
// wall clock.

// The credential classes, as the tests name them.
const (
	OAuth  = routeguard.OAuth
	APIKey = routeguard.APIKey
	Local  = routeguard.Local
)

// Breaker is the breaker of one provider.
type Breaker = circuit

// New returns a closed breaker, as a Set creates one.
func New(name string, p Profile, onChange func(Event)) *Breaker {
	p = p.normalize()
	return newCircuit(name, &p, onChange)
}

// Allow is AllowReportAt at time.Now() with a done func that takes only the
// outcome.
func (b *circuit) Allow() (done func(Outcome), err error) {
	gen, probe, err := b.admit(time.Time{})
	if err != nil {
		return nil, err
	}
	return func(o Outcome) { b.finish(gen, probe, Report{Outcome: o}) }, nil
}

func (b *circuit) AllowReport() (done func(Report), err error) { return b.AllowReportAt(time.Time{}) }
func (b *circuit) State() (State, time.Duration)               { return b.StateAt(time.Time{}) }
func (b *circuit) Status() Record                              { return b.SnapshotAt(time.Time{}) }
func (b *circuit) Export() Record                              { return b.SnapshotAt(time.Time{}) }
func (b *circuit) Restore(r Record) error                      { return b.RestoreAt(r, time.Time{}) }
func (b *circuit) Reset()                                      { b.ResetAt(time.Time{}) }
func (b *circuit) Report(r Report) bool                        { return b.ReportAt(r, r.At) }
func (b *circuit) Profile() Profile                            { return *b.p }

func (s *Set) Get(provider string) *Breaker { return s.getAt(provider, time.Time{}) }

func (s *Set) Allow(provider string) (done func(Outcome), err error) { return s.Get(provider).Allow() }

func (s *Set) AllowReport(provider string) (done func(Report), err error) {
	return s.AllowReportAt(provider, time.Time{})
}

func (s *Set) Report(provider string, r Report) bool { return s.ReportAt(provider, r, r.At) }

func (s *Set) State(provider string) (State, time.Duration) { return s.StateAt(provider, time.Time{}) }
func (s *Set) Snapshot() []Record                           { return s.SnapshotAt(time.Time{}) }
func (s *Set) Export() []Record                             { return s.SnapshotAt(time.Time{}) }
func (s *Set) Restore(records []Record) error               { return s.RestoreAt(records, time.Time{}) }
func (s *Set) Reset(provider string) bool                   { return s.ResetAt(provider, time.Time{}) }
func (s *Set) ResetAll() int                                { return s.ResetAllAt(time.Time{}) }
func (s *Set) ProfileOf(provider string) Profile            { return *s.profileOf(provider) }

// Len returns the number of breakers held.
func (s *Set) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m)
}

func (g *Gate) Enabled() bool                    { return g.cfg.Enabled }
func (g *Gate) ConnCooldown(n int) time.Duration { return g.connCooldown(n) }
func (g *Gate) PruneAt(now time.Time)            { g.pruneAt(now) }

// ConnBlockedUntilAt asks about the connection alone, whatever its
// provider's window says.
func (g *Gate) ConnBlockedUntilAt(provider, conn string, now time.Time) (time.Time, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if !g.cfg.Enabled {
		return time.Time{}, false
	}
	if c := g.conns[connKey{provider, conn}]; c != nil {
		if u, ok := g.connUntil(c, now); ok {
			return u, true
		}
	}
	return time.Time{}, false
}
