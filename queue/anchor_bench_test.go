package queue_test

import (
	"testing"
	"time"

	"github.com/routeguard/routeguard/queue"
	"golang.org/x/time/rate"
)

// BenchmarkAdmission puts the queue's admission of a rate-limited key
// beside its anchor, x/time/rate's Allow on a limiter of the same rate, in
// one run: the ratio is what the queue adds to a bare limiter.
func BenchmarkAdmission(b *testing.B) {
	const rpm = 600_000 // 10 000/s against a clock at 1 ms a step: never the limit
	b.Run("queue=TryAcquireAt", func(b *testing.B) {
		q := queue.New(queue.Config{RequestsPerMinute: rpm})
		now := t0
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(time.Millisecond)
			release, ok := q.TryAcquireAt("openai:k1", now)
			if !ok {
				b.Fatal("refused")
			}
			release()
		}
	})
	b.Run("anchor=rate.Allow", func(b *testing.B) {
		lim := rate.NewLimiter(rate.Limit(float64(rpm)/60), rpm)
		now := t0
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(time.Millisecond)
			if !lim.AllowN(now, 1) {
				b.Fatal("refused")
			}
		}
	})
}
