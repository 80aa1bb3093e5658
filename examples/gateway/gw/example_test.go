package gw_test

import (
	"fmt"

	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// A configuration is refused at start with the path of the offending field.
func ExampleParse() {
	_, err := gw.Parse([]byte(`{
		"providers": [{"id": "openai", "baseURL": "http://127.0.0.1:9001/v1",
		               "connections": [{"id": "k1", "apiKey": "sk-1"}], "models": ["gpt-4o"]}],
		"combos": [{"name": "smart", "strategy": "fastest",
		            "targets": [{"provider": "openai", "model": "gpt-4o"}]}]
	}`))
	fmt.Println(err)

	cfg, err := gw.Parse([]byte(`{
		"providers": [{"id": "openai", "baseURL": "http://127.0.0.1:9001/v1",
		               "connections": [{"id": "k1", "apiKey": "sk-1"}], "models": ["gpt-4o"]}],
		"combos": [{"name": "smart", "strategy": "round-robin",
		            "targets": [{"provider": "openai", "model": "gpt-4o"}]}]
	}`))
	fmt.Println(cfg.Combos[0].Name, cfg.Combos[0].Strategy, err)
	// Output:
	// config: combos[0].strategy: unknown strategy "fastest" (valid: auto, cache-optimized, context-optimized, context-relay, cost-optimized, fill-first, fusion, headroom, least-used, lkgp, p2c, pipeline, priority, quota-share, random, reset-aware, reset-window, round-robin, strict-random, weighted)
	// smart round-robin <nil>
}
