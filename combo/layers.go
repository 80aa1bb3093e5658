package combo

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/routeguard/routeguard"
	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lockout"
	"github.com/routeguard/routeguard/queue"
	"github.com/routeguard/routeguard/restate"
	"github.com/routeguard/routeguard/watchdog"
)

// This file is the only place that speaks each layer's language: it asks
// them before dispatch and translates every outcome into their inputs.

// queueKey is the admission key of a target: its connection, else its
// provider.
func queueKey(t *Target) string {
	if t.Connection != "" {
		return t.Connection
	}
	return t.Provider
}

// exclusion asks every layer about t, in the fixed order: breaker, provider
// gate, model lockout, connection, per-request exhaustion, tool limit, lease,
// admission, then the user's Config.Layers in order. The first refusal names the exclusion: it is written to x and
// exclusion reports true. It allocates nothing.
func (r *Router) exclusion(t *Target, st *reqState, now time.Time, x *Exclusion) bool {
	cfg := &r.cfg
	// The breaker is asked for every target: its lookup costs less than
	// remembering its answers over a screening (BenchmarkEligibilityAndOrder).
	if b := cfg.Breakers; b != nil {
		if s, wait := b.StateAt(t.Provider, now); s == breaker.Open {
			return exclude(x, t, ReasonCircuitOpen, "", wait)
		}
	}
	if g := cfg.Gate; g != nil {
		if until, blocked := g.BlockedUntilAt(t.Provider, t.Connection, now); blocked {
			return exclude(x, t, ReasonProviderCooldown, "", until.Sub(now))
		}
	}
	if l := cfg.Lockouts; l != nil && t.Model != "" {
		if until, reason, locked := l.LockedAt(t.Provider, t.Connection, t.Model, now); locked {
			return exclude(x, t, ReasonModelLockout, string(reason), until.Sub(now))
		}
	}
	if c := cfg.Cooldowns; c != nil && t.Connection != "" {
		s := c.StatusAt(t.Connection, now)
		switch {
		case s.State == cooldown.Cooling:
			return exclude(x, t, ReasonConnectionCooldown, s.Reason, s.Until.Sub(now))
		case s.State.Terminal():
			var wait time.Duration
			if s.Until.After(now) {
				wait = s.Until.Sub(now)
			}
			return exclude(x, t, ReasonUnavailable, s.State.String(), wait)
		}
	}
	if st.exh.skipped(t) {
		return exclude(x, t, ReasonExhausted, "", 0)
	}
	if tl := cfg.ToolLimits; tl != nil && !tl.Allows(t.Provider, t.Model, st.req.Tools, now) {
		return exclude(x, t, ReasonToolLimit, "", 0)
	}
	if m := cfg.Leases; m != nil && st.req.Lease == nil && t.Connection != "" {
		if until, held, err := m.HeldAt(st.context(), t.Connection, now); err == nil && held {
			return exclude(x, t, ReasonLeaseHeld, "", until.Sub(now))
		}
	}
	if q := cfg.Queue; q != nil {
		if q.CheckAt(queueKey(t), now) == queue.Refuse {
			return exclude(x, t, ReasonQueueFull, "", 0)
		}
	}
	if len(cfg.Layers) == 0 {
		return false
	}
	return r.layerExclusion(t, now, x)
}

// exclude fills x with t's exclusion and returns true. It is kept out of
// line: a refusal is the rare case, and inlined at every refusal it would
// swell exclusion's frame, which every candidate pays for.
//
//go:noinline
func exclude(x *Exclusion, t *Target, reason Reason, detail string, wait time.Duration) bool {
	*x = Exclusion{Provider: t.Provider, Connection: t.Connection, Model: t.Model,
		Reason: reason, Detail: detail, RetryAfter: wait}
	return true
}

// breakerState reports the provider's breaker state for strategies.
func (r *Router) breakerState(provider string) breaker.State {
	if r.cfg.Breakers == nil {
		return breaker.Closed
	}
	s, _ := r.cfg.Breakers.StateAt(provider, r.now())
	return s
}

// handle is what one attempt holds: the breaker's report function, the
// admission slot and the lease holder to fence with.
type handle struct {
	t       *Target
	now     func() time.Time // the router's clock; nil is the wall clock
	done    func(breaker.Report)
	release func()
	slot    queue.Grant // the strategy's per-target slot (TargetSlotter)
	at      time.Time   // the clock's reading at the breaker's admission, the last step of begin
}

// admittedAt is the clock's reading at the end of begin's admission; zero
// when begin read none (no breaker) or refused (a nil handle).
func (h *handle) admittedAt() time.Time {
	if h == nil {
		return time.Time{}
	}
	return h.at
}

// report tells the breaker the outcome, once.
func (h *handle) report(o breaker.Outcome) {
	h.reportDetail(breaker.Report{Outcome: o})
}

// reportDetail tells the breaker the outcome with its detail, once.
func (h *handle) reportDetail(r breaker.Report) {
	if h.done != nil {
		if r.At.IsZero() && h.now != nil {
			r.At = h.now() // the breaker measures on the router's clock
		}
		h.done(r)
		h.done = nil
	}
}

// abandon ends an attempt the caller gave up on: nothing is learned.
func (h *handle) abandon() {
	h.report(breaker.Ignored)
	h.releaseSlot()
}

func (h *handle) releaseSlot() {
	if h.release != nil {
		h.release()
		h.release = nil
	}
	h.slot.Release()
	h.slot = queue.Grant{}
}

// begin takes what an attempt needs: an admission slot (waiting if the queue
// says so), the strategy's per-target slot (see [TargetSlotter]), a fresh lease fence after those
// waits, and the breaker's admission. It returns a skip when a layer refuses
// the target now, and an error when the caller's context ended or the lease
// is no longer valid.
func (r *Router) begin(ctx context.Context, t *Target, st *reqState) (*handle, *Exclusion, error) {
	req, set := st.req, st.set
	h := st.newHandle()
	h.t, h.now = t, r.cfg.Now
	skip := func(reason Reason, detail string, wait time.Duration) (*handle, *Exclusion, error) {
		h.releaseSlot()
		return nil, &Exclusion{Provider: t.Provider, Connection: t.Connection, Model: t.Model,
			Reason: reason, Detail: detail, RetryAfter: wait}, nil
	}
	if q := r.cfg.Queue; q != nil {
		release, err := q.Acquire(ctx, queueKey(t))
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			return skip(ReasonQueueFull, queueCode(err), 0)
		}
		h.release = release
		if slots, ok := st.strat.(TargetSlotter); ok {
			// The connection's cap, else the combo's per-model concurrency.
			limit := t.MaxConcurrent
			if limit <= 0 {
				limit = set.ConcurrencyPerModel
			}
			g, err := q.AcquireMany(ctx, []queue.Need{{Key: slots.TargetSlot(t), Cap: limit}},
				queue.ManyOptions{Timeout: set.QueueTimeout, MaxQueue: set.QueueDepth})
			if err != nil {
				if ctx.Err() != nil {
					h.releaseSlot()
					return nil, nil, ctx.Err()
				}
				return skip(ReasonQueueFull, queueCode(err), 0)
			}
			h.slot = g
		}
	}
	if req.Lease != nil && r.cfg.Leases != nil {
		if err := r.fence(ctx, req, t.Connection); err != nil {
			h.releaseSlot()
			return nil, nil, err
		}
	}
	if b := r.cfg.Breakers; b != nil {
		h.at = r.nowFrom(st.deadline)
		done, err := b.AllowReportAt(t.Provider, h.at)
		if err != nil {
			var be *breaker.Error
			wait := time.Duration(0)
			if errors.As(err, &be) {
				wait = be.RetryAfter
			}
			return skip(ReasonCircuitOpen, "", wait)
		}
		h.done = done
	}
	return h, nil, nil
}

func queueCode(err error) string {
	var qe *queue.Error
	if errors.As(err, &qe) {
		return qe.Code
	}
	return err.Error()
}

// holder is the lease holder a request presents.
func holder(c *LeaseClaim) lease.Holder {
	return lease.Holder{Owner: lease.HashOwner(c.Owner), APIKeyID: c.APIKeyID, Generation: uint64(c.Generation)}
}

// fence checks the request's lease against conn.
func (r *Router) fence(ctx context.Context, req *Request, conn string) error {
	return r.cfg.Leases.FenceAt(ctx, holder(req.Lease), conn, r.now())
}

// checkLease validates the request's lease before anything is sent and
// narrows the candidates to the leased connection. A stale or unknown lease
// is refused here, before any upstream call.
func (r *Router) checkLease(req *Request, st *reqState, now time.Time) error {
	ctx := st.context()
	if req.Lease == nil || r.cfg.Leases == nil {
		return nil
	}
	l, err := r.cfg.Leases.StatusAt(ctx, holder(req.Lease), now)
	if err != nil {
		return err
	}
	if err := r.cfg.Leases.FenceAt(ctx, holder(req.Lease), l.Connection, now); err != nil {
		return err
	}
	kept := st.all[:0]
	for _, t := range st.all {
		if t.Connection == l.Connection {
			kept = append(kept, t)
		}
	}
	st.all = kept
	return nil
}

// classifier returns the configured classifier.
func (r *Router) classifier() *restate.Classifier {
	if r.cfg.Classifier != nil {
		return r.cfg.Classifier
	}
	return defaultClassifier
}

// defaultClassifier classifies for routers without a configured
// classifier: the built-in tables and the default restate.Config.
var defaultClassifier = &restate.Classifier{}

// authClass reads a target's credential class; an unknown word is
// routeguard.Unknown.
func authClass(s string) routeguard.Class {
	c, _ := routeguard.ParseClass(s)
	return c
}

// fail restates and classifies a failed attempt, then tells every layer:
// breaker, provider gate, connection cooldown, model lockout and the
// request's exhaustion sets.
func (r *Router) fail(st *reqState, h *handle, rp reply, now time.Time) *failure {
	t, msg := h.t, ""
	if rp.err != nil {
		msg = rp.err.Error()
	}
	v := r.classifier().ClassifyAt(restate.Response{
		Provider: t.Provider, Model: t.Model, Auth: authClass(t.AuthClass),
		Status: rp.status, Header: rp.header, Body: rp.body, Message: msg,
	}, now)
	f := r.failWith(st, h, v, rp, now)
	if req := st.req; req != nil && r.learnToolLimit(t, req.Tools, rp.status, rp.body, now) {
		// Too many tools for this target only: another may take them.
		f.fallback = true
		f.Reason = string(ReasonToolLimit)
	}
	return f
}

// failWith feeds a verdict to every layer. A bad stream (cut by the
// watchdog, empty, or ended early before its first useful output) or a
// plain answer whose body broke off is evidence about this model on this
// connection only: it locks the exact provider/connection/model and neither
// cools the connection nor marks it exhausted for the request, so the
// connection's other models keep serving.
func (r *Router) failWith(st *reqState, h *handle, v restate.Verdict, rp reply, now time.Time) *failure {
	t, header, body, badStream := h.t, rp.header, rp.body, rp.badStream
	status := v.Status
	text := string(body)
	breakerOpen := header.Get("X-Omniroute-Provider-Breaker") == "open" ||
		strings.Contains(text, breaker.CodeOpen)

	// Breaker: only provider-level statuses count.
	outcome := breaker.Classify(status, nil, nil)
	if v.SkipProviderBreaker || breakerOpen {
		outcome = breaker.Ignored
	}
	h.reportDetail(breaker.Report{Outcome: outcome, Kind: breakerKind(v), Conn: t.Connection,
		Network: v.Status == 0 || rp.network, At: now}) // no answer arrived, or it broke off
	h.releaseSlot()
	if g := r.cfg.Gate; g != nil && outcome == breaker.Failure {
		g.RecordFailureAt(t.Provider, t.Connection, now)
	}
	if q := r.cfg.Queue; q != nil && header != nil {
		q.LearnAt(queueKey(t), status, header, now)
	}

	terminal, modelScoped := v.Terminal, v.ModelScoped
	if badStream {
		if l := r.cfg.Lockouts; l != nil && t.Model != "" {
			l.RecordFailureAt(lockout.Failure{Provider: t.Provider, Connection: t.Connection, Model: t.Model,
				Status: status, Scope: lockout.ScopeExact}, now)
		}
	} else if (v.ShouldFallback || terminal) && !breakerOpen {
		if c := r.cfg.Cooldowns; c != nil && t.Connection != "" && (terminal || !modelScoped) {
			c.FailAt(t.Connection, cooldownFailure(v, text), now)
		}
		if l := r.cfg.Lockouts; l != nil && t.Model != "" && !terminal {
			l.RecordFailureAt(lockoutFailure(t, v), now)
		}
	}
	if !badStream {
		st.exh.apply(t, attemptFacts{
			Status: status, Reason: string(v.Reason), CreditsExhausted: v.CreditsExhausted,
			DailyQuota: v.DailyQuota, RequestScoped: v.RequestScoped,
			BreakerOpen: breakerOpen, TokenLimit: v.TokenLimit, EmptyAnswer: v.EmptyAnswer,
			PerModelQuota: r.perModelQuota(t),
		})
	}

	f := &failure{fallback: v.ShouldFallback || terminal || badStream}
	f.Status = status
	f.Header = header
	f.Body = body
	f.Reason = string(v.Reason)
	f.Err = rp.err
	if f.Status == 0 {
		f.Status = http.StatusBadGateway
	}
	f.RetryAfter = v.ClientRetryAfter
	r.log.Debug("combo: attempt failed", "target", t.String(), "status", status, "reason", v.Reason)
	return f
}

// perModelQuota reports whether t's provider keeps quotas per model.
func (r *Router) perModelQuota(t *Target) bool {
	if r.cfg.PerModelQuota != nil {
		return r.cfg.PerModelQuota(t.Provider, t.Model)
	}
	return defaultPerModelQuota(t.Provider, t.Model)
}

// breakerKind is the breaker's kind of a failure: it chooses the open time
// when the breaker's profile has per-kind hints on.
func breakerKind(v restate.Verdict) breaker.Kind {
	switch v.Reason {
	case restate.ReasonRateLimit:
		return breaker.KindRateLimit
	case restate.ReasonQuotaExhausted:
		return breaker.KindQuotaExhausted
	}
	return breaker.KindTransient
}

// cooldownFailure translates a verdict for the connection cooldown tracker.
func cooldownFailure(v restate.Verdict, text string) cooldown.Failure {
	f := cooldown.Failure{
		Status:           v.Status,
		Reason:           string(v.Reason),
		Code:             v.RuleID,
		Message:          text,
		RetryAfter:       v.Hint.After,
		Permanent:        v.Permanent,
		CreditsExhausted: v.CreditsExhausted,
		Expired:          v.Expired,
		RequestRejected:  v.RequestRejected,
	}
	switch v.Mode {
	case restate.CooldownFixed:
		f.Cooldown = v.Cooldown
	case restate.CooldownBackoff:
		f.Backoff = true
	case restate.CooldownBase:
		f.Base = true
	}
	return f
}

func lockoutFailure(t *Target, v restate.Verdict) lockout.Failure {
	f := lockout.Failure{Provider: t.Provider, Connection: t.Connection, Model: t.Model, Status: v.Status}
	switch v.Scope {
	case restate.ScopeModel:
		f.Scope = lockout.ScopeModel
	case restate.ScopeExact:
		f.Scope = lockout.ScopeExact
	}
	switch {
	case v.Reason == restate.ReasonQuotaExhausted:
		f.Reason = lockout.ReasonQuotaExhausted
		if v.QuotaResetHint > 0 {
			f.Cooldown, f.UpstreamReset = v.QuotaResetHint, true
		}
	case v.Reason == restate.ReasonNotFound:
		f.Reason = lockout.ReasonNotFound
	case v.Reason == restate.ReasonRateLimit:
		f.Reason = lockout.ReasonRateLimited
		if v.Hint.After > 0 {
			f.Cooldown, f.UpstreamReset = v.Hint.After, true
		}
	}
	return f
}

// succeed tells every layer that t served the request.
func (r *Router) succeed(t *Target, req *Request, h *handle, now time.Time) {
	h.reportDetail(breaker.Report{Outcome: breaker.Success, At: now})
	if g := r.cfg.Gate; g != nil {
		g.RecordSuccessAt(t.Provider, t.Connection, now)
	}
	if c := r.cfg.Cooldowns; c != nil && t.Connection != "" {
		c.SucceedAt(t.Connection, now)
	}
	if l := r.cfg.Lockouts; l != nil && t.Model != "" {
		l.DecayAt(t.Provider, t.Connection, t.Model, now)
	}
	if p := r.cfg.Pins; p != nil && t.Connection != "" {
		if key, ok := sessionKey(req); ok {
			p.PinAt(affinity.Request{Provider: t.Provider, Key: key}, t.Connection, now)
		} else {
			p.RecordUseAt(t.Connection, now)
		}
	}
}

// sessionKey turns the request's session string into an affinity key.
func sessionKey(req *Request) (affinity.Key, bool) {
	if req.Session == "" {
		return affinity.Key{}, false
	}
	return affinity.NewKey("session", req.Session)
}

// applyPin lets the session's pin choose the connection of the first
// provider/model group: when the pinned connection serves the first
// target's provider and model, it moves to the front (the targets before it
// shift back by one). A pin whose connection is not among the eligible
// targets of that provider is dropped (a hard rebind), so the session does
// not drift back when that connection recovers: its next success pins the
// connection that served it.
func (r *Router) applyPin(req *Request, ts []*Target, now time.Time) {
	p := r.cfg.Pins
	if p == nil || len(ts) == 0 {
		return
	}
	key, ok := sessionKey(req)
	if !ok {
		return
	}
	first := ts[0]
	pin, ok := p.LookupAt(first.Provider, key, now)
	if !ok {
		return
	}
	held := false
	for i, t := range ts {
		if t.Provider != first.Provider || t.Connection != pin.Connection {
			continue
		}
		if t.Model == first.Model {
			toFront(ts, i)
			return
		}
		held = true
	}
	if !held {
		p.UnpinAt(first.Provider, key, now)
	}
}

// evictPin drops the session's pin after a timeout on the pinned
// connection.
func (r *Router) evictPin(req *Request, t *Target) {
	if r.cfg.Pins == nil || t.Connection == "" {
		return
	}
	if key, ok := sessionKey(req); ok {
		r.cfg.Pins.EvictAt(t.Provider, key, t.Connection, r.now())
	}
}

// cooldownWait decides whether to wait out short transient model lockouts
// instead of giving up, and for how long. Every target of the pool is asked
// again now; the router waits only when every target that is out is held by
// a model lockout with a waitable reason that ends within MaxWait, and then
// only until the earliest of them ends (plus 50 ms, as a lock still holds at
// its end). Any other exclusion (an open breaker, a cooling or terminal
// connection, a failure earlier in the request, a full queue) means the
// answer is given at once.
func (r *Router) cooldownWait(st *reqState, now time.Time) (time.Duration, bool) {
	waits, left, last := st.waits, st.waitLeft, st.last
	cw := st.set.CooldownWait
	if !cw.Enabled() || r.cfg.Lockouts == nil || waits >= cw.maxAttempts() {
		return 0, false
	}
	// A wait that would reach the request's deadline is not worth making:
	// the answer is given at once instead.
	if last != nil && last.Status != http.StatusTooManyRequests {
		return 0, false
	}
	maxWait := cw.maxWait()
	var earliest time.Duration
	for _, t := range st.all {
		var x Exclusion
		if !r.exclusion(t, st, now, &x) {
			continue // free now (tried already in this round): nothing to wait for
		}
		if x.Reason != ReasonModelLockout || !waitableReason(x.Detail) ||
			x.RetryAfter <= 0 || x.RetryAfter+cooldownWaitPad > maxWait {
			return 0, false
		}
		if earliest == 0 || x.RetryAfter < earliest {
			earliest = x.RetryAfter
		}
	}
	if earliest == 0 {
		return 0, false
	}
	wait := earliest + cooldownWaitPad
	if wait > left || !now.Add(wait).Before(st.deadline) {
		return 0, false
	}
	return wait, true
}

// cooldownWaitPad is added to a wait so that the lock has ended when the
// router looks again.
const cooldownWaitPad = 50 * time.Millisecond

// eventBound is the watchdog's bound on one event under c (its
// MaxEventBytes, normalized as the watchdog does): a held stream longer than
// this without a complete event can no longer produce one that counts.
func eventBound(c watchdog.Config) int {
	switch n := c.MaxEventBytes; {
	case n == 0:
		return 1 << 20
	case n < 1<<10:
		return 1 << 10
	case n > 64<<20:
		return 64 << 20
	default:
		return n
	}
}

// holdChunk is how much room a held stream grows by: the read size.
// A read is given at least minHoldRoom bytes, so that the answer's inline
// room (smallBody) serves the first reads of most streams.
const (
	holdChunk   = 4096
	minHoldRoom = 256
)

// holdEventsFactor bounds a held stream that carries complete events but no
// useful output yet (metadata such as a Responses API response.created
// echo): it is held up to this many event bounds.
const holdEventsFactor = 4

// errNoOutput is the error of a stream held back past its bound without
// useful output: an endless line, or endless events that carry nothing.
var errNoOutput = errors.New("combo: stream produced no useful output within its hold bound")

// deadlineCut is the failure commitStream returns when the request's
// deadline cut the stream: the attempt is abandoned, nothing is learned.
var deadlineCut = &failure{}

// commitStream reads a streamed answer until its first useful output (text,
// a tool call or reasoning) and returns what it read, with the rest of the
// body still to come. Until then nothing has reached the caller, so a
// watchdog abort, an error event inside the 200 stream or an early end is a
// failure the router may retry on the next target.
//
// It holds at most the watchdog's event bound (1 MiB by default) before a
// complete event other than a heartbeat arrives, and four times that
// before the first useful output; past either, the stream is a bad stream
// (errNoOutput), never committed on bytes alone.
func (r *Router) commitStream(a *run, st *reqState, resp *http.Response) ([]byte, io.ReadCloser, *failure) {
	t, h := a.t, a.h
	// The router holds everything before the first useful output anyway;
	// holding heartbeats also makes the watchdog parse events whatever its
	// guards, so that the first useful output is seen.
	cfg := r.cfg.Watchdog
	cfg.HoldHeartbeats = true
	if t.ReadinessTimeout != nil {
		cfg.ReadinessTimeout = t.ReadinessTimeout
	}
	body := watchdog.WrapAt(resp.Body, cfg, watchdog.Options{Now: r.cfg.Now}, r.now())
	obs := body.Observer()
	noEvent := eventBound(cfg)
	// The stream is read straight into what it holds: the answer's inline
	// room first, then growing by at least holdChunk.
	held := st.bodyBuf()
	for {
		if cap(held)-len(held) < minHoldRoom {
			held = slices.Grow(held, holdChunk)
		}
		n, err := body.Read(held[len(held):cap(held)])
		held = held[:len(held)+n]
		if n > 0 {
			s := obs.Stats()
			if s.UsefulBytes > 0 || s.ProtectedPhase {
				obs.StopParsing() // committed: no per-chunk parsing beyond what the guards need
				a.firstOutput, a.useful = r.now().Sub(a.start), s.UsefulBytes
				return held, body, nil
			}
			if (len(held) > noEvent && !s.EventSeen) || len(held) > holdEventsFactor*noEvent {
				body.Close()
				a.cut = CutNoOutput
				if f := r.reopenStream(st, a, http.StatusBadGateway, errNoOutput); f != nil {
					return nil, nil, f
				}
				return nil, nil, r.failStream(st, h, http.StatusBadGateway, errNoOutput, r.now())
			}
		}
		if err == nil {
			continue
		}
		if a.deadlineHit() {
			body.Close()
			return nil, nil, deadlineCut
		}
		now := r.now()
		if ev, ok := watchdog.FindErrorEvent(held); ok {
			body.Close()
			v, _ := r.classifier().ClassifyEventAt(restate.Response{
				Provider: t.Provider, Model: t.Model, Auth: authClass(t.AuthClass),
				Status: http.StatusOK, Header: resp.Header,
			}, ev.SSE(), now)
			if v.Status < 400 {
				v.Status = http.StatusBadGateway
			}
			f := r.failWith(st, h, v, reply{header: resp.Header, body: ev.Data}, now)
			f.Err = errors.New("combo: error event in stream: " + ev.Message)
			a.cut = CutErrorEvent
			return nil, nil, f
		}
		if errors.Is(err, io.EOF) && obs.Stats().Events > 0 {
			// A complete answer with no text: pass it on as it is.
			return held, body, nil
		}
		body.Close()
		status := http.StatusBadGateway
		var we *watchdog.Error
		if errors.As(err, &we) || errors.Is(err, context.DeadlineExceeded) {
			status = http.StatusGatewayTimeout
		}
		if errors.Is(err, io.EOF) {
			err = ErrEmptyStream
		}
		a.cut = streamCut(a, we, err)
		if f := r.reopenStream(st, a, status, err); f != nil {
			return nil, nil, f
		}
		return nil, nil, r.failStream(st, h, status, err, now)
	}
}

// streamCut names the cause of a stream that failed before its first
// useful output with err (we when it is the watchdog's), for Attempt.Cut.
func streamCut(a *run, we *watchdog.Error, err error) string {
	switch {
	case we != nil:
		return we.Reason
	case err == ErrEmptyStream: //nolint:errorlint // set just above, never wrapped
		return CutEmptyStream
	case a.timedOut.Load():
		return CutTargetTimeout
	}
	return CutReadError
}

// failStream classifies a bad stream before commit (see failWith).
func (r *Router) failStream(st *reqState, h *handle, status int, err error, now time.Time) *failure {
	return r.failCut(st, h, status, err, false, now)
}

// failCut classifies a bad stream before commit or a plain answer whose
// body broke off (see failWith); network marks a failure the breaker counts
// as a network error.
func (r *Router) failCut(st *reqState, h *handle, status int, err error, network bool, now time.Time) *failure {
	t := h.t
	v := r.classifier().ClassifyAt(restate.Response{
		Provider: t.Provider, Model: t.Model, Auth: authClass(t.AuthClass),
		Status: status, Message: err.Error(),
	}, now)
	f := r.failWith(st, h, v, reply{err: err, badStream: true, network: network}, now)
	f.Err = err
	return f
}
