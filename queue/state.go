package queue

import (
	"cmp"
	"net/http"
	"slices"
	"time"
)

// Decision is what would happen to a request on a key now.
type Decision int

// Decisions.
const (
	// Admit: the request would start at once.
	Admit Decision = iota
	// Wait: the request would queue for a slot.
	Wait
	// Refuse: the queue is full; the request would be refused with
	// ErrQueueFull.
	Refuse
)

// String returns "admit", "wait" or "refuse".
func (d Decision) String() string {
	switch d {
	case Admit:
		return "admit"
	case Wait:
		return "wait"
	case Refuse:
		return "refuse"
	}
	return "decision(?)"
}

// Status is a key's admission state at one moment.
type Status struct {
	// Decision is what Acquire would do now.
	Decision Decision
	// Running is the number of slots in use; Waiting the number of waiters.
	Running, Waiting int
	// Cap is the concurrency cap (0: unlimited) and Depth the queue depth
	// (0: unbounded) from the key's settings.
	Cap, Depth int
	// Saturated is true when every slot is in use or the key is blocked.
	Saturated bool
	// ReadyAt is when a new request could start if nothing else changed:
	// the time asked about when it could start now, the end of a block or
	// of a rate-limit pause, or zero when that depends on slots being
	// released.
	ReadyAt time.Time
}

// CheckAt reports what Acquire would do with a request on key at now. It
// neither blocks nor allocates (provided Config.Overrides does not).
//
// On a queue whose settings limit nothing (no cap, depth, rate, spacing or
// overrides), while no key has waiters, a block or learned limits and there
// is room for a new key, it answers Admit from one atomic load, without
// the lock or a lookup. On any queue built by [New] it answers Admit from
// atomic loads too, without the lock, when the queue keeps fewer than
// MaxKeys keys and the key has no waiters, block, rate limiter, spacing or
// learned limits and room under its cap (its own, under Overrides); such
// state of other keys may send it to the lock now and then.
func (q *Queue) CheckAt(key string, now time.Time) Decision {
	if q.admitAll.Load() {
		return Admit // small enough to be inlined into the caller's screening
	}
	return q.checkAt(key, now)
}

// checkAt is CheckAt past its first shortcut.
func (q *Queue) checkAt(key string, now time.Time) Decision {
	cap, depth := q.capsFor(key)
	if q.sum.admits(key, cap) {
		return Admit
	}
	q.mu.RLock()
	g := q.gates[key]
	var d Decision
	switch {
	case g != nil:
		d = g.decideCaps(cap, depth, now)
	case !q.roomLocked(now):
		d = Refuse
	}
	q.mu.RUnlock()
	return d
}

// decide is what Acquire would do on g at now under settings s. It requires
// q.mu held.
func (g *gate) decide(s limits, now time.Time) Decision {
	return g.decideCaps(s.MaxConcurrency, s.MaxQueueDepth, now)
}

// decideCaps is decide given only the settings it reads: the concurrency
// cap and the queue depth.
func (g *gate) decideCaps(cap, depth int, now time.Time) Decision {
	waiting := g.waiters.Len()
	switch {
	case depth > 0 && waiting >= depth:
		return Refuse
	case waiting > 0,
		cap > 0 && g.running >= cap,
		g.blockedUntil.After(now),
		g.rateReadyAt(now).After(now):
		return Wait
	}
	return Admit
}

// StatusAt returns key's admission state at now. It neither blocks nor
// allocates (provided Config.Overrides does not).
func (q *Queue) StatusAt(key string, now time.Time) Status {
	cap, depth := q.capsFor(key)
	st := Status{Cap: cap, Depth: depth, ReadyAt: now}
	q.mu.RLock()
	defer q.mu.RUnlock()
	g := q.gates[key]
	if g == nil {
		if !q.roomLocked(now) {
			st.Decision, st.ReadyAt = Refuse, time.Time{}
		}
		return st
	}
	st.Running, st.Waiting = g.running, g.waiters.Len()
	capped := st.Cap > 0 && g.running >= st.Cap
	blocked := g.blockedUntil.After(now)
	st.Saturated = capped || blocked
	ready := g.rateReadyAt(now)
	if blocked && g.blockedUntil.After(ready) {
		ready = g.blockedUntil
	}
	st.Decision = g.decideCaps(cap, depth, now)
	switch {
	case st.Waiting > 0 || capped:
		st.ReadyAt = time.Time{}
	default:
		st.ReadyAt = ready
	}
	return st
}

// FullAt reports whether key has cap or more requests running, or is
// blocked, at now: whether a request needing a slot of key under cap (as
// [Need] does for [Queue.AcquireMany]) would have to wait. A cap ≤ 0 means
// no limit, so only a block makes the key full. It neither blocks nor
// allocates.
func (q *Queue) FullAt(key string, cap int, now time.Time) bool {
	q.mu.RLock()
	defer q.mu.RUnlock()
	g := q.gates[key]
	if g == nil {
		return false
	}
	return (cap > 0 && g.running >= cap) || g.blockedUntil.After(now)
}

// KeyState is one key's state as plain data, for health and admin views.
type KeyState struct {
	Key     string
	Running int
	Waiting int
	// Cap is the concurrency cap last applied (0: unlimited).
	Cap int
	// BlockedUntil is the end of a block; zero when not blocked.
	BlockedUntil time.Time
	// RequestsPerMinute and MinSpacing are the configured rate limits.
	RequestsPerMinute int
	MinSpacing        time.Duration
	// LearnedSpacing is the spacing learned from upstream headers.
	LearnedSpacing time.Duration
	// Reservoir is the number of starts left before ReservoirRefill, and
	// ReservoirMax what it refills to; both 0 when there is no reservoir.
	Reservoir, ReservoirMax int
	ReservoirRefill         time.Time
	// NextStart is the earliest time a rate-limited start may happen.
	NextStart time.Time
	// LastUse is when a slot was last taken, or when the key was last
	// found released by the idle sweep.
	LastUse time.Time
}

// SnapshotAt returns the state of every key kept at now, sorted by key.
func (q *Queue) SnapshotAt(now time.Time) []KeyState {
	q.mu.RLock()
	out := make([]KeyState, 0, len(q.gates))
	for _, g := range q.gates {
		ks := KeyState{
			Key: g.key, Running: g.running, Waiting: g.waiters.Len(), Cap: g.cap,
			RequestsPerMinute: g.rpm, MinSpacing: g.spacing, LearnedSpacing: g.learned,
			NextStart: g.rateReadyAt(now), LastUse: g.lastUse,
		}
		if g.blockedUntil.After(now) {
			ks.BlockedUntil = g.blockedUntil
		}
		if g.resMax > 0 {
			ks.Reservoir, ks.ReservoirMax, ks.ReservoirRefill = g.resLeft, g.resMax, g.resRefill
			if !now.Before(g.resRefill) {
				ks.Reservoir = g.resMax
				ks.ReservoirRefill = g.resRefill.Add((now.Sub(g.resRefill)/g.resEvery + 1) * g.resEvery)
			}
		}
		out = append(out, ks)
	}
	q.mu.RUnlock()
	slices.SortFunc(out, func(a, b KeyState) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// BlockAt stops new starts on key from now until the absolute time until;
// running requests are not affected and waiters keep their place. A later
// block replaces an earlier one, and an until at or before now lifts it.
// Blocks are lifted lazily: the key is free again at until without any
// call.
func (q *Queue) BlockAt(key string, until, now time.Time) {
	q.mu.Lock()
	g := q.gateLocked(key, now)
	if g == nil {
		q.keysFullLocked(key, now)
		q.unlock()
		return
	}
	g.blockedUntil = until
	g.lastUse = now
	q.usedLocked(g)
	q.dispatchLocked([]*gate{g}, now)
	q.placeLocked(g, now)
	q.heatLocked(g)
	q.noteLocked(EventBlocked, g, now, nil)
	q.unlock()
}

// UnblockAt lifts a block on key at now and lets its waiters go. A key
// that is not blocked is left alone, and no event is reported.
func (q *Queue) UnblockAt(key string, now time.Time) {
	q.mu.Lock()
	g := q.gates[key]
	if g == nil || g.blockedUntil.IsZero() {
		q.mu.Unlock()
		return
	}
	g.blockedUntil = time.Time{}
	q.dispatchLocked([]*gate{g}, now)
	q.placeLocked(g, now)
	q.noteLocked(EventUnblocked, g, now, nil)
	q.unlock()
}

// ResetAt rejects every request waiting on key with an error matching
// [ErrReset] (SEMAPHORE_RESET), and clears the key's block and learned
// limits, at now. Slots in use stay counted until they are released, so the
// cap keeps holding. A key the queue does not keep is left alone.
func (q *Queue) ResetAt(key string, now time.Time) {
	q.mu.Lock()
	g := q.gates[key]
	if g == nil {
		q.mu.Unlock()
		return
	}
	q.resetLocked(g, now)
	q.noteLocked(EventReset, g, now, nil)
	q.unlock()
}

// ResetAllAt resets every key as [Queue.ResetAt] does; the events come in
// key order.
func (q *Queue) ResetAllAt(now time.Time) {
	q.mu.Lock()
	keys := make([]string, 0, len(q.gates))
	for k, g := range q.gates {
		q.resetLocked(g, now)
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		q.noteLocked(EventReset, q.gates[k], now, nil)
	}
	q.unlock()
}

func (q *Queue) resetLocked(g *gate, now time.Time) {
	var others []*gate
	for e := g.waiters.Front(); e != nil; e = g.waiters.Front() {
		w := e.Value.(*waiter)
		for i := range w.needs {
			n := &w.needs[i]
			n.g.waiters.Remove(n.elem)
			n.elem = nil
			if n.g != g {
				others = append(others, n.g)
			}
		}
		w.err = newError(CodeReset, g.key)
		w.poke()
	}
	g.blockedUntil = time.Time{}
	g.resetRate()
	q.dispatchLocked(others, now)
	q.placeLocked(g, now)
	for _, o := range others {
		q.placeLocked(o, now)
	}
}

// resetRate gives g a fresh limiter: no learned limits, a full bucket.
func (g *gate) resetRate() {
	g.learned = 0
	g.started = false
	g.lastStart = time.Time{}
	g.resMax, g.resLeft, g.resRefill, g.resEvery = 0, 0, time.Time{}, 0
	if g.rpm > 0 {
		g.lim = nil
		rpm := g.rpm
		g.rpm = 0
		g.apply(limits{RequestsPerMinute: rpm, MinSpacing: g.spacing, MaxConcurrency: g.cap}, time.Time{})
	}
}

// LearnAt adapts key to an upstream answer received at now:
//
//   - status 429 gives the key a fresh limiter (learned spacing and
//     reservoir dropped, rate bucket full); how long to stay away is
//     the business of connection cooldown, not of the queue.
//   - a limit L > 0 sets the learned spacing to max(0, ⌊60 000/L⌋ − 10) ms.
//     If fewer than 10 % of L remain, a reservoir of the remaining starts
//     is set, refilled to L after the reset hint and then every reset
//     interval (60 s when the answer gives none). If more than half of L
//     remain, the learned spacing and the reservoir are dropped.
//   - "x-ratelimit-over-limit: yes" raises the learned spacing to at
//     least 200 ms.
//
// The spacing in force is the larger of the configured and the learned one.
func (q *Queue) LearnAt(key string, status int, h http.Header, now time.Time) {
	if status == http.StatusTooManyRequests {
		q.mu.Lock()
		if g := q.gates[key]; g != nil {
			g.resetRate()
			q.dispatchLocked([]*gate{g}, now)
			q.heatLocked(g)
			q.noteLocked(EventLimiterReset, g, now, nil)
		}
		q.unlock()
		return
	}
	l := parseLimits(h, now)
	if l.Limit <= 0 && !l.OverLimit {
		return
	}
	q.mu.Lock()
	g := q.gateLocked(key, now)
	if g == nil {
		q.keysFullLocked(key, now)
		q.unlock()
		return
	}
	if l.Limit > 0 {
		g.learned = max(0, time.Duration(60_000/l.Limit-10)*time.Millisecond)
		switch {
		case l.Remaining >= 0 && l.Remaining*10 < l.Limit:
			every := l.Reset
			if every <= 0 {
				every = defaultRefillTime
			}
			g.resMax, g.resLeft, g.resEvery = l.Limit, l.Remaining, every
			g.resRefill = now.Add(every)
		case l.Remaining*2 > l.Limit:
			g.learned = 0
			g.resMax, g.resLeft, g.resRefill, g.resEvery = 0, 0, time.Time{}, 0
		}
	}
	if l.OverLimit {
		g.learned = max(g.learned, overLimitSpacing)
	}
	g.lastUse = now
	q.usedLocked(g)
	q.dispatchLocked([]*gate{g}, now)
	q.heatLocked(g)
	q.noteLocked(EventLimitsLearned, g, now, nil)
	q.unlock()
}
