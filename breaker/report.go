package breaker

import "time"

// Report is the result of one request with the detail a breaker can use
// beyond its [Outcome]. The zero value is an Ignored report.
type Report struct {
	// Outcome is the request's outcome (see [Classify]).
	Outcome Outcome
	// Kind classifies a failure; it is kept as the breaker's last failure
	// kind and, with [Profile.Hints], chooses the base open time.
	Kind Kind
	// Conn names the connection (account, key) the request used. A
	// failure of a connection within Profile.ConnDedup (default 5 s) of
	// its last counted failure is not counted; a success clears the
	// connection's entry. Empty: no per-connection deduplication.
	Conn string
	// Network marks a failure to reach the provider at all (refused or
	// reset connection, DNS, dial timeout). A network error within
	// Profile.NetworkDedup (default 10 s) of the provider's last counted
	// one is not counted, whichever connection it came from.
	Network bool
	// QueueTimeout marks a request that timed out waiting in a local
	// queue before it reached the provider: it never counts.
	QueueTimeout bool
}

// Report is [Breaker.ReportAt] at time.Now().
func (b *Breaker) Report(r Report) bool { return b.ReportAt(r, time.Now()) }

// ReportAt accounts a report that belongs to no admission: a result
// learned outside [Breaker.Allow], such as a router's record of a failed
// attempt. It reports whether the report was accounted: false when it was
// Ignored, filtered out, or met an open breaker.
//
// A failure is filtered first: a queue timeout never counts, then a
// network error within NetworkDedup of the last counted one, then a
// failure of a connection within ConnDedup of its last counted one. A
// failure that passes counts as in [Breaker.Allow]'s done func, except that
// in the half-open state it reopens the breaker (one more cycle) even when
// a probe is out; that probe's result is then ignored. An open breaker
// ignores it, so a direct report never restarts an open period.
//
// A success on a closed breaker lowers the count and clears the
// connection's deduplication entry; on a half-open breaker it closes it;
// an open breaker ignores it. An Ignored report changes nothing.
//
// now is the time of the report: the deduplication windows and the failure
// time are measured with it. The breaker's open and probe periods follow
// the wall clock (see the package doc), so now should normally be
// time.Now().
func (b *Breaker) ReportAt(r Report, now time.Time) bool {
	if (r.Outcome != Success && r.Outcome != Failure) || r.QueueTimeout {
		return false
	}
	wall := time.Now()
	b.mu.Lock()
	b.refreshLocked(wall)
	counted := b.directLocked(r, now, wall)
	b.unlockAndNotify(wall)
	return counted
}

// directLocked applies a direct report; see ReportAt.
func (b *Breaker) directLocked(r Report, now, wall time.Time) bool {
	if r.Outcome == Failure && !b.passLocked(r, now) {
		return false
	}
	st, _ := b.stateLocked(wall)
	if st == Open {
		return false
	}
	if r.Outcome == Success && r.Conn != "" {
		delete(b.conns, r.Conn)
	}
	switch {
	case st.Admits():
		b.closedLocked(r.Outcome, r.Kind, now)
	case r.Outcome == Success:
		b.closeHalfOpenLocked()
	default:
		b.failHalfOpenLocked(r.Kind, now)
	}
	return true
}

// passLocked applies the failure filters of r at now and records what
// passes.
func (b *Breaker) passLocked(r Report, now time.Time) bool {
	if r.QueueTimeout {
		return false
	}
	if r.Network {
		if !b.netAt.IsZero() && now.Sub(b.netAt) < b.p.networkDedup() {
			return false
		}
		b.netAt = now
	}
	if r.Conn != "" {
		w := b.p.connDedup()
		if last, ok := b.conns[r.Conn]; ok && now.Sub(last) < w {
			return false
		}
		b.rememberConnLocked(r.Conn, now, w)
	}
	return true
}

// rememberConnLocked records conn's counted failure at now, keeping at most
// MaxConns entries: when full, it drops the entries older than the window
// w, then the oldest one.
func (b *Breaker) rememberConnLocked(conn string, now time.Time, w time.Duration) {
	if b.conns == nil {
		b.conns = make(map[string]time.Time)
	}
	if _, ok := b.conns[conn]; !ok && len(b.conns) >= b.p.maxConns() {
		for c, t := range b.conns {
			if now.Sub(t) >= w {
				delete(b.conns, c)
			}
		}
		for len(b.conns) >= b.p.maxConns() {
			oldest, first := "", true
			var ot time.Time
			for c, t := range b.conns {
				if first || t.Before(ot) {
					oldest, ot, first = c, t, false
				}
			}
			delete(b.conns, oldest)
		}
	}
	b.conns[conn] = now
}

// dedupLen returns the number of connections kept for deduplication.
func (b *Breaker) dedupLen() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.conns)
}
