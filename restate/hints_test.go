package restate

import (
	"net/http"
	"testing"
	"time"
)

func TestHintAt(t *testing.T) {
	c := &Classifier{}
	now := t0
	tests := []struct {
		name   string
		header http.Header
		body   string
		want   Hint
	}{
		{"none", nil, "", Hint{}},
		{"retry-after seconds", http.Header{"Retry-After": {"17"}}, "", Hint{17 * time.Second, hintHeader, false}},
		{"retry-after decimal", http.Header{"Retry-After": {"1.5"}}, "", Hint{1500 * time.Millisecond, hintHeader, false}},
		{"retry-after zero ignored", http.Header{"Retry-After": {"0"}}, "", Hint{}},
		{"retry-after http-date", http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, "", Hint{90 * time.Second, hintHeader, false}},
		{"retry-after past date", http.Header{"Retry-After": {now.Add(-time.Hour).Format(http.TimeFormat)}}, "", Hint{}},
		{"retry-after garbage", http.Header{"Retry-After": {"soon"}}, "", Hint{}},
		{"retry-after capped", http.Header{"Retry-After": {"999999999"}}, "", Hint{time.Hour, hintHeader, false}},
		{"retry-after-ms", http.Header{"Retry-After-Ms": {"2500"}}, "", Hint{2500 * time.Millisecond, hintHeader, false}},
		{"x-ratelimit-reset relative", http.Header{"X-Ratelimit-Reset": {"30"}}, "", Hint{30 * time.Second, hintHeader, false}},
		{"x-ratelimit-reset epoch s", http.Header{"X-Ratelimit-Reset": {"1773144020"}}, "", Hint{20 * time.Second, hintHeader, false}},
		{"x-ratelimit-reset epoch ms", http.Header{"X-Ratelimit-Reset": {"1773144020500"}}, "", Hint{20500 * time.Millisecond, hintHeader, false}},
		{"x-ratelimit-reset past epoch", http.Header{"X-Ratelimit-Reset": {"1700000000"}}, "", Hint{}},
		{"reset-requests duration", http.Header{"X-Ratelimit-Reset-Requests": {"6m0s"}}, "", Hint{6 * time.Minute, hintHeader, false}},
		{"reset-tokens ms", http.Header{"X-Ratelimit-Reset-Tokens": {"20ms"}}, "", Hint{20 * time.Millisecond, hintHeader, false}},
		{"reset exhausted wins", http.Header{"X-Ratelimit-Reset-Requests": {"1s"}, "X-Ratelimit-Remaining-Requests": {"0"},
			"X-Ratelimit-Reset-Tokens": {"6m0s"}, "X-Ratelimit-Remaining-Tokens": {"1200"}}, "", Hint{time.Second, hintHeader, false}},
		{"reset longest otherwise", http.Header{"X-Ratelimit-Reset-Requests": {"1s"}, "X-Ratelimit-Reset-Tokens": {"1m30.5s"}}, "",
			Hint{90500 * time.Millisecond, hintHeader, false}},
		{"anthropic reset", http.Header{"Anthropic-Ratelimit-Requests-Reset": {"2026-03-10T12:00:45Z"},
			"Anthropic-Ratelimit-Requests-Remaining": {"0"}, "Anthropic-Ratelimit-Tokens-Reset": {"2026-03-10T12:05:00Z"}}, "",
			Hint{45 * time.Second, hintHeader, false}},
		{"header before body", http.Header{"Retry-After": {"5"}}, `{"retry_after": 9}`, Hint{5 * time.Second, hintHeader, false}},
		{"retryinfo", nil, `{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"33s"}]}}`,
			Hint{33 * time.Second, hintRetryInfo, false}},
		{"retryinfo ms", nil, `[{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1500ms"}]}}]`,
			Hint{1500 * time.Millisecond, hintRetryInfo, false}},
		{"retryinfo bare", nil, `{"error":{"details":[{"@type":"google.rpc.RetryInfo","retryDelay":"2"}]}}`, Hint{2 * time.Second, hintRetryInfo, false}},
		{"retryinfo 2m", nil, `{"details":[{"@type":"google.rpc.RetryInfo","retryDelay":"2m"}]}`, Hint{2 * time.Minute, hintRetryInfo, false}},
		{"retryinfo capped", nil, `{"details":[{"@type":"google.rpc.RetryInfo","retryDelay":"3h"}]}`, Hint{time.Hour, hintRetryInfo, false}},
		{"body retry_after", nil, `{"error":{"retry_after":12}}`, Hint{12 * time.Second, hintBody, false}},
		{"body retryAfter iso", nil, `{"retryAfter":"2026-03-10T12:02:00Z"}`, Hint{2 * time.Minute, hintBody, false}},
		{"body retry_after_ms", nil, `{"retry_after_ms":1500}`, Hint{1500 * time.Millisecond, hintBody, false}},
		{"body retryAfterMs string", nil, `{"error":{"retryAfterMs":"250"}}`, Hint{250 * time.Millisecond, hintBody, false}},
		{"text please retry in", nil, "Please retry in 26.5s.", Hint{26500 * time.Millisecond, hintText, false}},
		{"text try again in", nil, "Rate limited. Try again in 20s", Hint{20 * time.Second, hintText, false}},
		{"text retry after", nil, "retry after 20s", Hint{20 * time.Second, hintText, false}},
		{"text retry after seconds word", nil, "retry after 20 seconds", Hint{20 * time.Second, hintText, false}},
		{"text try again in minutes", nil, "try again in 2 minutes and 30 seconds", Hint{150 * time.Second, hintText, false}},
		{"text retry after iso", nil, "retry after 2026-03-10T13:00:00Z", Hint{time.Hour, hintText, true}},
		{"text try again at", nil, "try again at 2026-03-10T12:10:00.000Z", Hint{10 * time.Minute, hintText, true}},
		{"text wait until", nil, "please wait until 2026-03-10T12:00:30+00:00", Hint{30 * time.Second, hintText, true}},
		{"text reset at datetime", nil, "quota will reset at 2026-03-11 00:00:00", Hint{12 * time.Hour, hintText, true}},
		{"text reset at month-day utc", nil, "limit resets at 03-11 00:00:00 UTC", Hint{12 * time.Hour, hintText, true}},
		{"text reset at month-day past rolls a year", nil, "resets at 03-09 00:00:00 UTC",
			Hint{30 * 24 * time.Hour, hintText, true}}, // next year, capped
		{"text resets after hms", nil, "Your quota will reset after 16h0m0s", Hint{16 * time.Hour, hintText, true}},
		{"text resets in hms", nil, "resets in 1h2m3s", Hint{time.Hour + 2*time.Minute + 3*time.Second, hintText, true}},
		{"text resets in days", nil, "Resets in 3 days", Hint{72 * time.Hour, hintText, true}},
		{"text resets in days capped", nil, "resets in 400 days", Hint{30 * 24 * time.Hour, hintText, true}},
		{"text past absolute ignored", nil, "try again at 2020-01-01T00:00:00Z", Hint{}},
		{"text no number", nil, "try again in a moment", Hint{}},
		{"json without hint falls to text", nil, `{"error":{"message":"Please retry in 3s"}}`, Hint{3 * time.Second, hintText, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.HintAt(tt.header, []byte(tt.body), now); got != tt.want {
				t.Errorf("HintAt(%v, %q) = %+v, want %+v", tt.header, tt.body, got, tt.want)
			}
		})
	}
}

func TestHintCapsFollowSettings(t *testing.T) {
	c := New(Config{MaxRateLimitHint: 10 * time.Second, MaxQuotaHint: 2 * time.Hour})
	if got := c.HintAt(http.Header{"Retry-After": {"60"}}, nil, t0); got.After != 10*time.Second {
		t.Errorf("rate-limit cap: got %v", got.After)
	}
	if got := c.HintAt(nil, []byte("resets in 3 days"), t0); got.After != 2*time.Hour || !got.Quota {
		t.Errorf("quota cap: got %+v", got)
	}
}

func TestParseSpan(t *testing.T) {
	tests := []struct {
		in       string
		unitless bool
		want     time.Duration
		ok       bool
	}{
		{"1h2m3s", false, time.Hour + 2*time.Minute + 3*time.Second, true},
		{" 26.5s", false, 26500 * time.Millisecond, true},
		{"3 days", false, 72 * time.Hour, true},
		{"2 hours, 5 minutes", false, 2*time.Hour + 5*time.Minute, true},
		{"1500ms", false, 1500 * time.Millisecond, true},
		{"20", true, 20 * time.Second, true},
		{"20", false, 0, false},
		{"2026-01-01", true, 0, false},
		{"abc", true, 0, false},
		{"99999999999999999999 days", false, maxSpan, true},
		{"1 fortnight", true, 0, false},
	}
	for _, tt := range tests {
		got, _, ok := parseSpan(tt.in, tt.unitless)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseSpan(%q, %v) = %v, %v; want %v, %v", tt.in, tt.unitless, got, ok, tt.want, tt.ok)
		}
	}
}
