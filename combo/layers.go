package combo

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

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
// admission. The first refusal names the exclusion: it is written to x and
// exclusion reports true. It allocates nothing.
func (r *Router) exclusion(t *Target, req *Request, st *reqState, now time.Time, x *Exclusion) bool {
	if r.cfg.Breakers != nil {
		if open, wait := r.breakerOpen(t.Provider, st); open {
			return exclude(x, t, ReasonCircuitOpen, "", wait)
		}
	}
	if g := r.cfg.Gate; g != nil {
		if until, blocked := g.BlockedUntilAt(t.Provider, now); blocked {
			return exclude(x, t, ReasonProviderCooldown, "", until.Sub(now))
		}
		if t.Connection != "" {
			if until, blocked := g.ConnBlockedUntilAt(t.Provider, t.Connection, now); blocked {
				return exclude(x, t, ReasonProviderCooldown, "", until.Sub(now))
			}
		}
	}
	if l := r.cfg.Lockouts; l != nil && t.Model != "" {
		if until, reason, locked := l.LockedAt(t.Provider, t.Connection, t.Model, now); locked {
			return exclude(x, t, ReasonModelLockout, string(reason), until.Sub(now))
		}
	}
	if c := r.cfg.Cooldowns; c != nil && t.Connection != "" {
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
	if tl := r.cfg.ToolLimits; tl != nil && !tl.Allows(t.Provider, t.Model, req.Tools, now) {
		return exclude(x, t, ReasonToolLimit, "", 0)
	}
	if m := r.cfg.Leases; m != nil && req.Lease == nil && t.Connection != "" {
		if until, held, err := m.HeldAt(context.Background(), t.Connection, now); err == nil && held {
			return exclude(x, t, ReasonLeaseHeld, "", until.Sub(now))
		}
	}
	if q := r.cfg.Queue; q != nil {
		if q.CheckAt(queueKey(t), now) == queue.Refuse {
			return exclude(x, t, ReasonQueueFull, "", 0)
		}
	}
	return false
}

// exclude fills x with t's exclusion and returns true.
func exclude(x *Exclusion, t *Target, reason Reason, detail string, wait time.Duration) bool {
	*x = Exclusion{Provider: t.Provider, Connection: t.Connection, Model: t.Model,
		Reason: reason, Detail: detail, RetryAfter: wait}
	return true
}

// breakerOpen reports whether provider's breaker is open and for how long.
// While st.memo is on (one screening pass), each provider's breaker is read
// once and remembered.
func (r *Router) breakerOpen(provider string, st *reqState) (bool, time.Duration) {
	if !st.memo {
		s, wait := r.cfg.Breakers.State(provider)
		return s == breaker.Open, wait
	}
	for _, b := range st.breakers {
		if b.provider == provider {
			return b.open, b.wait
		}
	}
	s, wait := r.cfg.Breakers.State(provider)
	st.breakers = append(st.breakers, breakerMemo{provider, s == breaker.Open, wait})
	return s == breaker.Open, wait
}

// breakerMemo is one provider's breaker as read during a screening pass.
type breakerMemo struct {
	provider string
	open     bool
	wait     time.Duration
}

// breakerState reports the provider's breaker state for strategies.
func (r *Router) breakerState(provider string) BreakerState {
	if r.cfg.Breakers == nil {
		return BreakerClosed
	}
	s, _ := r.cfg.Breakers.State(provider)
	switch s {
	case breaker.Degraded:
		return BreakerDegraded
	case breaker.HalfOpen:
		return BreakerHalfOpen
	case breaker.Open:
		return BreakerOpen
	}
	return BreakerClosed
}

// handle is what one attempt holds: the breaker's report function, the
// admission slot and the lease holder to fence with.
type handle struct {
	done    func(breaker.Report)
	release func()
	slot    queue.Grant // round-robin's per-target slot
}

// report tells the breaker the outcome, once.
func (h *handle) report(o breaker.Outcome) {
	h.reportDetail(breaker.Report{Outcome: o})
}

// reportDetail tells the breaker the outcome with its detail, once.
func (h *handle) reportDetail(r breaker.Report) {
	if h.done != nil {
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
// says so), round-robin's per-target slot, a fresh lease fence after those
// waits, and the breaker's admission. It returns a skip when a layer refuses
// the target now, and an error when the caller's context ended or the lease
// is no longer valid.
func (r *Router) begin(ctx context.Context, t *Target, req *Request, set Settings) (*handle, *Exclusion, error) {
	h := &handle{}
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
		if req.Combo.Strategy == StrategyRoundRobin {
			// The connection's cap, else the combo's per-model concurrency.
			limit := t.MaxConcurrent
			if limit <= 0 {
				limit = set.ConcurrencyPerModel
			}
			g, err := q.AcquireMany(ctx, []queue.Need{{Key: "rr:" + t.String(), Cap: limit}},
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
		done, err := b.AllowReport(t.Provider)
		if err != nil {
			var oe *breaker.OpenError
			wait := time.Duration(0)
			if errors.As(err, &oe) {
				wait = oe.RetryAfter
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
	if req.Lease == nil || r.cfg.Leases == nil {
		return nil
	}
	l, err := r.cfg.Leases.StatusAt(context.Background(), holder(req.Lease), now)
	if err != nil {
		return err
	}
	if err := r.cfg.Leases.FenceAt(context.Background(), holder(req.Lease), l.Connection, now); err != nil {
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
	return restate.Default
}

func authClass(s string) restate.AuthClass {
	switch strings.ToLower(s) {
	case "oauth":
		return restate.AuthOAuth
	case "apikey", "api_key", "api-key":
		return restate.AuthAPIKey
	case "local":
		return restate.AuthLocal
	}
	return restate.AuthUnknown
}

// fail restates and classifies a failed attempt, then tells every layer:
// breaker, provider gate, connection cooldown, model lockout and the
// request's exhaustion sets.
func (r *Router) fail(t *Target, req *Request, h *handle, st *reqState, status int, header http.Header, body []byte, sendErr error, now time.Time) *failure {
	msg := ""
	if sendErr != nil {
		msg = sendErr.Error()
	}
	v := r.classifier().ClassifyAt(restate.Response{
		Provider: t.Provider, Model: t.Model, Auth: authClass(t.AuthClass),
		Status: status, Header: header, Body: body, Message: msg,
	}, now)
	f := r.failWith(t, h, st, v, header, body, sendErr, now)
	if req != nil && r.learnToolLimit(t, req.Tools, status, body, now) {
		// Too many tools for this target only: another may take them.
		f.fallback = true
		f.Reason = string(ReasonToolLimit)
	}
	return f
}

// failWith feeds a verdict to every layer.
func (r *Router) failWith(t *Target, h *handle, st *reqState, v restate.Verdict, header http.Header, body []byte, sendErr error, now time.Time) *failure {
	status := v.Status
	text := string(body)
	breakerOpen := header.Get("X-Omniroute-Provider-Breaker") == "open" ||
		strings.Contains(text, breaker.OpenCode)

	// Breaker: only provider-level statuses count.
	outcome := breaker.Classify(status, nil)
	if v.SkipProviderBreaker || breakerOpen {
		outcome = breaker.Ignored
	}
	h.reportDetail(breaker.Report{Outcome: outcome, Kind: breakerKind(v), Conn: t.Connection,
		Network: v.Kind == restate.KindNetwork})
	h.releaseSlot()
	if g := r.cfg.Gate; g != nil && outcome == breaker.Failure {
		g.RecordFailureAt(t.Provider, t.Connection, now)
	}
	if q := r.cfg.Queue; q != nil && header != nil {
		q.LearnAt(queueKey(t), status, header, now)
	}

	terminal := v.Permanent || v.CreditsExhausted || status == http.StatusUnauthorized ||
		v.Kind == restate.KindRequestRejected
	modelScoped := v.Scope == restate.ScopeModel || v.Scope == restate.ScopeExact ||
		v.Reason == restate.ReasonNotFound || status == http.StatusNotFound || status == http.StatusGone
	if (v.ShouldFallback || terminal) && !breakerOpen {
		if c := r.cfg.Cooldowns; c != nil && t.Connection != "" && (terminal || !modelScoped) {
			c.FailAt(t.Connection, cooldownFailure(v, text), now)
		}
		if l := r.cfg.Lockouts; l != nil && t.Model != "" && !terminal {
			l.RecordFailureAt(lockoutFailure(t, v), now)
		}
	}
	st.exh.apply(t, attemptFacts{
		Status: status, Reason: string(v.Reason), CreditsExhausted: v.CreditsExhausted,
		DailyQuota: v.DailyQuota, RequestScoped: v.Kind == restate.KindBadRequest,
		BreakerOpen: breakerOpen, Text: text,
		TokenLimit:    status == http.StatusTooManyRequests && tokenLimit(text),
		PerModelQuota: r.perModelQuota(t),
	})

	f := &failure{fallback: v.ShouldFallback || terminal}
	f.Status = status
	f.Header = header
	f.Body = body
	f.Reason = string(v.Reason)
	f.Err = sendErr
	if f.Status == 0 {
		f.Status = http.StatusBadGateway
	}
	f.hint = v.Hint.After
	r.log.Debug("combo: attempt failed", "target", t.String(), "status", status, "reason", v.Reason)
	return f
}

// perModelQuota reports whether t's provider keeps quotas per model.
func (r *Router) perModelQuota(t *Target) bool {
	if r.cfg.PerModelQuota != nil {
		return r.cfg.PerModelQuota(t.Provider, t.Model)
	}
	return DefaultPerModelQuota(t.Provider, t.Model)
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
		Expired:          v.Status == http.StatusUnauthorized,
		RequestRejected:  v.Kind == restate.KindRequestRejected,
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
	h.report(breaker.Success)
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

// applyPin moves the session's pinned connection to the front of ts, and
// drops a pin whose connection is not eligible (a hard rebind).
func (r *Router) applyPin(req *Request, ts []*Target, now time.Time) {
	p := r.cfg.Pins
	if p == nil || len(ts) == 0 {
		return
	}
	key, ok := sessionKey(req)
	if !ok {
		return
	}
	provider := ts[0].Provider
	pin, ok := p.LookupAt(provider, key, now)
	if !ok {
		return
	}
	for i, t := range ts {
		if t.Provider == provider && t.Connection == pin.Connection {
			copy(ts[1:i+1], ts[:i])
			ts[0] = t
			return
		}
	}
	p.UnpinAt(provider, key, now)
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

// cooldownWait decides whether to wait out a short transient model lockout
// instead of giving up, and for how long.
func (r *Router) cooldownWait(req *Request, st *reqState, set Settings, waits int, left time.Duration, last *failure, now time.Time) (time.Duration, bool) {
	cw := set.CooldownWait
	l := r.cfg.Lockouts
	if !cw.Enabled() || l == nil || waits >= cw.MaxAttempts {
		return 0, false
	}
	if last != nil && last.Status != http.StatusTooManyRequests {
		return 0, false
	}
	var best time.Duration
	var bestReason lockout.Reason
	for i := range req.Combo.Targets {
		t := &req.Combo.Targets[i]
		until, reason, locked := l.LockedAt(t.Provider, t.Connection, t.Model, now)
		if !locked {
			continue
		}
		if d := until.Sub(now); d > 0 && (best == 0 || d < best) {
			best, bestReason = d, reason
		}
	}
	if best == 0 || !waitableReason(string(bestReason)) {
		return 0, false
	}
	wait := best
	if last != nil && last.hint > wait {
		wait = last.hint
	}
	wait += 50 * time.Millisecond
	if wait > cw.MaxWait || wait > left {
		return 0, false
	}
	return wait, true
}

// maxHold bounds how much of a stream is held back before the first useful
// output; past it the stream is committed anyway.
const maxHold = 256 << 10

// commitStream reads a streamed answer until its first useful output (text,
// a tool call or reasoning) and returns what it read, with the rest of the
// body still to come. Until then nothing has reached the caller, so a
// watchdog abort, an error event inside the 200 stream or an early end is a
// failure the router may retry on the next target.
func (r *Router) commitStream(t *Target, h *handle, st *reqState, resp *http.Response, stopTimer func()) ([]byte, io.ReadCloser, *failure) {
	// The router holds everything before the first useful output anyway;
	// holding heartbeats also makes the watchdog parse events whatever its
	// guards, so that the first useful output is seen.
	cfg := r.cfg.Watchdog
	cfg.HoldHeartbeats = true
	body := watchdog.WrapAt(resp.Body, cfg, watchdog.Options{}, r.now())
	obs := body.Observer()
	var held bytes.Buffer
	buf := make([]byte, 4096)
	for {
		n, err := body.Read(buf)
		held.Write(buf[:n])
		if n > 0 {
			s := obs.Stats()
			if s.UsefulBytes > 0 || s.ProtectedPhase || held.Len() >= maxHold {
				obs.StopParsing() // committed: no per-chunk parsing beyond what the guards need
				stopTimer()
				return held.Bytes(), body, nil
			}
		}
		if err == nil {
			continue
		}
		now := r.now()
		if ev, ok := watchdog.FindErrorEvent(held.Bytes()); ok {
			body.Close()
			v, _ := r.classifier().ClassifyEventAt(restate.Response{
				Provider: t.Provider, Model: t.Model, Auth: authClass(t.AuthClass),
				Status: http.StatusOK, Header: resp.Header,
			}, ev.SSE(), now)
			if v.Status < 400 {
				v.Status = http.StatusBadGateway
			}
			f := r.failWith(t, h, st, v, resp.Header, ev.Data, nil, now)
			f.Err = errors.New("combo: error event in stream: " + ev.Message)
			return nil, nil, f
		}
		if errors.Is(err, io.EOF) {
			// A complete answer with no text: pass it on as it is.
			stopTimer()
			return held.Bytes(), body, nil
		}
		body.Close()
		status := http.StatusBadGateway
		var we *watchdog.Error
		if errors.As(err, &we) || errors.Is(err, context.DeadlineExceeded) {
			status = http.StatusGatewayTimeout
		}
		f := r.fail(t, nil, h, st, status, nil, nil, err, now)
		f.Err = err
		return nil, nil, f
	}
}
