package main

import (
	"os"

	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// With the embedded demo configuration the gateway prints where it listens
// and two curl commands to try.
func Example_printBanner() {
	cfg, err := gw.Parse(gw.DemoConfigJSON())
	if err != nil {
		panic(err)
	}
	printBanner(os.Stdout, "127.0.0.1:8080", cfg, true)
	// Output:
	// routeguard gateway listening on http://127.0.0.1:8080
	// try:
	//   curl -s http://127.0.0.1:8080/v1/chat/completions -H 'Authorization: Bearer rk-demo' -H 'Content-Type: application/json' -d '{"model":"demo","messages":[{"role":"user","content":"hi"}]}'
	// health:
	//   curl -s http://127.0.0.1:8080/api/monitoring/health -H 'Authorization: Bearer demo-admin-token'
}
