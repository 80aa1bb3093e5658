package queue

import (
	"container/list"
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/routeguard/routeguard/internal/heap"
)

// Queue is admission control over keys such as "provider:connection". For
// each key it bounds concurrency, start rate and spacing, the number of
// waiters and the time they wait; waiters are served in FIFO order.
//
// Most callers use [Queue.Acquire] (or [Queue.Do]) before each upstream
// attempt and [Queue.CheckAt] to skip targets that would be refused. A Queue
// is safe for concurrent use; the zero Queue is usable with default
// settings.
type Queue struct {
	cfg      Config // normalized, when built by New
	defaults limits // the limits of cfg
	built    bool   // built by New

	// limited is set when the settings may make a request wait or be
	// refused: a cap, a depth, a rate, a spacing or per-key overrides.
	limited bool

	// sum lets CheckAt answer Admit without the lock on a limited queue;
	// see summary. Unused (no buckets) on a Queue not built by New.
	sum summary

	mu        queueLock
	gates     map[string]*gate // lazily initialized; guarded by mu
	keys      keyBook          // which gates may be dropped; guarded by mu
	lastSweep time.Time        // guarded by mu
	pend      []Event          // events to hand to OnChange at unlock; guarded by mu
	hot       int              // gates whose hot is set; guarded by mu
	free      *ticket          // tickets kept for the next grants (see ticket); guarded by mu
	nfree     int              // the length of the free list; guarded by mu
	dirty     bool             // hot or the number of keys changed since admitAll was set; guarded by mu

	// admitAll is set, at the end of each change, when [Queue.CheckAt]
	// would admit on every key: the queue is not limited, no gate is hot
	// and there is room for a new key. CheckAt then answers without the
	// lock or a lookup.
	admitAll atomic.Bool
}

// queueLock is the Queue's lock: a plain mutex, whose read side takes it
// whole. Every Acquire and release takes it for writing, and the readers
// (StatusAt, FullAt, SnapshotAt, CheckAt when its atomics do not settle
// the answer) hold it for a few dozen instructions; a sync.RWMutex would
// add two atomic operations and about 80 instructions to each acquisition
// and release pair (BenchmarkAcquireRelease) to let those readers overlap.
type queueLock struct{ sync.Mutex }

func (l *queueLock) RLock()   { l.Lock() }
func (l *queueLock) RUnlock() { l.Unlock() }

// New returns a Queue configured by cfg, normalized (see [Config.Normalize]).
func New(cfg Config) *Queue {
	cfg = cfg.Normalize()
	q := &Queue{cfg: cfg, defaults: cfg.limits(), built: true}
	d := q.defaults
	q.limited = cfg.Overrides != nil || d.RequestsPerMinute > 0 || d.MinSpacing > 0 ||
		d.MaxConcurrency > 0 || d.MaxQueueDepth > 0
	q.admitAll.Store(!q.limited)
	q.sum.init(cfg.MaxKeys)
	return q
}

// heatLocked updates g.hot (and the counts of hot gates, the queue's and
// its bucket's): whether admission on g depends on more than its running
// count and cap, because requests wait on it or it has a block, a rate
// limiter, a spacing or a reservoir. q.mu is held for writing.
func (q *Queue) heatLocked(g *gate) {
	hot := g.waiters.Len() > 0 || !g.blockedUntil.IsZero() || g.lim != nil ||
		g.spacing > 0 || g.learned > 0 || g.resMax > 0
	if hot != g.hot {
		g.hot = hot
		if hot {
			q.addHot(g, 1)
		} else {
			q.addHot(g, -1)
		}
		q.dirty = true
	}
}

// publishLocked brings admitAll up to date after a change to the count of
// hot gates or of keys; called at the end of every change, just before
// q.mu is released.
func (q *Queue) publishLocked() {
	if q.dirty {
		q.publishDirtyLocked()
	}
}

func (q *Queue) publishDirtyLocked() {
	q.dirty = false
	room := len(q.gates) < q.maxKeys()
	q.sum.setKeys(room, q.hot > 0 && q.hot == len(q.gates))
	q.admitAll.Store(!q.limited && q.hot == 0 && room)
}

// gate is the state of one key. All fields are guarded by Queue.mu.
type gate struct {
	key     string
	running int
	waiters list.List // of *waiter, FIFO
	cap     int       // last concurrency cap seen, for reporting
	lastUse time.Time
	touched bool   // released since lastUse was set; the sweep counts it as used
	fullErr *Error // the last queue-full refusal, reused while the depth stays
	hot     bool   // counted in Queue.hot; see heatLocked
	bucket  uint32 // the key's bucket in Queue.sum

	// The gate's place among the queue's keys (see keyBook): in the idle
	// list (inIdle, with the time it counts as idle from) or the blocked
	// heap (blockPos ≠ 0), or neither while busy. held counts the
	// acquisitions setting up on the gate; dropped is set once the queue
	// has dropped it.
	idlePrev, idleNext *gate
	idleAt             time.Time
	idleSeq            uint64 // when it last went idle (joined the idle list or was released in it), in pushes
	inIdle, dropped    bool
	isBusy             bool // busy() when last placed; counted in keyBook.busy
	blockPos           int
	held               int

	blockedUntil time.Time

	spacing   time.Duration // configured minimum spacing
	learned   time.Duration // spacing learned from headers
	lastStart time.Time
	started   bool

	rpm int
	lim *rate.Limiter // nil when rpm is 0

	resMax    int // 0: no reservoir
	resLeft   int
	resRefill time.Time
	resEvery  time.Duration
}

// need is one gate a waiter needs, with the cap it asked for.
type need struct {
	g    *gate
	cap  int
	elem *list.Element
}

// waiter is a request waiting in one or more gates. Its fields other than
// signal are guarded by Queue.mu.
type waiter struct {
	needs   []need
	rated   bool // subject to the gates' rate limits
	granted bool
	err     error
	wakeAt  time.Time
	signal  chan struct{} // buffered 1: "look at your state again"
}

func (w *waiter) poke() {
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// zeroLimits are the limits of the zero Queue.
var zeroLimits = limits{}.normalize()

func (q *Queue) settingsFor(key string) limits {
	if !q.built {
		return zeroLimits
	}
	if q.cfg.Overrides == nil {
		return q.defaults
	}
	return q.defaults.merge(q.cfg.Overrides(key).limits()).normalize()
}

// capsFor returns the concurrency cap and queue depth of settingsFor(key),
// without working out the rest.
func (q *Queue) capsFor(key string) (cap, depth int) {
	if !q.built {
		return zeroLimits.MaxConcurrency, zeroLimits.MaxQueueDepth
	}
	cap, depth = q.defaults.MaxConcurrency, q.defaults.MaxQueueDepth
	if q.cfg.Overrides != nil {
		o := q.cfg.Overrides(key)
		if o.MaxConcurrency > 0 {
			cap = min(o.MaxConcurrency, maxConcurrency)
		}
		if o.MaxQueueDepth > 0 {
			depth = min(o.MaxQueueDepth, maxQueueDepth)
		}
	}
	return cap, depth
}

func (q *Queue) idleTTL() time.Duration {
	if q.built {
		return q.cfg.IdleTTL
	}
	return defaultIdleTTL
}

func (q *Queue) maxKeys() int {
	if q.built {
		return q.cfg.MaxKeys
	}
	return defaultMaxKeys
}

// gateLocked returns key's gate, creating it (and pruning idle gates) when
// needed. It returns nil, creating nothing, when the queue keeps MaxKeys
// keys and none of them may be dropped. q.mu must be held for writing.
func (q *Queue) gateLocked(key string, now time.Time) *gate {
	if g := q.gates[key]; g != nil {
		return g
	}
	if q.gates == nil {
		q.gates = make(map[string]*gate)
		q.keys.blocked = heap.Min[gate]{Pos: blockPos}
	}
	ttl := q.idleTTL()
	if now.Before(q.lastSweep) {
		q.lastSweep = now
	}
	if len(q.gates) >= q.maxKeys() || now.Sub(q.lastSweep) >= ttl/2 {
		q.lastSweep = now
		q.sweepLocked(now, ttl)
	}
	if len(q.gates) >= q.maxKeys() {
		return nil
	}
	g := &gate{key: key, lastUse: now}
	if q.sum.buckets != nil {
		g.bucket = q.sum.bucket(key)
	}
	q.gates[key] = g
	q.dirty = true
	q.placeLocked(g, now)
	return g
}

// apply brings g's configured rate limits in line with s.
func (g *gate) apply(s limits, now time.Time) {
	if !now.IsZero() {
		if now.Before(g.lastStart) {
			g.lastStart = now // the clock went back: no time has passed
		}
		if !g.blockedUntil.IsZero() && !g.blockedUntil.After(now) {
			g.blockedUntil = time.Time{} // the block is over
		}
	}
	g.cap = s.MaxConcurrency
	g.spacing = s.MinSpacing
	if s.RequestsPerMinute == g.rpm {
		return
	}
	g.rpm = s.RequestsPerMinute
	switch {
	case g.rpm == 0:
		g.lim = nil
	case g.lim == nil:
		g.lim = rate.NewLimiter(rpmLimit(g.rpm), g.rpm)
	default:
		g.lim.SetLimitAt(now, rpmLimit(g.rpm))
		g.lim.SetBurstAt(now, g.rpm)
	}
}

func rpmLimit(rpm int) rate.Limit { return rate.Limit(float64(rpm) / 60) }

// effectiveSpacing is the larger of the configured and learned spacing.
func (g *gate) effectiveSpacing() time.Duration { return max(g.spacing, g.learned) }

// rateReadyAt returns the earliest time at or after now when g's rate limits
// let one more request start. It does not change g.
func (g *gate) rateReadyAt(now time.Time) time.Time {
	t := now
	if sp := g.effectiveSpacing(); sp > 0 && g.started {
		last := g.lastStart
		if last.After(now) {
			last = now // the clock went back: no time has passed
		}
		if next := last.Add(sp); next.After(t) {
			t = next
		}
	}
	if g.lim != nil {
		if tokens := g.lim.TokensAt(now); tokens < 1 {
			d := time.Duration(math.Ceil((1 - tokens) / float64(g.lim.Limit()) * float64(time.Second)))
			if next := now.Add(d); next.After(t) {
				t = next
			}
		}
	}
	if g.resMax > 0 && g.resLeft <= 0 && now.Before(g.resRefill) && g.resRefill.After(t) {
		t = g.resRefill
	}
	return t
}

// refill tops up an expired reservoir. q.mu must be held for writing.
func (g *gate) refill(now time.Time) {
	if g.resMax == 0 || now.Before(g.resRefill) {
		return
	}
	g.resLeft = g.resMax
	n := now.Sub(g.resRefill)/g.resEvery + 1
	g.resRefill = g.resRefill.Add(n * g.resEvery)
}

// start records a rated start on g. q.mu must be held for writing.
func (g *gate) start(now time.Time) {
	g.lastStart = now
	g.started = true
	if g.lim != nil {
		g.lim.AllowN(now, 1)
	}
	if g.resMax > 0 {
		g.refill(now)
		g.resLeft--
	}
}

// readyNow reports whether a request may start on g at now, given cap. A
// zero now means that nothing time-dependent applies (see clocked).
func (g *gate) readyNow(cap int, rated bool, now time.Time) bool {
	if cap > 0 && g.running >= cap {
		return false
	}
	if now.IsZero() {
		return true
	}
	if g.blockedUntil.After(now) {
		return false
	}
	return !rated || !g.rateReadyAt(now).After(now)
}

// grantableLocked reports whether w may be granted at now. When it may not,
// and only time stands in the way, wake is when to look again.
func (q *Queue) grantableLocked(w *waiter, now time.Time) (ok bool, wake time.Time) {
	timeOnly := true
	for _, n := range w.needs {
		g := n.g
		if g.waiters.Front() != n.elem || (n.cap > 0 && g.running >= n.cap) {
			timeOnly = false
			continue
		}
		if g.blockedUntil.After(now) && g.blockedUntil.After(wake) {
			wake = g.blockedUntil
		}
		if w.rated {
			if r := g.rateReadyAt(now); r.After(now) && r.After(wake) {
				wake = r
			}
		}
	}
	if !timeOnly {
		return false, time.Time{}
	}
	return wake.IsZero(), wake
}

// grantLocked gives w its slots.
func (q *Queue) grantLocked(w *waiter, now time.Time) {
	for i := range w.needs {
		n := &w.needs[i]
		n.g.waiters.Remove(n.elem)
		n.elem = nil
		q.addRunning(n.g, 1)
		n.g.lastUse = now
		if w.rated {
			n.g.start(now)
		}
		q.placeLocked(n.g, now)
	}
	w.granted = true
	w.wakeAt = time.Time{}
	w.poke()
}

// dispatchLocked grants, in FIFO order, every waiter at the head of gates
// (and of the gates they release in turn) that may start at now, and tells
// the heads that wait only for time when to look again.
func (q *Queue) dispatchLocked(gates []*gate, now time.Time) {
	var buf [8]*gate
	work := append(buf[:0], gates...)
	for len(work) > 0 {
		g := work[len(work)-1]
		work = work[:len(work)-1]
		front := g.waiters.Front()
		if front == nil {
			continue
		}
		w := front.Value.(*waiter)
		ok, wake := q.grantableLocked(w, now)
		if ok {
			q.grantLocked(w, now)
			for _, n := range w.needs {
				work = append(work, n.g)
			}
			continue
		}
		if !wake.IsZero() && !wake.Equal(w.wakeAt) {
			w.wakeAt = wake
			w.poke()
		}
	}
}

// enqueueLocked appends w to the queue of every gate it needs.
func (q *Queue) enqueueLocked(w *waiter) {
	for i := range w.needs {
		w.needs[i].elem = w.needs[i].g.waiters.PushBack(w)
		q.placeLocked(w.needs[i].g, time.Time{})
	}
}

// dequeueLocked removes a waiting w from its gates and lets the next heads
// go.
func (q *Queue) dequeueLocked(w *waiter, now time.Time) {
	gates := make([]*gate, 0, len(w.needs))
	for i := range w.needs {
		n := &w.needs[i]
		if n.elem != nil {
			n.g.waiters.Remove(n.elem)
			n.elem = nil
		}
		gates = append(gates, n.g)
	}
	q.dispatchLocked(gates, now)
	for _, g := range gates {
		q.placeLocked(g, now)
	}
}

// ungrantLocked returns the slots of a granted w that its caller gave up.
func (q *Queue) ungrantLocked(w *waiter, now time.Time) {
	gates := make([]*gate, 0, len(w.needs))
	for _, n := range w.needs {
		q.addRunning(n.g, -1)
		gates = append(gates, n.g)
	}
	w.granted = false
	q.dispatchLocked(gates, now)
	for _, g := range gates {
		q.placeLocked(g, now)
	}
}

// await blocks until w is granted, rejected, out of budget or ctx is done.
// timeoutErr is returned when the budget runs out.
func (q *Queue) await(ctx context.Context, w *waiter, budget time.Duration, timeoutErr func() error) error {
	budgetTimer := time.NewTimer(budget)
	defer budgetTimer.Stop()
	var wake *time.Timer
	var wakeC <-chan time.Time
	defer func() {
		if wake != nil {
			wake.Stop()
		}
	}()
	for {
		q.mu.Lock()
		granted, err, at := w.granted, w.err, w.wakeAt
		q.mu.Unlock()
		if granted {
			return nil
		}
		if err != nil {
			return err
		}
		wakeC = nil
		if !at.IsZero() {
			d := time.Until(at)
			if wake == nil {
				wake = time.NewTimer(d)
			} else {
				wake.Reset(d)
			}
			wakeC = wake.C
		} else if wake != nil {
			wake.Stop()
		}
		select {
		case <-w.signal:
		case <-wakeC:
			now := time.Now()
			q.mu.Lock()
			if !w.granted && w.err == nil {
				w.wakeAt = time.Time{}
				gates := make([]*gate, 0, len(w.needs))
				for _, n := range w.needs {
					gates = append(gates, n.g)
				}
				q.dispatchLocked(gates, now)
				q.publishLocked()
			}
			q.mu.Unlock()
		case <-budgetTimer.C:
			if q.abandon(w, false) {
				return nil
			}
			if err := q.rejected(w); err != nil {
				return err
			}
			return timeoutErr()
		case <-ctx.Done():
			q.abandon(w, true)
			if err := q.rejected(w); err != nil {
				return err
			}
			return ctx.Err()
		}
	}
}

func (q *Queue) rejected(w *waiter) error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return w.err
}

// abandon takes w out of the queues. If w was granted meanwhile, it keeps
// the grant (returns true) unless undo is set, in which case the slots are
// given back.
func (q *Queue) abandon(w *waiter, undo bool) bool {
	now := time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	defer q.publishLocked()
	switch {
	case w.err != nil:
		return false
	case w.granted && !undo:
		return true
	case w.granted:
		q.ungrantLocked(w, now)
	default:
		q.dequeueLocked(w, now)
	}
	return false
}

// noteLocked records an event of kind about g at now, with g's state as it
// is, for [Queue.unlock] to hand to OnChange. q.mu must be held for writing.
func (q *Queue) noteLocked(kind EventKind, g *gate, now time.Time, err error) {
	if q.cfg.OnChange == nil {
		return
	}
	if now.IsZero() {
		now = time.Now()
	}
	e := Event{Kind: kind, Key: g.key, At: now, Running: g.running, Waiting: g.waiters.Len(), Err: err}
	if g.blockedUntil.After(now) {
		e.Until = g.blockedUntil
	}
	e.Removed = kind == EventRemoved
	q.pend = append(q.pend, e)
}

// unlock releases q.mu for writing, then hands the events recorded under it
// to OnChange, in order.
func (q *Queue) unlock() {
	q.publishLocked()
	if len(q.pend) == 0 {
		q.mu.Unlock()
		return
	}
	events := q.pend
	q.pend = nil
	q.mu.Unlock()
	for _, e := range events {
		q.cfg.OnChange(e)
	}
}

// note records one event and hands it to OnChange at once. q.mu must not
// be held.
func (q *Queue) note(kind EventKind, g *gate, now time.Time, err error) {
	if q.cfg.OnChange == nil {
		return
	}
	q.mu.Lock()
	q.noteLocked(kind, g, now, err)
	q.unlock()
}

// Acquire waits until a request on key may start and returns the function
// that frees its slot; calling release more than once is harmless. A
// request is refused at once with an [*Error] coded RATE_LIMIT_QUEUE_FULL
// (matching [ErrQueueFull], HTTP 429) when MaxQueueDepth requests already
// wait on key; it gives up with RATE_LIMIT_QUEUE_TIMEOUT (matching
// [ErrQueueTimeout], HTTP 429) after MaxQueueWait, and with ctx.Err() when
// ctx is done first (or already). A refused or abandoned request leaves no slot or queue
// entry behind. Waiters are served in FIFO order. Errors may be shared
// between callers and must not be modified.
//
// Acquire does not bound the run itself; see [Queue.Do] and
// [Queue.ExecutionContext].
func (q *Queue) Acquire(ctx context.Context, key string) (release func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := &q.defaults
	var own limits
	if !q.built || q.cfg.Overrides != nil {
		own = q.settingsFor(key)
		s = &own
	}
	q.mu.Lock()
	g := q.gates[key]
	// The common case: a known key with nothing waiting, nothing about it
	// depending on the clock, and room under its cap.
	if g == nil || g.waiters.Len() > 0 || g.clocked(s) ||
		(s.MaxConcurrency > 0 && g.running >= s.MaxConcurrency) {
		return q.acquireSlow(ctx, key, g, s)
	}
	g.cap, g.spacing = s.MaxConcurrency, 0 // what apply does here: no rate, no spacing
	q.addRunning(g, 1)
	q.touchLocked(g)
	// What placeLocked does for a busy gate, written out: this is the path
	// BenchmarkAcquireRelease measures.
	if g.hot || g.blockPos != 0 {
		q.placeLocked(g, time.Time{})
	} else if !g.isBusy {
		g.isBusy = true
		q.keys.busy++
	}
	release = q.oneTicketLocked(g)
	q.publishLocked()
	q.mu.Unlock()
	return release, nil
}

// acquireSlow is Acquire past its common case, with q.mu held for writing
// and g the key's gate or nil.
func (q *Queue) acquireSlow(ctx context.Context, key string, g *gate, sp *limits) (release func(), err error) {
	s := *sp
	// Reading the clock is skipped when nothing about the key depends on it.
	var now time.Time
	if g == nil || g.clocked(&s) {
		now = time.Now()
		if g = q.gateLocked(key, now); g == nil {
			e := q.keysFullLocked(key, now)
			q.unlock()
			return nil, e
		}
	}
	g.apply(s, now)
	q.heatLocked(g) // apply may have set or dropped a limiter or a spacing
	if s.MaxQueueDepth > 0 && g.waiters.Len() >= s.MaxQueueDepth {
		e := g.fullErr
		if e == nil || e.Depth != s.MaxQueueDepth {
			e = newError(CodeQueueFull, key)
			e.Depth = s.MaxQueueDepth
			g.fullErr = e
		}
		q.noteLocked(EventQueueFull, g, now, e)
		q.unlock()
		return nil, e
	}
	if g.waiters.Len() == 0 && g.readyNow(s.MaxConcurrency, true, now) {
		q.addRunning(g, 1)
		if now.IsZero() {
			q.touchLocked(g)
		} else {
			g.lastUse = now
			g.start(now)
		}
		q.placeLocked(g, now)
		release = q.oneTicketLocked(g)
		q.unlock()
		return release, nil
	}
	if now.IsZero() {
		now = time.Now()
	}
	w := &waiter{needs: []need{{g: g, cap: s.MaxConcurrency}}, rated: true, signal: make(chan struct{}, 1)}
	q.enqueueLocked(w)
	q.dispatchLocked([]*gate{g}, now)
	q.unlock()
	err = q.await(ctx, w, s.MaxQueueWait, func() error {
		e := newError(CodeQueueTimeout, key)
		e.Budget = s.MaxQueueWait
		q.note(EventQueueTimeout, g, time.Now(), e)
		return e
	})
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	release = q.oneTicketLocked(g)
	q.mu.Unlock()
	return release, nil
}

// clocked reports whether admitting a request on g under s depends on the
// time: a rate limit, a spacing, a reservoir or a block.
func (g *gate) clocked(s *limits) bool {
	return s.RequestsPerMinute > 0 || s.MinSpacing > 0 || g.rpm > 0 || g.learned > 0 ||
		g.resMax > 0 || !g.blockedUntil.IsZero()
}

// TryAcquireAt takes a slot on key if a request may start at now without
// waiting, and reports whether it did. It never queues, and calling release
// more than once is harmless.
func (q *Queue) TryAcquireAt(key string, now time.Time) (release func(), ok bool) {
	s := q.settingsFor(key)
	q.mu.Lock()
	g := q.gateLocked(key, now)
	if g == nil {
		q.keysFullLocked(key, now)
		q.unlock()
		return nil, false
	}
	g.apply(s, now)
	q.heatLocked(g) // apply may have set or dropped a limiter or a spacing
	if g.waiters.Len() > 0 || !g.readyNow(s.MaxConcurrency, true, now) {
		q.placeLocked(g, now) // apply may have ended a block
		q.unlock()
		return nil, false
	}
	g.refill(now)
	q.addRunning(g, 1)
	g.lastUse = now
	g.start(now)
	q.placeLocked(g, now)
	release = q.oneTicketLocked(g)
	q.unlock()
	return release, true
}
