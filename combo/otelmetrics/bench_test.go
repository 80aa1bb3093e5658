package otelmetrics_test

import (
	"context"
	"io"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/otelmetrics"
	"github.com/routeguard/routeguard/internal/metricscore/metricstest"
)

// BenchmarkDoOverhead measures the router's whole per-request work around a
// send that answers at once from memory: bare, and with the collector
// attached to every layer (SDK with a manual reader) and recording the request.
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
	b.Run("metrics", func(b *testing.B) {
		r := metricstest.BenchRouter(mustNew())
		b.ReportAllocs()
		for b.Loop() {
			drain(r.Do(ctx, req, metricstest.BenchSend))
		}
	})
}

// mustNew returns metrics on a meter provider with a manual reader.
func mustNew() *otelmetrics.Metrics {
	m, err := otelmetrics.New(otelmetrics.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))})
	if err != nil {
		panic(err)
	}
	return m
}
