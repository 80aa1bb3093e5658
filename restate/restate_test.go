package restate

import (
	"net/http"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

func TestRestateScenarios(t *testing.T) {
	c := &Classifier{}
	const rule = "agentrouter-quota-misstatus"
	tests := []struct {
		name     string
		provider string
		status   int
		message  string
		body     string
		upstream time.Duration
		want     restatement
	}{
		{"1 quota misstatus 403", "agentrouter", 403, `{"error":{"message":"用户额度不足","type":"insufficient_user_quota"}}`, "", 0,
			restatement{Status: 429, FromStatus: 403, RuleID: rule, RetryAfter: 60 * time.Second}},
		{"2 model forbidden vetoed", "agentrouter", 403, "无权访问模型 claude-sonnet-4", "", 0,
			restatement{Status: 403, FromStatus: 403}},
		{"2b veto wins over marker", "agentrouter", 403, "额度不足 无权访问", "", 0,
			restatement{Status: 403, FromStatus: 403}},
		{"3 upstream retry kept", "agentrouter", 403, "用户额度不足", "", 5 * time.Second,
			restatement{Status: 429, FromStatus: 403, RuleID: rule, RetryAfter: 5 * time.Second}},
		{"3 zero upstream gives default", "agentrouter", 403, "用户额度不足", "", 0,
			restatement{Status: 429, FromStatus: 403, RuleID: rule, RetryAfter: 60 * time.Second}},
		{"4 400 with marker", "agentrouter", 400, "额度不足", "", 0,
			restatement{Status: 429, FromStatus: 400, RuleID: rule, RetryAfter: 60 * time.Second}},
		{"4 429 passthrough keeps upstream", "agentrouter", 429, "额度不足", "", 7 * time.Second,
			restatement{Status: 429, FromStatus: 429, RetryAfter: 7 * time.Second}},
		{"4 invalid key passthrough", "agentrouter", 403, "Invalid API key", "", 0,
			restatement{Status: 403, FromStatus: 403}},
		{"5 other provider", "openai", 403, "用户额度不足", "", 0,
			restatement{Status: 403, FromStatus: 403}},
		{"5 provider case-insensitive", "AgentRouter", 403, "用户额度不足", "", 0,
			restatement{Status: 429, FromStatus: 403, RuleID: rule, RetryAfter: 60 * time.Second}},
		{"marker in body only", "agentrouter", 403, "", `{"error":"额度不足"}`, 0,
			restatement{Status: 429, FromStatus: 403, RuleID: rule, RetryAfter: 60 * time.Second}},
		{"blank haystack", "agentrouter", 403, "  ", "", 0, restatement{Status: 403, FromStatus: 403}},
		{"no provider", "", 403, "额度不足", "", 0, restatement{Status: 403, FromStatus: 403}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := c.restate(tt.provider, tt.status, tt.message, []byte(tt.body), tt.upstream)
			if got != tt.want {
				t.Errorf("Restate(%q, %d, %q) = %+v, want %+v", tt.provider, tt.status, tt.message, got, tt.want)
			}
		})
	}
}

func TestRestateMarkersCaseInsensitive(t *testing.T) {
	c := &Classifier{}
	tb := DefaultTables()
	tb.Restatements["Acme"] = []RestateRule{{ID: "acme", FromStatuses: []int{403}, ToStatus: 429,
		Markers: []string{"Quota GONE"}, Excludes: []string{"NOT"}}}
	if err := c.SetTables(tb); err != nil {
		t.Fatal(err)
	}
	got := c.restate("acme", 403, "", []byte("the QUOTA gone"), 0)
	want := restatement{Status: 429, FromStatus: 403, RuleID: "acme"}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got := c.restate("acme", 403, "", []byte("quota gone? not yours"), 0); got.RuleID != "" {
		t.Errorf("veto ignored: %+v", got)
	}
}

func TestMatchRuleScenarios(t *testing.T) {
	c := &Classifier{}
	tests := []struct {
		name     string
		provider string
		status   int
		header   http.Header
		body     string
		want     ruleMatch
		ok       bool
	}{
		{"6 agentrouter quota", "agentrouter", 429, nil, `{"error":{"message":"用户额度不足"}}`,
			ruleMatch{ID: "agentrouter-quota", Reason: ReasonQuotaExhausted, Scope: ScopeConnection}, true},
		{"6 agentrouter model forbidden", "agentrouter", 403, nil, "无权访问模型 x",
			ruleMatch{ID: "agentrouter-model-forbidden", Reason: ReasonAuthError, Scope: ScopeModel, Cooldown: 6 * time.Hour}, true},
		{"6 invalid key", "agentrouter", 403, nil, "Invalid API key", ruleMatch{}, false},
		{"13 minimax zero pair", "minimax", 429, http.Header{"X-Model-Quota-Remaining": {"haiku=0,sonnet=42"}}, "",
			ruleMatch{ID: "minimax-model-quota", Reason: ReasonQuotaExhausted, Scope: ScopeModel}, true},
		{"13 minimax passthrough", "minimax-passthrough", 429, http.Header{"X-Model-Quota-Remaining": {"haiku=0"}}, "",
			ruleMatch{ID: "minimax-model-quota", Reason: ReasonQuotaExhausted, Scope: ScopeModel}, true},
		{"13 minimax nonzero", "minimax", 429, http.Header{"X-Model-Quota-Remaining": {"haiku=3"}}, "", ruleMatch{}, false},
		{"opencode endpoint unavailable 400", "opencode-zen", 400, nil, "The endpoint is unavailable",
			ruleMatch{ID: "opencode-endpoint-unavailable", Reason: ReasonModelCapacity, Scope: ScopeModel, Cooldown: 5 * time.Minute}, true},
		{"opencode endpoint unavailable 429", "opencode-go", 429, nil, "endpoint is unavailable",
			ruleMatch{ID: "opencode-endpoint-unavailable", Reason: ReasonModelCapacity, Scope: ScopeModel, Cooldown: 5 * time.Minute}, true},
		{"opencode monthly with reset", "opencode-cli", 429, nil, "Monthly usage limit reached. Resets in 3 days",
			ruleMatch{ID: "opencode-monthly-limit", Reason: ReasonQuotaExhausted, Scope: ScopeConnection, Cooldown: 72 * time.Hour}, true},
		{"opencode monthly without reset", "opencode-cli", 429, nil, "Monthly usage limit reached", ruleMatch{}, false},
		{"opencode remaining requests 0", "opencode-zen", 429, http.Header{"X-Ratelimit-Remaining-Requests": {"0"}}, "",
			ruleMatch{ID: "opencode-remaining-zero", Reason: ReasonQuotaExhausted, Scope: ScopeConnection}, true},
		{"opencode remaining tokens 0", "opencode-zen", 429, http.Header{"X-Ratelimit-Remaining-Tokens": {"0"}}, "",
			ruleMatch{ID: "opencode-remaining-zero", Reason: ReasonQuotaExhausted, Scope: ScopeConnection}, true},
		{"opencode org quota", "opencode-zen", 429, nil, `{"error":{"message":"organization_quota_exceeded"}}`,
			ruleMatch{ID: "opencode-account-quota", Reason: ReasonQuotaExhausted, Scope: ScopeConnection}, true},
		{"opencode plan limit", "opencode-zen", 429, nil, "plan_limit_reached",
			ruleMatch{ID: "opencode-account-quota", Reason: ReasonQuotaExhausted, Scope: ScopeConnection}, true},
		{"opencode model unavailable", "opencode-go", 400, nil, "Upstream request failed: model is unavailable.",
			ruleMatch{ID: "opencode-model-unavailable", Reason: ReasonModelCapacity, Scope: ScopeModel, Cooldown: time.Hour}, true},
		{"cloudflare daily", "cloudflare-ai", 429, nil, "you have used up your daily free allocation",
			ruleMatch{ID: "cloudflare-daily-allocation", Reason: ReasonQuotaExhausted, Scope: ScopeConnection, Cooldown: 12 * time.Hour, DailyQuota: true}, true},
		{"openrouter 402", "openrouter", 402, nil, "",
			ruleMatch{ID: "openrouter-payment-required", Reason: ReasonQuotaExhausted, Scope: ScopeConnection, Cooldown: 2 * time.Minute}, true},
		{"openrouter 429", "openrouter", 429, nil, "", ruleMatch{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := c.matchRuleAt(tt.provider, tt.status, tt.header, []byte(tt.body), t0)
			if ok != tt.ok || got != tt.want {
				t.Errorf("matchRuleAt(%q, %d) = %+v, %v; want %+v, %v", tt.provider, tt.status, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestRuleMatchBody(t *testing.T) {
	c := &Classifier{}
	tests := []struct{ provider, structured, text, want string }{
		{"agentrouter", "structured", "用户额度不足", "用户额度不足"},
		{"opencode-zen", "structured", "text", "structured"},
		// routeguard: without a structured error the text is used, so
		// rules still fire for callers that pass only the body.
		{"openrouter", "", "x", "x"},
		{"agentrouter", "structured", "", "structured"},
	}
	for _, tt := range tests {
		if got := c.ruleMatchBody(tt.provider, tt.structured, tt.text); got != tt.want {
			t.Errorf("ruleMatchBody(%q, %q, %q) = %q, want %q", tt.provider, tt.structured, tt.text, got, tt.want)
		}
	}
}

func TestHonorsScope(t *testing.T) {
	c := &Classifier{}
	for p, want := range map[string]bool{"agentrouter": true, "AgentRouter": true, "opencode-zen": true,
		"opencode-go": true, "opencode-cli": true, "opencode": false, "openrouter": false, "": false} {
		if got := c.honorsScope(p); got != want {
			t.Errorf("honorsScope(%q) = %v, want %v", p, got, want)
		}
	}
}
