package restate

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/routeguard/routeguard"
)

// M3 item d: "suspended" within 120 bytes of spending limit / billing /
// invoice / payment, all as whole words. A false match would make the
// connection credits exhausted, a terminal state.
func TestBillingSuspensionMatchesWords(t *testing.T) {
	tests := []struct {
		name string
		body string
		want bool
	}{
		{"spending limit", "Access suspended: monthly spending limit reached", true},
		{"billing", "Account suspended: billing issue", true},
		{"invoice", "API access suspended pending invoice #42", true},
		{"payment before suspended", "Your payment failed; the key is suspended.", true},
		{"underscore is a boundary", `{"code":"suspended_billing"}`, true},
		{"hyphen is a boundary", "key suspended (payment-overdue)", true},
		{"billing word 100 bytes away", "suspended" + strings.Repeat(" ", 100) + "billing", true},
		{"unpaid invoices", "API access suspended until unpaid invoices are settled", false},
		{"payments", "suspended: too many payments attempted", false},
		{"unsuspended", "key unsuspended after billing review", false},
		{"glued words", "suspendedbilling", false},
		{"rebilling", "Request suspended. See the rebilling FAQ", false},
		{"billing word 130 bytes away", "suspended" + strings.Repeat(" ", 130) + "billing", false},
		// The window ends right after "invoice" of "invoices": the
		// boundary is judged on the whole text, not on the window.
		{"window cuts a longer word", "suspended" + strings.Repeat(" ", 113) + "invoices", false},
		{"digit glued", "suspended 2invoice", false},
		{"letter outside ASCII glued", "suspended éinvoice", false},
		{"punctuation outside ASCII", "suspended →invoice←", true},
	}
	c := &Classifier{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := c.ClassifyAt(Response{Provider: "openai", Auth: routeguard.APIKey, Status: 403, Body: []byte(tt.body)}, t0)
			got := v.Kind == kindBillingSuspension
			if got != tt.want {
				t.Fatalf("ClassifyAt(403 %q): kind %q, want billing suspension %v", tt.body, v.Kind, tt.want)
			}
			if got {
				want := with(vd(403, true, kindBillingSuspension, ReasonQuotaExhausted, CooldownFixed, 2*time.Minute),
					func(v *Verdict) { v.CreditsExhausted = true }, terminal)
				if v != want {
					t.Errorf("got %+v\nwant %+v", v, want)
				}
			} else if v.CreditsExhausted {
				t.Errorf("credits exhausted without a billing suspension: %+v", v)
			}
		})
	}
}

// Every word list of Signals and the emergency lists match whole words;
// the substring lists still match inside words.
func TestPhraseListsMatchWords(t *testing.T) {
	retryAfter := http.Header{"Retry-After": {"600"}}
	tests := []struct {
		name string
		r    Response
		kind Kind
	}{
		{"ban phrase", Response{Status: 403, Body: []byte("This account is deactivated.")}, kindBan},
		{"ban inside a longer word", Response{Auth: routeguard.OAuth, Status: 403, Body: []byte("the subaccount has been disabled by its owner")}, kindStatusRule},
		{"credits singular", Response{Auth: routeguard.APIKey, Status: 400, Body: []byte("Insufficient credit")}, kindCredits},
		{"credits plural", Response{Auth: routeguard.APIKey, Status: 400, Body: []byte("insufficient credits for this request")}, kindCredits},
		{"credits inside a longer word", Response{Auth: routeguard.APIKey, Status: 400, Body: []byte("insufficient creditworthiness score")}, kindBadRequest},
		{"credits code", Response{Auth: routeguard.APIKey, Status: 429, Body: []byte(`{"error":{"code":"insufficient_quota"}}`)}, kindCredits},
		{"tpd word", Response{Auth: routeguard.OAuth, Status: 429, Header: retryAfter, Body: []byte("TPD rate limit reached")}, kindDaily},
		{"tpd inside httpd", Response{Auth: routeguard.OAuth, Status: 429, Header: retryAfter, Body: []byte("httpd rate limit reached")}, kindTextRule},
		{"weekly word", Response{Auth: routeguard.OAuth, Status: 429, Body: []byte("weekly limit reached")}, kindWeekly},
		{"weekly inside a longer word", Response{Auth: routeguard.OAuth, Status: 429, Body: []byte("no weekly limitations apply; slow down")}, kindStatusRule},
		{"weekly quota exhausted", Response{Auth: routeguard.OAuth, Status: 429, Body: []byte("weekly quota exhausted")}, kindWeekly},
		{"session", Response{Auth: routeguard.OAuth, Status: 429, Body: []byte("You reached your session's usage limit")}, kindSession},
		{"route refusal", Response{Auth: routeguard.APIKey, Status: 403, Body: []byte("Not authorized for this route.")}, kindRouteRefusal},
		// Substring lists.
		{"retired models/ prefix", Response{Status: 404, Body: []byte("models/gemini-1.0-pro has been deprecated")}, kindRetiredModel},
		{"high frequency in Chinese", Response{Auth: routeguard.APIKey, Status: 400, Body: []byte("请求过于频繁，请稍后再试")}, kindHighFrequency},
		{"text rule stem", Response{Status: 500, Body: []byte("you are being rate limited")}, kindTextRule},
		{"bad request stem", Response{Auth: routeguard.APIKey, Status: 400, Body: []byte("the models field is malformed")}, kindBadRequest},
	}
	c := &Classifier{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if v := c.ClassifyAt(tt.r, t0); v.Kind != tt.kind {
				t.Errorf("ClassifyAt(%d %q): kind %q, want %q", tt.r.Status, tt.r.Body, v.Kind, tt.kind)
			}
		})
	}

	emergency := []struct {
		body string
		want bool
	}{
		{"Billing hard limit has been reached", true},
		{`{"code":"billing_hard_limit_reached"}`, true},
		{"billing limits exceeded", true},
		{"billing: unlimited plan, internal error", false},
		{"rebilling limit job failed", false},
		{"credit limits reached", true}, // EmergencyPhrases are substrings
	}
	for _, tt := range emergency {
		if _, ok := c.EmergencyFallback(500, []byte(tt.body), false); ok != tt.want {
			t.Errorf("EmergencyFallback(500, %q) = %v, want %v", tt.body, ok, tt.want)
		}
	}
}

// parseResetCountdownMs: "reset(s) in N unit" with an integer N > 0 and a
// unit of day(s), hour(s), minute(s) or second(s); nothing else.
func TestResetCountdownUnits(t *testing.T) {
	day := 24 * time.Hour
	tests := []struct {
		text string
		want time.Duration
		ok   bool
	}{
		{"resets in 3 days", 3 * day, true},
		{"reset in 1 day", day, true},
		{"monthly usage limit reached. resets in 13 days.", 13 * day, true},
		{"resets in 2 hours", 2 * time.Hour, true},
		{"resets in 1 hour", time.Hour, true},
		{"resets in 30 minutes.", 30 * time.Minute, true},
		{"resets in 1 minute", time.Minute, true},
		{"resets in 45 seconds", 45 * time.Second, true},
		{"resets in 1 second", time.Second, true},
		{"resets  in\t7\ndays", 7 * day, true},
		{"resets in 3 days and 4 hours", 3 * day, true}, // the first unit only
		{"resets in 0 days, reset in 2 days", 2 * day, true},
		{`"resets in 5 days"`, 5 * day, true},
		{"resets in 99999999999999999999 days", maxSpan, true},
		{"resets in 2 weeks", 0, false},
		{"resets in 1 week", 0, false},
		{"resets in 1.5h", 0, false},
		{"resets in 1.5 hours", 0, false},
		{"resets in 3d", 0, false},
		{"resets in 3days", 0, false},
		{"resets in 90s", 0, false},
		{"resets in 1h2m3s", 0, false},
		{"resets in 0 days", 0, false},
		{"resets in -3 days", 0, false},
		{"resets in three days", 0, false},
		{"resets in 3 dayss", 0, false},
		{"resets in 3 months", 0, false},
		{"resetsin 3 days", 0, false},
		{"presets in 3 days", 0, false},
		{"resets at 3 days", 0, false},
		{"resets in 3", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, ok := resetCountdown(tt.text)
		if got != tt.want || ok != tt.ok {
			t.Errorf("resetCountdown(%q) = %v, %v; want %v, %v", tt.text, got, ok, tt.want, tt.ok)
		}
	}

	// The rules that read a countdown follow it: a refused form gives no
	// opencode monthly-limit cooldown and leaves the weekly default.
	c := &Classifier{}
	if m, ok := c.matchRuleAt("opencode-go", 429, nil, []byte("Monthly usage limit reached. Resets in 2 weeks"), t0); ok && m.ID == "opencode-monthly-limit" {
		t.Errorf("opencode monthly rule matched a week countdown: %+v", m)
	}
	if m, ok := c.matchRuleAt("opencode-go", 429, nil, []byte("Monthly usage limit reached. Resets in 13 days."), t0); !ok ||
		m != (ruleMatch{ID: "opencode-monthly-limit", Reason: ReasonQuotaExhausted, Scope: ScopeConnection, Cooldown: 13 * day}) {
		t.Errorf("opencode monthly rule = %+v, %v", m, ok)
	}
	v := c.ClassifyAt(Response{Auth: routeguard.OAuth, Status: 429, Body: []byte("weekly limit reached, resets in 3d")}, t0)
	if v.Kind != kindWeekly || v.Cooldown != weeklyCooldown || v.QuotaResetHint != weeklyCooldown {
		t.Errorf("weekly with a refused countdown = %+v", v)
	}
}
