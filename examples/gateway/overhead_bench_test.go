package main

import (
	"context"
	"io"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/otelmetrics"
	"github.com/routeguard/routeguard/combo/promcollector"
	"github.com/routeguard/routeguard/internal/metricscore/metricstest"
)

// BenchmarkRouterOverhead measures the router's whole per-request work
// around a send that answers at once from memory, in one run: with no
// metrics module, with combo/promcollector, and with combo/otelmetrics
// without an SDK (the no-op meter) and with the SDK's meter provider.
//
//	go test -run='^$' -bench=RouterOverhead -count=6 ./examples/gateway/
func BenchmarkRouterOverhead(b *testing.B) {
	ctx := context.Background()
	req := combo.Request{Combo: metricstest.BenchCombo}
	run := func(b *testing.B, r *combo.Router) {
		b.ReportAllocs()
		for b.Loop() {
			res, err := r.Do(ctx, req, metricstest.BenchSend)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Response.Body)
			res.Response.Body.Close()
		}
	}
	b.Run("bare", func(b *testing.B) { run(b, metricstest.BenchRouter(nil)) })
	b.Run("promcollector", func(b *testing.B) {
		run(b, metricstest.BenchRouter(promcollector.New(promcollector.Options{})))
	})
	b.Run("otelmetrics-noop", func(b *testing.B) {
		m, err := otelmetrics.New(otelmetrics.Options{})
		if err != nil {
			b.Fatal(err)
		}
		run(b, metricstest.BenchRouter(m))
	})
	b.Run("otelmetrics-sdk", func(b *testing.B) {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		m, err := otelmetrics.New(otelmetrics.Options{MeterProvider: mp})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = m.Close() })
		run(b, metricstest.BenchRouter(m))
	})
}
