package restate

import (
	"net/http"
	"testing"

	"github.com/routeguard/routeguard"
)

// flagSet is the consumer flags of a verdict, compared as one value.
type flagSet struct {
	Terminal, Permanent, CreditsExhausted, Expired, RequestRejected bool
	ModelScoped, RequestScoped, TokenLimit, EmptyAnswer             bool
}

func flagsOf(v Verdict) flagSet {
	return flagSet{v.Terminal, v.Permanent, v.CreditsExhausted, v.Expired, v.RequestRejected,
		v.ModelScoped, v.RequestScoped, v.TokenLimit, v.EmptyAnswer}
}

// TestVerdictFlagsCarryTheConsumerRules checks, rule by rule, the flags a
// consumer acts on instead of comparing statuses: Terminal (and the four
// flags it summarises), ModelScoped, RequestScoped, TokenLimit and
// EmptyAnswer.
func TestVerdictFlagsCarryTheConsumerRules(t *testing.T) {
	c := &Classifier{}
	if err := c.SetTables(func() Tables {
		tb := DefaultTables()
		tb.ProviderRules["exacto"] = []ProviderRule{{ID: "exact-rule", Statuses: []int{429}, Any: []string{"this model here"},
			Reason: ReasonQuotaExhausted, Scope: ScopeExact}}
		tb.ScopeProviders = append(tb.ScopeProviders, "exacto")
		return tb
	}()); err != nil {
		t.Fatal(err)
	}
	tooLarge := `{"error":{"message":"Request too large for gpt-4o on tokens per min (TPM): Limit 30000, Requested 50000."}}`
	tests := []struct {
		name string
		r    Response
		want flagSet
	}{
		// Terminal: the account's failure.
		{"401 is expired and terminal", Response{Provider: "openai", Auth: routeguard.APIKey, Status: 401},
			flagSet{Terminal: true, Expired: true}},
		{"401 with any text is expired", Response{Provider: "openai", Status: 401, Body: []byte("invalid api key")},
			flagSet{Terminal: true, Expired: true}},
		{"401 ban is permanent and expired", Response{Status: 401, Body: []byte(`{"error":{"code":"account_deactivated"}}`)},
			flagSet{Terminal: true, Permanent: true, Expired: true}},
		{"403 ban is permanent, not expired", Response{Status: 403, Body: []byte("Your account has been suspended for billing")},
			flagSet{Terminal: true, Permanent: true}},
		{"402 is credits exhausted", Response{Provider: "acme", Status: 402},
			flagSet{Terminal: true, CreditsExhausted: true}},
		{"credits text is credits exhausted", Response{Provider: "openai", Auth: routeguard.APIKey, Status: 429, Body: []byte(`{"error":{"code":"insufficient_quota"}}`)},
			flagSet{Terminal: true, CreditsExhausted: true}},
		{"billing suspension is credits exhausted", Response{Status: 403, Body: []byte("Access suspended: monthly spending limit reached")},
			flagSet{Terminal: true, CreditsExhausted: true}},
		{"request not allowed is request rejected", Response{Provider: "anthropic", Auth: routeguard.OAuth, Status: 403, Body: []byte("Request not allowed")},
			flagSet{Terminal: true, RequestRejected: true}},
		{"restated 403 is not expired", Response{Provider: "agentrouter", Status: 403, Body: []byte("用户额度不足")},
			flagSet{}},
		{"403 on an api key is not terminal", Response{Provider: "openai", Auth: routeguard.APIKey, Status: 403, Body: []byte("forbidden")},
			flagSet{}},
		// ModelScoped: the model on this connection.
		{"404 is model scoped", Response{Status: 404}, flagSet{ModelScoped: true}},
		{"410 is model scoped", Response{Status: 410, Body: []byte("gone")}, flagSet{ModelScoped: true}},
		{"retired model is model scoped", Response{Status: 404, Body: []byte("models/gemini-2.5-flash is no longer available")},
			flagSet{ModelScoped: true}},
		{"not_found reason on a 400 is model scoped", Response{Status: 400, Body: []byte("This endpoint has moved, update your base URL")},
			flagSet{ModelScoped: true}},
		{"model rule scope is model scoped", Response{Provider: "agentrouter", Status: 403, Body: []byte("无权访问模型 claude-opus-5")},
			flagSet{ModelScoped: true}},
		{"exact rule scope is model scoped", Response{Provider: "exacto", Status: 429, Body: []byte("quota for this model here")},
			flagSet{ModelScoped: true}},
		{"connection rule scope is not", Response{Provider: "agentrouter", Status: 429, Body: []byte("用户额度不足")},
			flagSet{}},
		{"unsurfaced scope is not", Response{Provider: "minimax", Status: 429,
			Header: http.Header{"X-Model-Quota-Remaining": {"haiku=0"}}}, flagSet{}},
		// RequestScoped: this request, not the target.
		{"400 context length is request scoped", Response{Auth: routeguard.APIKey, Status: 400, Body: []byte("maximum context length exceeded")},
			flagSet{RequestScoped: true}},
		{"400 without a pattern is request scoped", Response{Status: 400, Body: []byte("bad parameter foo")},
			flagSet{RequestScoped: true}},
		{"400 high frequency is not", Response{Status: 400, Body: []byte("Detected high-frequency non-compliant requests")},
			flagSet{}},
		// TokenLimit: a 429 for this request's size.
		{"429 request too large is a token limit", Response{Provider: "openai", Auth: routeguard.APIKey, Status: 429, Body: []byte(tooLarge)},
			flagSet{TokenLimit: true}},
		{"429 rate limit is not", Response{Provider: "openai", Auth: routeguard.APIKey, Status: 429, Body: []byte("Rate limited")},
			flagSet{}},
		{"413 request too large is not", Response{Provider: "openai", Status: 413, Body: []byte(tooLarge)}, flagSet{}},
		// EmptyAnswer: a 502 for an empty answer.
		{"502 empty response is an empty answer", Response{Provider: "claude", Status: 502, Body: []byte(`{"error":{"message":"Claude returned an empty response"}}`)},
			flagSet{EmptyAnswer: true}},
		{"502 empty content is an empty answer", Response{Status: 502, Body: []byte("upstream sent Empty Content")},
			flagSet{EmptyAnswer: true}},
		{"502 bad gateway is not", Response{Status: 502, Body: []byte("bad gateway")}, flagSet{}},
		{"503 empty response is not", Response{Status: 503, Body: []byte("empty response")}, flagSet{}},
		// Not failures.
		{"200 has no flags", Response{Status: 200, Body: []byte("request too large")}, flagSet{}},
		{"network error has no flags", Response{Status: 0, Message: "connection refused"}, flagSet{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := c.ClassifyAt(tt.r, t0)
			if got := flagsOf(v); got != tt.want {
				t.Errorf("flags = %+v\nwant    %+v\n(verdict %+v)", got, tt.want, v)
			}
		})
	}
}

// TestExpiredInsideAStream: an authentication error event inside a 200
// stream is a rejected credential like an HTTP 401.
func TestExpiredInsideAStream(t *testing.T) {
	v, ok := (&Classifier{}).ClassifyEventAt(Response{Provider: "anthropic", Auth: routeguard.APIKey},
		[]byte(`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`), t0)
	if !ok || v.Status != 401 || flagsOf(v) != (flagSet{Terminal: true, Expired: true}) {
		t.Errorf("ClassifyEventAt = %+v, %v", v, ok)
	}
}

// TestTokenLimitAndEmptyAnswerPhrasesAreData: the phrases behind TokenLimit
// and EmptyAnswer are Signals lists that can be replaced.
func TestTokenLimitAndEmptyAnswerPhrasesAreData(t *testing.T) {
	c := &Classifier{}
	tb := c.Tables()
	if got := tb.Signals.TokenLimit; len(got) != 1 || got[0] != "request too large" {
		t.Errorf("built-in TokenLimit = %q", got)
	}
	if got := tb.Signals.EmptyAnswer; len(got) != 2 || got[0] != "empty content" || got[1] != "empty response" {
		t.Errorf("built-in EmptyAnswer = %q", got)
	}
	tb.Signals.TokenLimit = []string{"Prompt Exceeds TPM"}
	tb.Signals.EmptyAnswer = []string{"nothing came back"}
	if err := c.SetTables(tb); err != nil {
		t.Fatal(err)
	}
	classify := func(status int, body string) Verdict {
		return c.ClassifyAt(Response{Provider: "openai", Auth: routeguard.APIKey, Status: status, Body: []byte(body)}, t0)
	}
	if v := classify(429, "prompt exceeds tpm limit"); !v.TokenLimit {
		t.Errorf("custom token limit phrase: %+v", v)
	}
	if v := classify(429, "Request too large for gpt-4o"); v.TokenLimit {
		t.Errorf("replaced token limit phrase still counts: %+v", v)
	}
	if v := classify(502, "NOTHING came back"); !v.EmptyAnswer {
		t.Errorf("custom empty answer phrase: %+v", v)
	}
	if v := classify(502, "empty response"); v.EmptyAnswer {
		t.Errorf("replaced empty answer phrase still counts: %+v", v)
	}
}
