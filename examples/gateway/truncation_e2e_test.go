package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// A plain answer that stops halfway through its body is a failed attempt of
// its target, read before anything reaches the client: with another target
// the client gets that target's whole answer, and with none it gets an
// error answer, never a 200 that breaks off.
func TestE2ETruncatedAnswerFallsBackOrFails(t *testing.T) {
	up := upstreams(t, "openai", "anthropic")
	up["openai"].Chaos(combotest.Chaos{Seed: 1, Stall: 1}) // status, headers, half the body, then nothing
	up["anthropic"].Script("", combotest.OK("the whole answer"))
	settings := gw.ComboSettings{TargetTimeoutMs: 500}
	cfg := config([]gw.Provider{provider("openai", up["openai"], "k1"), provider("anthropic", up["anthropic"], "a1")},
		gw.Combo{Name: "both", Strategy: "priority", Settings: settings,
			Targets: []gw.Target{{Provider: "openai", Model: "m"}, {Provider: "anthropic", Model: "m"}}},
		gw.Combo{Name: "alone", Strategy: "priority", Settings: settings,
			Targets: []gw.Target{{Provider: "openai", Model: "m2"}}})
	g := startGateway(t, cfg)

	start := time.Now()
	a := g.chat(t, "both", "hi", nil)
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, "anthropic/m", a.Header.Get("X-Routeguard-Target"))
	assert.Contains(t, a.body, "the whole answer")
	assert.Less(t, time.Since(start), 5*time.Second)

	// Alone (another model of the same connection, which the first cut did
	// not lock), the stalled target's answer is a 504 from the router: the
	// per-target timeout cut the body before anything was sent.
	a = g.chat(t, "alone", "hi", nil)
	assert.Equal(t, http.StatusGatewayTimeout, a.StatusCode, a.body)
	assert.NotEmpty(t, errorCode(t, a), "a JSON error answer: %s", a.body)
	assert.Equal(t, 2, up["openai"].Faults().Stall)
}
