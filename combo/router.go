package combo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
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
	// Continue, when set, sends the continuation of a committed stream
	// that broke off (see [StreamRecovery]); mid-stream continuation needs
	// it and Settings.StreamRecovery.MidStream.
	Continue ContinueFunc

	// deadline is when the request must have its answer (see
	// Settings.RequestTimeout), on the router's clock; set by Do, and kept
	// by the copies the emergency fallback makes, so that one deadline
	// covers the whole of Do.
	deadline time.Time
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
	Code     string // failure reason given by the classifier, the skip detail, "retry_same_target", or "stream_reopen" / "stream_continuation" (see StreamRecovery)
	Err      error  // transport or stream error, if any
	Start    time.Time
	Duration time.Duration // from Start to the attempt's end: its commit (see Result) or its failure

	// The timings below count from Start, like Duration, so that
	// QueueWait ≤ FirstByte ≤ FirstOutput ≤ Duration when each is set.

	// QueueWait is the time spent waiting for admission: the queue's
	// slot, the strategy's per-target slot and, on the first attempt, the
	// request's connection slot (see Config.NoQuotaShareSlot). For a
	// target skipped at admission it is how long it waited before the
	// refusal.
	QueueWait time.Duration
	// FirstByte is when send returned the answer's status and headers;
	// 0 when it returned none (a transport failure).
	FirstByte time.Duration
	// FirstOutput is when a streamed answer's first useful output (text, a
	// tool call or reasoning) was seen, at which the router committed to
	// it; 0 for a plain answer and for a stream with none.
	FirstOutput time.Duration
	// UsefulBytes counts the useful output bytes a stream had carried by
	// its commit; 0 for a plain answer.
	UsefulBytes int64
	// Cut names why a streamed attempt failed before its first useful
	// output: a watchdog guard's reason (such as "readiness_timeout" or
	// "idle_timeout"), "empty_stream", "error_event", "no_output" (held
	// past its bound without output), "target_timeout" or "read_error";
	// "" for every other attempt.
	Cut string
	// Usage is the token usage a successful answer reported: parsed from a
	// plain answer's body, or from a stream's chunks up to the commit (a
	// stream that reports its usage in its last chunk, after the commit,
	// leaves it zero).
	Usage Usage
}

// Stream cut causes of Attempt.Cut other than the watchdog's reasons.
const (
	CutEmptyStream   = "empty_stream"
	CutErrorEvent    = "error_event"
	CutNoOutput      = "no_output"
	CutTargetTimeout = "target_timeout"
	CutReadError     = "read_error"
)

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
	trigger *Error
}

// ErrEmptyStream is the error of an attempt whose streamed answer ended
// before any event: an empty answer, retried on the next target.
var ErrEmptyStream = errors.New("combo: stream ended before any event")

// ErrRequestTimeout is the error of a request that ran past its deadline
// (Settings.RequestTimeout): Do returns a 504 [*Error] matching it, and the
// body of a committed stream returns it from Read.
var ErrRequestTimeout = errors.New("combo: request timeout")

// ErrBodyTooLarge is the error of an attempt whose non-streamed answer is
// larger than Config.MaxBodyBytes: Do returns a 502 [*Error] matching it.
var ErrBodyTooLarge = errors.New("combo: answer body too large")

// Reasons of the router's own failures, as Error.Reason and Attempt.Code
// give them.
const (
	reasonRequestTimeout = "request_timeout"
	reasonBodyTooLarge   = "body_too_large"
)

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
	timers     sync.Pool // *attemptTimer
	log        *slog.Logger
	remote     remoteSlots // the slots of Config.Slots held now
}

// reqState is the state of one request, reused across requests: what the
// request is, how far it got, and the scratch space of its screenings.
type reqState struct {
	reqCore
	set Settings // the combo's, normalized; set anew by every getState

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
	// timer is a stopped attempt timer kept for the request's next
	// attempt, or the next request's, sparing the router's pool.
	timer *attemptTimer
}

// reqCore is the part of a request's state that putState zeroes: the
// request, as dispatch received it, and how far it got.
type reqCore struct {
	ctx   context.Context // for the layers' store calls
	req   *Request
	strat Strategy
	send  SendFunc
	res   *Result

	deadline  time.Time     // when the request must have its answer, on the router's clock
	budget    int           // attempts left, retries and fallbacks together
	attempted int           // attempts made (admission skips excluded)
	waits     int           // cooldown waits made
	waitLeft  time.Duration // cooldown-wait budget left
	last      *failure      // the latest failure, nil before any
	share     queue.Grant   // a ConnectionSlotter's slot, taken once
	ans       *answer       // the memory of the request's answer
	slotWait  time.Duration // the wait for share, given to the next attempt's QueueWait
	ordered   bool          // the strategy has ordered once
	fresh     bool          // the last screening ran at the current reading and nothing waited since
	reopen    int           // early stream recoveries left for the target tried now
}

// answer is the memory of one request's answer, taken in one allocation:
// the Result, the request as dispatch received it, the first attempt's run
// and handle, the final body, and inline room for a short trail, the
// exclusions and a small plain body. It lives as long as the caller holds
// the Result or the answer's body; nothing in it is reused by another
// request.
type answer struct {
	res      Result
	req      Request
	run      run
	h        handle
	fb       finalBody
	attempts [1]Attempt
	excluded [4]Exclusion
	body     [smallBody]byte
	runUsed  bool // run is taken (by the first attempt)
	hUsed    bool // h is taken (by the first begin)
	bodyUsed bool // body is taken (by the first answer read)
}

// bodyBuf returns room for an answer's body or a stream's held prefix:
// the answer's inline room the first time, nil after (the caller then
// allocates). What is read into it may outlive the attempt (a failure's
// body), so it is never handed out twice.
func (st *reqState) bodyBuf() []byte {
	if ans := st.ans; ans != nil && !ans.bodyUsed {
		ans.bodyUsed = true
		return ans.body[:0]
	}
	return nil
}

// smallBody is the size of a plain answer's body that the answer holds
// inline, without an allocation of its own. It is what keeps the answer,
// with the allocator's 8-byte header, in the 1,792-byte size class
// (TestAnswerFitsItsSizeClass): one byte more costs 256 bytes per request.
const smallBody = 456

// newRun returns a zeroed run for an attempt: the answer's own for the
// first attempt, a fresh one after.
func (st *reqState) newRun() *run {
	if ans := st.ans; ans != nil && !ans.runUsed {
		ans.runUsed = true
		return &ans.run
	}
	return new(run)
}

// newHandle returns a zeroed handle: the answer's own for the first
// admission, a fresh one after.
func (st *reqState) newHandle() *handle {
	if ans := st.ans; ans != nil && !ans.hUsed {
		ans.hUsed = true
		return &ans.h
	}
	return new(handle)
}

// New returns a router over the layers in cfg (see [Config.Normalize]).
// Every layer is optional: New(Config{}) routes with no layer at all.
func New(cfg Config) *Router {
	cfg = cfg.Normalize()
	r := &Router{cfg: cfg, strategies: newStrategies(&cfg), log: cfg.Logger}
	r.states.New = func() any { return new(reqState) }
	return r
}

func (r *Router) now() time.Time {
	if r.cfg.Now != nil {
		return r.cfg.Now()
	}
	return time.Now()
}

// nowFrom reads the router's clock during a request, given an earlier
// reading of it (the request's deadline, which carries the first one).
// On the wall clock it is that reading moved by the monotonic time since
// it: one clock read instead of the two of time.Now, the same instant on
// the monotonic clock that durations and comparisons use.
func (r *Router) nowFrom(anchor time.Time) time.Time {
	if r.cfg.Now != nil || anchor.IsZero() {
		return r.now()
	}
	return anchor.Add(time.Since(anchor))
}

// since is the time on the router's clock since t.
func (r *Router) since(t time.Time) time.Duration {
	if r.cfg.Now != nil {
		return r.cfg.Now().Sub(t)
	}
	return time.Since(t)
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

// getState returns a clean state for req.
func (r *Router) getState(ctx context.Context, req *Request, set Settings, strat Strategy, send SendFunc) *reqState {
	st := r.states.Get().(*reqState)
	st.ctx, st.req, st.set, st.strat, st.send = ctx, req, set, strat, send
	st.budget, st.waitLeft = set.MaxAttempts, set.CooldownWait.Budget
	return st
}

// putState hands st back for reuse: its scratch slices emptied (and cleared
// of what they point to), the rest zeroed but for set, which getState
// overwrites, and pick, which order clears after each use.
func (r *Router) putState(st *reqState) {
	clear(st.all)
	clear(st.eligible)
	clear(st.excluded)
	clear(st.skipped)
	st.all, st.eligible, st.excluded, st.skipped = st.all[:0], st.eligible[:0], st.excluded[:0], st.skipped[:0]
	st.tried = st.tried[:0]
	st.exh.reset()
	st.reqCore = reqCore{}
	r.states.Put(st)
}

// screen fills st.eligible with the targets that pass every layer now, in
// declared order, and st.excluded with the others.
func (r *Router) screen(st *reqState, now time.Time) {
	st.eligible = st.eligible[:0]
	st.excluded = st.excluded[:0]
	var x Exclusion // every refusal writes all of it
	for _, t := range st.all {
		if st.triedBefore(t) {
			continue
		}
		if r.exclusion(t, st, now, &x) {
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

// order runs the strategy over st.eligible, then lets session affinity pick
// the connection: whatever the strategy, a session pinned to a connection of
// the first target's provider and model goes to that connection, unless the
// strategy orders sessions itself (see [SessionOrderer]).
func (r *Router) order(st *reqState, now time.Time) {
	req := st.req
	st.pick = Pick{Combo: req.Combo, Targets: st.eligible, Now: now, Request: req, Signals: r}
	st.strat.Order(&st.pick)
	st.eligible = st.pick.Targets
	st.pick = Pick{}
	if req.Session == "" {
		return
	}
	if so, ok := st.strat.(SessionOrderer); ok && so.OrdersSessions() {
		return
	}
	r.applyPin(req, st.eligible, now)
}

// connectionSlot takes the slot of the first ordered target's connection
// when the strategy holds one per request (see [ConnectionSlotter] and
// Config.NoQuotaShareSlot). It fails open, so its only error is the end of
// ctx. When it waits, it sets *now to the clock's reading after the wait.
func (r *Router) connectionSlot(ctx context.Context, st *reqState, now *time.Time) (queue.Grant, error) {
	q := r.cfg.Queue
	cs, ok := st.strat.(ConnectionSlotter)
	if q == nil || !ok || r.cfg.NoQuotaShareSlot || len(st.eligible) == 0 {
		return queue.Grant{}, nil
	}
	t := st.eligible[0]
	if t.Connection == "" || t.MaxConcurrent <= 0 {
		return queue.Grant{}, nil
	}
	start := r.now()
	st.fresh = false
	g, err := q.AcquireMany(ctx, []queue.Need{{Key: cs.ConnectionSlot(t), Cap: t.MaxConcurrent}},
		queue.ManyOptions{Timeout: st.set.QueueTimeout, MaxQueue: st.set.QueueDepth, FailOpen: true})
	*now = r.now()
	st.slotWait = now.Sub(start)
	if err != nil {
		return queue.Grant{}, err
	}
	if g.Bypassed != nil {
		r.log.Warn("combo: connection slot bypassed", "connection", t.Connection, "err", g.Bypassed)
	}
	return g, nil
}

// Do routes req: it screens the combo's targets through every layer, orders
// the eligible ones with the combo's strategy and dispatches them in order
// through send until one succeeds.
//
// On success the result holds the upstream response, whose body the caller
// must close. Otherwise the error is an [*Error]: a terminal answer when
// nothing could be dispatched (503 [CodeAllCoolingDown], 429
// [CodeQueueFull], 404 [CodeModelNotFound] or 400 [CodeCapabilityMismatch]),
// [CodeUpstream] when attempts were made and failed, [CodeUnknownStrategy]
// for a strategy the router does not know; or a lease error (the request's
// lease is not valid), or the context's error.
//
// When the router is configured with an [EmergencyFallback] and every
// target failed, one of them naming exhausted funds or credits, a request without tools is sent
// once more to the emergency target (see [EmergencyFallback]).
func (r *Router) Do(ctx context.Context, req Request, send SendFunc) (*Result, error) {
	var start time.Time
	if r.cfg.OnRequest != nil || (req.deadline.IsZero() && req.Combo != nil) {
		start = r.now()
	}
	if req.deadline.IsZero() && req.Combo != nil {
		req.deadline = start.Add(req.Combo.Settings.requestTimeout())
	}
	res, err := r.dispatchAt(ctx, req, send, start)
	if err != nil && r.cfg.Emergency != nil {
		res, err = r.emergency(ctx, req, send, res, err)
	}
	if r.cfg.OnRequest != nil {
		r.requestEnd(ctx, &req, res, err, start)
	}
	return res, err
}

// requestEnd tells Config.OnRequest how a request ended.
func (r *Router) requestEnd(ctx context.Context, req *Request, res *Result, err error, start time.Time) {
	e := RequestEnd{Context: ctx, Err: err, Start: start}
	if req.Combo != nil {
		e.Combo = req.Combo.Name
	}
	if res != nil {
		e.Attempts, e.Excluded = res.Attempts, res.Excluded
	}
	if err != nil {
		if ce, ok := errors.AsType[*Error](err); ok {
			if len(ce.Attempts) > 0 {
				e.Attempts = ce.Attempts
			}
			if len(ce.Excluded) > 0 {
				e.Excluded = ce.Excluded
			}
		}
	}
	e.Duration = r.since(start)
	r.cfg.OnRequest(e)
}

// dispatch is Do without the emergency fallback. Each pass screens the
// targets not tried yet, then either waits out a short lockout, gives up,
// or dispatches the eligible ones in the strategy's order (a round).
func (r *Router) dispatch(ctx context.Context, req Request, send SendFunc) (*Result, error) {
	return r.dispatchAt(ctx, req, send, time.Time{})
}

// dispatchAt is dispatch given the clock's reading at its call (Do's), so
// that the first pass reads the clock no second time; zero reads it.
func (r *Router) dispatchAt(ctx context.Context, req Request, send SendFunc, now time.Time) (*Result, error) {
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
	ans := new(answer)
	ans.req = req
	st := r.getState(ctx, &ans.req, c.Settings.norm(), strat, send)
	st.ans = ans
	defer r.putState(st)
	if now.IsZero() {
		now = r.now()
	}
	st.deadline = req.deadline
	if st.deadline.IsZero() {
		st.deadline = now.Add(st.set.RequestTimeout)
	}
	n := len(c.Targets)
	st.all = slices.Grow(st.all[:0], n)[:n]
	for i := range st.all {
		st.all[i] = &c.Targets[i]
	}
	if err := r.checkLease(st.req, st, now); err != nil {
		return &Result{}, err
	}
	st.res = &ans.res
	ans.res.Attempts = ans.attempts[:0:len(ans.attempts)]
	defer func() { st.share.Release() }()
	return st.res, r.passes(ctx, st, now)
}

// passes screens the targets not tried yet, then either waits out a short
// lockout, gives up, or dispatches the eligible ones in the strategy's
// order (a round), until the request has its answer: nil for a success,
// the request's error otherwise. now is the first pass's reading of the
// clock. (Kept apart from dispatchAt, so that dispatchAt has few enough
// returns for its defers to cost nothing.)
func (r *Router) passes(ctx context.Context, st *reqState, now time.Time) error {
	for pass := 0; ; pass++ {
		if pass > 0 {
			now = r.now()
		}
		if !now.Before(st.deadline) {
			return r.requestTimedOut(st)
		}
		r.screen(st, now)
		st.fresh = true
		if len(st.eligible) == 0 {
			if d, ok := r.cooldownWait(st, now); ok {
				if err := sleep(ctx, d); err != nil {
					return err
				}
				st.waited(d)
				continue
			}
			return r.giveUp(st)
		}
		r.order(st, now)
		if !st.ordered {
			st.ordered = true
			var err error
			if st.share, err = r.connectionSlot(ctx, st, &now); err != nil {
				return err
			}
		}
		if done, err := r.round(ctx, st, now); done {
			return err
		}
		if st.budget == 0 {
			return r.giveUp(st)
		}
		// Every eligible target was tried once; loop to screen again, which
		// either finds nothing left (and may wait) or a target freed since.
	}
}

// waited starts a new pass after a cooldown wait of d: every target may be
// tried again.
func (st *reqState) waited(d time.Duration) {
	st.waits++
	st.waitLeft -= d
	st.tried = st.tried[:0]
	clear(st.skipped)
	st.skipped = st.skipped[:0]
}

// round dispatches st.eligible in order. It reports done when the request
// has its answer: a success (nil error), a failure not worth a fallback, or
// the end of ctx. Otherwise every eligible target was tried or the budget
// ran out. now is the clock's reading for the first target; every later
// one reads it again.
func (r *Router) round(ctx context.Context, st *reqState, now time.Time) (done bool, err error) {
	for i, t := range st.eligible {
		if st.budget == 0 {
			break
		}
		if i > 0 {
			now = r.now()
			st.fresh = false
		}
		if !now.Before(st.deadline) {
			return true, r.requestTimedOut(st)
		}
		st.tried = append(st.tried, keyOf(t))
		// The first target was screened at this very reading, with nothing
		// waited for since: the layers' answer then is their answer now.
		if !st.fresh && r.refusedAtDispatch(t, st, now) {
			continue
		}
		st.fresh = false
		resp, fail, err := r.tryTarget(ctx, t, st, now)
		switch {
		case err == ErrRequestTimeout: //nolint:errorlint // the attempt's own marker, never wrapped
			return true, r.requestTimedOut(st)
		case err != nil:
			return true, err
		case resp != nil:
			st.res.Response = resp
			st.res.Target = *t
			r.keepExcluded(st.res, st)
			return true, nil
		case fail == nil: // skipped at admission: no upstream call
			continue
		}
		r.noteFailure(st, fail)
		if !fail.fallback {
			return true, r.giveUp(st)
		}
	}
	return false, nil
}

// refusedAtDispatch asks the layers about t once more, right before its
// attempt: a target refused now is recorded as skipped.
func (r *Router) refusedAtDispatch(t *Target, st *reqState, now time.Time) bool {
	var x Exclusion
	if !r.exclusion(t, st, now, &x) {
		return false
	}
	st.explain(&x)
	st.skipped = append(st.skipped, x)
	st.res.Attempts = append(st.res.Attempts, Attempt{Target: *t, Outcome: OutcomeSkipped,
		Reason: x.Reason, Code: x.Detail, Start: now})
	return true
}

// tryTarget sends the request to t, and again to t after a transport
// failure while same-target retries are left. Every send counts against the
// budget; an attempt skipped at admission gives its count back.
func (r *Router) tryTarget(ctx context.Context, t *Target, st *reqState, now time.Time) (*http.Response, *failure, error) {
	st.budget--
	st.attempted++
	if st.set.StreamRecovery.Early {
		st.reopen = 1
	}
	resp, fail, err := r.attempt(ctx, t, st, 0, now)
	for retries := 1; err == nil && fail != nil && fail.retrySame; retries++ {
		if fail.reopen {
			retries-- // an early stream recovery: at once, and not a transport retry
		} else if err = sleep(ctx, st.set.retryDelay()); err != nil {
			break
		}
		st.budget--
		now = r.now()
		resp, fail, err = r.attempt(ctx, t, st, retries, now)
	}
	if err == nil && resp == nil && fail == nil {
		st.budget++
		st.attempted--
	}
	return resp, fail, err
}

// noteFailure keeps fail as the request's latest failure, and as the
// emergency fallback's trigger when it is the first to name exhausted funds
// or credits.
func (r *Router) noteFailure(st *reqState, fail *failure) {
	st.last = fail
	if r.cfg.Emergency != nil && st.res.trigger == nil {
		if _, ok := r.classifier().EmergencyFallback(fail.Status, fail.Body, st.req.Tools > 0); ok {
			st.res.trigger = &fail.Error
		}
	}
}

// giveUp is the request's answer when nothing more will be tried: the last
// upstream failure, carrying the whole trail, or the terminal answer when
// nothing was dispatched. Either way the result keeps the last screening's
// exclusions.
func (r *Router) giveUp(st *reqState) error {
	if st.last == nil {
		return r.terminal(st.req.Combo, st.attempted, st)
	}
	e := &st.last.Error
	e.Code, e.Combo, e.Attempts = CodeUpstream, st.req.Combo.Name, st.res.Attempts
	r.keepExcluded(st.res, st)
	return e
}

// requestTimedOut is the request's answer when its deadline passed before
// an answer: a 504 upstream failure matching [ErrRequestTimeout], with the
// trail, and the retry time of the last failure if there was one.
func (r *Router) requestTimedOut(st *reqState) error {
	e := &Error{Code: CodeUpstream, Status: http.StatusGatewayTimeout, Combo: st.req.Combo.Name,
		Reason: reasonRequestTimeout, Err: ErrRequestTimeout, Attempts: st.res.Attempts}
	if st.last != nil {
		e.RetryAfter = st.last.RetryAfter
	}
	r.keepExcluded(st.res, st)
	r.log.Warn("combo: request timeout", "combo", e.Combo, "attempts", len(e.Attempts))
	return e
}

// terminal builds the answer for a pool with nothing left to dispatch and
// logs it.
func (r *Router) terminal(c *Combo, attempted int, st *reqState) *Error {
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
	var into []Exclusion
	if ans := st.ans; ans != nil && res == &ans.res {
		into = ans.excluded[:0:len(ans.excluded)]
	}
	res.Excluded = append(into, st.excluded...)
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

// failure is an attempt's classified failure; its Error becomes the
// request's answer when it is the last.
type failure struct {
	Error
	fallback  bool // worth trying another target
	retrySame bool // a transport failure to send to the same target again
	reopen    bool // with retrySame: a stream reopened by early recovery
}

// codeRetrySameTarget is the Attempt.Code of a transport failure that the
// router sends to the same target again.
const codeRetrySameTarget = "retry_same_target"

// canRetry reports whether a transport failure of the next send may be sent
// to the same target again: a retry is left (retries were made so far), the
// attempt budget has room, and the pause ends before ctx's deadline and the
// request's.
func (r *Router) canRetry(ctx context.Context, st *reqState, retries int, now time.Time) bool {
	set := st.set
	if retries >= set.maxRetries() || st.budget <= 0 {
		return false
	}
	end := now.Add(set.retryDelay())
	if !end.Before(st.deadline) {
		return false
	}
	if dl, ok := ctx.Deadline(); ok && !end.Before(dl) {
		return false
	}
	return true
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

// reply is what one attempt got back, as the layers are told of it: an HTTP
// answer (status, header, body) or a transport or stream error.
type reply struct {
	status int
	header http.Header
	body   []byte
	err    error
	// badStream marks a stream cut by the watchdog, empty, or ended early
	// before its first useful output, or a plain answer whose body broke
	// off (see failWith).
	badStream bool
	// network marks a failure the breaker counts as a network error: the
	// answer broke off in transit.
	network bool
}

// run is one attempt in progress: its target, what it holds, its
// statistics and its timer. The timer runs to the per-target timeout, or to
// the request's deadline when that comes first (byDeadline); after a
// stream's commit, to the request's deadline.
type run struct {
	t          *Target
	h          *handle
	ts         *targetStats
	start      time.Time
	cancel     context.CancelFunc // context.WithCancel's; nil when the attempt's context is actx
	actx       attemptCtx         // the attempt's context when the request's can never end
	tm         *attemptTimer      // nil once stopped
	timedOut   atomic.Bool        // set by the timer's goroutine
	byDeadline bool               // the timer runs to the request's deadline
	timers     *sync.Pool         // where tm goes back
	spare      **attemptTimer     // the request's spare-timer slot, where tm goes first; nil once Do has returned

	// The trail entry's timings (see Attempt), since start.
	queueWait, firstByte, firstOutput time.Duration
	useful                            int64
	cut                               string
}

// timing fills at's timings from the attempt and returns it.
func (a *run) timing(at *Attempt) *Attempt {
	at.QueueWait, at.FirstByte, at.FirstOutput = a.queueWait, a.firstByte, a.firstOutput
	at.UsefulBytes, at.Cut = a.useful, a.cut
	return at
}

// stop ends the attempt's timeout and context.
func (a *run) stop() {
	a.stopTimer()
	a.end()
}

// end ends the attempt's context.
func (a *run) end() {
	if a.cancel != nil {
		a.cancel()
		return
	}
	a.actx.cancel()
}

// context returns the attempt's context, derived from ctx, the request's:
// context.WithCancel's when ctx can end, the attempt's own otherwise.
func (a *run) context(ctx context.Context) context.Context {
	if ctx.Done() != nil {
		actx, cancel := context.WithCancel(ctx)
		a.cancel = cancel
		return actx
	}
	a.actx.Context = ctx
	return &a.actx
}

// attemptTimer is the timer of an attempt's timeout, made once with its
// callback and reused by later attempts of the same router. A timer goes
// back to the router's pool only when stopping it proves that its callback
// will not run for the attempt it was armed for.
//
// Timers made inside a testing/synctest bubble run on the bubble's fake
// clock and must not be used outside it, so they are never pooled: a
// goroutine in a bubble reads time.Now without a monotonic clock reading,
// which is how armTimer tells.
type attemptTimer struct {
	t      *time.Timer
	cur    atomic.Pointer[run] // the attempt the timer is armed for
	pooled bool                // the timer goes back to the pool once stopped
}

func (at *attemptTimer) fire() {
	if a := at.cur.Load(); a != nil {
		a.timedOut.Store(true)
		a.end()
	}
}

// armTimer starts a's timeout of d. wall is a reading of time.Now in the
// attempt's goroutine (a.start when the router runs on the wall clock).
func (r *Router) armTimer(st *reqState, a *run, d time.Duration, wall time.Time) {
	pooled := wall != wall.Round(0) // a monotonic reading: outside any synctest bubble
	var at *attemptTimer
	if pooled {
		if at = st.timer; at != nil {
			st.timer = nil
		} else {
			at, _ = r.timers.Get().(*attemptTimer)
		}
	}
	if at == nil {
		at = &attemptTimer{pooled: pooled}
		at.cur.Store(a)
		at.t = time.AfterFunc(d, at.fire)
	} else {
		at.cur.Store(a)
		at.t.Reset(d)
	}
	a.tm, a.timers, a.spare = at, &r.timers, &st.timer
}

// stopTimer ends the attempt's timeout. Once the timer has fired (its
// callback may still be running) it is left to the collector.
func (a *run) stopTimer() {
	at := a.tm
	if at == nil {
		return
	}
	a.tm = nil
	if at.t.Stop() && at.pooled {
		at.cur.Store(nil)
		if a.spare != nil && *a.spare == nil {
			*a.spare = at
		} else {
			a.timers.Put(at)
		}
	}
}

// deadlineHit reports whether the attempt was cut by the request's
// deadline rather than by its per-target timeout.
func (a *run) deadlineHit() bool { return a.byDeadline && a.timedOut.Load() }

// untilDeadline re-arms the timer of a committed stream to the request's
// deadline, left from now. A timer that fired already is left as it is:
// the stream's next Read fails.
func (a *run) untilDeadline(left time.Duration) {
	if a.tm != nil && a.tm.t.Stop() {
		a.byDeadline = true
		a.tm.t.Reset(max(left, 0))
	}
}

// attempt runs one dispatch to t, begun at start (the caller's reading of
// the clock). It returns the response on success, the
// classified failure otherwise, nothing when a layer refused the target at
// admission, or an error when the caller's context ended or the request's
// lease is no longer valid.
//
// retries counts the same-target retries made so far. While another may be
// made (see canRetry, asked only when one is needed), a transport failure
// before any response (not the end of ctx nor of the attempt's timeout) is
// reported to no layer: attempt returns a failure with retrySame set, and
// the caller sends to the same target again after Settings.RetryDelay.
func (r *Router) attempt(ctx context.Context, t *Target, st *reqState, retries int, start time.Time) (*http.Response, *failure, error) {
	h, skip, err := r.begin(ctx, t, st)
	if err != nil {
		return nil, nil, err
	}
	var held *heldSlot
	if skip == nil {
		if held, skip, err = r.takeSlot(ctx, t, h); err != nil {
			return nil, nil, err
		}
	}
	// The breaker's reading ends begin's waits; takeSlot may have waited
	// on its store after it.
	admitted := h.admittedAt()
	if r.cfg.Slots != nil || admitted.IsZero() {
		admitted = r.now()
	}
	queueWait := admitted.Sub(start) + st.slotWait
	st.slotWait = 0
	if skip != nil {
		st.skipped = append(st.skipped, *skip)
		r.record(st, t, &Attempt{Target: *t, Outcome: OutcomeSkipped, Reason: skip.Reason, Code: skip.Detail, Start: start,
			QueueWait: queueWait})
		return nil, nil, nil
	}
	left := st.deadline.Sub(admitted) // after the admission waits
	if left <= 0 {
		h.abandon()
		return nil, nil, ErrRequestTimeout
	}
	a := st.newRun()
	a.t, a.h, a.ts, a.start, a.queueWait = t, h, r.stats.get(t), start, queueWait
	a.ts.requests.Add(1)
	a.ts.inFlight.Add(1)

	// The per-target timeout bounds the attempt up to its commit: the whole
	// of a plain answer, and a stream until its first useful output; the
	// request's deadline bounds it in any case.
	actx := a.context(ctx)
	if held != nil {
		held.setCancel(a.end)
	}
	d := st.set.TargetTimeout
	if left < d {
		d, a.byDeadline = left, true
	}
	wall := start
	if r.cfg.Now != nil {
		wall = time.Now()
	}
	r.armTimer(st, a, d, wall)

	resp, sendErr := st.send(actx, t)
	if sendErr == nil && resp == nil {
		sendErr = errors.New("combo: send returned neither response nor error")
	}
	if sendErr != nil {
		return r.sendFailed(ctx, actx, st, a, sendErr, retries)
	}
	a.firstByte = r.since(start)
	if resp.StatusCode >= 400 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		return r.failed(ctx, st, a, r.fail(st, h, reply{status: resp.StatusCode, header: resp.Header, body: body}, r.now()))
	}
	return r.succeeded(ctx, st, a, resp)
}

// sendFailed ends an attempt whose send returned an error: the caller gave
// up, a same-target retry follows, or the failure is classified.
func (r *Router) sendFailed(ctx, actx context.Context, st *reqState, a *run, sendErr error, retries int) (*http.Response, *failure, error) {
	if ctx.Err() != nil { // the caller gave up: not the target's fault
		return r.abandoned(st, a, ctx.Err())
	}
	if a.deadlineHit() { // the request ran out of time: not the target's fault
		return r.abandoned(st, a, ErrRequestTimeout)
	}
	if actx.Err() == nil && r.canRetry(ctx, st, retries, a.start) {
		// A transport failure before any response, with a same-target
		// retry left: nothing is reported, the caller sends again.
		a.stop()
		a.ts.inFlight.Add(-1)
		a.h.abandon()
		r.record(st, a.t, a.timing(&Attempt{Target: *a.t, Outcome: OutcomeFailed, Code: codeRetrySameTarget, Err: sendErr,
			Start: a.start, Duration: r.now().Sub(a.start)}))
		return nil, &failure{retrySame: true}, nil
	}
	status := http.StatusBadGateway
	if actx.Err() != nil || errors.Is(sendErr, context.DeadlineExceeded) {
		status = http.StatusGatewayTimeout
		r.evictPin(st.req, a.t)
	}
	return r.failed(ctx, st, a, r.fail(st, a.h, reply{status: status, err: sendErr}, r.now()))
}

// abandoned ends an attempt that the caller gave up on (err is ctx's error)
// or that the request's deadline cut (err is [ErrRequestTimeout]): nothing
// is learned, the trail records it, and err is returned.
func (r *Router) abandoned(st *reqState, a *run, err error) (*http.Response, *failure, error) {
	a.stop()
	a.ts.inFlight.Add(-1)
	a.h.abandon()
	at := a.timing(&Attempt{Target: *a.t, Outcome: OutcomeFailed, Err: err, Start: a.start, Duration: r.now().Sub(a.start)})
	if err == ErrRequestTimeout { //nolint:errorlint // the router's own value
		at.Status, at.Code = http.StatusGatewayTimeout, reasonRequestTimeout
	}
	r.record(st, a.t, at)
	return nil, nil, err
}

// failed ends a failed attempt: it records the trail entry and returns the
// failure, or the caller's error when ctx ended meanwhile.
func (r *Router) failed(ctx context.Context, st *reqState, a *run, f *failure) (*http.Response, *failure, error) {
	a.stop()
	a.ts.inFlight.Add(-1)
	a.ts.failures.Add(1)
	now := r.now()
	r.record(st, a.t, a.timing(&Attempt{Target: *a.t, Outcome: OutcomeFailed, Status: f.Status, Code: f.Reason,
		Err: f.Err, Start: a.start, Duration: now.Sub(a.start)}))
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	return nil, f, nil
}

// succeeded commits an answered attempt. A stream is read up to its first
// useful output (a bad stream before that point is a failure), then its
// timer runs to the request's deadline. A plain answer is read whole (a body
// that breaks off is a failure, see bodyFailed) and handed on from memory.
// The body is wrapped to finalize the attempt on Close, and every layer is
// told.
func (r *Router) succeeded(ctx context.Context, st *reqState, a *run, resp *http.Response) (*http.Response, *failure, error) {
	var fb *finalBody
	if ans := st.ans; ans != nil {
		fb = &ans.fb
		*fb = finalBody{}
	} else {
		fb = new(finalBody)
	}
	fb.left = -1
	fb.fin.a = a
	var usage Usage
	switch {
	case isEventStream(resp):
		prefix, body, f := r.commitStream(a, st, resp)
		if f == deadlineCut {
			return r.abandoned(st, a, ErrRequestTimeout)
		}
		if f != nil && f.reopen {
			return r.reopened(st, a, f)
		}
		if f != nil {
			if a.timedOut.Load() {
				r.evictPin(st.req, a.t)
			}
			return r.failed(ctx, st, a, f)
		}
		a.untilDeadline(st.deadline.Sub(r.now()))
		a.spare = nil // the stream's timer stops after Do has returned
		usage = streamUsage(prefix)
		fb.buf.Reset(prefix)
		fb.up, fb.c = body, body
		if resp.ContentLength > 0 {
			fb.left = resp.ContentLength - int64(len(prefix))
		}
		if st.midStream() {
			r.resumable(fb, st, a, prefix, body, resp.ContentLength)
		}
	case hasNoBody(resp):
		a.stopTimer()
		if resp.Body != nil {
			fb.up, fb.c = resp.Body, resp.Body
		}
	default:
		body, err := readWhole(resp.Body, resp.ContentLength, r.cfg.MaxBodyBytes, st.bodyBuf())
		resp.Body.Close()
		if err != nil {
			return r.bodyFailed(ctx, st, a, err)
		}
		a.stopTimer()
		usage = bodyUsage(body)
		fb.buf.Reset(body)
		resp.ContentLength = int64(len(body))
		if h := resp.Header; h != nil && len(h["Content-Length"]) > 0 {
			h.Set("Content-Length", strconv.Itoa(len(body)))
		}
	}
	resp.Body = fb
	now := r.nowFrom(st.deadline)
	r.succeed(a.t, st.req, a.h, now)
	a.ts.success(now.Sub(a.start), now)
	r.record(st, a.t, a.timing(&Attempt{Target: *a.t, Outcome: OutcomeSucceeded, Status: resp.StatusCode,
		Start: a.start, Duration: now.Sub(a.start), Usage: usage}))
	return resp, nil, nil
}

// record appends a trail entry and tells the OnAttempt hook, and every
// user layer of an attempt that was made.
func (r *Router) record(st *reqState, t *Target, a *Attempt) {
	st.res.Attempts = append(st.res.Attempts, *a)
	if r.cfg.OnAttempt != nil {
		r.cfg.OnAttempt(*a)
	}
	if len(r.cfg.Layers) > 0 && a.Outcome != OutcomeSkipped {
		now := a.Start.Add(a.Duration)
		for _, l := range r.cfg.Layers {
			l.Report(t, *a, now)
		}
	}
}

func isEventStream(resp *http.Response) bool {
	var ct string // resp.Header.Get, without canonicalising a canonical key
	if v := resp.Header["Content-Type"]; len(v) > 0 {
		ct = v[0]
	}
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), "text/event-stream")
}

// finalizer ends an attempt exactly once, when the caller closes the body.
type finalizer struct {
	done atomic.Bool
	a    *run
}

func (f *finalizer) finish() {
	if f.done.Swap(true) {
		return
	}
	f.a.stop()
	f.a.ts.inFlight.Add(-1)
	f.a.h.releaseSlot()
}

// hasNoBody reports whether resp has no body to read: none at all, or one
// that HEAD, 204 and 304 answers never carry.
func hasNoBody(resp *http.Response) bool {
	if resp.Body == nil || resp.Body == http.NoBody {
		return true
	}
	if resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified {
		return true
	}
	return resp.Request != nil && resp.Request.Method == http.MethodHead
}

// readWhole reads a plain answer's body whole, up to limit bytes. A body
// that ends before its declared length (declared > 0) is cut short:
// io.ErrUnexpectedEOF. A declared length of 0 or less is read as unknown,
// up to its end. Over limit, the error matches [ErrBodyTooLarge]. The body
// is read into buf when it fits (buf's capacity), else into new memory.
func readWhole(body io.Reader, declared, limit int64, buf []byte) ([]byte, error) {
	if declared > limit {
		return nil, fmt.Errorf("%w: %d bytes declared, limit %d", ErrBodyTooLarge, declared, limit)
	}
	if declared > 0 {
		var b []byte
		if declared <= int64(cap(buf)) {
			b = buf[:declared]
		} else {
			b = make([]byte, declared)
		}
		n, err := io.ReadFull(body, b)
		if err == io.EOF { //nolint:errorlint // io.ReadFull's own value
			err = io.ErrUnexpectedEOF // nothing of a body that was declared
		}
		return b[:n], err
	}
	b := buf[:0]
	if cap(b) == 0 {
		b = make([]byte, 0, 512)
	}
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if int64(len(b)) > limit {
			return nil, fmt.Errorf("%w: over %d bytes", ErrBodyTooLarge, limit)
		}
		if err == io.EOF { //nolint:errorlint // io.Reader's own value
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// bodyFailed ends an attempt whose plain answer could not be read whole.
// The caller's end and the request's deadline learn nothing; an answer over
// Config.MaxBodyBytes ends the request without a fallback and is reported to
// no layer. Any other failure (a short or broken body, the per-target
// timeout while reading it) is a failed attempt that falls back: it is
// treated like a bad stream (see failWith: the exact model is locked, the
// connection is not cooled) and counts for the breaker as a network error,
// with status 502 (504 for the timeout).
func (r *Router) bodyFailed(ctx context.Context, st *reqState, a *run, err error) (*http.Response, *failure, error) {
	switch {
	case ctx.Err() != nil:
		return r.abandoned(st, a, ctx.Err())
	case a.deadlineHit():
		return r.abandoned(st, a, ErrRequestTimeout)
	case errors.Is(err, ErrBodyTooLarge):
		a.h.abandon()
		f := &failure{}
		f.Status, f.Reason, f.Err = http.StatusBadGateway, reasonBodyTooLarge, err
		return r.failed(ctx, st, a, f)
	}
	status, network := http.StatusBadGateway, true
	if a.timedOut.Load() {
		status, network = http.StatusGatewayTimeout, false
		err = fmt.Errorf("combo: per-target timeout while reading the answer: %w", err)
		r.evictPin(st.req, a.t)
	} else {
		err = fmt.Errorf("combo: answer cut short: %w", err)
	}
	return r.failed(ctx, st, a, r.failCut(st, a.h, status, err, network, r.now()))
}

// finalBody is the body of a committed answer: the whole of a plain answer
// read before commit, or a stream's held prefix followed by the rest of the
// stream. It finalizes its attempt on Close. A stream that ends before its
// declared Content-Length returns io.ErrUnexpectedEOF; one cut by the
// request's deadline returns [ErrRequestTimeout]; any other error of the
// upstream is returned as it is, never turned into io.EOF.
type finalBody struct {
	buf  bytes.Reader // the whole plain answer, or a stream's held prefix
	up   io.Reader    // the rest of a stream; nil when everything is in buf
	c    io.Closer    // the upstream body still open; nil when closed at commit
	left int64        // bytes a stream still owes its Content-Length; -1 when unknown
	fin  finalizer
}

func (b *finalBody) Read(p []byte) (int, error) {
	if b.buf.Len() > 0 {
		return b.buf.Read(p)
	}
	if b.up == nil {
		return 0, io.EOF
	}
	n, err := b.up.Read(p)
	if b.left >= 0 {
		b.left -= int64(n)
	}
	switch {
	case err == io.EOF && b.left > 0: //nolint:errorlint // io.Reader's own value
		err = io.ErrUnexpectedEOF
	case err != nil && err != io.EOF && b.fin.a.deadlineHit(): //nolint:errorlint // as above
		err = ErrRequestTimeout
	}
	return n, err
}

func (b *finalBody) Close() error {
	var err error
	if b.c != nil {
		err = b.c.Close()
	}
	b.fin.finish()
	return err
}

// layerExclusion asks the user's layers about t, in order; the first that
// refuses it names the exclusion.
func (r *Router) layerExclusion(t *Target, now time.Time, x *Exclusion) bool {
	for _, l := range r.cfg.Layers {
		reason, until, ok := l.Check(t, now)
		if ok {
			continue
		}
		if reason == "" {
			reason = reasonLayerRefused
		}
		var wait time.Duration
		if until.After(now) {
			wait = until.Sub(now)
		}
		return exclude(x, t, Reason(reason), "", wait)
	}
	return false
}

// reasonLayerRefused is the reason of a user layer's exclusion that names
// none.
const reasonLayerRefused = "layer_refused"

// context is the request's context, for the layers' store calls.
func (st *reqState) context() context.Context {
	if st.ctx == nil {
		return context.Background()
	}
	return st.ctx
}
