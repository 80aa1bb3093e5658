package queue

import (
	"cmp"
	"slices"
	"time"

	"github.com/routeguard/routeguard/internal/heap"
)

// The keys a Queue keeps, and which of them may be dropped.
//
// Every gate is in one of three groups: busy (requests running or waiting
// on it, or an acquisition holding it while it sets up), blocked (nothing
// running or waiting but a block set), or idle. Idle gates are kept in a
// list in the order they became idle (or were last used), so that both the
// gates idle for longer than IdleTTL and the least recently used idle gate
// are found at its head; a gate that turns busy may stay in the list (so
// that a key taken and released over and over does not move), and is taken
// out when a walk from the head meets it. Blocked gates are kept in a heap
// by the end of their block, so that the ones whose block is over are
// found on top. A new
// key therefore costs O(1) amortised (O(log n) for the blocked heap) however
// many keys are kept, and a sweep visits only the gates it changes.

// keyBook is the Queue's bookkeeping of its gates; guarded by Queue.mu.
type keyBook struct {
	idleHead, idleTail *gate
	blocked            heap.Min[gate]
	touched            []*gate // gates released (or taken without a clock) since the last sweep
	seq                uint64  // counts pushes onto the idle list
	busy               int     // gates whose isBusy is set
}

func blockPos(g *gate) *int { return &g.blockPos }

// wallAfter reports whether a is after b by the wall clock.
func wallAfter(a, b time.Time) bool {
	as, bs := a.Unix(), b.Unix()
	return as > bs || (as == bs && a.Nanosecond() > b.Nanosecond())
}

// busy reports whether g has requests running or waiting, or is held by an
// acquisition under way.
func (g *gate) busy() bool { return g.running > 0 || g.waiters.Len() > 0 || g.held > 0 }

// placeLocked puts g in the group its state gives. now is the time of the
// change; zero when the caller did not read the clock, and then a gate with
// a block set counts as blocked until the next sweep looks. q.mu is held
// for writing.
func (q *Queue) placeLocked(g *gate, now time.Time) {
	// Waiters come and go through here; a gate turns hot otherwise only by
	// a block, learned limits or a rate limit or spacing applied, whose
	// callers see to it.
	if g.hot || g.waiters.Len() > 0 {
		q.heatLocked(g)
	}
	busy := g.busy()
	if busy != g.isBusy {
		g.isBusy = busy
		if busy {
			q.keys.busy++
		} else {
			q.keys.busy--
		}
	}
	switch {
	case busy:
		if g.blockPos != 0 { // in the blocked heap; it may stay in the idle list
			q.keys.blocked.Remove(g)
		}
	case !g.blockedUntil.IsZero() && (now.IsZero() || g.blockedUntil.After(now)):
		q.unlinkIdle(g)
		q.keys.blocked.Set(g, heap.Stamp(g.blockedUntil))
	default:
		if g.blockPos != 0 {
			q.keys.blocked.Remove(g)
		}
		// A gate still in the idle list keeps its place: the walks from the
		// head in sweepLocked move it to the tail when its last use is
		// later than its place says, so a key taken and released over and
		// over costs no relinking.
		if !g.inIdle {
			q.pushIdle(g)
		} else {
			q.keys.seq++ // the sweep orders released gates by when they went idle
			g.idleSeq = q.keys.seq
		}
	}
}

// usedLocked records that g, whatever its group, was used at g.lastUse: an
// idle gate moves to the tail of the idle list.
func (q *Queue) usedLocked(g *gate) {
	if g.inIdle && !g.isBusy {
		q.unlinkIdle(g)
		q.pushIdle(g)
	}
}

// touchLocked marks g used without a clock reading; the next sweep takes
// its time as g's last use.
func (q *Queue) touchLocked(g *gate) {
	if !g.touched {
		g.touched = true
		q.keys.touched = append(q.keys.touched, g)
	}
}

// pushIdle appends g to the idle list. Its idle time is its last use, or
// the previous tail's when that is later (a clock that went back), so the
// list stays in order.
func (q *Queue) pushIdle(g *gate) {
	k := &q.keys
	g.idleAt = g.lastUse
	if t := k.idleTail; t != nil && wallAfter(t.idleAt, g.idleAt) {
		g.idleAt = t.idleAt
	}
	k.seq++
	g.idleSeq = k.seq
	g.idlePrev, g.idleNext, g.inIdle = k.idleTail, nil, true
	if k.idleTail != nil {
		k.idleTail.idleNext = g
	} else {
		k.idleHead = g
	}
	k.idleTail = g
}

func (q *Queue) unlinkIdle(g *gate) {
	if !g.inIdle {
		return
	}
	k := &q.keys
	if g.idlePrev != nil {
		g.idlePrev.idleNext = g.idleNext
	} else {
		k.idleHead = g.idleNext
	}
	if g.idleNext != nil {
		g.idleNext.idlePrev = g.idlePrev
	} else {
		k.idleTail = g.idlePrev
	}
	g.idlePrev, g.idleNext, g.inIdle = nil, nil, false
}

// dropLocked removes the quiet gate g and notes its removal.
func (q *Queue) dropLocked(g *gate, now time.Time) {
	q.unlinkIdle(g)
	q.keys.blocked.Remove(g)
	g.dropped = true
	if g.hot {
		g.hot = false
		q.addHot(g, -1)
	}
	delete(q.gates, g.key)
	q.dirty = true
	q.noteLocked(EventRemoved, g, now, nil)
}

// sweepLocked brings the groups up to date at now and drops what IdleTTL
// and MaxKeys say: the gates released since the last sweep count as used
// now; gates whose block is over become idle (or go, when they were last
// used IdleTTL ago); idle gates last used IdleTTL ago go; and while the
// queue keeps MaxKeys keys, the least recently used idle gate goes.
func (q *Queue) sweepLocked(now time.Time, ttl time.Duration) {
	k := &q.keys
	// The touched gates move to the tail in the order they went idle, so
	// the list stays in order of use.
	slices.SortFunc(k.touched, func(a, b *gate) int { return cmp.Compare(a.idleSeq, b.idleSeq) })
	for i, g := range k.touched {
		k.touched[i] = nil
		if g.dropped || !g.touched {
			continue
		}
		g.touched, g.lastUse = false, now
		q.usedLocked(g)
	}
	k.touched = k.touched[:0]
	for g, _ := k.blocked.Top(); g != nil && !g.blockedUntil.After(now); g, _ = k.blocked.Top() {
		k.blocked.Remove(g)
		if now.Sub(g.lastUse) >= ttl {
			q.dropLocked(g, now)
		} else {
			q.pushIdle(g)
		}
	}
	for g := k.idleHead; g != nil && now.Sub(g.idleAt) >= ttl; g = k.idleHead {
		q.headLocked(g, now)
	}
	for g := k.idleHead; g != nil && len(q.gates) >= q.maxKeys(); g = k.idleHead {
		q.headLocked(g, now)
	}
}

// headLocked settles the head of the idle list, met by a walk that would
// drop it: a busy gate leaves the list, a gate used since it took its place
// goes to the tail (its place was stale), and any other goes. Each gate is
// moved at most once per use, so a walk costs O(1) amortised per gate it
// drops.
func (q *Queue) headLocked(g *gate, now time.Time) {
	switch {
	case g.isBusy:
		q.unlinkIdle(g)
	case wallAfter(g.lastUse, g.idleAt):
		q.unlinkIdle(g)
		q.pushIdle(g)
	default:
		q.dropLocked(g, now)
	}
}

// roomLocked reports whether a new key could be kept at now: the queue
// keeps fewer than MaxKeys keys, or one of them is idle (or its block is
// over) and would make room. q.mu is held, at least for reading.
func (q *Queue) roomLocked(now time.Time) bool {
	// The gates neither busy nor blocked are idle, in the idle list.
	if len(q.gates) < q.maxKeys() || len(q.gates)-q.keys.busy-q.keys.blocked.Len() > 0 {
		return true
	}
	g, _ := q.keys.blocked.Top()
	return g != nil && !g.blockedUntil.After(now)
}

// keysFullLocked returns the refusal of a new key when the queue keeps
// MaxKeys keys and none of them may be dropped, and notes it.
func (q *Queue) keysFullLocked(key string, now time.Time) *Error {
	e := q.keysError(key)
	q.noteLocked(EventQueueFull, &gate{key: key}, now, e)
	return e
}

// keysError returns the refusal of the new key key for want of room.
func (q *Queue) keysError(key string) *Error {
	e := newError(CodeQueueFull, key)
	e.Keys = q.maxKeys()
	return e
}
