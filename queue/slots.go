package queue

import "time"

// A grant's slots are recorded in a ticket: the one gate of [Queue.Acquire]
// or [Queue.TryAcquireAt], or the gates of [Queue.AcquireMany]. A ticket
// belongs to the queue that made it for life. The queue keeps the tickets
// its grants gave back, up to maxFreeTickets of them, in a list under its
// lock, and hands them to its next grants; taking and giving one back
// costs a few instructions inside the critical sections that Acquire and
// release enter anyway.
//
// gen counts the ticket's releases. A release function (or a [Grant])
// holds the generation its grant was given, so that calling it again,
// after the ticket went to another grant, finds a later generation and
// frees nothing.
type ticket struct {
	q     *Queue  // set when made, never changed
	one   *gate   // the gate of a single-key grant; guarded by q.mu
	gates []*gate // the gates of an AcquireMany grant; guarded by q.mu
	next  *ticket // in q.free; guarded by q.mu
	gen   uint64  // guarded by q.mu
}

// maxFreeTickets bounds the tickets a queue keeps for its next grants:
// after a burst of grants held at once, the tickets beyond it are left to
// the garbage collector.
const maxFreeTickets = 256

// takeTicketLocked returns a ticket of q that no grant holds. q.mu is
// held for writing.
func (q *Queue) takeTicketLocked() *ticket {
	t := q.free
	if t == nil {
		return &ticket{q: q}
	}
	q.free, t.next = t.next, nil
	q.nfree--
	return t
}

// putTicketLocked ends the grant t records and keeps t for a next one
// while q keeps fewer than maxFreeTickets. q.mu is held for writing.
func (q *Queue) putTicketLocked(t *ticket) {
	t.gen++
	if q.nfree < maxFreeTickets {
		t.next = q.free
		q.free = t
		q.nfree++
	}
}

// oneTicketLocked records a single-key grant on g and returns its release
// function. q.mu is held for writing.
func (q *Queue) oneTicketLocked(g *gate) func() {
	t := q.takeTicketLocked()
	t.one = g
	return t.releaser(t.gen)
}

// manyTicketLocked records a grant on gates and returns it. q.mu is held
// for writing.
func (q *Queue) manyTicketLocked(gates []*gate) Grant {
	t := q.takeTicketLocked()
	t.gates = append(t.gates[:0], gates...)
	return Grant{t: t, gen: t.gen}
}

// releaser returns the release function of t's single-key grant of
// generation gen.
func (t *ticket) releaser(gen uint64) func() {
	return func() { t.releaseOne(gen) }
}

// releaseOne frees the slot of t's single-key grant if gen is still its
// generation.
func (t *ticket) releaseOne(gen uint64) {
	q := t.q
	q.mu.Lock()
	if t.gen != gen {
		q.mu.Unlock()
		return
	}
	g := t.one
	t.one = nil
	q.putTicketLocked(t)
	q.addRunning(g, -1)
	q.touchLocked(g)
	// What placeLocked does, written out for the common case: a gate that
	// is not hot (so not blocked) going idle where it is in the idle list.
	switch {
	case g.waiters.Len() > 0:
		q.dispatchLocked([]*gate{g}, time.Now())
		q.placeLocked(g, time.Time{})
	case g.hot || g.running > 0 || g.held > 0 || g.blockPos != 0 || !g.inIdle:
		q.placeLocked(g, time.Time{})
	default:
		if g.isBusy {
			g.isBusy = false
			q.keys.busy--
		}
		q.keys.seq++
		g.idleSeq = q.keys.seq
	}
	q.publishLocked()
	q.mu.Unlock()
}

// release frees the slots of t's AcquireMany grant if gen is still its
// generation.
func (t *ticket) release(gen uint64) {
	q := t.q
	q.mu.Lock()
	if t.gen != gen {
		q.mu.Unlock()
		return
	}
	waiting := false
	for _, g := range t.gates {
		q.addRunning(g, -1)
		q.touchLocked(g)
		waiting = waiting || g.waiters.Len() > 0
	}
	if waiting {
		q.dispatchLocked(t.gates, time.Now())
	}
	for _, g := range t.gates {
		q.placeLocked(g, time.Time{})
	}
	clear(t.gates)
	t.gates = t.gates[:0]
	q.putTicketLocked(t)
	q.publishLocked()
	q.mu.Unlock()
}
