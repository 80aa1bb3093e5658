package combo_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/cooldown"
)

func Example() {
	openai, anthropic := combotest.New(), combotest.New()
	defer openai.Close()
	defer anthropic.Close()
	openai.Script("sk-1", combotest.Error(http.StatusServiceUnavailable, "overloaded"))
	upstreams := map[string]*combotest.Upstream{"openai": openai, "anthropic": anthropic}

	r := combo.New(combo.Config{
		Breakers:  breaker.NewSet(breaker.Config{}),
		Cooldowns: cooldown.New(cooldown.Config{}),
	})
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
	defer res.Response.Body.Close()
	for _, a := range res.Attempts {
		fmt.Println(a.Target.Provider, a.Outcome, a.Status)
	}
	fmt.Println("served by", res.Target.String())
	// Output:
	// openai failed 503
	// anthropic succeeded 200
	// served by anthropic/ak-1/claude-sonnet
}

func ExampleError() {
	cd := cooldown.New(cooldown.Config{})
	r := combo.New(combo.Config{Cooldowns: cd})
	cd.FailAt("k1", cooldown.Failure{Status: 429, Cooldown: 90 * time.Second}, time.Now())
	c := &combo.Combo{Name: "solo", Targets: []combo.Target{{Provider: "openai", Connection: "k1", Model: "gpt-4o"}}}
	_, err := r.Do(context.Background(), combo.Request{Combo: c}, nil)
	if te, ok := err.(*combo.Error); ok {
		resp := te.Response(nil)
		fmt.Println(resp.StatusCode, resp.Header.Get("Retry-After"), te.Excluded[0].Reason)
	}
	// Output:
	// 503 90 connection_cooldown
}
