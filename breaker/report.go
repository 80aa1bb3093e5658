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
	// At is when the result was learned, on the caller's clock: the time
	// a done func of [Set.AllowReportAt] accounts it at. Zero means
	// time.Now() when done is called. [Set.ReportAt] takes the time as an
	// argument instead.
	At time.Time
}

// ReportAt is [Set.ReportAt] for this breaker.
func (b *circuit) ReportAt(r Report, now time.Time) bool {
	if (r.Outcome != Success && r.Outcome != Failure) || r.QueueTimeout {
		return false
	}
	b.mu.Lock()
	now = b.clockLocked(now)
	b.refreshLocked(now)
	counted := b.directLocked(r, now)
	b.unlockAndNotify(now)
	return counted
}

// directLocked applies a direct report at now; see ReportAt.
func (b *circuit) directLocked(r Report, now time.Time) bool {
	if r.Outcome == Failure && !b.passLocked(r, now) {
		return false
	}
	if b.state == Open {
		return false
	}
	if r.Outcome == Success && r.Conn != "" {
		delete(b.conns, r.Conn)
	}
	switch {
	case b.state.admits():
		b.closedLocked(r.Outcome, r.Kind, now)
	case r.Outcome == Success:
		b.closeLocked()
	default:
		b.reopenLocked(r.Kind, now)
	}
	return true
}

// passLocked applies the failure filters of r at now and records what
// passes.
func (b *circuit) passLocked(r Report, now time.Time) bool {
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
func (b *circuit) rememberConnLocked(conn string, now time.Time, w time.Duration) {
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
func (b *circuit) dedupLen() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.conns)
}
