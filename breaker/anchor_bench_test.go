package breaker

import (
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
)

// BenchmarkAdmissionAnchor puts a closed breaker's admission and success
// report beside its anchor, gobreaker's TwoStepCircuitBreaker doing the
// same (Allow, then done(nil)), in one run.
func BenchmarkAdmissionAnchor(b *testing.B) {
	b.Run("breaker=AllowReportAt", func(b *testing.B) {
		br := New("p", defaultProfile(APIKey), nil)
		now := t0
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(time.Microsecond)
			done, err := br.AllowReportAt(now)
			if err != nil {
				b.Fatal(err)
			}
			done(Report{Outcome: Success})
		}
	})
	b.Run("set=AllowReportAt", func(b *testing.B) {
		s := NewSet(Config{})
		now := t0
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(time.Microsecond)
			done, err := s.AllowReportAt("openai", now)
			if err != nil {
				b.Fatal(err)
			}
			done(Report{Outcome: Success})
		}
	})
	b.Run("anchor=gobreaker-TwoStep", func(b *testing.B) {
		cb := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{Name: "p"})
		b.ReportAllocs()
		for b.Loop() {
			done, err := cb.Allow()
			if err != nil {
				b.Fatal(err)
			}
			done(nil)
		}
	})
}
