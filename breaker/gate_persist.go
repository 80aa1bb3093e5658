package breaker

import (
	"errors"
	"time"

	"github.com/routeguard/routeguard/internal/heap"
)

// maxRestoredConnFailures caps a restored connection entry's failure count:
// beyond the capped exponent more failures change nothing.
const maxRestoredConnFailures = 1000

// RestoreAt puts gate entries back at now, as [Gate.SnapshotAt] gave them,
// so that a restarted process keeps cooling what the last one cooled. Each
// record replaces the entry of its key (its provider, or its provider and
// connection), creating it if needed, and the hook hears the cooldowns it
// restores as it hears new ones. A zero now means time.Now(). A disabled
// gate restores nothing.
//
// A provider record cools until its Until when it is Open and Until is not
// before now (capped at now plus its class's cooldown); its failures count
// as if they all happened at LastFailure, at most the class's threshold
// while cooling and one below it otherwise (so that, as before the
// restart, the next failure inside the window trips it again), and only
// while LastFailure is inside the window. A connection record keeps its
// failure count (capped at 1000) and LastFailure, from which its cooldown
// follows as for a recorded failure; its Until is not read. A record with
// nothing left at now (not cooling, and its last failure older than the
// gate's retention) is dropped without error. Times after now are taken as
// now; a negative count as zero.
//
// A record with an empty provider, or the provider "unknown", is skipped;
// the error joins one [*Error] with code [CodeInvalidRecord] per skipped
// record and matches [ErrInvalidRecord].
func (g *Gate) RestoreAt(records []Record, now time.Time) error {
	if now.IsZero() {
		now = time.Now()
	}
	var errs []error
	var evs []Event
	g.mu.Lock()
	for _, r := range records {
		if skipProvider(r.Provider) {
			errs = append(errs, recordError(r.Provider, "no provider a gate records"))
			continue
		}
		if !g.cfg.Enabled {
			continue
		}
		last := r.LastFailure
		if last.IsZero() || last.After(now) {
			last = now
		}
		if r.Connection == "" {
			evs = g.restoreProvLocked(evs, r, last, now)
		} else {
			evs = g.restoreConnLocked(evs, r, last, now)
		}
	}
	g.countEntries()
	g.mu.Unlock()
	g.fire(evs)
	return errors.Join(errs...)
}

func (g *Gate) restoreProvLocked(evs []Event, r Record, last, now time.Time) []Event {
	w := g.window(r.Provider)
	var until time.Time
	if r.State == Open && !r.Until.IsZero() && !now.After(r.Until) {
		until = r.Until
		if limit := now.Add(w.Cooldown); until.After(limit) {
			until = limit
		}
	}
	n := 0
	if last.After(now.Add(-w.Window)) {
		n = min(max(r.Failures, 0), w.Threshold-1)
		if !until.IsZero() {
			n = min(max(r.Failures, 0), w.Threshold)
		}
	}
	e := g.prov[r.Provider]
	if until.IsZero() && last.Before(now.Add(-g.retention)) {
		if e != nil {
			evs = g.dropProvLocked(evs, e, now)
		}
		return evs
	}
	if e == nil {
		e, evs = g.addProvLocked(evs, r.Provider, now)
	}
	e.times = e.times[:0]
	for range n {
		e.times = append(e.times, last)
	}
	e.until, e.last = until, last
	g.provOld.Set(e, heap.Stamp(e.last))
	return g.provNoteLocked(evs, r.Provider, e, now)
}

func (g *Gate) restoreConnLocked(evs []Event, r Record, last, now time.Time) []Event {
	k := connKey{r.Provider, r.Connection}
	c := g.conns[k]
	count := min(max(r.Failures, 0), maxRestoredConnFailures)
	probe := connEntry{count: count, last: last}
	if _, cooling := g.connUntil(&probe, now); !cooling && last.Before(now.Add(-g.retention)) {
		if c != nil {
			evs = g.dropConnLocked(evs, c, now)
		}
		return evs
	}
	if c == nil {
		c, evs = g.addConnLocked(evs, k, now)
	}
	c.count, c.last = count, last
	g.connOld.Set(c, heap.Stamp(c.last))
	return g.connNoteLocked(evs, k, c, now)
}
