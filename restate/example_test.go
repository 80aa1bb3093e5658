package restate_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/routeguard/routeguard"
	"github.com/routeguard/routeguard/restate"
)

// A 403 that really means "quota exhausted" is restated to 429 and then
// classified.
func ExampleClassifier_ClassifyAt() {
	c := &restate.Classifier{}
	v := c.ClassifyAt(restate.Response{
		Provider: "agentrouter",
		Status:   403,
		Body:     []byte(`{"error":{"message":"用户额度不足","type":"insufficient_user_quota"}}`),
	}, time.Now())
	fmt.Println(v.FromStatus, "->", v.Status, v.RestateRule)
	fmt.Println(v.Reason, v.Scope, v.Mode, v.ShouldFallback)
	// Output:
	// 403 -> 429 agentrouter-quota-misstatus
	// quota_exhausted connection backoff true
}

// An upstream hint travels with its source and is capped.
func ExampleClassifier_ClassifyAt_retryAfter() {
	c := restate.New(restate.Config{MaxRateLimitHint: 10 * time.Minute})
	v := c.ClassifyAt(restate.Response{
		Provider: "openai",
		Auth:     routeguard.APIKey,
		Status:   429,
		Header:   http.Header{"Retry-After": {"999999"}},
		Body:     []byte("Rate limit reached"),
	}, time.Now())
	fmt.Println(v.Reason, v.Hint.After, v.Hint.Source, v.Hint.Quota, v.HintOverrides)
	// Output:
	// rate_limit_exceeded 10m0s header false true
}

// Operator rules are replaced at run time; invalid sets are refused.
func ExampleClassifier_SetOperatorRules() {
	c := &restate.Classifier{}
	err := c.SetOperatorRules(map[string][]restate.OperatorRule{
		"acme": {{Status: 503, Match: "maintenance", Scope: restate.ScopeConnection, Cooldown: 10 * time.Minute}},
	})
	fmt.Println(err)
	v := c.ClassifyAt(restate.Response{Provider: "ACME", Status: 503, Body: []byte("Scheduled MAINTENANCE window")}, time.Now())
	fmt.Println(v.RuleID, v.Reason, v.Scope, v.Cooldown)

	err = c.SetOperatorRules(map[string][]restate.OperatorRule{"acme": {{Status: 503, Match: "", Scope: restate.ScopeModel}}})
	fmt.Println(err)
	// Output:
	// <nil>
	// operator:acme:0 quota_exhausted connection 10m0s
	// restate: invalid_rule: OperatorRules["acme"][0] (operator:acme:0): empty match
}

// Error events inside a 200 SSE stream are classified like HTTP errors.
func ExampleClassifyEventAt() {
	event := []byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow down\"}}\n\n")
	v, ok := restate.ClassifyEventAt(restate.Response{Provider: "anthropic", Auth: routeguard.APIKey}, event, time.Now())
	fmt.Println(ok, v.Status, v.Reason)
	// Output:
	// true 429 rate_limit_exceeded
}
