package restate

import (
	"encoding/binary"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/routeguard/routeguard"
)

// Fixed cooldowns of the classification.
const (
	banCooldown          = 365 * 24 * time.Hour // a banned account (permanent)
	retiredCooldown      = 24 * time.Hour       // a retired model or moved endpoint
	creditsCooldown      = 2 * time.Minute      // credits exhausted or billing suspension
	subscriptionCooldown = time.Hour            // subscription usage limit without a hint
	weeklyCooldown       = 24 * time.Hour       // weekly quota without a reset time
	sessionCooldown      = 5 * time.Hour        // session usage limit
	suspensionWindow     = 120                  // bytes between "suspended" and a billing word
)

// restate applies the restatement rules of provider to one answer. The
// haystack is message + " " + body, lower-cased; markers are substrings.
// A rule applies when status is one of its FromStatuses, a marker occurs
// and no exclude marker does; the result then carries the rule's ToStatus
// and upstream (when > 0) or the rule's default retry time. Otherwise the
// answer passes through unchanged.
func (c *Classifier) restate(provider string, status int, message string, body []byte, upstream time.Duration) restatement {
	st := c.load()
	rules := st.restate[lower(strings.TrimSpace(provider))]
	if len(rules) == 0 {
		return passthrough(status, upstream)
	}
	return st.restateText(rules, status, hay{s: st.haystack(message, body)}, upstream)
}

func passthrough(status int, upstream time.Duration) restatement {
	return restatement{Status: status, FromStatus: status, RetryAfter: max(upstream, 0)}
}

func (st *state) haystack(message string, body []byte) string {
	b := st.bound(body)
	m := st.boundString(message)
	if m == "" {
		return lower(b)
	}
	return lower(m + " " + b)
}

// haystackInto is haystack, written into sc's buffer when the text is
// ASCII (strings.ToLower changes nothing but the letters A–Z there), with
// the text's byte pairs set in sc. The text it returns lives in sc.buf:
// it must not outlive sc's next use.
func (st *state) haystackInto(sc *scratch, message string, body []byte) hay {
	sc.pairs = pairs{}
	b := body[:min(len(body), st.set.MaxScan)]
	m := st.boundString(message)
	n := len(b)
	if m != "" {
		n += len(m) + 1
	}
	if n == 0 {
		return hay{p: &sc.pairs}
	}
	buf := slices.Grow(sc.buf[:0], n)
	if m != "" {
		buf = append(append(buf, m...), ' ')
	}
	buf = append(buf, b...)
	sc.buf = buf
	if !lowerEven(buf, &sc.pairs) {
		// What strings.ToLower does to other text is its own.
		sc.pairs = pairs{}
		text := st.haystack(message, body)
		sc.pairs.add(text)
		return hay{s: text, p: &sc.pairs}
	}
	return hay{s: view(buf), p: &sc.pairs}
}

// lowerEven lower-cases the ASCII text b in place, eight bytes at a time,
// and puts the pairs that start at even offsets of b in p (enough for
// [pairs.mayHold]). It returns false, with b and p in no useful state,
// when b is not ASCII.
func lowerEven(b []byte, p *pairs) bool {
	const (
		ones = 0x0101010101010101
		high = 0x80 * ones
	)
	var seen uint64
	last := ^uint64(0)
	i := 0
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		seen |= w
		// With every byte below 0x80 no sum carries into the next byte:
		// a byte gets its high bit from the first sum when it is ≥ 'A',
		// from the second when it is > 'Z'.
		upper := (w + (0x80-'A')*ones) &^ (w + (0x80-'Z'-1)*ones) & high
		w |= upper >> 2
		binary.LittleEndian.PutUint64(b[i:], w)
		if w == last {
			continue // a run of the same eight bytes sets the same bits
		}
		last = w
		for s := 0; s < 64; s += 16 {
			k := pairBit(byte(w>>s), byte(w>>(s+8)))
			p[k>>6] |= 1 << (k & 63)
		}
	}
	for ; i < len(b); i++ {
		seen |= uint64(b[i])
		b[i] = lowerASCII[b[i]]
		if i%2 == 1 {
			k := pairBit(b[i-1], b[i])
			p[k>>6] |= 1 << (k & 63)
		}
	}
	return seen&high == 0
}

// lowerASCII maps the bytes A–Z to a–z and every other byte to itself.
var lowerASCII = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
		if 'A' <= i && i <= 'Z' {
			t[i] += 'a' - 'A'
		}
	}
	return t
}()

// scratch holds the lower-cased text of one classification and its byte
// pairs, reused across classifications.
type scratch struct {
	buf   []byte
	pairs pairs
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxPooledScratch is the largest text buffer kept for reuse.
const maxPooledScratch = 64 << 10

func putScratch(sc *scratch) {
	if cap(sc.buf) <= maxPooledScratch {
		scratchPool.Put(sc)
	}
}

// view returns b as a string without copying; the caller must not let the
// string outlive b's next change.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func (st *state) restateText(rules []RestateRule, status int, text hay, upstream time.Duration) restatement {
	if strings.TrimSpace(text.s) == "" {
		return passthrough(status, upstream)
	}
	for _, r := range rules {
		if !slices.Contains(r.FromStatuses, status) || !text.any(r.Markers, substring) || text.any(r.Excludes, substring) {
			continue
		}
		ra := r.DefaultRetryAfter
		if upstream > 0 {
			ra = upstream
		}
		return restatement{Status: r.ToStatus, FromStatus: status, RuleID: r.ID, RetryAfter: ra}
	}
	return passthrough(status, upstream)
}

// Classify is shorthand for ClassifyAt(r, time.Now()).
func (c *Classifier) Classify(r Response) Verdict { return c.ClassifyAt(r, time.Now()) }

// ClassifyAt restates r's status and classifies the failure at time now
// (now's location is the local time of daily quotas). A status below 400
// (other than 0) is not a failure and gives a Verdict with the empty Kind,
// ShouldFallback false and no flags; status 0 means no answer arrived (a network error).
//
// The first match wins, in this order:
//
//  1. the gateway's own refusals (no fallback, skip the provider breaker);
//  2. text signals: ban, retired model (404/410), moved endpoint, billing
//     suspension, per-metric quota (429 with a model), credits, daily,
//     weekly, session, subscription, a quota text with a hint, a 403 route
//     refusal, a 403 provider rule of a scope-honouring provider, a 403 on
//     an API key. Credits, daily and subscription need quota signals to be
//     kept: always unless the status is 429 on an API key whose text has
//     no long-period quota wording (Signals.LongPeriod);
//  3. global text rules (skipped on such a 429), then status rules, each
//     refined by a matching provider rule; then a provider rule alone, for
//     any status including 400;
//  4. 432 (subscription) and other 5xx except 501 (server error, backoff);
//  5. 400: request problems (model capacity, no cooldown), high-frequency
//     refusals (rate limit, backoff), else no fallback;
//  6. anything else: fall back with the base cooldown.
//
// Weekly and session limits are tried before the subscription limit, so
// "weekly usage limit reached" is a weekly quota.
//
// The fixed cooldowns of the text signals: a ban 365 days (and Permanent);
// a retired model or a moved endpoint 24 h; exhausted credits or a billing
// suspension 2 min (and CreditsExhausted); a daily quota until the next
// local midnight, at most 24 h; a weekly quota its "resets in" countdown,
// else 24 h; a session limit 5 h; a subscription limit 1 h, or the hint
// where the connection's profile honours hints.
//
// The consumer flags are then set from the outcome, in one place: Expired
// for a 401, RequestRejected for the request_rejected kind, Terminal for
// either or for Permanent or CreditsExhausted; ModelScoped for a model or
// exact rule scope, reason not_found, 404 or 410; RequestScoped for the
// bad_request kind; TokenLimit for a 429 and EmptyAnswer for a 502 whose
// text matches Signals.TokenLimit or Signals.EmptyAnswer.
func (c *Classifier) ClassifyAt(r Response, now time.Time) Verdict {
	if r.Status > 0 && r.Status < 400 {
		return Verdict{Status: r.Status, FromStatus: r.Status, ClientRetryAfter: max(r.RetryAfter, 0), Mode: CooldownNone}
	}
	st := c.load()
	p := lower(strings.TrimSpace(r.Provider))
	// Neither text outlives the call: a Verdict holds no text.
	raw := view(r.Body[:min(len(r.Body), st.set.MaxScan)])
	sc := scratchPool.Get().(*scratch)
	defer putScratch(sc)
	text := st.haystackInto(sc, r.Message, r.Body)

	hint := st.hint(r.Header, raw, text, now)
	upstream := r.RetryAfter
	if upstream <= 0 {
		upstream = hint.After
	}
	rs := passthrough(r.Status, upstream)
	if rules := st.restate[p]; len(rules) > 0 {
		rs = st.restateText(rules, r.Status, text, upstream)
	}
	v := Verdict{Status: rs.Status, FromStatus: rs.FromStatus, RestateRule: rs.RuleID, ClientRetryAfter: rs.RetryAfter, Hint: hint}
	if v.Status > 0 && v.Status < 400 {
		v.Mode = CooldownNone // a rule restated a failure as a success
		return v
	}
	cl := classification{st: st, header: r.Header, auth: r.Auth, model: r.Model, p: p, text: text, now: now}
	if len(r.Structured) > 0 {
		cl.structured = lower(st.bound(r.Structured))
	}
	cl.classify(&v)
	cl.flags(&v)
	return v
}

// flags sets the consumer flags of a failure verdict from its status,
// kind, reason, scope and text. This is the one place where they are
// decided: consumers read the flags and never compare statuses.
func (cl *classification) flags(v *Verdict) {
	sig := &cl.st.t.Signals
	v.Expired = v.Status == 401
	v.RequestRejected = v.Kind == kindRequestRejected
	v.Terminal = v.Permanent || v.CreditsExhausted || v.Expired || v.RequestRejected
	v.ModelScoped = v.Scope == ScopeModel || v.Scope == ScopeExact || v.Reason == ReasonNotFound ||
		v.Status == 404 || v.Status == 410
	v.RequestScoped = v.Kind == kindBadRequest
	v.TokenLimit = v.Status == 429 && cl.text.any(sig.TokenLimit, substring)
	v.EmptyAnswer = v.Status == 502 && cl.text.any(sig.EmptyAnswer, substring)
}

type classification struct {
	st         *state
	header     http.Header
	auth       routeguard.Class
	model      string
	p          string
	text       hay
	structured string
	now        time.Time
}

func (cl *classification) ruleBody() hay {
	if (cl.st.fullText[cl.p] || len(cl.st.op[cl.p]) > 0) && strings.TrimSpace(cl.text.s) != "" {
		return cl.text
	}
	if strings.TrimSpace(cl.structured) != "" {
		return hay{s: cl.structured}
	}
	return cl.text
}

func (cl *classification) rule(status int) (ruleMatch, bool) {
	return cl.st.matchRule(cl.p, status, cl.header, cl.ruleBody(), cl.now)
}

// creditsExempt reports whether the provider's credit phrases are not
// trusted on their own.
func (cl *classification) creditsExempt() bool {
	for _, sub := range cl.st.t.CreditsExempt {
		if sub != "" && strings.Contains(cl.p, lower(sub)) {
			return true
		}
	}
	return false
}

func (cl *classification) scoped() bool {
	return cl.st.scoped[cl.p] || len(cl.st.op[cl.p]) > 0
}

// applyRule records a matched provider rule on v.
func (cl *classification) applyRule(v *Verdict, m ruleMatch) {
	v.RuleID = m.ID
	if cl.scoped() {
		v.Scope = m.Scope
	}
	if m.DailyQuota {
		v.DailyQuota = true
		v.QuotaResetHint = m.Cooldown
	}
}

func set(v *Verdict, fallback bool, kind Kind, reason Reason, mode CooldownMode, d time.Duration) {
	v.ShouldFallback, v.Kind, v.Reason, v.Mode, v.Cooldown = fallback, kind, reason, mode, d
	v.HintOverrides = mode == CooldownBackoff
}

func (cl *classification) classify(v *Verdict) {
	st, sig, text, status := cl.st, &cl.st.t.Signals, cl.text, v.Status
	if status <= 0 {
		set(v, true, kindNetwork, ReasonServerError, CooldownBackoff, 0)
		return
	}
	// 1. The gateway's own refusals.
	if text.any(sig.InternalRefusal, words) || status == 409 && text.any(sig.InternalRefusal409, words) {
		set(v, false, kindInternalRefusal, ReasonInvalidBinding, CooldownNone, 0)
		v.SkipProviderBreaker = true
		return
	}
	auth := cl.auth
	useQuota := status != 429 || auth == routeguard.OAuth || auth == routeguard.Unknown || text.any(sig.LongPeriod, substring)
	hint := v.Hint

	// 2. Body text checks.
	if strings.TrimSpace(text.s) != "" {
		switch {
		case text.any(sig.Ban, words):
			set(v, true, kindBan, ReasonAuthError, CooldownFixed, banCooldown)
			v.Permanent = true
			return
		case (status == 404 || status == 410) && text.any(sig.Retired, substring):
			set(v, true, kindRetiredModel, ReasonNotFound, CooldownFixed, retiredCooldown)
			v.QuotaResetHint = retiredCooldown
			return
		case text.any(sig.Moved, words):
			set(v, true, kindMovedEndpoint, ReasonNotFound, CooldownFixed, retiredCooldown)
			v.QuotaResetHint = retiredCooldown
			return
		case text.near(sig.Suspended, words, sig.BillingNear, words, suspensionWindow):
			set(v, true, kindBillingSuspension, ReasonQuotaExhausted, CooldownFixed, creditsCooldown)
			v.CreditsExhausted = true
			return
		case status == 429 && cl.model != "" && st.metric[cl.p]:
			reason := ReasonRateLimit
			if text.any(sig.MetricPerDay, substring) {
				reason = ReasonQuotaExhausted
			}
			set(v, true, kindMetricQuota, reason, CooldownBackoff, 0)
			return
		case useQuota && text.any(sig.Credits, words) && (!cl.creditsExempt() || text.any(sig.EmptyWallet, words)):
			set(v, true, kindCredits, ReasonQuotaExhausted, CooldownFixed, creditsCooldown)
			v.CreditsExhausted = true
			return
		}
		if useQuota && text.any(sig.TokensPerDay, words) && hint.Source == hintHeader && hint.After > 0 {
			set(v, true, kindDaily, ReasonQuotaExhausted, CooldownFixed, min(hint.After, st.set.MaxQuotaHint))
			v.DailyQuota, v.QuotaResetHint = true, v.Cooldown
			return
		}
		if useQuota && text.any(sig.Daily, words) {
			set(v, true, kindDaily, ReasonQuotaExhausted, CooldownFixed, untilMidnight(cl.now))
			v.DailyQuota, v.QuotaResetHint = true, v.Cooldown
			return
		}
		if text.any(sig.Weekly, words) {
			d := weeklyCooldown
			if rd, ok := resetCountdown(text.s); ok {
				d = min(rd, st.set.MaxQuotaHint)
			}
			set(v, true, kindWeekly, ReasonQuotaExhausted, CooldownFixed, d)
			v.QuotaResetHint = d
			return
		}
		if text.any(sig.Session, words) {
			set(v, true, kindSession, ReasonQuotaExhausted, CooldownFixed, sessionCooldown)
			v.QuotaResetHint = sessionCooldown
			return
		}
		if useQuota && (text.any(sig.Subscription, words) || text.any(st.subBy[cl.p], words)) {
			cl.subscription(v)
			return
		}
		if hint.After > 0 && useQuota && text.any(sig.QuotaText, substring) {
			set(v, true, kindQuotaHint, ReasonQuotaExhausted, CooldownBackoff, 0)
			v.QuotaResetHint = hint.After
			return
		}
		if status == 403 && text.any(sig.RouteRefusal, words) {
			set(v, false, kindRouteRefusal, ReasonUnknown, CooldownNone, 0)
			return
		}
	}
	if status == 403 && cl.scoped() {
		if m, ok := cl.rule(status); ok {
			if m.Cooldown > 0 {
				set(v, true, kindProviderRule, m.Reason, CooldownFixed, m.Cooldown)
			} else {
				set(v, true, kindProviderRule, m.Reason, CooldownBackoff, 0)
			}
			cl.applyRule(v, m)
			return
		}
	}
	if status == 403 && auth == routeguard.APIKey && !text.any(sig.ForbiddenExempt, substring) {
		set(v, true, kindForbidden, ReasonAuthError, CooldownBackoff, 0)
		v.HintOverrides = false
		return
	}

	// 3. Global rules: text rules on any status, then status rules, then a
	// provider rule on its own.
	if status != 429 || useQuota {
		for _, tr := range st.t.TextRules {
			if text.any(tr.Phrases, substring) {
				set(v, true, tr.Kind, tr.Reason, tr.Mode, tr.Cooldown)
				cl.override(v, status, tr.Mode == CooldownBackoff)
				return
			}
		}
	}
	if sr, ok := st.status[status]; ok {
		set(v, true, kindStatusRule, sr.Reason, sr.Mode, sr.Cooldown)
		if status == 402 {
			v.CreditsExhausted = true
		}
		cl.override(v, status, sr.Mode == CooldownBackoff)
		return
	}
	if m, ok := cl.rule(status); ok {
		if m.Cooldown > 0 {
			set(v, true, kindProviderRule, m.Reason, CooldownFixed, m.Cooldown)
		} else {
			set(v, true, kindProviderRule, m.Reason, CooldownBackoff, 0)
		}
		cl.applyRule(v, m)
		return
	}

	// 4. Leftovers.
	switch {
	case status == 432:
		cl.subscription(v)
		return
	case status >= 500 && status != 501:
		set(v, true, kindStatusRule, ReasonServerError, CooldownBackoff, 0)
		return
	}

	// 5. Bad requests.
	if status == 400 {
		switch {
		case text.any(sig.BadRequest, substring) && !text.any(sig.Credential, substring):
			set(v, true, kindBadRequest, ReasonModelCapacity, CooldownNone, 0)
		case text.any(sig.HighFrequency, substring):
			set(v, true, kindHighFrequency, ReasonRateLimit, CooldownBackoff, 0)
		default:
			set(v, false, kindBadRequest, ReasonUnknown, CooldownNone, 0)
		}
		return
	}

	// 6. Anything else.
	set(v, true, kindOther, ReasonUnknown, CooldownBase, 0)
}

// subscription sets the subscription-limit verdict: one hour, or the hint
// where the profile honours hints.
func (cl *classification) subscription(v *Verdict) {
	set(v, true, kindSubscription, ReasonQuotaExhausted, CooldownFixed, subscriptionCooldown)
	v.HintOverrides = true
	v.QuotaResetHint = v.Hint.After
}

// override lets a matching provider rule refine a global rule: for a
// backoff rule it replaces the reason, and the cooldown when it gives one;
// for another rule it replaces the cooldown when it gives one.
func (cl *classification) override(v *Verdict, status int, backoff bool) {
	m, ok := cl.rule(status)
	if !ok {
		return
	}
	if backoff {
		v.Reason = m.Reason
	}
	if m.Cooldown > 0 {
		v.Mode, v.Cooldown, v.HintOverrides = CooldownFixed, m.Cooldown, false
	}
	cl.applyRule(v, m)
}

// ClassifyEventAt classifies an error event found inside a 200 SSE stream
// at time now. The event is the lines of one event ("event: error",
// "data: {...}") or a bare JSON payload; only its first 64 KiB are read. It
// is an error when its payload has an "error" member or "type": "error",
// when the event is named "error", or when it is a Responses API
// "response.failed" event (by type or by name, read from its
// response.error member). Its status is the error's numeric status or code
// when that lies in 400..599, else the one its type or code names
// (rate_limit_error → 429, overloaded_error → 503, authentication_error →
// 401, …), else 500.
//
// r supplies the provider, model, credential class and headers; its
// Status and Body are replaced by the event's status and error payload,
// which are then restated and classified as by [Classifier.ClassifyAt].
// The result is false when the event carries no error.
func (c *Classifier) ClassifyEventAt(r Response, event []byte, now time.Time) (Verdict, bool) {
	status, payload, ok := parseStreamError(event)
	if !ok {
		return Verdict{}, false
	}
	r.Status, r.Body, r.Structured = status, payload, nil
	return c.ClassifyAt(r, now), true
}

// Package-level functions: a Classifier with the built-in tables and the
// default Config. To change a table or a setting, build your own with
// [New] or use a zero [Classifier].

// Classify is shorthand for ClassifyAt(r, time.Now()).
func Classify(r Response) Verdict { return std.ClassifyAt(r, time.Now()) }

// ClassifyAt classifies r at time now with the built-in tables and the
// default Config; see [Classifier.ClassifyAt].
func ClassifyAt(r Response, now time.Time) Verdict { return std.ClassifyAt(r, now) }

// ClassifyEventAt classifies an SSE error event at time now with the
// built-in tables and the default Config; see [Classifier.ClassifyEventAt].
func ClassifyEventAt(r Response, event []byte, now time.Time) (Verdict, bool) {
	return std.ClassifyEventAt(r, event, now)
}
