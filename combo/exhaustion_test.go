package combo

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The per-request exhaustion scenarios of the cooldown contract (M6.3, 7–14).
func TestExhaustionSets(t *testing.T) {
	openai1 := Target{Provider: "openai", Connection: "c1", Model: "gpt-4o"}
	openaiAny := Target{Provider: "openai", Model: "gpt-4o"}
	anth9 := Target{Provider: "anthropic", Connection: "c9", Model: "claude"}
	anthAny := Target{Provider: "anthropic", Model: "claude"}
	p1 := Target{Provider: "p", Connection: "c1", Model: "m"}
	gemini := Target{Provider: "gemini", Connection: "g1", Model: "gemini-pro"}

	tests := []struct {
		name        string
		target      Target
		facts       attemptFacts
		wantReturn  bool
		providers   []string
		connections []connKey
		transient   []string
	}{
		{"7 quota exhausted marks the provider", openai1, attemptFacts{Status: 429, Reason: "quota_exhausted"}, true, []string{"openai"}, nil, nil},
		{"credits exhausted marks the provider", openai1, attemptFacts{Status: 402, CreditsExhausted: true}, true, []string{"openai"}, nil, nil},
		{"daily quota marks the provider", openai1, attemptFacts{Status: 429, DailyQuota: true}, true, []string{"openai"}, nil, nil},
		{"request-scoped quota text does not", openai1, attemptFacts{Status: 400, Reason: "quota_exhausted", RequestScoped: true}, false, nil, nil, nil},
		{"8 a 502 without connection marks the provider", openaiAny, attemptFacts{Status: 502}, false, []string{"openai"}, nil, nil},
		{"9 breaker-open refusal changes nothing", openai1, attemptFacts{Status: 503, BreakerOpen: true}, false, nil, nil, nil},
		{"10 plain 429 is transient", openai1, attemptFacts{Status: 429, Reason: "rate_limit_exceeded"}, false, nil, nil, []string{"openai"}},
		{"10 token-limit 429 changes nothing", openai1, attemptFacts{Status: 429, Reason: "rate_limit_exceeded", TokenLimit: true}, false, nil, nil, nil},
		{"11 502 empty response changes nothing", openai1, attemptFacts{Status: 502, EmptyAnswer: true}, false, nil, nil, nil},
		{"12 403 marks the connection", anth9, attemptFacts{Status: 403}, true, nil, []connKey{{"anthropic", "c9"}}, nil},
		{"12 403 without connection marks the provider", anthAny, attemptFacts{Status: 403}, true, []string{"anthropic"}, nil, nil},
		{"401 marks the connection", anth9, attemptFacts{Status: 401}, true, nil, []connKey{{"anthropic", "c9"}}, nil},
		{"13 400 changes nothing", openai1, attemptFacts{Status: 400}, false, nil, nil, nil},
		{"13 200 changes nothing", openai1, attemptFacts{Status: 200}, false, nil, nil, nil},
		{"14 524 marks the connection", p1, attemptFacts{Status: 524}, false, nil, []connKey{{"p", "c1"}}, nil},
		{"14 500 on a per-model quota provider", gemini, attemptFacts{Status: 500, PerModelQuota: true}, false, nil, nil, nil},
		{"503 marks the connection", openai1, attemptFacts{Status: 503}, false, nil, []connKey{{"openai", "c1"}}, nil},
		{"request-scoped 503 changes nothing", openai1, attemptFacts{Status: 503, RequestScoped: true}, false, nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e exhaustion
			got := e.apply(&tt.target, tt.facts)
			assert.Equal(t, tt.wantReturn, got)
			assert.ElementsMatch(t, tt.providers, e.providers, "providers")
			assert.ElementsMatch(t, tt.connections, e.connections, "connections")
			assert.ElementsMatch(t, tt.transient, e.transient, "transient")
		})
	}
}

func TestExhaustionSkipMessages(t *testing.T) {
	var e exhaustion
	assert.True(t, e.apply(&Target{Provider: "openai", Connection: "c1"}, attemptFacts{Status: 429, Reason: "quota_exhausted"}))
	msg, ok := e.skip(&Target{Provider: "openai", Connection: "c2"})
	assert.True(t, ok)
	assert.Equal(t, "provider openai marked exhausted this request", msg)

	e.reset()
	e.apply(&Target{Provider: "anthropic", Connection: "c9"}, attemptFacts{Status: 403})
	msg, ok = e.skip(&Target{Provider: "anthropic", Connection: "c9"})
	assert.True(t, ok)
	assert.Equal(t, "connection c9 for provider anthropic had connection error", msg)
	_, ok = e.skip(&Target{Provider: "anthropic", Connection: "c10"})
	assert.False(t, ok, "a sibling connection is not skipped")
	_, ok = e.skip(&Target{Provider: "anthropic"})
	assert.False(t, ok, "a plain model target never matches a connection key")
	assert.True(t, e.skipped(&Target{Provider: "anthropic", Connection: "c9"}))
	assert.False(t, e.skipped(&Target{Provider: "anthropic", Connection: "c10"}))
}

func TestExhaustionMarksOnce(t *testing.T) {
	var e exhaustion
	for range 3 {
		e.apply(&Target{Provider: "p", Connection: "c"}, attemptFacts{Status: 503})
		e.apply(&Target{Provider: "q"}, attemptFacts{Status: 503})
	}
	assert.Len(t, e.connections, 1)
	assert.Len(t, e.providers, 1)
}

// The exhaustion scenarios of the cooldown contract (M6.3, 7–14) through the
// router's own failure path: real answers are restated and classified, then
// their facts reach the sets.
func TestExhaustionFromClassifiedFailures(t *testing.T) {
	breakerHeader := http.Header{"X-Omniroute-Provider-Breaker": []string{"open"}}
	tests := []struct {
		name        string
		target      Target
		status      int
		header      http.Header
		body        string
		providers   []string
		connections []connKey
		transient   []string
	}{
		{"7 quota exhausted marks the provider", Target{Provider: "openai", Connection: "c1", Model: "m"}, 429, nil,
			`{"error":{"code":"insufficient_quota","message":"You exceeded your current quota, please check your plan"}}`,
			[]string{"openai"}, nil, nil},
		{"8 a 502 without connection marks the provider", Target{Provider: "openai", Model: "m"}, 502, nil,
			`{"error":{"message":"bad gateway"}}`, []string{"openai"}, nil, nil},
		{"9 a breaker-open refusal changes nothing", Target{Provider: "openai", Connection: "c1", Model: "m"}, 503, breakerHeader,
			`{"error":{"message":"unavailable"}}`, nil, nil, nil},
		{"10 a plain 429 is transient", Target{Provider: "openai", Connection: "c1", Model: "m"}, 429, nil,
			`{"error":{"message":"Rate limited"}}`, nil, nil, []string{"openai"}},
		{"10 a token-limit 429 changes nothing", Target{Provider: "openai", Connection: "c1", Model: "m"}, 429, nil,
			`{"error":{"message":"Request too large for gpt-4o on tokens per min (TPM): Limit 30000, Requested 50000."}}`, nil, nil, nil},
		{"11 a 502 empty response changes nothing", Target{Provider: "claude", Connection: "c1", Model: "m"}, 502, nil,
			`{"error":{"message":"Claude returned an empty response"}}`, nil, nil, nil},
		{"12 a 403 marks the connection", Target{Provider: "anthropic", Connection: "c9", Model: "m"}, 403, nil,
			`{"error":{"message":"forbidden"}}`, nil, []connKey{{"anthropic", "c9"}}, nil},
		{"12 a 403 without connection marks the provider", Target{Provider: "anthropic", Model: "m"}, 403, nil,
			`{"error":{"message":"forbidden"}}`, []string{"anthropic"}, nil, nil},
		{"13 a 400 changes nothing", Target{Provider: "openai", Connection: "c1", Model: "m"}, 400, nil,
			`{"error":{"message":"Bad Request"}}`, nil, nil, nil},
		{"14 a 524 marks the connection", Target{Provider: "p", Connection: "c1", Model: "m"}, 524, nil,
			`timeout`, nil, []connKey{{"p", "c1"}}, nil},
		{"14 a 500 on a per-model quota provider changes nothing", Target{Provider: "gemini", Connection: "g1", Model: "gemini-pro"}, 500, nil,
			`{"error":{"message":"internal"}}`, nil, nil, nil},
		{"a 500 elsewhere marks the connection", Target{Provider: "openai", Connection: "c1", Model: "m"}, 500, nil,
			`{"error":{"message":"internal"}}`, nil, []connKey{{"openai", "c1"}}, nil},
		{"quota on a per-model quota provider spares the provider", Target{Provider: "gemini", Connection: "g1", Model: "gemini-pro"}, 429, nil,
			`{"error":{"code":"insufficient_quota","message":"You exceeded your current quota, please check your plan"}}`, nil, nil, []string{"gemini"}},
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(Config{})
			st := new(reqState)
			f := r.fail(st, &handle{t: &tt.target}, reply{status: tt.status, header: tt.header, body: []byte(tt.body)}, now)
			assert.Equal(t, tt.status, f.Status)
			assert.ElementsMatch(t, tt.providers, st.exh.providers, "providers")
			assert.ElementsMatch(t, tt.connections, st.exh.connections, "connections")
			assert.ElementsMatch(t, tt.transient, st.exh.transient, "transient")
		})
	}
}

func TestPerModelQuotaProviders(t *testing.T) {
	for _, p := range []string{"gemini", "GitHub", "antigravity", "agy", "passthrough", "openai-compatible-acme"} {
		assert.True(t, defaultPerModelQuota(p, "m"), p)
	}
	for _, p := range []string{"openai", "anthropic", "compatible", ""} {
		assert.False(t, defaultPerModelQuota(p, "m"), p)
	}
	// A configured list replaces the built-in one.
	r := New(Config{PerModelQuota: func(p, _ string) bool { return p == "openai" }})
	st := new(reqState)
	r.fail(st, &handle{t: &Target{Provider: "openai", Connection: "c1", Model: "m"}}, reply{status: 500, body: []byte("boom")}, time.Now())
	assert.Empty(t, st.exh.connections)
	r.fail(st, &handle{t: &Target{Provider: "gemini", Connection: "g1", Model: "m"}}, reply{status: 500, body: []byte("boom")}, time.Now())
	assert.Equal(t, []connKey{{"gemini", "g1"}}, st.exh.connections)
}
