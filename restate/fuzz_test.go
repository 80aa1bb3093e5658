package restate

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/routeguard/routeguard"
)

func checkHint(t *testing.T, h Hint, s Config) {
	t.Helper()
	limit := s.MaxRateLimitHint
	if h.Quota {
		limit = s.MaxQuotaHint
	}
	if h.After < 0 || h.After > limit {
		t.Fatalf("hint %+v outside [0, %v]", h, limit)
	}
	if (h.After == 0) != (h.Source == hintNone) || h.After == 0 && h.Quota {
		t.Fatalf("hint %+v: source and cap must be set only when a wait is", h)
	}
}

// checkFlags checks the consumer flags of a verdict against the fields
// they summarise.
func checkFlags(t *testing.T, v Verdict) {
	t.Helper()
	if v.Terminal != (v.Permanent || v.CreditsExhausted || v.Expired || v.RequestRejected) ||
		v.Expired != (v.Status == 401) || v.RequestRejected != (v.Kind == kindRequestRejected) ||
		v.RequestScoped != (v.Kind == kindBadRequest) ||
		v.TokenLimit && v.Status != 429 || v.EmptyAnswer && v.Status != 502 {
		t.Fatalf("flags disagree with the verdict: %+v", v)
	}
	if v.Status == 404 || v.Status == 410 || v.Reason == ReasonNotFound || v.Scope == ScopeModel || v.Scope == ScopeExact {
		if !v.ModelScoped {
			t.Fatalf("not ModelScoped: %+v", v)
		}
	} else if v.ModelScoped {
		t.Fatalf("ModelScoped: %+v", v)
	}
}

func FuzzClassify(f *testing.F) {
	f.Add("agentrouter", "", 403, "Retry-After", "17", []byte(`{"error":{"message":"用户额度不足"}}`))
	f.Add("openai", "apikey", 429, "X-Ratelimit-Reset", "1700000000", []byte("Rate limit reached. Please retry in 26.5s"))
	f.Add("opencode-zen", "oauth", 429, "X-Ratelimit-Remaining-Tokens", "0", []byte("Monthly usage limit reached, resets in 3 days"))
	f.Add("minimax", "apikey", 429, "X-Model-Quota-Remaining", "a=0,b=1", []byte(""))
	f.Add("claude", "oauth", 400, "Anthropic-Ratelimit-Tokens-Reset", "2026-03-10T12:00:45Z", []byte("maximum context length exceeded"))
	f.Add("gemini", "apikey", 404, "", "", []byte("model is no longer available; reset at 2026-03-11 00:00:00"))
	f.Add("", "", 0, "", "", []byte(nil))
	f.Fuzz(func(t *testing.T, provider, auth string, status int, hk, hv string, body []byte) {
		c := std
		s := c.Config()
		class, _ := routeguard.ParseClass(auth)
		r := Response{Provider: provider, Model: "m", Auth: class, Status: status, Body: body,
			Header: http.Header{http.CanonicalHeaderKey(hk): {hv}}}
		v := c.ClassifyAt(r, t0)
		checkHint(t, v.Hint, s)
		if v.Cooldown < 0 || v.Cooldown > banCooldown || v.QuotaResetHint < 0 || v.QuotaResetHint > s.MaxQuotaHint {
			t.Fatalf("durations out of range: %+v", v)
		}
		if v.FromStatus != status {
			t.Fatalf("FromStatus %d, want %d", v.FromStatus, status)
		}
		restatable := false
		var maxDefault time.Duration
		for _, rs := range c.load().restate {
			for _, rr := range rs {
				restatable = restatable || slices.Contains(rr.FromStatuses, status)
				maxDefault = max(maxDefault, rr.DefaultRetryAfter)
				if rr.ID == v.RestateRule && (v.Status != rr.ToStatus || !slices.Contains(rr.FromStatuses, status)) {
					t.Fatalf("rule %s restated %d to %d", rr.ID, status, v.Status)
				}
			}
		}
		if !restatable && (v.Status != status || v.RestateRule != "") {
			t.Fatalf("status %d restated to %d", status, v.Status)
		}
		if v.RestateRule == "" && v.Status != status {
			t.Fatalf("status %d changed to %d without a rule", status, v.Status)
		}
		if v.ClientRetryAfter < 0 || v.ClientRetryAfter > max(s.MaxRateLimitHint, s.MaxQuotaHint, maxDefault) {
			t.Fatalf("client retry %v out of range", v.ClientRetryAfter)
		}
		if v.ClientRetryAfter != v.Hint.After && (v.RestateRule == "" || v.Hint.After != 0) {
			t.Fatalf("client retry %v, hint %v, rule %q", v.ClientRetryAfter, v.Hint.After, v.RestateRule)
		}
		if v.Mode != CooldownFixed && v.Cooldown != 0 {
			t.Fatalf("mode %q with cooldown %v", v.Mode, v.Cooldown)
		}
		if !validMode(v.Mode) {
			t.Fatalf("mode %q", v.Mode)
		}
		if v.Status >= 400 && v.Reason == "" {
			t.Fatalf("failure without reason: %+v", v)
		}
		checkFlags(t, v)
		_, _ = c.EmergencyFallback(status, body, false)
	})
}

func FuzzRestate(f *testing.F) {
	f.Add("agentrouter", 403, "用户额度不足", []byte("{}"), int64(0))
	f.Add("AgentRouter", 400, "", []byte("额度不足 无权访问"), int64(5e9))
	f.Add("openai", 429, "x", []byte(nil), int64(-1))
	f.Fuzz(func(t *testing.T, provider string, status int, msg string, body []byte, upstream int64) {
		r := std.restate(provider, status, msg, body, time.Duration(upstream))
		if r.FromStatus != status {
			t.Fatalf("FromStatus %d, want %d", r.FromStatus, status)
		}
		if r.RetryAfter < 0 {
			t.Fatalf("negative retry %v", r.RetryAfter)
		}
		if r.RuleID == "" && r.Status != status {
			t.Fatalf("passthrough changed status: %+v", r)
		}
		if r.RuleID != "" && status != 400 && status != 403 {
			t.Fatalf("status %d restated: %+v", status, r)
		}
	})
}

func FuzzHintHeaders(f *testing.F) {
	f.Add("17", "1700000000", "6m0s", "20ms", "2026-03-10T12:00:45Z", "0")
	f.Add("Tue, 10 Mar 2026 12:01:30 GMT", "30", "1m30.5s", "", "", "")
	f.Add("1.5", "1773144020500", "", "1s", "garbage", "1")
	f.Add("-3", "99999999999999999999", "9999999999h", "nan", "1e309", "")
	f.Fuzz(func(t *testing.T, ra, reset, resetReq, resetTok, anth, remaining string) {
		h := http.Header{
			"Retry-After": {ra}, "X-Ratelimit-Reset": {reset},
			"X-Ratelimit-Reset-Requests": {resetReq}, "X-Ratelimit-Reset-Tokens": {resetTok},
			"X-Ratelimit-Remaining-Tokens":       {remaining},
			"Anthropic-Ratelimit-Requests-Reset": {anth}, "Anthropic-Ratelimit-Requests-Remaining": {remaining},
		}
		checkHint(t, std.HintAt(h, nil, t0), std.Config())
		for _, v := range []string{ra, reset, resetReq, anth} {
			if d, ok := parseRetryAfter(v, t0); ok && d <= 0 {
				t.Fatalf("parseRetryAfter(%q) = %v", v, d)
			}
			if d, ok := parseRateLimitReset(v, t0); ok && d <= 0 {
				t.Fatalf("parseRateLimitReset(%q) = %v", v, d)
			}
		}
	})
}

func FuzzHintBody(f *testing.F) {
	f.Add([]byte(`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26.5s"}]}}`))
	f.Add([]byte(`[{"error":{"retry_after":12,"retryAfter":"2026-03-10T12:02:00Z","retry_after_ms":"x"}}]`))
	f.Add([]byte(`{"retryAfterMs":1e300,"details":[{"@type":"RetryInfo","retryDelay":{"seconds":3,"nanos":5}}]}`))
	f.Add([]byte("Please retry in 26.5s. Your quota resets in 3 days, 4 hours and 2 minutes"))
	f.Add([]byte("try again at 2026-03-10t13:00:00z; reset at 03-11 00:00:00 UTC; wait until 2026-03-11 00:00:00"))
	f.Add([]byte("retry after 99999999999999999999999 days; resets after 1h2m3s"))
	f.Add([]byte("Monthly usage limit reached. Resets in 2 weeks; resets in 1.5h; resets in 3d"))
	f.Add([]byte("presets in 3 days, resets in 0 days, reset  in\t2\nseconds"))
	f.Fuzz(func(t *testing.T, body []byte) {
		checkHint(t, std.HintAt(nil, body, t0), std.Config())
		text := lower(string(body))
		if d, ok := resetCountdown(text); ok && (d <= 0 || d > maxSpan || d != maxSpan && d%time.Second != 0 ||
			!strings.Contains(text, "reset") || !strings.Contains(text, "in")) {
			t.Fatalf("resetCountdown = %v", d)
		}
		if d, n, ok := parseSpan(lower(string(body)), true); ok && (d <= 0 || d > maxSpan || n > len(body)) {
			t.Fatalf("parseSpan = %v, %d", d, n)
		}
	})
}

func FuzzParseStreamError(f *testing.F) {
	f.Add([]byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n"))
	f.Add([]byte("data: {\"error\":{\"code\":403,\"message\":\"用户额度不足\"}}\n"))
	f.Add([]byte(`{"error":{"code":"429","status":"RESOURCE_EXHAUSTED"}}`))
	f.Add([]byte("event: error\r\ndata: not json\r\n"))
	f.Add([]byte("data: [DONE]\n"))
	f.Add([]byte("event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"error\":{\"code\":\"rate_limit_exceeded\"}}}\n\n"))
	f.Fuzz(func(t *testing.T, event []byte) {
		status, payload, ok := parseStreamError(event)
		if ok != (status != 0) {
			t.Fatalf("ok %v with status %d", ok, status)
		}
		if ok && (status < 400 || status > 599) {
			t.Fatalf("status %d outside 400..599", status)
		}
		if !ok && payload != nil {
			t.Fatalf("payload without error")
		}
		if ok {
			v, ok2 := ClassifyEventAt(Response{Provider: "agentrouter"}, event, t0)
			if !ok2 || v.FromStatus != status {
				t.Fatalf("ClassifyEventAt = %+v, %v", v, ok2)
			}
		}
	})
}

func FuzzConfigNormalize(f *testing.F) {
	f.Add(int64(0), int64(0), 0, 0)
	f.Add(int64(-1), int64(1), -5, 1<<40)
	f.Add(int64(time.Hour), int64(30*24*time.Hour), 65536, 4096)
	f.Fuzz(func(t *testing.T, rl, q int64, scan, tokens int) {
		s := Config{MaxRateLimitHint: time.Duration(rl), MaxQuotaHint: time.Duration(q), MaxScan: scan, EmergencyMaxTokens: tokens}.Normalize()
		if s.MaxRateLimitHint < minRateLimitHint || s.MaxRateLimitHint > maxRateLimitHint ||
			s.MaxQuotaHint < minQuotaHint || s.MaxQuotaHint > maxQuotaHint ||
			s.MaxScan < minScan || s.MaxScan > maxScan || s.EmergencyMaxTokens < 1 || s.EmergencyMaxTokens > maxEmergencyTokens ||
			s.EmergencyProvider == "" || s.EmergencyModel == "" {
			t.Fatalf("Normalize out of range: %+v", s)
		}
		if s.Normalize() != s {
			t.Fatalf("Normalize not idempotent: %+v", s)
		}
		if in := (Config{MaxRateLimitHint: time.Duration(rl), MaxQuotaHint: time.Duration(q), MaxScan: scan, EmergencyMaxTokens: tokens}); in.Normalize() != s ||
			in.MaxRateLimitHint != time.Duration(rl) || in.MaxScan != scan {
			t.Fatalf("Normalize changed its receiver or is not deterministic: %+v", in)
		}
	})
}

func FuzzOperatorRules(f *testing.F) {
	f.Add("acme", 503, "Maintenance", "connection", int64(600000))
	f.Add("", 99, "", "exact", int64(-1))
	f.Add(" Acme ", 400, "Slow&&Down…Now", "model", int64(0))
	f.Fuzz(func(t *testing.T, provider string, status int, match, scope string, cooldown int64) {
		c := &Classifier{}
		err := c.SetOperatorRules(map[string][]OperatorRule{provider: {{Status: status, Match: match, Scope: Scope(scope), Cooldown: time.Duration(cooldown)}}})
		if err != nil {
			if len(c.OperatorRules()) != 0 {
				t.Fatal("refused rules installed")
			}
			return
		}
		v := c.ClassifyAt(Response{Provider: provider, Status: status, Body: []byte(match)}, t0)
		if v.Cooldown < 0 {
			t.Fatalf("negative cooldown: %+v", v)
		}
		// An accepted rule matches a body that is its own Match text.
		if len(match) <= defaultMaxScan {
			want := ruleMatch{ID: operatorID(lower(strings.TrimSpace(provider)), 0), Reason: ReasonQuotaExhausted,
				Scope: Scope(scope), Cooldown: time.Duration(cooldown)}
			if m, ok := c.matchRuleAt(provider, status, nil, []byte(match), t0); !ok || m != want {
				t.Fatalf("matchRuleAt = %+v, %v; want %+v", m, ok, want)
			}
			if !c.honorsScope(provider) {
				t.Fatalf("honorsScope(%q) = false with an operator rule", provider)
			}
		}
	})
}
