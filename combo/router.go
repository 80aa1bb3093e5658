package combo

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/routeguard/routeguard/queue"
)

// Request is one request to route through a combo.
type Request struct {
	Combo *Combo
	// Session is the client's session key (see affinity.KeyFrom); "" for
	// none. A session is pinned to the connection that served it.
	Session string
	// Lease, when set, restricts the request to the connection its owner
	// leased, and is fenced before every attempt.
	Lease *LeaseClaim
	// Tools is the number of tools the request carries; requests with tools
	// never take the emergency fallback.
	Tools int
	// PromptTokens is an estimate of the request's size, for strategies that
	// filter by context window; 0 when unknown.
	PromptTokens int
}

// LeaseClaim is the lease a request presents.
type LeaseClaim struct {
	Owner      string // the owner token
	APIKeyID   string // the managed key the request authenticated with
	Generation int64
}

// SendFunc sends the request to one target. It must honour ctx, which ends
// when the attempt times out or the caller gives up. A non-nil error means
// no answer was received (a transport failure).
type SendFunc func(ctx context.Context, t *Target) (*http.Response, error)

// Outcome is what happened to a target during a request.
type Outcome string

// Attempt outcomes.
const (
	OutcomeSucceeded Outcome = "succeeded"
	OutcomeFailed    Outcome = "failed"
	OutcomeSkipped   Outcome = "skipped"
)

// Attempt is one entry of a request's trail: a target that was tried or
// skipped, why, and what came of it.
type Attempt struct {
	Target   Target
	Outcome  Outcome
	Reason   Reason // for skipped targets: why
	Status   int    // upstream status after restatement; 0 for transport errors
	Code     string // failure reason given by the classifier, or the skip detail
	Err      error  // transport or stream error, if any
	Start    time.Time
	Duration time.Duration
}

// Result is the answer of a successful request: the upstream response and
// the trail of targets tried on the way.
type Result struct {
	// Response is the winning upstream response. Its body must be closed:
	// closing it releases the attempt's admission slot.
	Response *http.Response
	Target   Target
	Attempts []Attempt
	// Excluded lists the targets that the layers kept out before dispatch
	// (in the screening that led to the answer), each with its reason and
	// recovery time. Targets refused at dispatch are in Attempts, skipped.
	Excluded []Exclusion
	// Emergency reports that the emergency fallback served the request.
	Emergency bool

	// trigger is the first failure that names exhausted funds or credits,
	// for the emergency fallback; nil when none did.
	trigger *UpstreamError
}

// ErrUpstream is matched by [UpstreamError].
var ErrUpstream = errors.New("combo: upstream failed")

// UpstreamError is the answer when every dispatched attempt failed, or a
// failure was not worth a fallback (a malformed request). It carries the
// last upstream answer so a gateway can pass it through.
type UpstreamError struct {
	Status   int // restated status; 502 for a transport failure
	Header   http.Header
	Body     []byte
	Reason   string // classifier reason of the last failure
	Err      error  // transport or stream error of the last attempt, if any
	Attempts []Attempt
}

func (e *UpstreamError) Error() string {
	msg := "combo: upstream failed with status " + http.StatusText(e.Status)
	if e.Reason != "" {
		msg += " (" + e.Reason + ")"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is matches ErrUpstream.
func (e *UpstreamError) Is(target error) bool { return target == ErrUpstream }

// Unwrap returns the transport or stream error of the last attempt.
func (e *UpstreamError) Unwrap() error { return e.Err }

// maxErrorBody bounds how much of a failed answer is read for
// classification and kept for the caller.
const maxErrorBody = 64 << 10

// Router dispatches requests over combos, asking every configured layer
// before each attempt and reporting every outcome back to it. It is safe for
// concurrent use.
type Router struct {
	cfg        Config
	strategies *strategies
	stats      statsTable
	states     sync.Pool // *reqState
	log        *slog.Logger
}

// reqState is the scratch space of one request, reused across requests.
type reqState struct {
	all      []*Target
	eligible []*Target
	excluded []Exclusion
	// skipped are the tried targets that a layer refused at dispatch; screen
	// passes over tried targets, so their exclusions are kept here for the
	// terminal answer.
	skipped []Exclusion
	tried   []targetKey
	exh     exhaustion
	pick    Pick
	// memo and breakers: during screen, each provider's breaker is read
	// once.
	memo     bool
	breakers []breakerMemo
}

// New returns a router over the layers in cfg. Every layer is optional.
func New(cfg Config) *Router {
	r := &Router{cfg: cfg, strategies: newStrategies(&cfg), log: cfg.Logger}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.states.New = func() any { return new(reqState) }
	return r
}

func (r *Router) now() time.Time {
	if r.cfg.Now != nil {
		return r.cfg.Now()
	}
	return time.Now()
}

// Stats returns the router's counters for t.
func (r *Router) Stats(t *Target) Stats {
	var s Stats
	if ts := r.stats.lookup(t); ts != nil {
		s = ts.snapshot()
	}
	s.Breaker = r.breakerState(t.Provider)
	return s
}

func (r *Router) getState() *reqState { return r.states.Get().(*reqState) }

func (r *Router) putState(st *reqState) {
	clear(st.all)
	clear(st.eligible)
	clear(st.excluded)
	clear(st.skipped)
	st.all, st.eligible, st.excluded, st.skipped = st.all[:0], st.eligible[:0], st.excluded[:0], st.skipped[:0]
	st.tried = st.tried[:0]
	st.exh.reset()
	st.pick = Pick{}
	r.states.Put(st)
}

// screen fills st.eligible with the targets that pass every layer now, in
// declared order, and st.excluded with the others.
func (r *Router) screen(req *Request, st *reqState, now time.Time) {
	st.eligible = st.eligible[:0]
	st.excluded = st.excluded[:0]
	st.memo, st.breakers = true, st.breakers[:0]
	defer func() {
		clear(st.breakers)
		st.memo, st.breakers = false, st.breakers[:0]
	}()
	for _, t := range st.all {
		if st.triedBefore(t) {
			continue
		}
		var x Exclusion
		if r.exclusion(t, req, st, now, &x) {
			st.excluded = append(st.excluded, x)
			continue
		}
		st.eligible = append(st.eligible, t)
	}
}

func (st *reqState) triedBefore(t *Target) bool {
	if len(st.tried) == 0 {
		return false
	}
	k := keyOf(t)
	for _, x := range st.tried {
		if x == k {
			return true
		}
	}
	return false
}

// order runs the strategy over st.eligible, then puts the session's pinned
// connection first (for strategies that allow it).
func (r *Router) order(s Strategy, req *Request, st *reqState, now time.Time) {
	st.pick = Pick{Combo: req.Combo, Targets: st.eligible, Now: now, Request: req, Signals: r}
	s.Order(&st.pick)
	st.eligible = st.pick.Targets
	st.pick = Pick{}
	// Priority, fill-first and context-relay keep their declared order; cache-optimized's
	// order beats session stickiness.
	switch req.Combo.Strategy {
	case "", StrategyPriority, StrategyFillFirst, StrategyContextRelay, StrategyCacheOptimized:
		return
	}
	if req.Session != "" {
		r.applyPin(req, st.eligible, now)
	}
}

// quotaShareSlot takes the quota-share slot of the first ordered target's
// connection (see Config.NoQuotaShareSlot). It fails open, so its only error
// is the end of ctx.
func (r *Router) quotaShareSlot(ctx context.Context, req *Request, ordered []*Target, set Settings) (queue.Grant, error) {
	q := r.cfg.Queue
	if q == nil || r.cfg.NoQuotaShareSlot || req.Combo.Strategy != StrategyQuotaShare || len(ordered) == 0 {
		return queue.Grant{}, nil
	}
	t := ordered[0]
	if t.Connection == "" || t.MaxConcurrent <= 0 {
		return queue.Grant{}, nil
	}
	g, err := q.AcquireMany(ctx, []queue.Need{{Key: "qsconn:" + t.Connection, Cap: t.MaxConcurrent}},
		queue.ManyOptions{Timeout: set.QueueTimeout, MaxQueue: set.QueueDepth, FailOpen: true})
	if err != nil {
		return queue.Grant{}, err
	}
	if g.Bypassed != nil {
		r.log.Warn("combo: quota-share slot bypassed", "connection", t.Connection, "err", g.Bypassed)
	}
	return g, nil
}

// Do routes req: it screens the combo's targets through every layer, orders
// the eligible ones with the combo's strategy and dispatches them in order
// through send until one succeeds.
//
// On success the result holds the upstream response, whose body the caller
// must close. Otherwise the error is a [*TerminalError] (nothing could be
// dispatched: 503 all_targets_cooling_down or 404 no_executable_targets), an
// [*UpstreamError] (attempts were made and failed), a lease error (the
// request's lease is not valid), or the context's error.
//
// When the router is configured with an [EmergencyFallback] and every
// target failed, one of them naming exhausted funds or credits, a request without tools is sent
// once more to the emergency target (see [EmergencyFallback]).
func (r *Router) Do(ctx context.Context, req Request, send SendFunc) (*Result, error) {
	res, err := r.dispatch(ctx, req, send)
	if err != nil && r.cfg.Emergency != nil {
		return r.emergency(ctx, req, send, res, err)
	}
	return res, err
}

// dispatch is Do without the emergency fallback.
func (r *Router) dispatch(ctx context.Context, req Request, send SendFunc) (*Result, error) {
	c := req.Combo
	if c == nil || len(c.Targets) == 0 {
		name := ""
		if c != nil {
			name = c.Name
		}
		return &Result{}, terminalError(name, 0, 0, nil)
	}
	strat, err := r.strategies.get(c.Strategy)
	if err != nil {
		return &Result{}, err
	}
	set := c.Settings.Normalize()
	st := r.getState()
	defer r.putState(st)
	for i := range c.Targets {
		st.all = append(st.all, &c.Targets[i])
	}
	if err := r.checkLease(&req, st, r.now()); err != nil {
		return &Result{}, err
	}

	res := &Result{}
	budget := set.MaxAttempts
	waits := 0
	waitLeft := set.CooldownWait.Budget
	var last *failure
	attempted := 0
	var share queue.Grant // quota-share's connection slot, taken once
	defer func() { share.Release() }()
	ordered := false
	for {
		now := r.now()
		r.screen(&req, st, now)
		if len(st.eligible) == 0 {
			if d, ok := r.cooldownWait(&req, st, set, waits, waitLeft, last, now); ok {
				if err := sleep(ctx, d); err != nil {
					return res, err
				}
				waits++
				waitLeft -= d
				st.tried = st.tried[:0]
				clear(st.skipped)
				st.skipped = st.skipped[:0]
				continue
			}
			if last != nil {
				last.Attempts = res.Attempts
				r.keepExcluded(res, st)
				return res, &last.UpstreamError
			}
			return res, r.terminal(c, attempted, st)
		}
		r.order(strat, &req, st, now)
		if !ordered {
			ordered = true
			if share, err = r.quotaShareSlot(ctx, &req, st.eligible, set); err != nil {
				return res, err
			}
		}

		for _, t := range st.eligible {
			if budget == 0 {
				break
			}
			st.tried = append(st.tried, keyOf(t))
			var x Exclusion
			if r.exclusion(t, &req, st, r.now(), &x) {
				st.explain(&x)
				st.skipped = append(st.skipped, x)
				res.Attempts = append(res.Attempts, Attempt{Target: *t, Outcome: OutcomeSkipped,
					Reason: x.Reason, Code: x.Detail, Start: r.now()})
				continue
			}
			budget--
			attempted++
			resp, fail, err := r.attempt(ctx, t, &req, set, st, res, send)
			if err != nil {
				return res, err
			}
			if resp == nil && fail == nil { // skipped at admission: no upstream call
				budget++
				attempted--
				continue
			}
			if resp != nil {
				res.Response = resp
				res.Target = *t
				r.keepExcluded(res, st)
				return res, nil
			}
			last = fail
			if r.cfg.Emergency != nil && res.trigger == nil {
				if _, ok := r.classifier().EmergencyFallback(fail.Status, fail.Body, req.Tools > 0); ok {
					res.trigger = &fail.UpstreamError
				}
			}
			if !fail.fallback {
				last.Attempts = res.Attempts
				r.keepExcluded(res, st)
				return res, &last.UpstreamError
			}
		}
		if budget == 0 {
			if last != nil {
				last.Attempts = res.Attempts
				r.keepExcluded(res, st)
				return res, &last.UpstreamError
			}
			return res, r.terminal(c, attempted, st)
		}
		// Every eligible target was tried once; loop to screen again, which
		// either finds nothing left (and may wait) or a target freed since.
	}
}

// terminal builds the answer for a pool with nothing left to dispatch and
// logs it.
func (r *Router) terminal(c *Combo, attempted int, st *reqState) *TerminalError {
	for i := range st.excluded {
		st.explain(&st.excluded[i])
	}
	te := terminalError(c.Name, len(c.Targets), attempted, st.excluded, st.skipped)
	if attempted == 0 && len(te.Excluded) > 0 {
		r.log.Warn("combo: every target excluded before dispatch — "+te.exclusionList(),
			"combo", c.Name, "terminal_reason", te.TerminalReason, "retry_after", te.RetryAfter)
	}
	return te
}

// keepExcluded copies the exclusions of the last screening into the result.
func (r *Router) keepExcluded(res *Result, st *reqState) {
	if len(st.excluded) == 0 {
		return
	}
	res.Excluded = append([]Exclusion(nil), st.excluded...)
	for i := range res.Excluded {
		st.explain(&res.Excluded[i])
	}
}

// explain fills the skip message of an exclusion by this request's
// exhaustion sets.
func (st *reqState) explain(x *Exclusion) {
	if x.Reason == ReasonExhausted && x.Detail == "" {
		x.Detail, _ = st.exh.skip(&Target{Provider: x.Provider, Connection: x.Connection})
	}
}

// failure is an attempt's classified failure.
type failure struct {
	UpstreamError
	fallback bool          // worth trying another target
	hint     time.Duration // the upstream's retry hint, if any
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// attempt runs one dispatch to t. It returns the response on success, the
// classified failure otherwise, nothing when a layer refused the target at
// admission, or an error when the caller's context ended or the request's
// lease is no longer valid.
func (r *Router) attempt(ctx context.Context, t *Target, req *Request, set Settings, st *reqState, res *Result, send SendFunc) (*http.Response, *failure, error) {
	start := r.now()
	h, skip, err := r.begin(ctx, t, req, set)
	if err != nil {
		return nil, nil, err
	}
	if skip != nil {
		st.skipped = append(st.skipped, *skip)
		r.record(res, Attempt{Target: *t, Outcome: OutcomeSkipped, Reason: skip.Reason, Code: skip.Detail, Start: start})
		return nil, nil, nil
	}
	ts := r.stats.get(t)
	ts.requests.Add(1)
	ts.inFlight.Add(1)

	// The per-target timeout bounds the attempt up to its commit: the whole
	// of a plain answer, and a stream until its first useful output.
	actx, cancel := context.WithCancel(ctx)
	var timedOut atomic.Bool // set by the timer's goroutine
	timer := time.AfterFunc(set.TargetTimeout, func() { timedOut.Store(true); cancel() })
	stopTimer := func() { timer.Stop() }
	failed := func(f *failure, e error) (*http.Response, *failure, error) {
		timer.Stop()
		cancel()
		ts.inFlight.Add(-1)
		ts.failures.Add(1)
		now := r.now()
		r.record(res, Attempt{Target: *t, Outcome: OutcomeFailed, Status: f.Status, Code: f.Reason,
			Err: e, Start: start, Duration: now.Sub(start)})
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, f, nil
	}

	resp, sendErr := send(actx, t)
	if sendErr == nil && resp == nil {
		sendErr = errors.New("combo: send returned neither response nor error")
	}
	if sendErr != nil {
		if ctx.Err() != nil { // the caller gave up: not the target's fault
			timer.Stop()
			cancel()
			ts.inFlight.Add(-1)
			h.abandon()
			r.record(res, Attempt{Target: *t, Outcome: OutcomeFailed, Err: ctx.Err(), Start: start, Duration: r.now().Sub(start)})
			return nil, nil, ctx.Err()
		}
		status := http.StatusBadGateway
		if actx.Err() != nil || errors.Is(sendErr, context.DeadlineExceeded) {
			status = http.StatusGatewayTimeout
			r.evictPin(req, t)
		}
		return failed(r.fail(t, req, h, st, status, nil, nil, sendErr, r.now()), sendErr)
	}

	if resp.StatusCode >= 400 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		return failed(r.fail(t, req, h, st, resp.StatusCode, resp.Header, body, nil, r.now()), nil)
	}

	fin := &finalizer{ts: ts, h: h, cancel: func() { timer.Stop(); cancel() }}
	if isEventStream(resp) {
		prefix, body, f := r.commitStream(t, h, st, resp, stopTimer)
		if f != nil {
			if timedOut.Load() {
				r.evictPin(req, t)
			}
			return failed(f, f.Err)
		}
		resp.Body = &finalBody{r: io.MultiReader(bytes.NewReader(prefix), body), c: body, fin: fin}
	} else {
		resp.Body = &finalBody{r: resp.Body, c: resp.Body, fin: fin}
	}
	now := r.now()
	r.succeed(t, req, h, now)
	ts.success(now.Sub(start), now)
	r.record(res, Attempt{Target: *t, Outcome: OutcomeSucceeded, Status: resp.StatusCode,
		Start: start, Duration: now.Sub(start)})
	return resp, nil, nil
}

func (r *Router) record(res *Result, a Attempt) {
	res.Attempts = append(res.Attempts, a)
	if r.cfg.OnAttempt != nil {
		r.cfg.OnAttempt(a)
	}
}

func isEventStream(resp *http.Response) bool {
	ct := resp.Header.Get("Content-Type")
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), "text/event-stream")
}

// finalizer ends an attempt exactly once, when the caller closes the body.
type finalizer struct {
	once   sync.Once
	ts     *targetStats
	h      *handle
	cancel func()
}

func (f *finalizer) finish() {
	f.once.Do(func() {
		f.cancel()
		f.ts.inFlight.Add(-1)
		f.h.releaseSlot()
	})
}

// finalBody is a response body that finalizes its attempt on Close.
type finalBody struct {
	r   io.Reader
	c   io.Closer
	fin *finalizer
}

func (b *finalBody) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *finalBody) Close() error {
	err := b.c.Close()
	b.fin.finish()
	return err
}

// Config returns the layers the router was built with.
func (r *Router) Config() Config { return r.cfg }
