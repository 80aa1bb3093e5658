package restate

import (
	"net/http"
	"time"

	"github.com/routeguard/routeguard"
)

// Reason is the coarse failure class a [Verdict] carries. The values are the
// stable strings other layers store and report; a Verdict that is not a
// failure has the empty reason.
type Reason string

// Reasons.
const (
	ReasonRateLimit      Reason = "rate_limit_exceeded"
	ReasonQuotaExhausted Reason = "quota_exhausted"
	ReasonAuthError      Reason = "auth_error"
	ReasonNotFound       Reason = "not_found"
	ReasonModelCapacity  Reason = "model_capacity"
	ReasonServerError    Reason = "server_error"
	ReasonUnknown        Reason = "unknown"
	ReasonInvalidBinding Reason = "invalid_previous_response_binding"
)

// Kind names the rule of the classification that produced a [Verdict], for
// logs and diagnostics; consumers act on the Verdict's flags and reason.
// It is finer than [Reason]: a weekly quota and a credits failure share the
// reason quota_exhausted but differ in kind. The values, in roughly the
// order the classification tries them:
//
//	""                    not a failure (status below 400)
//	"network"             no HTTP status (status 0)
//	"internal_refusal"    the gateway's own refusal, not the upstream's
//	"ban"                 account banned or deactivated
//	"retired_model"       404/410 for a retired model
//	"moved_endpoint"      the endpoint has moved
//	"billing_suspension"  suspended for billing reasons
//	"metric_quota"        a per-metric quota (requests per day / minute)
//	"credits"             credits or balance exhausted
//	"daily"               daily quota
//	"weekly"              weekly or monthly quota
//	"session"             session usage limit
//	"subscription"        subscription usage limit
//	"quota_hint"          quota text with an upstream hint
//	"route_refusal"       403 not authorized for this route
//	"provider_rule"       a provider error rule decided alone
//	"forbidden"           403 on an API key
//	"request_rejected"    "request not allowed" refusals (a text rule's kind)
//	"text_rule"           a global text rule
//	"status_rule"         a global status rule
//	"bad_request"         a 400 about the request itself
//	"high_frequency"      a 400 that is really a rate limit
//	"other"               any other status
//
// A [TextRule] names the kind its matches get; "request_rejected" and
// "bad_request" set [Verdict.RequestRejected] and [Verdict.RequestScoped].
type Kind string

// Kinds.
const (
	kindNone              Kind = ""                   // not a failure (status below 400)
	kindNetwork           Kind = "network"            // no HTTP status (status 0)
	kindInternalRefusal   Kind = "internal_refusal"   // the gateway's own refusal, not the upstream's
	kindBan               Kind = "ban"                // account banned or deactivated
	kindRetiredModel      Kind = "retired_model"      // 404/410 for a retired model
	kindMovedEndpoint     Kind = "moved_endpoint"     // the endpoint has moved
	kindBillingSuspension Kind = "billing_suspension" // suspended for billing reasons
	kindMetricQuota       Kind = "metric_quota"       // a per-metric quota (requests per day / minute)
	kindCredits           Kind = "credits"            // credits or balance exhausted
	kindDaily             Kind = "daily"              // daily quota
	kindWeekly            Kind = "weekly"             // weekly or monthly quota
	kindSession           Kind = "session"            // session usage limit
	kindSubscription      Kind = "subscription"       // subscription usage limit
	kindQuotaHint         Kind = "quota_hint"         // quota text with an upstream hint
	kindRouteRefusal      Kind = "route_refusal"      // 403 not authorized for this route
	kindProviderRule      Kind = "provider_rule"      // a provider error rule decided alone
	kindForbidden         Kind = "forbidden"          // 403 on an API key
	kindRequestRejected   Kind = "request_rejected"   // "request not allowed" refusals
	kindTextRule          Kind = "text_rule"          // a global text rule
	kindStatusRule        Kind = "status_rule"        // a global status rule
	kindBadRequest        Kind = "bad_request"        // a 400 about the request itself
	kindHighFrequency     Kind = "high_frequency"     // a 400 that is really a rate limit
	kindOther             Kind = "other"              // any other status
)

// Scope is the unit a failure applies to, as a provider error rule states
// it. The empty scope means the rule states none (or the provider's scopes
// are not surfaced).
type Scope string

// Scopes.
const (
	ScopeProvider   Scope = "provider"
	ScopeConnection Scope = "connection"
	ScopeModel      Scope = "model"
	ScopeExact      Scope = "exact"
)

// CooldownMode tells a consumer how to derive the cooldown of a [Verdict].
type CooldownMode string

// Cooldown modes.
const (
	// CooldownNone means no cooldown (Verdict.Cooldown is 0).
	CooldownNone CooldownMode = "none"
	// CooldownFixed means Verdict.Cooldown is the cooldown.
	CooldownFixed CooldownMode = "fixed"
	// CooldownBackoff means the consumer's escalating backoff
	// (base·2^level, capped) applies.
	CooldownBackoff CooldownMode = "backoff"
	// CooldownBase means the consumer's base cooldown, without escalation.
	CooldownBase CooldownMode = "base"
)

// HintSource says where a retry hint was read, for logs and diagnostics:
//
//	""                       no hint
//	"header"                 Retry-After, x-ratelimit-*, anthropic-ratelimit-*
//	"google_rpc_retry_info"  google.rpc.RetryInfo retryDelay in a JSON body
//	"body"                   JSON retry_after, retry_after_ms, retryAfter
//	"text"                   "retry in 20s", "resets in 3 days", …
type HintSource string

// Hint sources.
const (
	hintNone      HintSource = ""
	hintHeader    HintSource = "header"
	hintRetryInfo HintSource = "google_rpc_retry_info"
	hintBody      HintSource = "body"
	hintText      HintSource = "text"
)

// hintCap says which cap bounds a retry hint.
type hintCap string

// Hint caps.
const (
	capNone      hintCap = ""
	capRateLimit hintCap = "rate_limit" // bounded by Config.MaxRateLimitHint
	capQuota     hintCap = "quota"      // bounded by Config.MaxQuotaHint
)

// Response is one failed upstream answer as the router saw it.
type Response struct {
	Provider string      // provider id, compared case-insensitively
	Model    string      // requested model, if any
	Status   int         // HTTP status as received; 0 when no answer arrived
	Header   http.Header // response headers, may be nil
	Body     []byte      // response body (only the first Config.MaxScan bytes are read)
	// Auth is the credential class of the connection. It changes how a 429
	// and a 403 are read: on an API key a 429 keeps its quota signals only
	// with long-period quota wording, and a 403 is an auth failure. The
	// zero value, [routeguard.Unknown], gets the cautious reading of an
	// unknown provider: the quota signals of a 429 are always honoured.
	Auth routeguard.Class
	// Message is an error message the caller extracted, if any; it is
	// searched together with Body.
	Message string
	// Structured is the upstream's structured error (JSON), if the caller
	// separated it from the text. Provider rules of providers outside the
	// full-text list match against it when present.
	Structured []byte
	// RetryAfter is a retry time the caller already knows (for example from
	// an earlier parse); restatement keeps it when it is positive.
	RetryAfter time.Duration
}

// Hint is an upstream retry hint: how long to wait, where it was read and
// which cap bounded it.
type Hint struct {
	After  time.Duration // the wait, already capped; 0 when there is no hint
	Source HintSource    // where the hint was read
	// Quota is true for a quota-reset hint (daily, weekly, "resets in N
	// days", reset times), bounded by Config.MaxQuotaHint; false for a
	// rate-limit hint, bounded by Config.MaxRateLimitHint, and for no hint.
	Quota bool
}

// restatement is the outcome of the restatement step.
type restatement struct {
	Status     int           // the status to act on
	FromStatus int           // the status as received
	RuleID     string        // the restatement rule that applied, "" for passthrough
	RetryAfter time.Duration // what the client may be told; 0 when unknown
}

// Verdict is the classification of one failure: what happened, how long
// the connection or model should rest, and what a consumer should do about
// it. The flags below carry every decision that depends on the status or
// the text, so a consumer never compares statuses itself.
type Verdict struct {
	// Status is the status after restatement (0: no answer arrived);
	// FromStatus the one received.
	Status     int
	FromStatus int
	// RestateRule names the restatement rule that applied ("" if none), and
	// ClientRetryAfter is the retry time to tell the client: the caller's
	// Response.RetryAfter, else the parsed hint, else a restatement rule's
	// default.
	RestateRule      string
	ClientRetryAfter time.Duration

	Reason Reason
	Kind   Kind // the rule that decided, for diagnostics (see [Kind])
	// RuleID names the provider error rule that matched, "" if none.
	RuleID string
	// Scope is the rule's scope; it is set only for providers that honour
	// rule scopes (see Tables.ScopeProviders) and for providers with
	// operator rules.
	Scope Scope

	// Mode and Cooldown describe the cooldown (see CooldownMode).
	Mode     CooldownMode
	Cooldown time.Duration
	// HintOverrides is true when a positive Hint.After replaces the
	// cooldown for a connection whose profile honours upstream hints: for
	// the backoff mode and the subscription limit, not for a fixed
	// cooldown.
	HintOverrides bool
	// Hint is the upstream retry hint, already capped.
	Hint Hint
	// QuotaResetHint is how long until a quota resets, when known; model
	// lockouts use it.
	QuotaResetHint time.Duration

	// ShouldFallback: try the next target.
	ShouldFallback bool
	// SkipProviderBreaker: the failure must not count against the provider
	// breaker (the gateway's own refusals).
	SkipProviderBreaker bool

	// What the failure says about the account. Each of these also sets
	// Terminal.

	// Permanent: the account is banned; never a timed cooldown.
	Permanent bool
	// CreditsExhausted: out of credits or balance, or a billing suspension.
	CreditsExhausted bool
	// Expired: the credential was rejected (status 401 after restatement).
	Expired bool
	// RequestRejected: a "request not allowed" refusal (kind
	// request_rejected), which escalates per connection (5 min, 15 min,
	// then a ban, in the cooldown tracker) instead of the cooldown above.
	RequestRejected bool
	// Terminal is Permanent, CreditsExhausted, Expired or RequestRejected:
	// the failure is the account's, whatever the model. A consumer cools
	// or ends the connection even when the failure is ModelScoped, locks
	// no model, and tries the next target even when ShouldFallback is
	// false.
	Terminal bool

	// ModelScoped: the failure concerns the model on this connection, not
	// the connection: a rule scope of model or exact, reason not_found, or
	// status 404 or 410. A consumer locks the model and leaves the
	// connection alone, unless Terminal.
	ModelScoped bool
	// RequestScoped: the failure is about this request, not the target (a
	// 400 about the request itself, kind bad_request); it does not mark a
	// provider or connection exhausted for the rest of the request.
	RequestScoped bool
	// DailyQuota: a daily quota is exhausted.
	DailyQuota bool
	// TokenLimit: a 429 whose text says the request alone exceeds the token
	// rate limit (Signals.TokenLimit, "request too large"): waiting, or
	// another connection under the same limit, does not help, and the
	// provider is not rate limited for other requests.
	TokenLimit bool
	// EmptyAnswer: a 502 whose text says the upstream answered with empty
	// content (Signals.EmptyAnswer): the answer was bad, the connection is
	// not broken.
	EmptyAnswer bool
}
