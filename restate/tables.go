package restate

import (
	"maps"
	"slices"
	"time"
)

// RestateRule rewrites a misleading upstream status. It applies when the
// status is one of FromStatuses, some Marker occurs in the lower-cased
// message and body, and no Exclude marker does. Markers are compared
// case-insensitively as substrings.
type RestateRule struct {
	ID                string
	FromStatuses      []int
	ToStatus          int
	Markers           []string
	Excludes          []string
	DefaultRetryAfter time.Duration // client retry time when the upstream gave none
}

// ProviderRule is one provider error rule. Every condition that is set must
// hold; a rule with only Statuses matches any body with such a status.
// Texts are compared case-insensitively as substrings of the rule body (see
// Tables.FullTextProviders): the raw text, lower-cased, never a JSON-escaped
// form of it, so non-ASCII markers and quotes match as written. Header
// conditions see the response headers on every path, and rules fire for any
// status, 400 included.
type ProviderRule struct {
	ID       string
	Statuses []int    // statuses the rule applies to; empty means any status
	Any      []string // at least one of these occurs
	All      []string // all of these occur
	// HeaderZero lists headers of which at least one must equal "0".
	HeaderZero []string
	// HeaderZeroPair names a header holding "name=value" pairs separated by
	// commas; at least one value must be 0.
	HeaderZeroPair string

	Reason   Reason
	Scope    Scope
	Cooldown time.Duration // 0 means the rule gives no cooldown
	// CooldownFromReset takes the cooldown from a "resets in N unit" text;
	// the rule does not match without one.
	CooldownFromReset bool
	// UntilMidnight sets the cooldown to the time until local midnight
	// (24 h at most) and marks a daily quota.
	UntilMidnight bool

	// literal makes Any a list of plain substrings, without the "…" and
	// "&&" operators of Signals (set for operator rules).
	literal bool
}

// OperatorRule is a rule an operator configures for one provider. It matches
// when the status is equal and the body contains Match, compared
// case-insensitively as a plain substring: never a regular expression, and
// the "…" and "&&" operators of [Signals] do not apply.
type OperatorRule struct {
	Status   int
	Match    string
	Scope    Scope         // model, provider or connection
	Reason   Reason        // default quota_exhausted
	Cooldown time.Duration // 0 means none
}

// TextRule is a global rule over the failure text, tried on any status.
// Phrases are substrings ("rate limit" matches "rate limited"), with the
// operators of [Signals].
type TextRule struct {
	Phrases  []string
	Reason   Reason
	Kind     Kind
	Mode     CooldownMode
	Cooldown time.Duration
}

// StatusRule is a global rule for one status.
type StatusRule struct {
	Status   int
	Reason   Reason
	Mode     CooldownMode
	Cooldown time.Duration
}

// Signals are the phrase lists of the classification. Phrases are compared
// with the lower-cased text, case-insensitively, in one of two ways fixed
// per list (each field says which):
//
//   - word: the phrase matches only as whole words: the character before
//     and the character after it must not be a letter or a digit, so
//     "invoice" does not match "invoices" and "tpd" does not match "httpd".
//     Punctuation, spaces, '_' and '-' are boundaries. Lists whose match
//     parks a connection for long (a ban, credits exhausted, a billing
//     suspension, daily, weekly, session or subscription quotas) are word
//     lists, so a longer word never triggers them by accident; spell out
//     every form that should count ("insufficient credit" and "insufficient
//     credits").
//   - substring: the phrase matches wherever its bytes occur, inside longer
//     words too ("model" matches "models/…"). Lists that need stems, hold
//     scripts without spaces (Chinese), or only gate or veto another check
//     are substring lists.
//
// Two operators apply in both kinds: "a…b" (U+2026) means b follows a
// within 80 bytes, and "a&&b" means both occur anywhere; each part is
// compared the way its list is.
type Signals struct {
	InternalRefusal    []string // word: the gateway's own refusals (any status)
	InternalRefusal409 []string // word: refusals recognised on a 409
	Ban                []string // word: banned or deactivated accounts (permanent)
	// Retired is a substring list: retired model on 404/410; "model…"
	// must also match "models/…" and "model_id".
	Retired   []string
	Moved     []string // word: moved endpoints (any status)
	Suspended []string // word: "suspended" words …
	// BillingNear is a word list: … within 120 bytes of one of these
	// ("unpaid invoices" is not "invoice").
	BillingNear []string
	Credits     []string // word: credits or balance exhausted (terminal)
	EmptyWallet []string // word: an empty wallet on an exempt provider
	Daily       []string // word: daily quota
	// TokensPerDay is a word list: daily token quota; needs a header hint.
	TokensPerDay []string
	Subscription []string // word: subscription usage limit
	// SubscriptionByProvider adds subscription phrases per provider (word
	// lists).
	SubscriptionByProvider map[string][]string
	Weekly                 []string // word: weekly or monthly quota
	Session                []string // word: session usage limit
	// LongPeriod is a substring list of quota wording that keeps quota
	// checks on an API-key 429 ("quota exceed" covers "quota exceeded");
	// it only lets the word lists above be consulted.
	LongPeriod []string
	// QuotaText is a substring list of text that reads as quota exhaustion
	// (used only together with an upstream hint).
	QuotaText    []string
	RouteRefusal []string // word: 403 refusals that are not the account's fault
	// ForbiddenExempt is a substring list of 403 texts that are quotas, not
	// auth failures (a veto).
	ForbiddenExempt []string
	// BadRequest is a substring list of 400s about the request (context,
	// parameters, model); they cause no cooldown.
	BadRequest []string
	// Credential is a substring list of texts that look like a bad
	// credential ("credential" covers "credentials"); it vetoes BadRequest.
	Credential []string
	// HighFrequency is a substring list of 400s that are rate limits in
	// disguise; it holds Chinese phrases, which have no word boundaries.
	HighFrequency []string
	// MetricPerDay is a substring list of per-day quota metric names; it
	// must match inside ids such as "generaterequestsperdayperproject".
	MetricPerDay []string
	// TokenLimit is a substring list of 429 texts saying the request alone
	// exceeds a token rate limit ("request too large for … tokens per
	// min"); they set Verdict.TokenLimit.
	TokenLimit []string
	// EmptyAnswer is a substring list of 502 texts saying the upstream
	// answered with empty content; they set Verdict.EmptyAnswer.
	EmptyAnswer []string
}

// Tables holds every table the classification reads. Provider keys are
// compared in lower case. Use [DefaultTables] for a fresh copy of the
// built-in tables, change it, and install it with [Classifier.SetTables].
type Tables struct {
	Restatements  map[string][]RestateRule
	ProviderRules map[string][]ProviderRule
	// FullTextProviders match their rules against the whole text even when
	// a structured error is given.
	FullTextProviders []string
	// ScopeProviders surface a rule's scope in the Verdict.
	ScopeProviders []string
	// MetricQuotaProviders read per-metric quota names on a 429 with a model.
	MetricQuotaProviders []string
	// CreditsExempt lists substrings of provider ids (such as the
	// "-compatible-" of generated compatible providers) whose credit
	// phrases are not trusted, unless the text also matches
	// Signals.EmptyWallet.
	CreditsExempt []string
	TextRules     []TextRule
	StatusRules   []StatusRule
	Signals       Signals
	// EmergencyPhrases trigger the emergency fallback; they are substrings
	// ("credit limit" covers "credit limits"). EmergencyBilling is a word
	// list whose words count only within 40 bytes of a word of the
	// EmergencyBillingNear word list ("billing" next to "limit", never next
	// to "unlimited").
	EmergencyPhrases     []string
	EmergencyBilling     []string
	EmergencyBillingNear []string
}

func opencodeRules() []ProviderRule {
	return []ProviderRule{
		{ID: "opencode-endpoint-unavailable", Statuses: []int{400, 429}, Any: []string{"endpoint is unavailable"},
			Reason: ReasonModelCapacity, Scope: ScopeModel, Cooldown: 5 * time.Minute},
		{ID: "opencode-monthly-limit", Statuses: []int{429}, All: []string{"monthly usage limit reached"},
			CooldownFromReset: true, Reason: ReasonQuotaExhausted, Scope: ScopeConnection},
		{ID: "opencode-remaining-zero", Statuses: []int{429},
			HeaderZero: []string{"x-ratelimit-remaining-requests", "x-ratelimit-remaining-tokens"},
			Reason:     ReasonQuotaExhausted, Scope: ScopeConnection},
		{ID: "opencode-account-quota", Statuses: []int{429},
			Any:    []string{"organization_quota_exceeded", "account_quota_exceeded", "plan_limit_reached"},
			Reason: ReasonQuotaExhausted, Scope: ScopeConnection},
		{ID: "opencode-model-unavailable", Statuses: []int{400},
			Any:    []string{"upstream request failed: model is unavailable."},
			Reason: ReasonModelCapacity, Scope: ScopeModel, Cooldown: time.Hour},
	}
}

// DefaultTables returns a fresh copy of the built-in tables.
func DefaultTables() Tables {
	minimax := []ProviderRule{{ID: "minimax-model-quota", Statuses: []int{429},
		HeaderZeroPair: "x-model-quota-remaining", Reason: ReasonQuotaExhausted, Scope: ScopeModel}}
	return Tables{
		Restatements: map[string][]RestateRule{
			"agentrouter": {{
				ID: "agentrouter-quota-misstatus", FromStatuses: []int{403, 400}, ToStatus: 429,
				Markers: []string{"额度不足"}, Excludes: []string{"无权访问"}, DefaultRetryAfter: time.Minute,
			}},
		},
		ProviderRules: map[string][]ProviderRule{
			"opencode-zen":        opencodeRules(),
			"opencode-go":         opencodeRules(),
			"opencode-cli":        opencodeRules(),
			"minimax":             minimax,
			"minimax-passthrough": slices.Clone(minimax),
			"cloudflare-ai": {{ID: "cloudflare-daily-allocation", Statuses: []int{429},
				Any: []string{"daily free allocation"}, Reason: ReasonQuotaExhausted, Scope: ScopeConnection,
				UntilMidnight: true}},
			"openrouter": {{ID: "openrouter-payment-required", Statuses: []int{402},
				Reason: ReasonQuotaExhausted, Scope: ScopeConnection, Cooldown: 2 * time.Minute}},
			"agentrouter": {
				{ID: "agentrouter-quota", Statuses: []int{400, 403, 429}, Any: []string{"额度不足"},
					Reason: ReasonQuotaExhausted, Scope: ScopeConnection},
				{ID: "agentrouter-model-forbidden", Statuses: []int{403}, Any: []string{"无权访问模型"},
					Reason: ReasonAuthError, Scope: ScopeModel, Cooldown: 6 * time.Hour},
			},
		},
		FullTextProviders:    []string{"agentrouter"},
		ScopeProviders:       []string{"agentrouter", "opencode-zen", "opencode-go", "opencode-cli"},
		MetricQuotaProviders: []string{"gemini"},
		CreditsExempt:        []string{"-compatible-"},
		TextRules: []TextRule{
			{Phrases: []string{"no credentials"}, Reason: ReasonAuthError, Kind: kindTextRule, Mode: CooldownFixed, Cooldown: 2 * time.Minute},
			{Phrases: []string{"request not allowed"}, Reason: ReasonRateLimit, Kind: kindRequestRejected, Mode: CooldownFixed, Cooldown: 5 * time.Second},
			{Phrases: []string{"improperly formed request"}, Reason: ReasonModelCapacity, Kind: kindTextRule, Mode: CooldownNone},
			{Phrases: []string{"rate limit", "too many requests"}, Reason: ReasonRateLimit, Kind: kindTextRule, Mode: CooldownBackoff},
			{Phrases: []string{"hour quota", "quota has been exceeded", "quota exceeded", "quota will reset",
				"exhausted your capacity", "quota exhausted", "free tier"}, Reason: ReasonQuotaExhausted, Kind: kindTextRule, Mode: CooldownBackoff},
			{Phrases: []string{"capacity", "overloaded"}, Reason: ReasonModelCapacity, Kind: kindTextRule, Mode: CooldownBackoff},
		},
		StatusRules: []StatusRule{
			{Status: 401, Reason: ReasonAuthError, Mode: CooldownNone},
			{Status: 402, Reason: ReasonQuotaExhausted, Mode: CooldownNone},
			{Status: 403, Reason: ReasonQuotaExhausted, Mode: CooldownNone},
			{Status: 404, Reason: ReasonUnknown, Mode: CooldownFixed, Cooldown: 2 * time.Minute},
			{Status: 406, Reason: ReasonServerError, Mode: CooldownBackoff},
			{Status: 408, Reason: ReasonServerError, Mode: CooldownBackoff},
			{Status: 429, Reason: ReasonRateLimit, Mode: CooldownBackoff},
			{Status: 500, Reason: ReasonServerError, Mode: CooldownBackoff},
			{Status: 502, Reason: ReasonServerError, Mode: CooldownBackoff},
			{Status: 503, Reason: ReasonServerError, Mode: CooldownBackoff},
			{Status: 504, Reason: ReasonServerError, Mode: CooldownBackoff},
		},
		Signals: Signals{
			InternalRefusal:    []string{"invalid_previous_response_binding"},
			InternalRefusal409: []string{"previous_response_id does not belong"},
			Ban: []string{"account_deactivated", "account has been deactivated", "account has been disabled",
				"your account has been suspended", "this account is deactivated", "verify your account to continue",
				"this service has been disabled in this account"},
			Retired: []string{"no longer available", "no longer supported", "end of life",
				"model…deprecated", "model…retired", "model…discontinued", "model…decommissioned"},
			Moved:       []string{"endpoint has moved", "no longer works", "update your base url"},
			Suspended:   []string{"suspended"},
			BillingNear: []string{"spending limit", "billing", "invoice", "payment"},
			Credits: []string{"insufficient_quota", "billing_hard_limit_reached", "exceeded your current quota",
				"exceeded your current usage quota", "credit_balance_too_low", "credit balance is too low",
				"credits exhausted", "out of credits", "payment required", "tier has been exhausted",
				"insufficient balance", "insufficient account balance", "insufficient credit balance",
				"insufficient credit", "insufficient credits"},
			EmptyWallet:  []string{"exceeded_current_quota_error", "suspended due to insufficient balance"},
			Daily:        []string{"today's quota", "daily quota", "try again tomorrow"},
			TokensPerDay: []string{"tpd rate limit"},
			Subscription: []string{"usage limit reached", "usage limit has been", "claude pro usage limit",
				"you've reached your usage limit", "you have reached your usage limit"},
			SubscriptionByProvider: map[string][]string{"claude": {"would exceed your account's rate limit"}},
			Weekly: []string{"weekly usage limit", "weekly limit reached", "reached your weekly", "week quota",
				"weekly limit", "monthly limit", "weekly&&quota&&exhausted", "weekly&&quota&&exhaustion"},
			Session: []string{"session usage limit", "session limit reached", "reached your session…usage limit"},
			LongPeriod: []string{"daily limit", "daily quota", "monthly limit", "monthly quota", "quota exceed",
				"quota_exceed", "insufficient quota", "insufficient_quota", "billing cap", "out of credits",
				"hard limit", "hard_limit", "plan limit", "plan_limit", "today's quota", "tpd", "exceeded_current_quota"},
			QuotaText: []string{"quota exceeded", "quota_exceeded", "quota has been exceeded", "quota exhausted",
				"quota will reset", "resource_exhausted", "insufficient_quota", "usage limit"},
			RouteRefusal:    []string{"not authorized for this route"},
			ForbiddenExempt: []string{"has not been used in project", "hour quota", "quota has been exceeded"},
			BadRequest: []string{"context length", "context_length_exceeded", "maximum context", "context window",
				"prompt is too long", "too many tokens", "input is too long", "malformed", "invalid model",
				"unsupported parameter", "unknown parameter", "invalid parameter", "invalid_request_error…param",
				"model_not_found", "deployment_not_found", "not_found_error", "permission_error&&model",
				"does not exist…model", "model…does not exist", "degraded function"},
			Credential:    []string{"api key", "api_key", "apikey", "credential", "unauthorized", "authentication"},
			HighFrequency: []string{"high-frequency", "non-compliant", "频繁", "频率"},
			MetricPerDay:  []string{"perday", "per_day", "requests per day", "rpd"},
			TokenLimit:    []string{"request too large"},
			EmptyAnswer:   []string{"empty content", "empty response"},
		},
		EmergencyPhrases: []string{"insufficient funds", "insufficient_funds", "budget exceeded", "budget_exceeded",
			"quota exceeded", "quota_exceeded", "payment required", "out of credits", "no credits", "credit limit",
			"spending limit", "saldo insuficiente", "limite de gastos", "cota excedida"},
		EmergencyBilling:     []string{"billing"},
		EmergencyBillingNear: []string{"limit", "limits", "quota", "quotas", "exceeded"},
	}
}

// clone returns a deep copy of t.
func (t Tables) clone() Tables {
	c := t
	c.Restatements = make(map[string][]RestateRule, len(t.Restatements))
	for k, rs := range t.Restatements {
		cp := make([]RestateRule, len(rs))
		for i, r := range rs {
			r.FromStatuses = slices.Clone(r.FromStatuses)
			r.Markers = slices.Clone(r.Markers)
			r.Excludes = slices.Clone(r.Excludes)
			cp[i] = r
		}
		c.Restatements[k] = cp
	}
	c.ProviderRules = make(map[string][]ProviderRule, len(t.ProviderRules))
	for k, rs := range t.ProviderRules {
		c.ProviderRules[k] = cloneProviderRules(rs)
	}
	c.FullTextProviders = slices.Clone(t.FullTextProviders)
	c.ScopeProviders = slices.Clone(t.ScopeProviders)
	c.MetricQuotaProviders = slices.Clone(t.MetricQuotaProviders)
	c.CreditsExempt = slices.Clone(t.CreditsExempt)
	c.TextRules = make([]TextRule, len(t.TextRules))
	for i, r := range t.TextRules {
		r.Phrases = slices.Clone(r.Phrases)
		c.TextRules[i] = r
	}
	c.StatusRules = slices.Clone(t.StatusRules)
	c.Signals = t.Signals.clone()
	c.EmergencyPhrases = slices.Clone(t.EmergencyPhrases)
	c.EmergencyBilling = slices.Clone(t.EmergencyBilling)
	c.EmergencyBillingNear = slices.Clone(t.EmergencyBillingNear)
	return c
}

func cloneProviderRules(rs []ProviderRule) []ProviderRule {
	cp := make([]ProviderRule, len(rs))
	for i, r := range rs {
		r.Statuses = slices.Clone(r.Statuses)
		r.Any = slices.Clone(r.Any)
		r.All = slices.Clone(r.All)
		r.HeaderZero = slices.Clone(r.HeaderZero)
		cp[i] = r
	}
	return cp
}

func (s Signals) clone() Signals {
	c := s
	for _, p := range s.lists(&c) {
		*p = slices.Clone(*p)
	}
	c.SubscriptionByProvider = make(map[string][]string, len(s.SubscriptionByProvider))
	for k, v := range s.SubscriptionByProvider {
		c.SubscriptionByProvider[k] = slices.Clone(v)
	}
	return c
}

// lists returns pointers to every phrase list of dst.
func (Signals) lists(dst *Signals) []*[]string {
	return []*[]string{&dst.InternalRefusal, &dst.InternalRefusal409, &dst.Ban, &dst.Retired, &dst.Moved,
		&dst.Suspended, &dst.BillingNear, &dst.Credits, &dst.EmptyWallet, &dst.Daily, &dst.TokensPerDay, &dst.Subscription,
		&dst.Weekly, &dst.Session, &dst.LongPeriod, &dst.QuotaText, &dst.RouteRefusal, &dst.ForbiddenExempt,
		&dst.BadRequest, &dst.Credential, &dst.HighFrequency, &dst.MetricPerDay, &dst.TokenLimit, &dst.EmptyAnswer}
}

// lowerKeys returns m with lower-cased keys; later keys of equal lower case
// are appended.
func lowerKeys[V any](m map[string][]V) map[string][]V {
	out := make(map[string][]V, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		lk := lower(k)
		out[lk] = append(out[lk], m[k]...)
	}
	return out
}
