package restate

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/routeguard/routeguard"
)

// vd builds an expected Verdict for an unrestated status.
func vd(status int, fallback bool, kind Kind, reason Reason, mode CooldownMode, d time.Duration) Verdict {
	return Verdict{Status: status, FromStatus: status, ShouldFallback: fallback, Kind: kind, Reason: reason,
		Mode: mode, Cooldown: d, HintOverrides: mode == CooldownBackoff}
}

type classifyCase struct {
	name string
	r    Response
	now  time.Time
	want Verdict
}

func runClassify(t *testing.T, c *Classifier, cases []classifyCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			now := tt.now
			if now.IsZero() {
				now = t0
			}
			got := c.ClassifyAt(tt.r, now)
			// Unless a case says otherwise, the client is told the hint.
			if tt.want.ClientRetryAfter == 0 {
				tt.want.ClientRetryAfter = tt.want.Hint.After
			}
			if got != tt.want {
				t.Errorf("ClassifyAt(%+v)\n got %+v\nwant %+v", tt.r, got, tt.want)
			}
		})
	}
}

// with applies changes to an expected verdict.
func with(v Verdict, fs ...func(*Verdict)) Verdict {
	for _, f := range fs {
		f(&v)
	}
	return v
}

// The consumer flags of an expected verdict.
func terminal(v *Verdict)        { v.Terminal = true }
func expired(v *Verdict)         { v.Expired = true }
func requestRejected(v *Verdict) { v.RequestRejected = true }
func modelScoped(v *Verdict)     { v.ModelScoped = true }
func requestScoped(v *Verdict)   { v.RequestScoped = true }

func TestClassifyRestateScenarios(t *testing.T) {
	c := &Classifier{}
	runClassify(t, c, []classifyCase{
		{"M5-7 agentrouter 429 quota marker", Response{Provider: "agentrouter", Status: 429, Body: []byte("用户额度不足")},
			time.Time{}, with(vd(429, true, kindStatusRule, ReasonQuotaExhausted, CooldownBackoff, 0), func(v *Verdict) {
				v.RuleID, v.Scope = "agentrouter-quota", ScopeConnection
			})},
		{"M5-7 agentrouter 403 model forbidden", Response{Provider: "agentrouter", Status: 403, Body: []byte("无权访问模型 claude-opus-5")},
			time.Time{}, with(vd(403, true, kindProviderRule, ReasonAuthError, CooldownFixed, 6*time.Hour), func(v *Verdict) {
				v.RuleID, v.Scope = "agentrouter-model-forbidden", ScopeModel
			}, modelScoped)},
		{"M5-1 restated 403 then classified", Response{Provider: "agentrouter", Status: 403,
			Body: []byte(`{"error":{"message":"用户额度不足","type":"insufficient_user_quota"}}`)},
			time.Time{}, with(vd(429, true, kindStatusRule, ReasonQuotaExhausted, CooldownBackoff, 0), func(v *Verdict) {
				v.FromStatus, v.RestateRule, v.ClientRetryAfter = 403, "agentrouter-quota-misstatus", time.Minute
				v.RuleID, v.Scope = "agentrouter-quota", ScopeConnection
			})},
		{"M5-3 restated with the upstream Retry-After", Response{Provider: "agentrouter", Status: 403,
			Header: http.Header{"Retry-After": {"5"}}, Body: []byte("用户额度不足")},
			time.Time{}, with(vd(429, true, kindStatusRule, ReasonQuotaExhausted, CooldownBackoff, 0), func(v *Verdict) {
				v.FromStatus, v.RestateRule, v.ClientRetryAfter = 403, "agentrouter-quota-misstatus", 5*time.Second
				v.RuleID, v.Scope = "agentrouter-quota", ScopeConnection
				v.Hint = Hint{5 * time.Second, hintHeader, false}
			})},
		{"caller's RetryAfter wins over the hint", Response{Provider: "openai", Auth: routeguard.APIKey, Status: 503,
			Header: http.Header{"Retry-After": {"5"}}, RetryAfter: 8 * time.Second},
			time.Time{}, with(vd(503, true, kindStatusRule, ReasonServerError, CooldownBackoff, 0), func(v *Verdict) {
				v.ClientRetryAfter = 8 * time.Second
				v.Hint = Hint{5 * time.Second, hintHeader, false}
			})},
		// routeguard: the body is its own structured error, so the opencode
		// rule fires and its connection scope is surfaced (the original saw
		// no structured error on this path and answered rate_limit_exceeded).
		{"M5-8 opencode org quota", Response{Provider: "opencode-zen", Status: 429,
			Body: []byte(`{"error":{"message":"organization_quota_exceeded"}}`)},
			time.Time{}, with(vd(429, true, kindStatusRule, ReasonQuotaExhausted, CooldownBackoff, 0), func(v *Verdict) {
				v.RuleID, v.Scope = "opencode-account-quota", ScopeConnection
			})},
		{"M5-8 openrouter credits has no scope", Response{Provider: "openrouter", Status: 402, Body: []byte("credits exhausted")},
			time.Time{}, with(vd(402, true, kindCredits, ReasonQuotaExhausted, CooldownFixed, 2*time.Minute), func(v *Verdict) {
				v.CreditsExhausted = true
			}, terminal)},
		{"D7 opencode 400 model unavailable", Response{Provider: "opencode-go", Status: 400,
			Body: []byte("Upstream request failed: model is unavailable.")},
			time.Time{}, with(vd(400, true, kindProviderRule, ReasonModelCapacity, CooldownFixed, time.Hour), func(v *Verdict) {
				v.RuleID, v.Scope = "opencode-model-unavailable", ScopeModel
			}, modelScoped)},
		{"minimax 429 header rule, scope not surfaced", Response{Provider: "minimax", Auth: routeguard.APIKey, Status: 429,
			Header: http.Header{"X-Model-Quota-Remaining": {"haiku=0,sonnet=42"}}},
			time.Time{}, with(vd(429, true, kindStatusRule, ReasonQuotaExhausted, CooldownBackoff, 0), func(v *Verdict) {
				v.RuleID = "minimax-model-quota"
			})},
	})
}

func TestOperatorRules(t *testing.T) {
	c := &Classifier{}
	err := c.SetOperatorRules(map[string][]OperatorRule{
		"acme": {{Status: 503, Match: "Maintenance", Scope: ScopeConnection, Cooldown: 10 * time.Minute}},
		"foo":  {{Status: 400, Match: "foo", Scope: ScopeModel}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !c.honorsScope("acme") || !c.honorsScope("ACME") {
		t.Error("honorsScope(acme) = false, want true")
	}
	if got := c.ruleMatchBody("acme", "structured", "Scheduled MAINTENANCE window"); got != "Scheduled MAINTENANCE window" {
		t.Errorf("ruleMatchBody = %q, want the full text", got)
	}
	m, ok := c.matchRuleAt("ACME", 503, nil, []byte("Scheduled MAINTENANCE window"), t0)
	if want := (ruleMatch{ID: "operator:acme:0", Reason: ReasonQuotaExhausted, Scope: ScopeConnection, Cooldown: 10 * time.Minute}); !ok || m != want {
		t.Errorf("matchRuleAt = %+v, %v; want %+v", m, ok, want)
	}
	runClassify(t, c, []classifyCase{
		{"M5-11 operator 503", Response{Provider: "ACME", Status: 503, Body: []byte("Scheduled MAINTENANCE window")},
			time.Time{}, with(vd(503, true, kindStatusRule, ReasonQuotaExhausted, CooldownFixed, 10*time.Minute), func(v *Verdict) {
				v.RuleID, v.Scope = "operator:acme:0", ScopeConnection
			})},
		// routeguard: the 400 gap is closed (D7).
		{"M5-12 operator 400 fires", Response{Provider: "foo", Status: 400, Body: []byte("foo bar")},
			time.Time{}, with(vd(400, true, kindProviderRule, ReasonQuotaExhausted, CooldownBackoff, 0), func(v *Verdict) {
				v.RuleID, v.Scope = "operator:foo:0", ScopeModel
			}, modelScoped)},
		{"operator status differs", Response{Provider: "foo", Status: 404, Body: []byte("foo bar")},
			time.Time{}, with(vd(404, true, kindStatusRule, ReasonUnknown, CooldownFixed, 2*time.Minute), modelScoped)},
	})
	if err := c.SetOperatorRules(nil); err != nil {
		t.Fatal(err)
	}
	if c.honorsScope("acme") || len(c.OperatorRules()) != 0 {
		t.Error("operator rules not cleared")
	}
}

// Operator matches are plain substrings: the phrase operators of the
// signal lists are taken literally.
func TestOperatorRuleMatchIsLiteral(t *testing.T) {
	c := &Classifier{}
	err := c.SetOperatorRules(map[string][]OperatorRule{"acme": {
		{Status: 503, Match: "Slow&&Down", Scope: ScopeProvider},
		{Status: 503, Match: "back…later", Scope: ScopeModel, Cooldown: time.Minute},
	}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		body string
		want ruleMatch
		ok   bool
	}{
		{"please slow&&down", ruleMatch{ID: "operator:acme:0", Reason: ReasonQuotaExhausted, Scope: ScopeProvider}, true},
		{"down, slow", ruleMatch{}, false},
		{"come BACK…LATER", ruleMatch{ID: "operator:acme:1", Reason: ReasonQuotaExhausted, Scope: ScopeModel, Cooldown: time.Minute}, true},
		{"back a bit later", ruleMatch{}, false},
	}
	for _, tt := range tests {
		got, ok := c.matchRuleAt("acme", 503, nil, []byte(tt.body), t0)
		if ok != tt.ok || got != tt.want {
			t.Errorf("matchRuleAt(%q) = %+v, %v; want %+v, %v", tt.body, got, ok, tt.want, tt.ok)
		}
	}
}

func TestOperatorRulesValidation(t *testing.T) {
	many := make([]OperatorRule, 51)
	for i := range many {
		many[i] = OperatorRule{Status: 429, Match: "x", Scope: ScopeModel}
	}
	tests := []struct {
		name  string
		rules map[string][]OperatorRule
		field string
		id    string
	}{
		{"too many", map[string][]OperatorRule{"a": many}, "OperatorRules", ""},
		{"empty provider", map[string][]OperatorRule{" ": {{Status: 429, Match: "x", Scope: ScopeModel}}}, `OperatorRules[" "]`, ""},
		{"status low", map[string][]OperatorRule{"a": {{Status: 99, Match: "x", Scope: ScopeModel}}}, `OperatorRules["a"][0]`, "operator:a:0"},
		{"status high", map[string][]OperatorRule{"a": {{Status: 600, Match: "x", Scope: ScopeModel}}}, `OperatorRules["a"][0]`, "operator:a:0"},
		{"empty match", map[string][]OperatorRule{"a": {{Status: 429, Match: "x", Scope: ScopeModel}, {Status: 429, Match: " ", Scope: ScopeModel}}}, `OperatorRules["a"][1]`, "operator:a:1"},
		{"bad scope", map[string][]OperatorRule{"B": {{Status: 429, Match: "x", Scope: "exact"}}}, `OperatorRules["b"][0]`, "operator:b:0"},
		{"negative cooldown", map[string][]OperatorRule{"a": {{Status: 429, Match: "x", Scope: ScopeModel, Cooldown: -1}}}, `OperatorRules["a"][0]`, "operator:a:0"},
	}
	c := &Classifier{}
	keep := map[string][]OperatorRule{"keep": {{Status: 429, Match: "k", Scope: ScopeModel}}}
	if err := c.SetOperatorRules(keep); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.SetOperatorRules(tt.rules)
			var re *Error
			if !errors.As(err, &re) || !errors.Is(err, ErrInvalidRule) || errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("SetOperatorRules = %v, want an *Error matching ErrInvalidRule", err)
			}
			if re.Field != tt.field || re.Rule != tt.id || re.Code != "invalid_rule" || re.Status != 400 {
				t.Errorf("Error = %+v (%q), want field %s, rule %q", re, re.Error(), tt.field, tt.id)
			}
			if got := c.OperatorRules(); len(got["keep"]) != 1 || got["keep"][0].Reason != ReasonQuotaExhausted {
				t.Errorf("previous rules lost: %+v", got)
			}
		})
	}
	// Exactly 50 is allowed; empty lists are dropped.
	if err := c.SetOperatorRules(map[string][]OperatorRule{"a": many[:50], "empty": nil}); err != nil {
		t.Errorf("50 rules refused: %v", err)
	}
	if _, ok := c.OperatorRules()["empty"]; ok {
		t.Error("empty list kept")
	}
}

func TestClassifyCooldownScenarios(t *testing.T) {
	c := &Classifier{}
	cet := time.FixedZone("CET", 3600)
	rateLimit := vd(429, true, kindStatusRule, ReasonRateLimit, CooldownBackoff, 0)
	runClassify(t, c, []classifyCase{
		{"M3-1 apikey 429 rate limit", Response{Provider: "openai", Auth: routeguard.APIKey, Status: 429, Body: []byte("Rate limit reached")},
			time.Time{}, rateLimit},
		// The backoff level is the consumer's: the verdict is the same at
		// level 2, 5 or 9 (the cooldown package scales it).
		{"M3-2 apikey 429 at any level", Response{Provider: "openai", Auth: routeguard.APIKey, Status: 429, Body: []byte("Rate limit reached")},
			time.Time{}, rateLimit},
		{"M3-3 oauth 503", Response{Provider: "claude", Auth: routeguard.OAuth, Status: 503},
			time.Time{}, vd(503, true, kindStatusRule, ReasonServerError, CooldownBackoff, 0)},
		{"M3-4 apikey retry-after", Response{Provider: "openai", Auth: routeguard.APIKey, Status: 429, Header: http.Header{"Retry-After": {"17"}}},
			time.Time{}, with(rateLimit, func(v *Verdict) { v.Hint = Hint{17 * time.Second, hintHeader, false} })},
		{"M3-4 oauth retry-after (hints are the consumer's switch)", Response{Provider: "claude", Auth: routeguard.OAuth, Status: 429, Header: http.Header{"Retry-After": {"17"}}},
			time.Time{}, with(rateLimit, func(v *Verdict) { v.Hint = Hint{17 * time.Second, hintHeader, false} })},
		{"M3-5 reset epoch seconds", Response{Auth: routeguard.APIKey, Status: 429, Header: http.Header{"X-Ratelimit-Reset": {"1700000000"}}},
			time.UnixMilli(1699999990000), with(rateLimit, func(v *Verdict) { v.Hint = Hint{10 * time.Second, hintHeader, false} })},
		{"M3-5 reset epoch ms", Response{Auth: routeguard.APIKey, Status: 429, Header: http.Header{"X-Ratelimit-Reset": {"1700000000000"}}},
			time.UnixMilli(1699999990000), with(rateLimit, func(v *Verdict) { v.Hint = Hint{10 * time.Second, hintHeader, false} })},
		// routeguard: a small integer is relative seconds (D4).
		{"M3-5 reset relative", Response{Auth: routeguard.APIKey, Status: 429, Header: http.Header{"X-Ratelimit-Reset": {"30"}}},
			time.UnixMilli(1699999990000), with(rateLimit, func(v *Verdict) { v.Hint = Hint{30 * time.Second, hintHeader, false} })},
		{"M3-6 RetryInfo", Response{Auth: routeguard.APIKey, Status: 429, Body: []byte(`{"error":{"code":429,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26.5s"}]}}`)},
			time.Time{}, with(rateLimit, func(v *Verdict) { v.Hint = Hint{26500 * time.Millisecond, hintRetryInfo, false} })},
		{"M3-7 account deactivated", Response{Status: 401, Body: []byte(`{"error":{"code":"account_deactivated"}}`)},
			time.Time{}, with(vd(401, true, kindBan, ReasonAuthError, CooldownFixed, 365*24*time.Hour), func(v *Verdict) { v.Permanent = true }, expired, terminal)},
		{"M3-8 plain 401", Response{Provider: "openai", Auth: routeguard.APIKey, Status: 401},
			time.Time{}, with(vd(401, true, kindStatusRule, ReasonAuthError, CooldownNone, 0), expired, terminal)},
		{"M3-9 openrouter 402", Response{Provider: "openrouter", Auth: routeguard.APIKey, Status: 402},
			time.Time{}, with(vd(402, true, kindStatusRule, ReasonQuotaExhausted, CooldownFixed, 2*time.Minute), func(v *Verdict) {
				v.RuleID, v.CreditsExhausted = "openrouter-payment-required", true
			}, terminal)},
		{"M3-10 deepseek balance", Response{Provider: "deepseek", Auth: routeguard.APIKey, Status: 400, Body: []byte("Insufficient account balance")},
			time.Time{}, with(vd(400, true, kindCredits, ReasonQuotaExhausted, CooldownFixed, 2*time.Minute), func(v *Verdict) { v.CreditsExhausted = true }, terminal)},
		{"M3-12 daily at 23:00 local", Response{Provider: "gemini-cli", Auth: routeguard.OAuth, Status: 429, Body: []byte("You exceeded today's quota")},
			time.Date(2026, 3, 10, 23, 0, 0, 0, cet), with(vd(429, true, kindDaily, ReasonQuotaExhausted, CooldownFixed, time.Hour), func(v *Verdict) {
				v.DailyQuota, v.QuotaResetHint = true, time.Hour
			})},
		{"M3-13 retired model", Response{Status: 404, Body: []byte("models/gemini-2.5-flash is no longer available")},
			time.Time{}, with(vd(404, true, kindRetiredModel, ReasonNotFound, CooldownFixed, 24*time.Hour), func(v *Verdict) { v.QuotaResetHint = 24 * time.Hour }, modelScoped)},
		{"M3-14 context length", Response{Auth: routeguard.APIKey, Status: 400, Body: []byte("maximum context length exceeded")},
			time.Time{}, with(vd(400, true, kindBadRequest, ReasonModelCapacity, CooldownNone, 0), requestScoped)},
		{"M3-14 invalid model", Response{Auth: routeguard.APIKey, Status: 400, Body: []byte("Invalid model xyz")},
			time.Time{}, with(vd(400, true, kindBadRequest, ReasonModelCapacity, CooldownNone, 0), requestScoped)},
		{"M3-14 credential looking", Response{Auth: routeguard.APIKey, Status: 400, Body: []byte("invalid api key for model xyz")},
			time.Time{}, with(vd(400, false, kindBadRequest, ReasonUnknown, CooldownNone, 0), requestScoped)},
		{"M3-14 high frequency", Response{Auth: routeguard.APIKey, Status: 400, Body: []byte("Detected high-frequency non-compliant requests")},
			time.Time{}, vd(400, true, kindHighFrequency, ReasonRateLimit, CooldownBackoff, 0)},
		{"M3-14 bad parameter", Response{Auth: routeguard.APIKey, Status: 400, Body: []byte("bad parameter foo")},
			time.Time{}, with(vd(400, false, kindBadRequest, ReasonUnknown, CooldownNone, 0), requestScoped)},
		{"M3-15 usage limit", Response{Provider: "claude", Auth: routeguard.OAuth, Status: 429, Body: []byte("Usage limit reached")},
			time.Time{}, with(vd(429, true, kindSubscription, ReasonQuotaExhausted, CooldownFixed, time.Hour), func(v *Verdict) { v.HintOverrides = true })},
		{"M3-15 weekly resets in 3 days", Response{Provider: "claude", Auth: routeguard.OAuth, Status: 429, Body: []byte("You have reached your weekly limit, resets in 3 days")},
			time.Time{}, with(vd(429, true, kindWeekly, ReasonQuotaExhausted, CooldownFixed, 72*time.Hour), func(v *Verdict) {
				v.QuotaResetHint = 72 * time.Hour
				v.Hint = Hint{72 * time.Hour, hintText, true}
			})},
		{"M3-15 session", Response{Provider: "claude", Auth: routeguard.OAuth, Status: 429, Body: []byte("You've reached your session usage limit")},
			time.Time{}, with(vd(429, true, kindSession, ReasonQuotaExhausted, CooldownFixed, 5*time.Hour), func(v *Verdict) { v.QuotaResetHint = 5 * time.Hour })},
		{"M3-16 request not allowed", Response{Provider: "anthropic", Auth: routeguard.OAuth, Status: 403, Body: []byte("Request not allowed")},
			time.Time{}, with(vd(403, true, kindRequestRejected, ReasonRateLimit, CooldownFixed, 5*time.Second), requestRejected, terminal)},
	})
}

func TestClassifyBranches(t *testing.T) {
	c := &Classifier{}
	runClassify(t, c, []classifyCase{
		{"success status", Response{Status: 200, Body: []byte("rate limit")}, time.Time{},
			Verdict{Status: 200, FromStatus: 200, Mode: CooldownNone}},
		{"network error", Response{Status: 0}, time.Time{}, vd(0, true, kindNetwork, ReasonServerError, CooldownBackoff, 0)},
		{"internal refusal binding", Response{Status: 400, Body: []byte(`{"error":{"code":"invalid_previous_response_binding"}}`)}, time.Time{},
			with(vd(400, false, kindInternalRefusal, ReasonInvalidBinding, CooldownNone, 0), func(v *Verdict) { v.SkipProviderBreaker = true })},
		{"internal refusal 409", Response{Status: 409, Body: []byte("previous_response_id does not belong to this connection")}, time.Time{},
			with(vd(409, false, kindInternalRefusal, ReasonInvalidBinding, CooldownNone, 0), func(v *Verdict) { v.SkipProviderBreaker = true })},
		{"409 without the text", Response{Status: 409, Body: []byte("conflict")}, time.Time{},
			vd(409, true, kindOther, ReasonUnknown, CooldownBase, 0)},
		{"moved endpoint", Response{Status: 400, Body: []byte("This endpoint has moved, update your base URL")}, time.Time{},
			with(vd(400, true, kindMovedEndpoint, ReasonNotFound, CooldownFixed, 24*time.Hour), func(v *Verdict) { v.QuotaResetHint = 24 * time.Hour }, modelScoped)},
		{"retired needs 404/410", Response{Status: 500, Body: []byte("model deprecated")}, time.Time{},
			vd(500, true, kindStatusRule, ReasonServerError, CooldownBackoff, 0)},
		{"retired model wording 410", Response{Status: 410, Body: []byte("The model gpt-3 has been retired")}, time.Time{},
			with(vd(410, true, kindRetiredModel, ReasonNotFound, CooldownFixed, 24*time.Hour), func(v *Verdict) { v.QuotaResetHint = 24 * time.Hour }, modelScoped)},
		{"billing suspension", Response{Status: 403, Body: []byte("Access suspended: monthly spending limit reached")}, time.Time{},
			with(vd(403, true, kindBillingSuspension, ReasonQuotaExhausted, CooldownFixed, 2*time.Minute), func(v *Verdict) { v.CreditsExhausted = true }, terminal)},
		{"ban wins over billing suspension", Response{Status: 403, Body: []byte("Your account has been suspended for billing")}, time.Time{},
			with(vd(403, true, kindBan, ReasonAuthError, CooldownFixed, 365*24*time.Hour), func(v *Verdict) { v.Permanent = true }, terminal)},
		{"gemini per-day metric", Response{Provider: "gemini", Model: "gemini-2.5-pro", Auth: routeguard.APIKey, Status: 429,
			Body: []byte(`quota_metric: generate_content_free_tier_requests, quotaId: GenerateRequestsPerDayPerProjectPerModel`)}, time.Time{},
			vd(429, true, kindMetricQuota, ReasonQuotaExhausted, CooldownBackoff, 0)},
		{"gemini per-minute metric", Response{Provider: "gemini", Model: "gemini-2.5-pro", Auth: routeguard.APIKey, Status: 429,
			Body: []byte(`quotaId: GenerateRequestsPerMinutePerProjectPerModel`)}, time.Time{},
			vd(429, true, kindMetricQuota, ReasonRateLimit, CooldownBackoff, 0)},
		{"apikey 429 credits text not preserved", Response{Provider: "openai", Auth: routeguard.APIKey, Status: 429, Body: []byte("credit balance is too low")}, time.Time{},
			vd(429, true, kindStatusRule, ReasonRateLimit, CooldownBackoff, 0)},
		{"apikey 429 insufficient_quota preserved", Response{Provider: "openai", Auth: routeguard.APIKey, Status: 429, Body: []byte(`{"error":{"code":"insufficient_quota"}}`)}, time.Time{},
			with(vd(429, true, kindCredits, ReasonQuotaExhausted, CooldownFixed, 2*time.Minute), func(v *Verdict) { v.CreditsExhausted = true }, terminal)},
		{"compatible provider credit phrase not trusted", Response{Provider: "openai-compatible-abc", Auth: routeguard.APIKey, Status: 400, Body: []byte("Insufficient balance")}, time.Time{},
			with(vd(400, false, kindBadRequest, ReasonUnknown, CooldownNone, 0), requestScoped)},
		{"compatible provider empty wallet", Response{Provider: "openai-compatible-moonshot", Auth: routeguard.APIKey, Status: 429,
			Body: []byte(`{"error":{"type":"exceeded_current_quota_error","message":"insufficient balance"}}`)}, time.Time{},
			with(vd(429, true, kindCredits, ReasonQuotaExhausted, CooldownFixed, 2*time.Minute), func(v *Verdict) { v.CreditsExhausted = true }, terminal)},
		{"tpd with header hint", Response{Provider: "groq", Auth: routeguard.OAuth, Status: 429, Body: []byte("TPD rate limit reached"),
			Header: http.Header{"Retry-After": {"600"}}}, time.Time{},
			with(vd(429, true, kindDaily, ReasonQuotaExhausted, CooldownFixed, 10*time.Minute), func(v *Verdict) {
				v.DailyQuota, v.QuotaResetHint = true, 10*time.Minute
				v.Hint = Hint{10 * time.Minute, hintHeader, false}
			})},
		{"tpd without hint falls through", Response{Provider: "groq", Auth: routeguard.OAuth, Status: 429, Body: []byte("TPD rate limit reached")}, time.Time{},
			vd(429, true, kindTextRule, ReasonRateLimit, CooldownBackoff, 0)},
		{"claude-only subscription phrase", Response{Provider: "claude", Auth: routeguard.OAuth, Status: 429, Body: []byte("This request would exceed your account's rate limit")}, time.Time{},
			with(vd(429, true, kindSubscription, ReasonQuotaExhausted, CooldownFixed, time.Hour), func(v *Verdict) { v.HintOverrides = true })},
		{"subscription with hint", Response{Provider: "codex", Auth: routeguard.OAuth, Status: 429, Body: []byte("You have reached your usage limit. Try again in 2 hours")}, time.Time{},
			with(vd(429, true, kindSubscription, ReasonQuotaExhausted, CooldownFixed, time.Hour), func(v *Verdict) {
				v.HintOverrides, v.QuotaResetHint = true, time.Hour
				v.Hint = Hint{time.Hour, hintText, false} // 2 h capped by MaxRateLimitHint
			})},
		{"weekly without reset", Response{Auth: routeguard.OAuth, Status: 429, Body: []byte("weekly usage limit")}, time.Time{},
			with(vd(429, true, kindWeekly, ReasonQuotaExhausted, CooldownFixed, 24*time.Hour), func(v *Verdict) { v.QuotaResetHint = 24 * time.Hour })},
		{"weekly capped at 30 days", Response{Auth: routeguard.OAuth, Status: 429, Body: []byte("monthly limit hit, resets in 90 days")}, time.Time{},
			with(vd(429, true, kindWeekly, ReasonQuotaExhausted, CooldownFixed, 30*24*time.Hour), func(v *Verdict) {
				v.QuotaResetHint = 30 * 24 * time.Hour
				v.Hint = Hint{30 * 24 * time.Hour, hintText, true}
			})},
		{"quota text with hint", Response{Auth: routeguard.OAuth, Status: 429, Body: []byte(`{"error":{"status":"RESOURCE_EXHAUSTED","message":"exhausted"}}`),
			Header: http.Header{"Retry-After": {"90"}}}, time.Time{},
			with(vd(429, true, kindQuotaHint, ReasonQuotaExhausted, CooldownBackoff, 0), func(v *Verdict) {
				v.QuotaResetHint = 90 * time.Second
				v.Hint = Hint{90 * time.Second, hintHeader, false}
			})},
		{"route refusal", Response{Auth: routeguard.APIKey, Status: 403, Body: []byte("Not authorized for this route")}, time.Time{},
			vd(403, false, kindRouteRefusal, ReasonUnknown, CooldownNone, 0)},
		{"403 apikey forbidden", Response{Provider: "openai", Auth: routeguard.APIKey, Status: 403, Body: []byte("Forbidden")}, time.Time{},
			with(vd(403, true, kindForbidden, ReasonAuthError, CooldownBackoff, 0), func(v *Verdict) { v.HintOverrides = false })},
		{"403 apikey hour quota is a quota", Response{Provider: "openai", Auth: routeguard.APIKey, Status: 403, Body: []byte("hour quota exceeded")}, time.Time{},
			vd(403, true, kindTextRule, ReasonQuotaExhausted, CooldownBackoff, 0)},
		{"403 oauth plain", Response{Provider: "claude", Auth: routeguard.OAuth, Status: 403}, time.Time{},
			vd(403, true, kindStatusRule, ReasonQuotaExhausted, CooldownNone, 0)},
		{"no credentials", Response{Status: 500, Body: []byte("No credentials found")}, time.Time{},
			vd(500, true, kindTextRule, ReasonAuthError, CooldownFixed, 2*time.Minute)},
		{"improperly formed", Response{Status: 400, Body: []byte("Improperly formed request")}, time.Time{},
			vd(400, true, kindTextRule, ReasonModelCapacity, CooldownNone, 0)},
		{"overloaded text on 529", Response{Status: 529, Body: []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)}, time.Time{},
			vd(529, true, kindTextRule, ReasonModelCapacity, CooldownBackoff, 0)},
		{"524 leftover", Response{Status: 524}, time.Time{}, vd(524, true, kindStatusRule, ReasonServerError, CooldownBackoff, 0)},
		{"501 other", Response{Status: 501}, time.Time{}, vd(501, true, kindOther, ReasonUnknown, CooldownBase, 0)},
		{"422 other", Response{Status: 422, Body: []byte("unprocessable")}, time.Time{}, vd(422, true, kindOther, ReasonUnknown, CooldownBase, 0)},
		{"432 subscription", Response{Status: 432}, time.Time{},
			with(vd(432, true, kindSubscription, ReasonQuotaExhausted, CooldownFixed, time.Hour), func(v *Verdict) { v.HintOverrides = true })},
		{"404 status rule", Response{Status: 404}, time.Time{}, with(vd(404, true, kindStatusRule, ReasonUnknown, CooldownFixed, 2*time.Minute), modelScoped)},
		{"cloudflare daily via rule", Response{Provider: "cloudflare-ai", Auth: routeguard.APIKey, Status: 429, Body: []byte("daily free allocation used")},
			time.Date(2026, 3, 10, 18, 0, 0, 0, time.UTC),
			with(vd(429, true, kindStatusRule, ReasonRateLimit, CooldownFixed, 6*time.Hour), func(v *Verdict) {
				v.HintOverrides, v.RuleID, v.DailyQuota, v.QuotaResetHint = false, "cloudflare-daily-allocation", true, 6*time.Hour
				v.Reason = ReasonQuotaExhausted
			})},
		{"retry-after capped at 1h", Response{Auth: routeguard.APIKey, Status: 429, Header: http.Header{"Retry-After": {"999999999"}}}, time.Time{},
			with(vd(429, true, kindStatusRule, ReasonRateLimit, CooldownBackoff, 0), func(v *Verdict) { v.Hint = Hint{time.Hour, hintHeader, false} })},
	})
}

func TestRestatedStatusNeverInventedForOtherStatuses(t *testing.T) {
	c := &Classifier{}
	for _, s := range []int{401, 402, 404, 429, 500, 503} {
		v := c.ClassifyAt(Response{Provider: "agentrouter", Status: s, Body: []byte("用户额度不足")}, t0)
		if v.Status != s || v.RestateRule != "" {
			t.Errorf("status %d restated to %d by %q", s, v.Status, v.RestateRule)
		}
	}
}

func TestDailyMidnightGuard(t *testing.T) {
	for _, tt := range []struct {
		now  time.Time
		want time.Duration
	}{
		{time.Date(2026, 3, 10, 23, 0, 0, 0, time.UTC), time.Hour},
		{time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC), 24 * time.Hour},
		{time.Date(2026, 3, 10, 12, 30, 0, 0, time.UTC), 11*time.Hour + 30*time.Minute},
	} {
		if got := untilMidnight(tt.now); got != tt.want {
			t.Errorf("untilMidnight(%v) = %v, want %v", tt.now, got, tt.want)
		}
	}
}
