package queue_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/routeguard/routeguard/queue"
	"github.com/stretchr/testify/assert"
)

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestParseLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.Header
		want queue.Limits
	}{
		{"empty", hdr(), queue.Limits{Remaining: -1}},
		{"plain", hdr("x-ratelimit-limit", "60", "x-ratelimit-remaining", "3", "x-ratelimit-reset", "20"),
			queue.Limits{Limit: 60, Remaining: 3, Reset: 20 * time.Second}},
		{"openai", hdr("x-ratelimit-limit-requests", "500", "x-ratelimit-remaining-requests", "499", "x-ratelimit-reset-requests", "120ms"),
			queue.Limits{Limit: 500, Remaining: 499, Reset: 120 * time.Millisecond}},
		{"openai minutes", hdr("x-ratelimit-reset-requests", "6m0s"), queue.Limits{Remaining: -1, Reset: 6 * time.Minute}},
		{"anthropic", hdr("anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", "2026-01-01T00:00:30Z"),
			queue.Limits{Limit: 50, Remaining: 0, Reset: 30 * time.Second}},
		{"epoch seconds", hdr("x-ratelimit-reset", "1767225645"), queue.Limits{Remaining: -1, Reset: 45 * time.Second}},
		{"epoch milliseconds", hdr("x-ratelimit-reset", "1767225600500"), queue.Limits{Remaining: -1, Reset: 500 * time.Millisecond}},
		{"past epoch", hdr("x-ratelimit-reset", "1000000000"), queue.Limits{Remaining: -1}},
		{"fractional seconds", hdr("x-ratelimit-reset", "1.5"), queue.Limits{Remaining: -1, Reset: 1500 * time.Millisecond}},
		{"hint capped at 1 h", hdr("x-ratelimit-reset", "86400", "retry-after", "7200"), queue.Limits{Remaining: -1, Reset: time.Hour, RetryAfter: time.Hour}},
		{"structured count", hdr("x-ratelimit-limit", "100, 100;w=60", "x-ratelimit-remaining", " 7 ;w=60"), queue.Limits{Limit: 100, Remaining: 7}},
		{"retry-after date", hdr("retry-after", "Thu, 01 Jan 2026 00:01:00 GMT"), queue.Limits{Remaining: -1, RetryAfter: time.Minute}},
		{"over limit", hdr("x-ratelimit-over-limit", "Yes"), queue.Limits{Remaining: -1, OverLimit: true}},
		{"garbage", hdr("x-ratelimit-limit", "lots", "x-ratelimit-remaining", "-4", "x-ratelimit-reset", "soon", "retry-after", "NaN"), queue.Limits{Remaining: -1}},
		{"zero limit is unknown", hdr("x-ratelimit-limit", "0", "x-ratelimit-limit-requests", "30"), queue.Limits{Limit: 30, Remaining: -1}},
		{"huge counts are capped", hdr("x-ratelimit-limit", "99999999999999999999"), queue.Limits{Limit: 1 << 40, Remaining: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, queue.ParseLimits(tc.h, t0))
		})
	}
}
