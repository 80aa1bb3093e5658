package restate

import (
	"net/http"
	"time"
)

// Reason is the coarse failure class a [Verdict] carries. The values are the
// stable strings other layers store and report.
type Reason string

// Reasons.
const (
	ReasonNone           Reason = ""
	ReasonRateLimit      Reason = "rate_limit_exceeded"
	ReasonQuotaExhausted Reason = "quota_exhausted"
	ReasonAuthError      Reason = "auth_error"
	ReasonNotFound       Reason = "not_found"
	ReasonModelCapacity  Reason = "model_capacity"
	ReasonServerError    Reason = "server_error"
	ReasonUnknown        Reason = "unknown"
	ReasonInvalidBinding Reason = "invalid_previous_response_binding"
)

// Kind names the rule of the classification that produced a [Verdict]. It is
// finer than [Reason]: a weekly quota and a credits failure share the reason
// quota_exhausted but differ in kind.
type Kind string

// Kinds, in roughly the order the classification tries them.
const (
	KindNone              Kind = ""                   // not a failure (status below 400)
	KindNetwork           Kind = "network"            // no HTTP status (status 0)
	KindInternalRefusal   Kind = "internal_refusal"   // the gateway's own refusal, not the upstream's
	KindBan               Kind = "ban"                // account banned or deactivated
	KindRetiredModel      Kind = "retired_model"      // 404/410 for a retired model
	KindMovedEndpoint     Kind = "moved_endpoint"     // the endpoint has moved
	KindBillingSuspension Kind = "billing_suspension" // suspended for billing reasons
	KindMetricQuota       Kind = "metric_quota"       // a per-metric quota (requests per day / minute)
	KindCredits           Kind = "credits"            // credits or balance exhausted
	KindDaily             Kind = "daily"              // daily quota
	KindWeekly            Kind = "weekly"             // weekly or monthly quota
	KindSession           Kind = "session"            // session usage limit
	KindSubscription      Kind = "subscription"       // subscription usage limit
	KindQuotaHint         Kind = "quota_hint"         // quota text with an upstream hint
	KindRouteRefusal      Kind = "route_refusal"      // 403 not authorized for this route
	KindProviderRule      Kind = "provider_rule"      // a provider error rule decided alone
	KindForbidden         Kind = "forbidden"          // 403 on an API key
	KindRequestRejected   Kind = "request_rejected"   // "request not allowed" refusals
	KindTextRule          Kind = "text_rule"          // a global text rule
	KindStatusRule        Kind = "status_rule"        // a global status rule
	KindBadRequest        Kind = "bad_request"        // a 400 about the request itself
	KindHighFrequency     Kind = "high_frequency"     // a 400 that is really a rate limit
	KindOther             Kind = "other"              // any other status
)

// Scope is the unit a failure applies to, as a provider error rule states it.
type Scope string

// Scopes.
const (
	ScopeNone       Scope = ""
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

// HintSource says where a retry hint was read.
type HintSource string

// Hint sources.
const (
	HintNone      HintSource = ""
	HintHeader    HintSource = "header"                // Retry-After, x-ratelimit-*, anthropic-ratelimit-*
	HintRetryInfo HintSource = "google_rpc_retry_info" // google.rpc.RetryInfo retryDelay
	HintBody      HintSource = "body"                  // JSON retry_after, retry_after_ms, retryAfter
	HintText      HintSource = "text"                  // "retry in 20s", "resets in 3 days", …
)

// HintCap says which cap bounds a retry hint.
type HintCap string

// Hint caps.
const (
	CapNone      HintCap = ""
	CapRateLimit HintCap = "rate_limit" // bounded by Settings.MaxRateLimitHint
	CapQuota     HintCap = "quota"      // bounded by Settings.MaxQuotaHint
)

// AuthClass is the credential class of a connection. It changes how a 429
// and a 403 are read.
type AuthClass string

// Auth classes. The empty class is treated like an unknown provider: quota
// signals on a 429 are always honoured.
const (
	AuthUnknown AuthClass = ""
	AuthOAuth   AuthClass = "oauth"
	AuthAPIKey  AuthClass = "apikey"
	AuthLocal   AuthClass = "local"
)

// Response is one failed upstream answer as the router saw it.
type Response struct {
	Provider string      // provider id, compared case-insensitively
	Model    string      // requested model, if any
	Auth     AuthClass   // credential class of the connection
	Status   int         // HTTP status as received; 0 when no answer arrived
	Header   http.Header // response headers, may be nil
	Body     []byte      // response body (only the first Settings.MaxScan bytes are read)
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
	Cap    HintCap       // which cap bounded it
}

// Restatement is the outcome of the restatement step.
type Restatement struct {
	Status     int           // the status to act on
	FromStatus int           // the status as received
	RuleID     string        // the restatement rule that applied, "" for passthrough
	RetryAfter time.Duration // what the client may be told; 0 when unknown
}

// Restated reports whether a rule rewrote the status.
func (r Restatement) Restated() bool { return r.RuleID != "" }

// Verdict is the classification of one failure.
type Verdict struct {
	// Status is the status after restatement; FromStatus the one received.
	Status     int
	FromStatus int
	// RestateRule names the restatement rule that applied ("" if none), and
	// ClientRetryAfter is the retry time to tell the client: the caller's
	// Response.RetryAfter, else the parsed hint, else a restatement rule's
	// default.
	RestateRule      string
	ClientRetryAfter time.Duration

	Reason Reason
	Kind   Kind
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
	// cooldown for a connection whose profile honours upstream hints.
	HintOverrides bool
	// Hint is the upstream retry hint, already capped.
	Hint Hint
	// QuotaResetHint is how long until a quota resets, when known; model
	// lockouts use it.
	QuotaResetHint time.Duration

	ShouldFallback      bool // try the next target
	Permanent           bool // the account is banned; never a timed cooldown
	CreditsExhausted    bool // out of credits or balance (terminal)
	DailyQuota          bool // a daily quota is exhausted
	SkipProviderBreaker bool // the failure must not count against the provider breaker
}
