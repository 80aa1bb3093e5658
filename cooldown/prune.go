package cooldown

import (
	"slices"
	"time"
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
	if e.Options != (Options{}) || e.Level != 0 || e.StatusAt(now).State != Available {
		return false
	}
	if now.Before(e.StreakUntil) || (e.Streak > 0 && now.Sub(e.StreakLast) < t.cfg.RequestRejectedMemory) {
		return false
	}
	return !within(e.EgressSeen, now, t.cfg.EgressWindow)
}

// afterWrite prunes idle entries every so many writes (amortised O(1) per
// write) and enforces the entry cap. conn is the connection just written;
// the cap never evicts it.
func (t *Tracker) afterWrite(conn string, now time.Time) {
	if t.sweeper == nil {
		return
	}
	n := t.sinceSweep.Add(1)
	size := t.sweeper.Len()
	over := size > t.cfg.MaxEntries && n >= capSweepInterval
	if !over && n < max(minSweepInterval, int64(size)) {
		return
	}
	if !t.sweeping.CompareAndSwap(false, true) {
		return
	}
	defer t.sweeping.Store(false)
	t.sinceSweep.Store(0)
	t.sweep(now, conn)
}

// sweep drops idle entries and, when the store is still over the cap,
// evicts available entries, then the cooling entries that end first.
// Terminal entries are never evicted, nor is keep, the connection whose
// write caused the sweep: that write has just reported its state.
func (t *Tracker) sweep(now time.Time, keep string) {
	t.sweeper.Sweep(func(_ string, e *Entry) bool { return t.idle(e, now) })
	over := t.sweeper.Len() - t.cfg.MaxEntries
	if over <= 0 {
		return
	}
	t.sweeper.Sweep(func(conn string, e *Entry) bool {
		return e.State == Available && !now.Before(e.Until) && conn != keep
	})
	// Leave a tenth of the cap free so the next writes do not sweep again.
	over = t.sweeper.Len() - t.cfg.MaxEntries*9/10
	if over <= 0 {
		return
	}
	var ends []time.Time
	t.sweeper.Sweep(func(conn string, e *Entry) bool {
		if e.State == Available && conn != keep {
			ends = append(ends, e.Until)
		}
		return false
	})
	if len(ends) == 0 {
		return
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
		return true
	})
}
