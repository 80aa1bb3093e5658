package restate

import (
	"net/http"
	"slices"
	"strings"
	"time"
)

// Fixed cooldowns of the classification.
const (
	BanCooldown          = 365 * 24 * time.Hour // a banned account (permanent)
	RetiredCooldown      = 24 * time.Hour       // a retired model or moved endpoint
	CreditsCooldown      = 2 * time.Minute      // credits exhausted or billing suspension
	SubscriptionCooldown = time.Hour            // subscription usage limit without a hint
	WeeklyCooldown       = 24 * time.Hour       // weekly quota without a reset time
	SessionCooldown      = 5 * time.Hour        // session usage limit
	suspensionWindow     = 120                  // bytes between "suspended" and a billing word
)

// Restate applies the restatement rules of provider to one answer. The
// haystack is message + " " + body, lower-cased; markers are substrings.
// A rule applies when status is one of its FromStatuses, a marker occurs
// and no exclude marker does; the result then carries the rule's ToStatus
// and upstream (when > 0) or the rule's default retry time. Otherwise the
// answer passes through unchanged.
func (c *Classifier) Restate(provider string, status int, message string, body []byte, upstream time.Duration) Restatement {
	st := c.load()
	rules := st.restate[lower(strings.TrimSpace(provider))]
	if len(rules) == 0 {
		return passthrough(status, upstream)
	}
	return st.restateText(rules, status, st.haystack(message, body), upstream)
}

func passthrough(status int, upstream time.Duration) Restatement {
	return Restatement{Status: status, FromStatus: status, RetryAfter: max(upstream, 0)}
}

func (st *state) haystack(message string, body []byte) string {
	b := st.bound(body)
	m := st.boundString(message)
	if m == "" {
		return lower(b)
	}
	return lower(m + " " + b)
}

func (st *state) restateText(rules []RestateRule, status int, text string, upstream time.Duration) Restatement {
	if strings.TrimSpace(text) == "" {
		return passthrough(status, upstream)
	}
	for _, r := range rules {
		if !slices.Contains(r.FromStatuses, status) || !hasAny(text, r.Markers) || hasAny(text, r.Excludes) {
			continue
		}
		ra := r.DefaultRetryAfter
		if upstream > 0 {
			ra = upstream
		}
		return Restatement{Status: r.ToStatus, FromStatus: status, RuleID: r.ID, RetryAfter: ra}
	}
	return passthrough(status, upstream)
}

// Classify is ClassifyAt at time.Now().
func (c *Classifier) Classify(r Response) Verdict { return c.ClassifyAt(r, time.Now()) }

// ClassifyAt restates r's status and classifies the failure at time now
// (now's location is the local time of daily quotas). A status below 400
// (other than 0) is not a failure and gives a Verdict with Kind none and
// ShouldFallback false; status 0 means no answer arrived (a network error).
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
func (c *Classifier) ClassifyAt(r Response, now time.Time) Verdict {
	st := c.load()
	p := lower(strings.TrimSpace(r.Provider))
	raw := st.bound(r.Body)
	text := st.haystack(r.Message, r.Body)

	if r.Status > 0 && r.Status < 400 {
		return Verdict{Status: r.Status, FromStatus: r.Status, ClientRetryAfter: max(r.RetryAfter, 0), Mode: CooldownNone}
	}
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
	cl := classification{st: st, r: &r, p: p, text: text, now: now}
	if len(r.Structured) > 0 {
		cl.structured = lower(st.bound(r.Structured))
	}
	cl.classify(&v)
	return v
}

type classification struct {
	st         *state
	r          *Response
	p          string
	text       string
	structured string
	now        time.Time
}

func (cl *classification) ruleBody() string {
	if (cl.st.fullText[cl.p] || len(cl.st.op[cl.p]) > 0) && strings.TrimSpace(cl.text) != "" {
		return cl.text
	}
	if strings.TrimSpace(cl.structured) != "" {
		return cl.structured
	}
	return cl.text
}

func (cl *classification) rule(status int) (RuleMatch, bool) {
	return cl.st.matchRule(cl.p, status, cl.r.Header, cl.ruleBody(), cl.now)
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
func (cl *classification) applyRule(v *Verdict, m RuleMatch) {
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
		set(v, true, KindNetwork, ReasonServerError, CooldownBackoff, 0)
		return
	}
	// 1. The gateway's own refusals.
	if hasAny(text, sig.InternalRefusal) || status == 409 && hasAny(text, sig.InternalRefusal409) {
		set(v, false, KindInternalRefusal, ReasonInvalidBinding, CooldownNone, 0)
		v.SkipProviderBreaker = true
		return
	}
	auth := cl.r.Auth
	useQuota := status != 429 || auth == AuthOAuth || auth == AuthUnknown || hasAny(text, sig.LongPeriod)
	hint := v.Hint

	// 2. Body text checks.
	if strings.TrimSpace(text) != "" {
		switch {
		case hasAny(text, sig.Ban):
			set(v, true, KindBan, ReasonAuthError, CooldownFixed, BanCooldown)
			v.Permanent = true
			return
		case (status == 404 || status == 410) && hasAny(text, sig.Retired):
			set(v, true, KindRetiredModel, ReasonNotFound, CooldownFixed, RetiredCooldown)
			v.QuotaResetHint = RetiredCooldown
			return
		case hasAny(text, sig.Moved):
			set(v, true, KindMovedEndpoint, ReasonNotFound, CooldownFixed, RetiredCooldown)
			v.QuotaResetHint = RetiredCooldown
			return
		case near(text, sig.Suspended, sig.BillingNear, suspensionWindow):
			set(v, true, KindBillingSuspension, ReasonQuotaExhausted, CooldownFixed, CreditsCooldown)
			v.CreditsExhausted = true
			return
		case status == 429 && cl.r.Model != "" && st.metric[cl.p]:
			reason := ReasonRateLimit
			if hasAny(text, sig.MetricPerDay) {
				reason = ReasonQuotaExhausted
			}
			set(v, true, KindMetricQuota, reason, CooldownBackoff, 0)
			return
		case useQuota && hasAny(text, sig.Credits) && (!cl.creditsExempt() || hasAny(text, sig.EmptyWallet)):
			set(v, true, KindCredits, ReasonQuotaExhausted, CooldownFixed, CreditsCooldown)
			v.CreditsExhausted = true
			return
		}
		if useQuota && hasAny(text, sig.TokensPerDay) && hint.Source == HintHeader && hint.After > 0 {
			set(v, true, KindDaily, ReasonQuotaExhausted, CooldownFixed, min(hint.After, st.set.MaxQuotaHint))
			v.DailyQuota, v.QuotaResetHint = true, v.Cooldown
			return
		}
		if useQuota && hasAny(text, sig.Daily) {
			set(v, true, KindDaily, ReasonQuotaExhausted, CooldownFixed, untilMidnight(cl.now))
			v.DailyQuota, v.QuotaResetHint = true, v.Cooldown
			return
		}
		if hasAny(text, sig.Weekly) {
			d := WeeklyCooldown
			if rd, ok := resetCountdown(text); ok {
				d = min(rd, st.set.MaxQuotaHint)
			}
			set(v, true, KindWeekly, ReasonQuotaExhausted, CooldownFixed, d)
			v.QuotaResetHint = d
			return
		}
		if hasAny(text, sig.Session) {
			set(v, true, KindSession, ReasonQuotaExhausted, CooldownFixed, SessionCooldown)
			v.QuotaResetHint = SessionCooldown
			return
		}
		if useQuota && (hasAny(text, sig.Subscription) || hasAny(text, st.subBy[cl.p])) {
			cl.subscription(v)
			return
		}
		if hint.After > 0 && useQuota && hasAny(text, sig.QuotaText) {
			set(v, true, KindQuotaHint, ReasonQuotaExhausted, CooldownBackoff, 0)
			v.QuotaResetHint = hint.After
			return
		}
		if status == 403 && hasAny(text, sig.RouteRefusal) {
			set(v, false, KindRouteRefusal, ReasonUnknown, CooldownNone, 0)
			return
		}
	}
	if status == 403 && cl.scoped() {
		if m, ok := cl.rule(status); ok {
			if m.Cooldown > 0 {
				set(v, true, KindProviderRule, m.Reason, CooldownFixed, m.Cooldown)
			} else {
				set(v, true, KindProviderRule, m.Reason, CooldownBackoff, 0)
			}
			cl.applyRule(v, m)
			return
		}
	}
	if status == 403 && auth == AuthAPIKey && !hasAny(text, sig.ForbiddenExempt) {
		set(v, true, KindForbidden, ReasonAuthError, CooldownBackoff, 0)
		v.HintOverrides = false
		return
	}

	// 3. Global rules: text rules on any status, then status rules, then a
	// provider rule on its own.
	if status != 429 || useQuota {
		for _, tr := range st.t.TextRules {
			if hasAny(text, tr.Phrases) {
				set(v, true, tr.Kind, tr.Reason, tr.Mode, tr.Cooldown)
				cl.override(v, status, tr.Mode == CooldownBackoff)
				return
			}
		}
	}
	if sr, ok := st.status[status]; ok {
		set(v, true, KindStatusRule, sr.Reason, sr.Mode, sr.Cooldown)
		if status == 402 {
			v.CreditsExhausted = true
		}
		cl.override(v, status, sr.Mode == CooldownBackoff)
		return
	}
	if m, ok := cl.rule(status); ok {
		if m.Cooldown > 0 {
			set(v, true, KindProviderRule, m.Reason, CooldownFixed, m.Cooldown)
		} else {
			set(v, true, KindProviderRule, m.Reason, CooldownBackoff, 0)
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
		set(v, true, KindStatusRule, ReasonServerError, CooldownBackoff, 0)
		return
	}

	// 5. Bad requests.
	if status == 400 {
		switch {
		case hasAny(text, sig.BadRequest) && !hasAny(text, sig.Credential):
			set(v, true, KindBadRequest, ReasonModelCapacity, CooldownNone, 0)
		case hasAny(text, sig.HighFrequency):
			set(v, true, KindHighFrequency, ReasonRateLimit, CooldownBackoff, 0)
		default:
			set(v, false, KindBadRequest, ReasonUnknown, CooldownNone, 0)
		}
		return
	}

	// 6. Anything else.
	set(v, true, KindOther, ReasonUnknown, CooldownBase, 0)
}

// subscription sets the subscription-limit verdict: one hour, or the hint
// where the profile honours hints.
func (cl *classification) subscription(v *Verdict) {
	set(v, true, KindSubscription, ReasonQuotaExhausted, CooldownFixed, SubscriptionCooldown)
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

// ClassifyEvent is ClassifyEventAt at time.Now().
func (c *Classifier) ClassifyEvent(r Response, event []byte) (Verdict, bool) {
	return c.ClassifyEventAt(r, event, time.Now())
}

// ClassifyEventAt classifies an error event found inside a 200 SSE stream.
// The event is parsed with [ParseStreamError]; r supplies the provider,
// model, auth class and headers, while its Status and Body are replaced by
// the event's. The result is false when the event carries no error.
func (c *Classifier) ClassifyEventAt(r Response, event []byte, now time.Time) (Verdict, bool) {
	status, payload, ok := ParseStreamError(event)
	if !ok {
		return Verdict{}, false
	}
	r.Status, r.Body, r.Structured = status, payload, nil
	return c.ClassifyAt(r, now), true
}

// Package-level shorthands using Default.

// Classify classifies r with [Default] at time.Now().
func Classify(r Response) Verdict { return Default.Classify(r) }

// ClassifyAt classifies r with [Default] at time now.
func ClassifyAt(r Response, now time.Time) Verdict { return Default.ClassifyAt(r, now) }

// ClassifyEvent classifies an SSE error event with [Default] at time.Now().
func ClassifyEvent(r Response, event []byte) (Verdict, bool) { return Default.ClassifyEvent(r, event) }

// ClassifyEventAt classifies an SSE error event with [Default].
func ClassifyEventAt(r Response, event []byte, now time.Time) (Verdict, bool) {
	return Default.ClassifyEventAt(r, event, now)
}

// Restate applies the restatement rules of [Default].
func Restate(provider string, status int, message string, body []byte, upstream time.Duration) Restatement {
	return Default.Restate(provider, status, message, body, upstream)
}

// HintAt parses a retry hint with [Default]. (Use Default.Hint for the
// time.Now() shorthand.)
func HintAt(h http.Header, body []byte, now time.Time) Hint { return Default.HintAt(h, body, now) }

// EmergencyFallback asks [Default] whether to use the emergency target.
func EmergencyFallback(status int, body []byte, hasTools bool) (EmergencyTarget, bool) {
	return Default.EmergencyFallback(status, body, hasTools)
}
