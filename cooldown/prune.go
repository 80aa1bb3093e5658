package cooldown

import (
	"slices"
	"time"

	"github.com/routeguard/routeguard/internal/heap"
)

const (
	// minSweepInterval is the least number of writes between two idle
	// sweeps.
	minSweepInterval = 1024
	// capSweepInterval is the least number of writes between two sweeps
	// caused by the entry cap, so that a store kept over the cap by
	// terminal entries is not swept on every write.
	capSweepInterval = 8
)

// idle reports whether e carries no information at now, so that dropping
// it changes nothing a caller can observe besides its error history.
func (t *Tracker) idle(e *Entry, now time.Time) bool {
	if e.Options != (Options{}) || e.Level != 0 || e.status(now).State != Available {
		return false
	}
	if now.Before(e.StreakUntil) || (e.Streak > 0 && now.Sub(e.StreakLast) < t.cfg.RequestRejectedMemory) {
		return false
	}
	return !within(e.EgressSeen, now, t.cfg.EgressWindow)
}

// idleAt returns the time from which e is idle (see [Tracker.idle]) if
// nothing is written to it, as a heap key, and false when e never becomes
// idle by itself (it has Options, a level or an untimed terminal state).
func (t *Tracker) idleAt(e *Entry) (int64, bool) {
	if e.Options != (Options{}) || e.Level != 0 || e.State == Banned || e.State == Expired ||
		(e.State == CreditsExhausted && e.Until.IsZero()) {
		return 0, false
	}
	at := max(heap.Stamp(e.Until), heap.Stamp(e.StreakUntil))
	if e.Streak > 0 {
		at = max(at, heap.Stamp(e.StreakLast.Add(t.cfg.RequestRejectedMemory)))
	}
	if !e.EgressSeen.IsZero() {
		at = max(at, heap.Stamp(e.EgressSeen.Add(t.cfg.EgressWindow)))
	}
	return at, true
}

// afterWrite hands on evicted, the events of the entries the write dropped
// to keep the caps, and prunes idle entries every so many writes. conn is
// the connection just written. With the in-memory store the caps were kept
// by the write itself and a prune visits only the entries it drops; with
// another store that can sweep, the cap is kept here, by sweeps (amortised
// O(1) per write), which never evict conn. Every entry dropped is reported
// to OnChange once the sweep is over.
func (t *Tracker) afterWrite(conn string, now time.Time, evicted []Event) {
	t.emitAll(evicted)
	if t.mem != nil {
		if n := t.sinceSweep.Add(1); n < max(minSweepInterval, int64(t.mem.Len())) || !t.sweeping.CompareAndSwap(false, true) {
			return
		}
		t.sinceSweep.Store(0)
		gone := t.mem.pruneIdle(now)
		t.sweeping.Store(false)
		t.emitAll(gone)
		return
	}
	if t.sweeper == nil {
		return
	}
	n := t.sinceSweep.Add(1)
	size := t.sweeper.Len()
	swept := int(t.swept.Load())
	over := size > max(t.cfg.MaxEntries, swept+max(t.cfg.MaxEntries, swept)/10) && n >= capSweepInterval
	if !over && n < max(minSweepInterval, int64(size)) {
		return
	}
	if !t.sweeping.CompareAndSwap(false, true) {
		return
	}
	t.sinceSweep.Store(0)
	gone := t.sweep(now, conn)
	t.swept.Store(int64(t.sweeper.Len()))
	t.sweeping.Store(false)
	for _, ev := range gone {
		t.emit(ev)
	}
}

// sweep drops idle entries; when more than MaxTerminal entries are
// terminal, the ones that became terminal first; and when more than
// MaxEntries entries are not terminal, available entries, then the cooling
// entries that end first. It never drops keep, the connection whose write
// caused the sweep: that write has just reported its state. It returns the
// events of the entries it dropped when OnChange is set.
func (t *Tracker) sweep(now time.Time, keep string) (gone []Event) {
	// note records a dropped entry; drop callbacks run one at a time.
	note := func(conn string, e *Entry, cause string) bool {
		if t.cfg.OnChange != nil {
			gone = append(gone, dropped(conn, e.Options.Provider, e.status(now).State, now, cause))
		}
		return true
	}
	// Terminal entries count against MaxTerminal alone.
	var terminal []time.Time
	terms := 0
	t.sweeper.Sweep(func(conn string, e *Entry) bool {
		if t.idle(e, now) {
			return note(conn, e, causeIdle)
		}
		if e.State.Terminal() {
			terms++
			if conn != keep {
				terminal = append(terminal, e.TerminalAt)
			}
		}
		return false
	})
	if over := min(terms-t.cfg.MaxTerminal, len(terminal)); over > 0 {
		terms -= over
		// The terminal entries that became terminal first go.
		slices.SortFunc(terminal, func(a, b time.Time) int { return a.Compare(b) })
		cut := terminal[over-1]
		t.sweeper.Sweep(func(conn string, e *Entry) bool {
			if !e.State.Terminal() || conn == keep || e.TerminalAt.After(cut) || over == 0 {
				return false
			}
			over--
			return note(conn, e, causeMaxTerminal)
		})
	}
	over := t.sweeper.Len() - terms - t.cfg.MaxEntries
	if over <= 0 {
		return gone
	}
	t.sweeper.Sweep(func(conn string, e *Entry) bool {
		return e.State == Available && !now.Before(e.Until) && conn != keep && note(conn, e, causeMaxEntries)
	})
	// Leave a tenth of the cap free so the next writes do not sweep again.
	over = t.sweeper.Len() - terms - t.cfg.MaxEntries*9/10
	if over <= 0 {
		return gone
	}
	var ends []time.Time
	t.sweeper.Sweep(func(conn string, e *Entry) bool {
		if e.State == Available && conn != keep {
			ends = append(ends, e.Until)
		}
		return false
	})
	if len(ends) == 0 {
		return gone
	}
	slices.SortFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
	over = min(over, len(ends))
	cut := ends[over-1]
	// Entries ending at the cut itself go only while some are still needed.
	t.sweeper.Sweep(func(conn string, e *Entry) bool {
		if e.State != Available || conn == keep || e.Until.After(cut) || over == 0 {
			return false
		}
		over--
		return note(conn, e, causeMaxEntries)
	})
	return gone
}
