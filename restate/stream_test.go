package restate

import (
	"testing"
	"time"

	"github.com/routeguard/routeguard"
)

func TestParseStreamError(t *testing.T) {
	tests := []struct {
		name   string
		event  string
		status int
		ok     bool
	}{
		{"anthropic overloaded", "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n", 503, true},
		{"anthropic rate limit", "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\"}}\n", 429, true},
		{"openai error object", "data: {\"error\":{\"message\":\"quota\",\"type\":\"insufficient_quota\",\"code\":\"insufficient_quota\"}}\n", 429, true},
		{"numeric code", "data: {\"error\":{\"code\":403,\"message\":\"用户额度不足\"}}\n", 403, true},
		{"google status", `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}`, 429, true},
		{"google status name only", `{"error":{"status":"UNAVAILABLE"}}`, 503, true},
		{"multi-line data", "event: error\ndata: {\"error\":\ndata: {\"type\":\"api_error\"}}\n", 500, true},
		{"unknown type", "data: {\"error\":{\"type\":\"weird\"}}\n", 500, true},
		{"error event with text", "event: error\ndata: upstream exploded\n", 500, true},
		{"crlf", "event: error\r\ndata: {\"error\":{\"type\":\"authentication_error\"}}\r\n", 401, true},
		{"responses failed rate limit", "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"rate_limit_exceeded\",\"message\":\"Rate limit reached\"}}}\n\n", 429, true},
		{"responses failed bare payload", `{"type":"response.failed","response":{"error":{"code":"server_error","message":"boom"}}}`, 500, true},
		{"responses failed numeric code", `{"type":"response.failed","error":null,"response":{"error":{"code":503}}}`, 503, true},
		{"responses failed by name only", "event: response.failed\ndata: {\"response\":{\"error\":{\"code\":\"insufficient_quota\"}}}\n", 429, true},
		{"responses failed without error", `{"type":"response.failed","response":{"status":"failed"}}`, 500, true},
		{"responses completed", `{"type":"response.completed","response":{"status":"completed","error":null}}`, 0, false},
		{"normal chunk", "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n", 0, false},
		{"done", "data: [DONE]\n", 0, false},
		{"null error", "data: {\"error\":null}\n", 0, false},
		{"empty", "", 0, false},
		{"comment only", ": ping\n", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, payload, ok := parseStreamError([]byte(tt.event))
			if status != tt.status || ok != tt.ok {
				t.Errorf("parseStreamError(%q) = %d, %q, %v; want %d, %v", tt.event, status, payload, ok, tt.status, tt.ok)
			}
		})
	}
}

func TestClassifyEventRestates(t *testing.T) {
	c := &Classifier{}
	ev := []byte("event: error\ndata: {\"error\":{\"code\":403,\"message\":\"用户额度不足\"}}\n\n")
	v, ok := c.ClassifyEventAt(Response{Provider: "agentrouter", Status: 200}, ev, t0)
	want := Verdict{Status: 429, FromStatus: 403, RestateRule: "agentrouter-quota-misstatus", ClientRetryAfter: time.Minute,
		Reason: ReasonQuotaExhausted, Kind: kindStatusRule, RuleID: "agentrouter-quota", Scope: ScopeConnection,
		Mode: CooldownBackoff, HintOverrides: true, ShouldFallback: true}
	if !ok || v != want {
		t.Errorf("ClassifyEventAt = %+v, %v\nwant %+v", v, ok, want)
	}
	if _, ok := c.ClassifyEventAt(Response{Provider: "agentrouter"}, []byte("data: {\"choices\":[]}\n"), t0); ok {
		t.Error("a normal chunk was classified")
	}
	v, ok = ClassifyEventAt(Response{Provider: "anthropic", Auth: routeguard.OAuth},
		[]byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n"), t0)
	if !ok || v.Status != 503 || v.Reason != ReasonModelCapacity || v.Mode != CooldownBackoff {
		t.Errorf("overloaded event = %+v, %v", v, ok)
	}
}

// A failed Responses API answer inside a 200 stream is classified like the
// HTTP error it reports.
func TestClassifyEventResponsesFailed(t *testing.T) {
	c := &Classifier{}
	ev := []byte(`{"type":"response.failed","response":{"status":"failed","error":{"code":"rate_limit_exceeded","message":"Rate limit reached. Please try again in 20s."}}}`)
	v, ok := c.ClassifyEventAt(Response{Provider: "openai", Auth: routeguard.APIKey, Status: 200}, ev, t0)
	want := Verdict{Status: 429, FromStatus: 429, ClientRetryAfter: 20 * time.Second,
		Reason: ReasonRateLimit, Kind: kindStatusRule, Mode: CooldownBackoff, HintOverrides: true, ShouldFallback: true,
		Hint: Hint{20 * time.Second, hintText, false}}
	if !ok || v != want {
		t.Errorf("ClassifyEventAt = %+v, %v\nwant %+v", v, ok, want)
	}
}

func TestShorthandsUseWallClock(t *testing.T) {
	if v := Classify(Response{Status: 503}); v.Reason != ReasonServerError {
		t.Errorf("Classify = %+v", v)
	}
	// A daily quota lasts until the next local midnight of the clock used.
	daily := Response{Status: 429, Auth: routeguard.OAuth, Body: []byte("daily quota exceeded")}
	for name, classify := range map[string]func(Response) Verdict{"Classify": Classify, "Classifier.Classify": (&Classifier{}).Classify} {
		before := untilMidnight(time.Now())
		v := classify(daily)
		after := untilMidnight(time.Now())
		if v.Kind != kindDaily || v.Cooldown > before || v.Cooldown < after {
			t.Errorf("%s = %+v, want a daily cooldown in [%v, %v]", name, v, after, before)
		}
	}
	if v, ok := ClassifyEventAt(Response{}, []byte(`{"error":{"type":"rate_limit_error"}}`), t0); !ok || v.Status != 429 {
		t.Errorf("ClassifyEventAt = %+v, %v", v, ok)
	}
}
