package promcollector_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/promcollector"
	"github.com/routeguard/routeguard/internal/metricscore/metricstest"
)

// BenchmarkDoOverhead measures the router's whole per-request work around a
// send that answers at once from memory: bare, and with the collector
// attached to every layer and recording the request.
func BenchmarkDoOverhead(b *testing.B) {
	ctx := context.Background()
	req := combo.Request{Combo: metricstest.BenchCombo}
	drain := func(res *combo.Result, err error) {
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Response.Body)
		res.Response.Body.Close()
	}
	b.Run("bare", func(b *testing.B) {
		r := metricstest.BenchRouter(nil)
		b.ReportAllocs()
		for b.Loop() {
			drain(r.Do(ctx, req, metricstest.BenchSend))
		}
	})
	b.Run("collector", func(b *testing.B) {
		r := metricstest.BenchRouter(promcollector.New(promcollector.Options{}))
		b.ReportAllocs()
		for b.Loop() {
			drain(r.Do(ctx, req, metricstest.BenchSend))
		}
	})
}

// BenchmarkRecord measures the collector's own work for one routed
// request as BenchmarkDoOverhead makes it: one successful attempt, then
// the request with its two exclusions.
func BenchmarkRecord(b *testing.B) {
	c := promcollector.New(promcollector.Options{})
	rc := combo.Config{}
	c.Attach(&rc)
	tg := combo.Target{Provider: "p0", Connection: "c0", Model: "m"}
	a := combo.Attempt{Target: tg, Outcome: combo.OutcomeSucceeded, Status: 200, Duration: 3 * time.Microsecond}
	end := combo.RequestEnd{Combo: "bench", Attempts: []combo.Attempt{a}, Duration: 8 * time.Microsecond,
		Excluded: []combo.Exclusion{{Provider: "p1", Connection: "c1", Model: "m", Reason: combo.ReasonModelLockout},
			{Provider: "p2", Connection: "c2", Model: "m", Reason: combo.ReasonConnectionCooldown}}}
	b.ReportAllocs()
	for b.Loop() {
		rc.OnAttempt(a)
		rc.OnRequest(end)
	}
}

// BenchmarkRecordPlain measures the collector's work for the plainest
// routed request: one successful attempt that did not wait, no exclusion.
func BenchmarkRecordPlain(b *testing.B) {
	c := promcollector.New(promcollector.Options{})
	rc := combo.Config{}
	c.Attach(&rc)
	a := combo.Attempt{Target: combo.Target{Provider: "p0", Connection: "c0", Model: "m"}, Outcome: combo.OutcomeSucceeded,
		Status: 200, Duration: 3 * time.Microsecond}
	end := combo.RequestEnd{Combo: "bench", Attempts: []combo.Attempt{a}, Duration: 8 * time.Microsecond}
	b.ReportAllocs()
	for b.Loop() {
		rc.OnAttempt(a)
		rc.OnRequest(end)
	}
}
