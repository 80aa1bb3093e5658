package lockout

import (
	"strings"
	"time"
)

// Record is one key's lock and failure count as plain data: what a store
// keeps so that a restarted process resumes where the last one stopped
// ([Lockout.RestoreAt] puts it back). It is what an [Event] of kind
// [EventLocked] carries, with the escalation state on top.
type Record struct {
	// The key: Model is the listed name, as in [Info] (the model for
	// ScopeModel, the family name for ScopeFamily, "exact:" and the
	// trimmed, lower-cased model for ScopeExact).
	Provider   string
	Connection string
	Model      string
	Scope      Scope

	Reason   Reason
	LockedAt time.Time
	// Until is the end of the lock (the model is locked at Until itself);
	// zero, or a time before the restore's now, when only the failure
	// count is left.
	Until time.Time

	// FailureCount is the number of consecutive failures the next failure
	// escalates from.
	FailureCount int
	// LastFailure is the time of the last counted failure; zero for a key
	// locked without one (LockAt), which a failure does not escalate.
	LastFailure time.Time
	// LastCooldown is the lock length the last failure gave, part of the
	// escalation window; zero means Until − LastFailure.
	LastCooldown time.Duration
	// ResetAfter is the key's escalation window when
	// Config.EscalationWindow is not set; zero means the default 30 min.
	ResetAfter time.Duration
}

// RestoreAt puts records back at now, each replacing the entry of its key,
// and returns how many it restored. A record whose lock holds at now comes
// back with its end, reason and scope (a lock longer than MaxCooldown is
// kept: its length was decided before the restart); its failure count and
// last failure come back with it, so that the next failure within the
// escalation window escalates from there exactly as it would have without
// the restart. A record without a lock at now is restored as a failure
// count alone while its escalation window lasts. A record with nothing
// left at now, an empty model or an unknown scope is skipped, as is every
// record while lockout is disabled. Times after now are taken as now; a
// negative count as none. The hook hears each restored lock as an
// [EventLocked].
func (l *Lockout) RestoreAt(records []Record, now time.Time) int {
	c := l.conf()
	if !c.Enabled {
		return 0
	}
	n := 0
	for i := range records {
		r := &records[i]
		if r.Model == "" || r.Scope < ScopeFamily || r.Scope > ScopeExact {
			continue
		}
		last := r.LastFailure
		if last.After(now) {
			last = now
		}
		count := min(max(r.FailureCount, 0), maxCount)
		if last.IsZero() {
			count = 0
		}
		resetAfter := r.ResetAfter
		if resetAfter <= 0 {
			resetAfter = defaultResetAfter
		}
		cooldown := r.LastCooldown
		if cooldown <= 0 && !last.IsZero() && r.Until.After(last) {
			cooldown = r.Until.Sub(last)
		}
		active := !r.Until.IsZero() && !now.After(r.Until)
		k := key{provider: c.canonical(r.Provider), connection: r.Connection, name: r.Model}
		if r.Scope == ScopeExact {
			k.name, k.exact = exactKey(strings.TrimPrefix(r.Model, exactPrefix)), true
		}
		probe := entry{count: count, lastFailureAt: last, resetAfter: resetAfter, lastCooldown: cooldown}
		if !active && (count == 0 || now.After(probe.retainUntil(c))) {
			continue
		}
		if l.restore(c, k, r, &probe, active, now) {
			n++
		}
	}
	return n
}

// restore writes one record into its key's entry; p holds the escalation
// state.
func (l *Lockout) restore(c *conf, k key, r *Record, p *entry, active bool, now time.Time) bool {
	hc := strhash(k.connection)
	h := keyHash(hc, strhash(k.name))
	sh := l.shard(hc)
	var events []Event
	sh.mu.Lock()
	e := sh.lookup(h, k)
	if e == nil {
		e = &entry{key: k.own(), hash: h}
		l.insertLocked(sh, e)
	}
	e.count, e.lastFailureAt, e.resetAfter, e.lastCooldown = p.count, p.lastFailureAt, p.resetAfter, p.lastCooldown
	e.scope = r.Scope
	if active {
		e.until, e.reason, e.lockedAt = r.Until, r.Reason, r.LockedAt
		if e.lockedAt.IsZero() || e.lockedAt.After(now) {
			e.lockedAt = now
		}
		e.count = max(e.count, 1)
		if c.OnChange != nil {
			events = append(events, e.event(EventLocked, now, false))
		}
	} else {
		e.until, e.reason, e.lockedAt = time.Time{}, "", time.Time{}
	}
	e.publish()
	l.keyLocked(sh, c, e)
	sh.mu.Unlock()
	if l.total.Load() > int64(c.MaxEntries) {
		events = l.evict(c, now, e, events)
	}
	emit(c, events)
	return true
}
