package otelmetrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/combo/otelmetrics"
	"github.com/routeguard/routeguard/cooldown"
)

func Example() {
	openai, anthropic := combotest.New(), combotest.New()
	defer openai.Close()
	defer anthropic.Close()
	openai.Script("sk-1", combotest.Error(http.StatusServiceUnavailable, "down"))
	upstreams := map[string]*combotest.Upstream{"openai": openai, "anthropic": anthropic}

	// The program's meter provider; a manual reader here, an exporter in
	// production.
	reader := sdkmetric.NewManualReader()
	metrics, err := otelmetrics.New(otelmetrics.Options{
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
		Providers:     []string{"openai", "anthropic"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer metrics.Close()

	// Attach to each layer's Config before the layer is built, then to the
	// router's Config before combo.New.
	bc, cc := breaker.Config{}, cooldown.Config{}
	metrics.AttachBreaker(&bc)
	metrics.AttachCooldown(&cc)
	cfg := combo.Config{Breakers: breaker.NewSet(bc), Cooldowns: cooldown.New(cc)}
	metrics.Attach(&cfg)
	r := combo.New(cfg)

	smart := &combo.Combo{Name: "smart", Targets: []combo.Target{
		{Provider: "openai", Connection: "sk-1", Model: "gpt-4o"},
		{Provider: "anthropic", Connection: "ak-1", Model: "claude-sonnet"},
	}}
	send := func(ctx context.Context, t *combo.Target) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+t.Provider+".test/v1/chat/completions", nil)
		req.Header.Set("Authorization", "Bearer "+t.Connection)
		return upstreams[t.Provider].Transport().RoundTrip(req)
	}

	res, err := r.Do(context.Background(), combo.Request{Combo: smart}, send)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _ = io.Copy(io.Discard, res.Response.Body)
	res.Response.Body.Close()

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case "routeguard_fallbacks_total":
				for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
					from, _ := p.Attributes.Value("from_provider")
					to, _ := p.Attributes.Value("to_provider")
					fmt.Println(m.Name, from.AsString(), "→", to.AsString(), p.Value)
				}
			case "gen_ai.client.operation.duration":
				fmt.Println(m.Name, len(m.Data.(metricdata.Histogram[float64]).DataPoints), "series")
			}
		}
	}
	// Output:
	// routeguard_fallbacks_total openai → anthropic 1
	// gen_ai.client.operation.duration 2 series
}
