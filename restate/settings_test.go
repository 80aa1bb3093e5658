package restate

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSettingsNormalize(t *testing.T) {
	def := Settings{MaxRateLimitHint: time.Hour, MaxQuotaHint: 30 * 24 * time.Hour, MaxScan: 64 << 10,
		EmergencyProvider: "nvidia", EmergencyModel: "openai/gpt-oss-120b", EmergencyMaxTokens: 4096}
	tests := []struct {
		name string
		in   Settings
		want Settings
	}{
		{"zero", Settings{}, def},
		{"negative", Settings{MaxRateLimitHint: -1, MaxQuotaHint: -1, MaxScan: -1, EmergencyMaxTokens: -5}, def},
		{"low", Settings{MaxRateLimitHint: time.Millisecond, MaxQuotaHint: time.Minute, MaxScan: 10, EmergencyMaxTokens: 1},
			with2(def, func(s *Settings) {
				s.MaxRateLimitHint, s.MaxQuotaHint, s.MaxScan, s.EmergencyMaxTokens = time.Second, time.Hour, 1024, 1
			})},
		{"high", Settings{MaxRateLimitHint: 48 * time.Hour, MaxQuotaHint: 1000 * 24 * time.Hour, MaxScan: 1 << 30, EmergencyMaxTokens: 1 << 30},
			with2(def, func(s *Settings) {
				s.MaxRateLimitHint, s.MaxQuotaHint, s.MaxScan, s.EmergencyMaxTokens = 24*time.Hour, 366*24*time.Hour, 16<<20, 1<<20
			})},
		{"kept", Settings{MaxRateLimitHint: 5 * time.Minute, EmergencyProvider: "p", EmergencyModel: "m"},
			with2(def, func(s *Settings) { s.MaxRateLimitHint, s.EmergencyProvider, s.EmergencyModel = 5*time.Minute, "p", "m" })},
	}
	for _, tt := range tests {
		if got := tt.in.Normalize(); got != tt.want {
			t.Errorf("%s: Normalize() = %+v, want %+v", tt.name, got, tt.want)
		}
	}
	if got := New(Settings{}).Settings(); got != def {
		t.Errorf("New(Settings{}).Settings() = %+v", got)
	}
}

func with2(s Settings, f func(*Settings)) Settings { f(&s); return s }

func TestSetTablesValidation(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Tables)
		id     string
	}{
		{"restate empty marker", func(tb *Tables) { tb.Restatements["agentrouter"][0].Markers = []string{""} }, "agentrouter-quota-misstatus"},
		{"restate bad to", func(tb *Tables) { tb.Restatements["agentrouter"][0].ToStatus = 42 }, "agentrouter-quota-misstatus"},
		{"restate bad from", func(tb *Tables) { tb.Restatements["agentrouter"][0].FromStatuses = []int{700} }, "agentrouter-quota-misstatus"},
		{"rule no condition", func(tb *Tables) { tb.ProviderRules["x"] = []ProviderRule{{ID: "r", Reason: ReasonUnknown}} }, "r"},
		{"rule bad scope", func(tb *Tables) {
			tb.ProviderRules["x"] = []ProviderRule{{ID: "s", Statuses: []int{429}, Reason: ReasonUnknown, Scope: "planet"}}
		}, "s"},
		{"rule negative cooldown", func(tb *Tables) {
			tb.ProviderRules["x"] = []ProviderRule{{ID: "n", Statuses: []int{429}, Reason: ReasonUnknown, Cooldown: -time.Second}}
		}, "n"},
		{"text rule empty", func(tb *Tables) { tb.TextRules = append(tb.TextRules, TextRule{Mode: CooldownNone}) }, "text"},
		{"status rule bad mode", func(tb *Tables) { tb.StatusRules = append(tb.StatusRules, StatusRule{Status: 418, Mode: "x"}) }, "status"},
	}
	c := &Classifier{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := DefaultTables()
			tt.change(&tb)
			err := c.SetTables(tb)
			var re *RuleError
			if !errors.As(err, &re) || !errors.Is(err, ErrInvalidRule) || re.ID != tt.id {
				t.Fatalf("SetTables = %v, want a RuleError for %q", err, tt.id)
			}
			if c.Restate("agentrouter", 403, "额度不足", nil, 0).Status != 429 {
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
	if c.Restate("agentrouter", 403, "额度不足", nil, 0).Status != 429 {
		t.Error("changing a Tables() copy changed the classifier")
	}
	tb2 := DefaultTables()
	if err := c.SetTables(tb2); err != nil {
		t.Fatal(err)
	}
	tb2.Restatements["agentrouter"][0].Markers[0] = "changed"
	if c.Restate("agentrouter", 403, "额度不足", nil, 0).Status != 429 {
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
	if !v.Permanent || v.Kind != KindBan {
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
		{"ban", func(s *Signals) *[]string { return &s.Ban }, "account_deactivated", "Account Frozen", KindBan},
		{"credits", func(s *Signals) *[]string { return &s.Credits }, "out of credits", "Wallet Empty", KindCredits},
		{"daily", func(s *Signals) *[]string { return &s.Daily }, "today's quota", "Per-Day Cap Hit", KindDaily},
		{"subscription", func(s *Signals) *[]string { return &s.Subscription }, "usage limit reached", "Plan Allowance Used", KindSubscription},
		{"weekly", func(s *Signals) *[]string { return &s.Weekly }, "weekly usage limit", "Seven-Day Cap", KindWeekly},
		{"session", func(s *Signals) *[]string { return &s.Session }, "session usage limit", "Five-Hour Window Used", KindSession},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Classifier{}
			classify := func(text string) Verdict {
				return c.ClassifyAt(Response{Provider: "p", Auth: AuthOAuth, Status: 429, Body: []byte("error: " + text)}, t0)
			}
			if got := classify(tt.builtin); got.Kind != tt.wantKind {
				t.Fatalf("built-in %q: kind %q, want %q", tt.builtin, got.Kind, tt.wantKind)
			}
			tb := c.Tables()
			*tt.list(&tb.Signals) = []string{tt.custom}
			if err := c.SetTables(tb); err != nil {
				t.Fatal(err)
			}
			if got := classify(strings.ToLower(tt.custom)); got.Kind != tt.wantKind || got.Reason == ReasonNone {
				t.Errorf("custom %q: kind %q, want %q", tt.custom, got.Kind, tt.wantKind)
			}
			if got := classify(tt.builtin); got.Kind != KindStatusRule || got.Reason != ReasonRateLimit {
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
			c.SetSettings(Settings{MaxScan: 1024 + j})
		}
	})
	wg.Wait()
}

func TestPassthroughAllocatesNothing(t *testing.T) {
	c := &Classifier{}
	body := []byte(`{"error":{"message":"rate limited"}}`)
	if n := testing.AllocsPerRun(100, func() { c.Restate("openai", 429, "", body, 0) }); n != 0 {
		t.Errorf("Restate passthrough allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { c.HonorsScope("agentrouter") }); n != 0 {
		t.Errorf("HonorsScope allocates %v times", n)
	}
}
