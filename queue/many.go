package queue

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"
)

// Need is one slot that [Queue.AcquireMany] must take: a key and its
// concurrency cap. A cap ≤ 0 means no limit, and the need is ignored.
type Need struct {
	Key string
	Cap int
}

// ManyOptions tune [Queue.AcquireMany].
type ManyOptions struct {
	// Timeout bounds the wait for all slots (SEMAPHORE_TIMEOUT,
	// [ErrSemaphoreTimeout]). ≤ 0 means 15 s; it is clamped to 1 ms..30 s
	// like Config.MaxQueueWait.
	Timeout time.Duration
	// MaxQueue refuses at once (SEMAPHORE_QUEUE_FULL,
	// [ErrSemaphoreQueueFull]) when any needed key already has that many
	// waiters. 0 means unbounded; negative values count as 0.
	MaxQueue int
	// FailOpen lets the request proceed without slots when the queue is
	// full or the wait times out: AcquireMany then returns a Grant that
	// holds nothing, with the reason in Grant.Bypassed, and a nil error.
	FailOpen bool
}

// Grant is the outcome of [Queue.AcquireMany]: slots held on every needed
// key, or, in fail-open mode, no slot and the reason why.
type Grant struct {
	t   *ticket
	gen uint64
	// Bypassed is nil when the grant holds its slots. In fail-open mode it
	// is the refusal or timeout (matching ErrSemaphoreQueueFull or
	// ErrSemaphoreTimeout, or ErrQueueFull with [Error.Keys] set when a
	// needed key could not be kept) after which the request proceeds
	// without slots.
	Bypassed error
}

// Held reports whether the grant holds slots. A grant for no needs holds
// none and is not bypassed.
func (g Grant) Held() bool { return g.t != nil }

// Release frees the grant's slots. Calling it more than once, or on a grant
// that holds nothing, is harmless.
func (g Grant) Release() {
	if g.t != nil {
		g.t.release(g.gen)
	}
}

// AcquireMany takes one slot on every needed key, all or nothing: waiting
// holds no slot on any key, and a request is granted only when it is first
// in every key's queue and every key has room, so callers that need
// overlapping keys cannot deadlock. It applies the keys' concurrency caps
// and blocks, not their rate limits. Needs with a cap ≤ 0 are ignored, a
// key named twice takes the smaller cap, and no needs left gives an empty
// grant at once. The cap of a key is the one given by the latest call.
//
// AcquireMany is the hierarchical semaphore; its refusals carry the
// semaphore codes. It fails with ctx.Err() when ctx is done (or already),
// with an [*Error] coded SEMAPHORE_QUEUE_FULL (matching
// [ErrSemaphoreQueueFull] and [ErrQueueFull], HTTP 429) when a key's queue
// already holds opts.MaxQueue waiters, with SEMAPHORE_TIMEOUT (matching
// [ErrSemaphoreTimeout] and [ErrQueueTimeout], HTTP 429) after
// opts.Timeout, with SEMAPHORE_RESET ([ErrReset]) when a key is reset
// meanwhile, and with RATE_LIMIT_QUEUE_FULL ([ErrQueueFull], [Error.Keys]
// set) when a needed key is new and the queue keeps Config.MaxKeys keys,
// none idle; making room for one needed key never drops another. A failed
// or abandoned call leaves no slot or queue entry behind. With opts.FailOpen, a full queue or a timeout instead gives a
// Grant with Bypassed set and a nil error.
func (q *Queue) AcquireMany(ctx context.Context, needs []Need, opts ManyOptions) (Grant, error) {
	var needBuf [4]Need
	needs = normalizeNeeds(needBuf[:0], needs)
	if len(needs) == 0 {
		return Grant{}, nil
	}
	if err := ctx.Err(); err != nil {
		return Grant{}, err
	}
	timeout := ManyOptions{Timeout: opts.Timeout}.timeout()
	depth := max(opts.MaxQueue, 0)
	now := time.Now()

	q.mu.Lock()
	var gateBuf [4]*gate
	gates := gateBuf[:0]
	// Taking in a new key may sweep, so from the first new key on the
	// gates are held while the call sets up: making room for one needed key
	// never drops another. Known keys alone need no holding.
	holding := false
	fast := true
	for _, n := range needs {
		g := q.gates[n.Key]
		if g == nil {
			if !holding {
				holding = true
				for _, h := range gates {
					h.held++
					q.placeLocked(h, now)
				}
			}
			if g = q.gateLocked(n.Key, now); g == nil {
				q.unholdLocked(gates, now)
				return q.bypassLocked(opts, q.keysError(n.Key), EventQueueFull, []*gate{{key: n.Key}}, now)
			}
		}
		if holding {
			g.held++
			q.placeLocked(g, now)
		}
		gates = append(gates, g)
		g.cap = n.Cap
		if depth > 0 && g.waiters.Len() >= depth {
			if holding {
				q.unholdLocked(gates, now)
			}
			e := newError(CodeSemaphoreQueueFull, n.Key)
			e.Depth = depth
			return q.bypassLocked(opts, e, EventQueueFull, []*gate{g}, now)
		}
		if g.waiters.Len() > 0 || !g.readyNow(n.Cap, false, now) {
			fast = false
		}
	}
	if fast {
		for _, g := range gates {
			q.addRunning(g, 1)
			g.lastUse = now
			if holding {
				g.held--
			}
			q.placeLocked(g, now)
		}
		grant := q.manyTicketLocked(gates)
		q.unlock()
		return grant, nil
	}
	w := &waiter{needs: make([]need, len(needs)), signal: make(chan struct{}, 1)}
	for i, g := range gates {
		w.needs[i] = need{g: g, cap: needs[i].Cap}
	}
	q.enqueueLocked(w)
	if holding {
		q.unholdLocked(gates, now)
	}
	q.dispatchLocked(gates, now)
	q.unlock()

	err := q.await(ctx, w, timeout, func() error {
		e := newError(CodeSemaphoreTimeout, joinKeys(needs))
		e.Budget = timeout
		return e
	})
	if err != nil {
		if e, ok := err.(*Error); ok && e.Code == CodeSemaphoreTimeout {
			q.mu.Lock()
			return q.bypassLocked(opts, e, EventQueueTimeout, gates, time.Now())
		}
		return Grant{}, err
	}
	q.mu.Lock()
	grant := q.manyTicketLocked(gates)
	q.mu.Unlock()
	return grant, nil
}

// unholdLocked ends the hold of an AcquireMany setting up on gates.
func (q *Queue) unholdLocked(gates []*gate, now time.Time) {
	for _, g := range gates {
		g.held--
		q.placeLocked(g, now)
	}
}

// bypassLocked reports err on each of gates, unlocks q.mu, and turns err
// into an empty bypassed grant in fail-open mode.
func (q *Queue) bypassLocked(opts ManyOptions, err *Error, kind EventKind, gates []*gate, now time.Time) (Grant, error) {
	for _, g := range gates {
		q.noteLocked(kind, g, now, err)
	}
	if opts.FailOpen {
		for _, g := range gates {
			q.noteLocked(EventFailOpen, g, now, err)
		}
	}
	q.unlock()
	if !opts.FailOpen {
		return Grant{}, err
	}
	return Grant{Bypassed: err}, nil
}

func (o ManyOptions) timeout() time.Duration {
	return limits{MaxQueueWait: o.Timeout}.normalize().MaxQueueWait
}

// normalizeNeeds appends to dst the needs with a cap, sorted by key, with
// duplicate keys merged to the smaller cap, and returns the result; needs
// is not modified.
func normalizeNeeds(dst, needs []Need) []Need {
	out := dst
	for _, n := range needs {
		if n.Cap > 0 {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b Need) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), cmp.Compare(a.Cap, b.Cap))
	})
	return slices.CompactFunc(out, func(a, b Need) bool { return a.Key == b.Key })
}

func joinKeys(needs []Need) string {
	var b strings.Builder
	for i, n := range needs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n.Key)
	}
	return b.String()
}
