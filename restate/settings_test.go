package restate

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/routeguard/routeguard"
)

func TestConfigNormalize(t *testing.T) {
	def := Config{MaxRateLimitHint: time.Hour, MaxQuotaHint: 30 * 24 * time.Hour, MaxScan: 64 << 10,
		EmergencyProvider: "nvidia", EmergencyModel: "openai/gpt-oss-120b", EmergencyMaxTokens: 4096}
	tests := []struct {
		name string
		in   Config
		want Config
	}{
		{"zero", Config{}, def},
		{"negative", Config{MaxRateLimitHint: -1, MaxQuotaHint: -1, MaxScan: -1, EmergencyMaxTokens: -5}, def},
		{"low", Config{MaxRateLimitHint: time.Millisecond, MaxQuotaHint: time.Minute, MaxScan: 10, EmergencyMaxTokens: 1},
			with2(def, func(s *Config) {
				s.MaxRateLimitHint, s.MaxQuotaHint, s.MaxScan, s.EmergencyMaxTokens = time.Second, time.Hour, 1024, 1
			})},
		{"high", Config{MaxRateLimitHint: 48 * time.Hour, MaxQuotaHint: 1000 * 24 * time.Hour, MaxScan: 1 << 30, EmergencyMaxTokens: 1 << 30},
			with2(def, func(s *Config) {
				s.MaxRateLimitHint, s.MaxQuotaHint, s.MaxScan, s.EmergencyMaxTokens = 24*time.Hour, 366*24*time.Hour, 16<<20, 1<<20
			})},
		{"kept", Config{MaxRateLimitHint: 5 * time.Minute, EmergencyProvider: "p", EmergencyModel: "m"},
			with2(def, func(s *Config) { s.MaxRateLimitHint, s.EmergencyProvider, s.EmergencyModel = 5*time.Minute, "p", "m" })},
	}
	for _, tt := range tests {
		if got := tt.in.Normalize(); got != tt.want {
			t.Errorf("%s: Normalize() = %+v, want %+v", tt.name, got, tt.want)
		}
	}
	if got := New(Config{}).Config(); got != def {
		t.Errorf("New(Config{}).Config() = %+v", got)
	}
	if got := (&Classifier{}).Config(); got != def {
		t.Errorf("zero Classifier Config() = %+v", got)
	}
	// New keeps the built-in tables next to its own configuration.
	c := New(Config{MaxScan: 2048, EmergencyDisabled: true})
	if got := c.Config(); got.MaxScan != 2048 || !got.EmergencyDisabled || got.MaxQuotaHint != def.MaxQuotaHint {
		t.Errorf("New(...).Config() = %+v", got)
	}
	if v := c.ClassifyAt(Response{Provider: "agentrouter", Status: 403, Body: []byte("用户额度不足")}, t0); v.Status != 429 {
		t.Errorf("New lost the built-in tables: %+v", v)
	}
	if std.Config() != def {
		t.Error("New changed the package-level classifier")
	}
}

// TestSetConfigKeepsTablesAndRules: SetConfig swaps the configuration
// (normalised) and keeps the tables and operator rules in use.
func TestSetConfigKeepsTablesAndRules(t *testing.T) {
	c := &Classifier{}
	if err := c.SetOperatorRules(map[string][]OperatorRule{"acme": {{Status: 503, Match: "down", Scope: ScopeModel}}}); err != nil {
		t.Fatal(err)
	}
	c.SetConfig(Config{EmergencyDisabled: true, MaxScan: 1})
	if got := c.Config(); !got.EmergencyDisabled || got.MaxScan != 1024 || got.EmergencyModel != "openai/gpt-oss-120b" {
		t.Errorf("Config() = %+v", got)
	}
	if _, ok := c.EmergencyFallback(402, nil, false); ok {
		t.Error("emergency fallback still on after SetConfig")
	}
	if v := c.ClassifyAt(Response{Provider: "acme", Status: 503, Body: []byte("down")}, t0); v.RuleID != "operator:acme:0" {
		t.Errorf("operator rule lost after SetConfig: %+v", v)
	}
	if v := c.ClassifyAt(Response{Provider: "agentrouter", Status: 403, Body: []byte("用户额度不足")}, t0); v.Status != 429 {
		t.Errorf("tables lost after SetConfig: %+v", v)
	}
	c.SetConfig(Config{})
	if _, ok := c.EmergencyFallback(402, nil, false); !ok {
		t.Error("emergency fallback still off after SetConfig(Config{})")
	}
}

func with2(s Config, f func(*Config)) Config { f(&s); return s }

func TestSetTablesValidation(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Tables)
		field  string
		id     string
	}{
		{"restate empty marker", func(tb *Tables) { tb.Restatements["agentrouter"][0].Markers = []string{""} }, `Restatements["agentrouter"][0]`, "agentrouter-quota-misstatus"},
		{"restate bad to", func(tb *Tables) { tb.Restatements["agentrouter"][0].ToStatus = 42 }, `Restatements["agentrouter"][0]`, "agentrouter-quota-misstatus"},
		{"restate bad from", func(tb *Tables) { tb.Restatements["agentrouter"][0].FromStatuses = []int{700} }, `Restatements["agentrouter"][0]`, "agentrouter-quota-misstatus"},
		{"rule no condition", func(tb *Tables) { tb.ProviderRules["x"] = []ProviderRule{{ID: "r", Reason: ReasonUnknown}} }, `ProviderRules["x"][0]`, "r"},
		{"rule bad scope", func(tb *Tables) {
			tb.ProviderRules["x"] = []ProviderRule{{ID: "s", Statuses: []int{429}, Reason: ReasonUnknown, Scope: "planet"}}
		}, `ProviderRules["x"][0]`, "s"},
		{"rule negative cooldown", func(tb *Tables) {
			tb.ProviderRules["x"] = []ProviderRule{{ID: "ok", Statuses: []int{429}, Reason: ReasonUnknown},
				{ID: "n", Statuses: []int{429}, Reason: ReasonUnknown, Cooldown: -time.Second}}
		}, `ProviderRules["x"][1]`, "n"},
		{"text rule empty", func(tb *Tables) { tb.TextRules = append(tb.TextRules, TextRule{Mode: CooldownNone}) },
			fmt.Sprintf("TextRules[%d]", len(DefaultTables().TextRules)), ""},
		{"status rule bad mode", func(tb *Tables) { tb.StatusRules = append(tb.StatusRules, StatusRule{Status: 418, Mode: "x"}) },
			fmt.Sprintf("StatusRules[%d]", len(DefaultTables().StatusRules)), ""},
	}
	c := &Classifier{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := DefaultTables()
			tt.change(&tb)
			err := c.SetTables(tb)
			var re *Error
			if !errors.As(err, &re) || !errors.Is(err, ErrInvalidRule) || re.Rule != tt.id || re.Field != tt.field ||
				re.Code != CodeInvalidRule || re.Status != 400 {
				t.Fatalf("SetTables = %v (%+v), want an *Error for %s (%q)", err, re, tt.field, tt.id)
			}
			if c.restate("agentrouter", 403, "额度不足", nil, 0).Status != 429 {
				t.Error("built-in tables lost after a refused SetTables")
			}
		})
	}
}

func TestTablesAreCopies(t *testing.T) {
	c := &Classifier{}
	tb := c.Tables()
	tb.Restatements["agentrouter"][0].Markers[0] = "changed"
	tb.Signals.Ban[0] = "changed"
	if c.restate("agentrouter", 403, "额度不足", nil, 0).Status != 429 {
		t.Error("changing a Tables() copy changed the classifier")
	}
	tb2 := DefaultTables()
	if err := c.SetTables(tb2); err != nil {
		t.Fatal(err)
	}
	tb2.Restatements["agentrouter"][0].Markers[0] = "changed"
	if c.restate("agentrouter", 403, "额度不足", nil, 0).Status != 429 {
		t.Error("changing the installed table changed the classifier")
	}
}

func TestExtendSignals(t *testing.T) {
	c := &Classifier{}
	tb := c.Tables()
	tb.Signals.Ban = append(tb.Signals.Ban, "Account Frozen")
	tb.Restatements["Acme"] = []RestateRule{{ID: "acme-misstatus", FromStatuses: []int{500}, ToStatus: 429, Markers: []string{"slow down"}}}
	if err := c.SetTables(tb); err != nil {
		t.Fatal(err)
	}
	v := c.ClassifyAt(Response{Status: 403, Body: []byte("your ACCOUNT FROZEN")}, t0)
	if !v.Permanent || v.Kind != kindBan {
		t.Errorf("custom ban signal ignored: %+v", v)
	}
	v = c.ClassifyAt(Response{Provider: "acme", Status: 500, Body: []byte("please slow down")}, t0)
	if v.Status != 429 || v.FromStatus != 500 || v.RestateRule != "acme-misstatus" || v.Reason != ReasonRateLimit {
		t.Errorf("custom restatement ignored: %+v", v)
	}
}

// Every phrase list can be replaced: the new phrase decides and the
// built-in one no longer does.
func TestReplaceSignalLists(t *testing.T) {
	tests := []struct {
		name     string
		list     func(*Signals) *[]string
		builtin  string
		custom   string
		wantKind Kind
	}{
		{"ban", func(s *Signals) *[]string { return &s.Ban }, "account_deactivated", "Account Frozen", kindBan},
		{"credits", func(s *Signals) *[]string { return &s.Credits }, "out of credits", "Wallet Empty", kindCredits},
		{"daily", func(s *Signals) *[]string { return &s.Daily }, "today's quota", "Per-Day Cap Hit", kindDaily},
		{"subscription", func(s *Signals) *[]string { return &s.Subscription }, "usage limit reached", "Plan Allowance Used", kindSubscription},
		{"weekly", func(s *Signals) *[]string { return &s.Weekly }, "weekly usage limit", "Seven-Day Cap", kindWeekly},
		{"session", func(s *Signals) *[]string { return &s.Session }, "session usage limit", "Five-Hour Window Used", kindSession},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Classifier{}
			classify := func(text string) Verdict {
				return c.ClassifyAt(Response{Provider: "p", Auth: routeguard.OAuth, Status: 429, Body: []byte("error: " + text)}, t0)
			}
			if got := classify(tt.builtin); got.Kind != tt.wantKind {
				t.Fatalf("built-in %q: kind %q, want %q", tt.builtin, got.Kind, tt.wantKind)
			}
			tb := c.Tables()
			*tt.list(&tb.Signals) = []string{tt.custom}
			if err := c.SetTables(tb); err != nil {
				t.Fatal(err)
			}
			if got := classify(strings.ToLower(tt.custom)); got.Kind != tt.wantKind || got.Reason == "" {
				t.Errorf("custom %q: kind %q, want %q", tt.custom, got.Kind, tt.wantKind)
			}
			if got := classify(tt.builtin); got.Kind != kindStatusRule || got.Reason != ReasonRateLimit {
				t.Errorf("replaced %q: kind %q reason %q, want the 429 status rule", tt.builtin, got.Kind, got.Reason)
			}
		})
	}
}

func TestConcurrentUse(t *testing.T) {
	c := &Classifier{}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 200 {
				v := c.ClassifyAt(Response{Provider: "agentrouter", Status: 403, Body: []byte("用户额度不足")}, t0)
				if v.Status != 429 {
					t.Errorf("goroutine %d step %d: status %d", i, j, v.Status)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for j := range 100 {
			_ = c.SetOperatorRules(map[string][]OperatorRule{"acme": {{Status: 503, Match: "m", Scope: ScopeModel}}})
			_ = c.SetTables(DefaultTables())
			c.SetConfig(Config{MaxScan: 1024 + j})
		}
	})
	wg.Wait()
}

func TestPassthroughAllocatesNothing(t *testing.T) {
	c := &Classifier{}
	body := []byte(`{"error":{"message":"rate limited"}}`)
	if n := testing.AllocsPerRun(100, func() { c.restate("openai", 429, "", body, 0) }); n != 0 {
		t.Errorf("Restate passthrough allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { c.honorsScope("agentrouter") }); n != 0 {
		t.Errorf("honorsScope allocates %v times", n)
	}
}
