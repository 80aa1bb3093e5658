package promcollector_test

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/combo/promcollector"
	"github.com/routeguard/routeguard/cooldown"
)

func Example() {
	openai, anthropic := combotest.New(), combotest.New()
	defer openai.Close()
	defer anthropic.Close()
	openai.Script("sk-1", combotest.Error(http.StatusServiceUnavailable, "down"))
	upstreams := map[string]*combotest.Upstream{"openai": openai, "anthropic": anthropic}

	// One collector, registered on the program's own registry.
	metrics := promcollector.New(promcollector.Options{Providers: []string{"openai", "anthropic"}})
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)

	// Attach it to each layer's Config before the layer is built, then to
	// the router's Config before combo.New.
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

	// What a scrape shows of the fallback and the attempts.
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "routeguard_fallbacks_total" && mf.GetName() != "routeguard_attempts_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			fmt.Print(mf.GetName())
			for _, l := range m.GetLabel() {
				if l.GetValue() != "" {
					fmt.Printf(" %s=%s", l.GetName(), l.GetValue())
				}
			}
			fmt.Println(" ", m.GetCounter().GetValue())
		}
	}
	// Output:
	// routeguard_attempts_total model=claude-sonnet outcome=succeeded provider=anthropic status_class=2xx  1
	// routeguard_attempts_total model=gpt-4o outcome=failed provider=openai reason=server_error status_class=5xx  1
	// routeguard_fallbacks_total from_provider=openai result=succeeded to_provider=anthropic  1
}
