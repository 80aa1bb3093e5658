package restate

import (
	"net/http"
	"strings"
	"testing"

	"github.com/routeguard/routeguard"
)

func typical429() Response {
	msg := `{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29980, Requested 1200. Please try again in 2.4s.","type":"tokens","param":null,"code":"rate_limit_exceeded"},"detail":"`
	body := msg + strings.Repeat("x", 2048-len(msg)-2) + `"}`
	return Response{
		Provider: "openai", Model: "gpt-4o", Auth: routeguard.APIKey, Status: 429,
		Header: http.Header{
			"Content-Type":                   {"application/json"},
			"X-Ratelimit-Limit-Tokens":       {"30000"},
			"X-Ratelimit-Remaining-Tokens":   {"0"},
			"X-Ratelimit-Reset-Tokens":       {"2.4s"},
			"X-Ratelimit-Remaining-Requests": {"499"},
			"X-Ratelimit-Reset-Requests":     {"120ms"},
		},
		Body: []byte(body),
	}
}

func BenchmarkClassify429(b *testing.B) {
	c := &Classifier{}
	r := typical429()
	b.ReportAllocs()
	for b.Loop() {
		c.ClassifyAt(r, t0)
	}
}

func BenchmarkClassify429Parallel(b *testing.B) {
	c := &Classifier{}
	r := typical429()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.ClassifyAt(r, t0)
		}
	})
}

func BenchmarkClassifyRestated403(b *testing.B) {
	c := &Classifier{}
	r := Response{Provider: "agentrouter", Status: 403, Body: []byte(`{"error":{"message":"用户额度不足","type":"insufficient_user_quota"}}`)}
	b.ReportAllocs()
	for b.Loop() {
		c.ClassifyAt(r, t0)
	}
}

func BenchmarkRestatePassthrough(b *testing.B) {
	c := &Classifier{}
	body := []byte(`{"error":{"message":"rate limited"}}`)
	b.ReportAllocs()
	for b.Loop() {
		c.restate("openai", 429, "", body, 0)
	}
}

func BenchmarkParseStreamError(b *testing.B) {
	ev := []byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
	b.ReportAllocs()
	for b.Loop() {
		parseStreamError(ev)
	}
}

func TestTypical429(t *testing.T) {
	v := (&Classifier{}).ClassifyAt(typical429(), t0)
	if v.Reason != ReasonRateLimit || v.Hint.After.Seconds() != 2.4 || v.Hint.Source != hintHeader || v.Mode != CooldownBackoff {
		t.Errorf("typical 429 = %+v", v)
	}
}
