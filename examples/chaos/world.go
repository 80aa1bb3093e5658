package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
)

// The request stream is cut into phases; each phase brings its own incident.
const (
	phaseCalm = iota
	phaseOutage
	phaseRecovery
	phaseRetired
	phaseRateLimit
	phaseStall
	numPhases
)

var phaseTitles = [numPhases]string{
	"calm: every provider answers",
	"openai outage: every openai key answers 503",
	"openai is back",
	"gpt-x retired: k1 answers 404 for it from now on",
	"key k1 rate-limited: 429 with Retry-After: 2",
	"slow stalls: its streams carry heartbeats and no text",
}

// Two combos: chat requests prefer openai's key k1, then its other model,
// then its second key, then two other providers; streamed requests prefer
// the slow provider over the fast one.
var (
	chat = &combo.Combo{Name: "chat", Targets: []combo.Target{
		{Provider: "openai", Connection: "k1", Model: "gpt-x", AuthClass: "apikey"},
		{Provider: "openai", Connection: "k1", Model: "gpt-y", AuthClass: "apikey"},
		{Provider: "openai", Connection: "k2", Model: "gpt-x", AuthClass: "apikey"},
		{Provider: "agentrouter", Connection: "r1", Model: "claude", AuthClass: "apikey"},
		{Provider: "anthropic", Connection: "c1", Model: "claude", AuthClass: "apikey"},
	}}
	streaming = &combo.Combo{Name: "stream", Targets: []combo.Target{
		{Provider: "slow", Connection: "s1", Model: "llama", AuthClass: "apikey"},
		{Provider: "fast", Connection: "f1", Model: "llama", AuthClass: "apikey"},
	}}
)

const (
	latency       = 25 * time.Millisecond  // of every answer, good or bad
	heartbeatPace = 200 * time.Millisecond // of a stalled stream
)

// world is one set of in-process fake providers whose faults follow the
// current phase. Each run gets a fresh world, so both runs meet the same
// faults at the same requests.
type world struct {
	phase     atomic.Int32
	upstreams map[string]*combotest.Upstream
}

func newWorld() *world {
	w := &world{upstreams: map[string]*combotest.Upstream{}}
	for _, c := range []*combo.Combo{chat, streaming} {
		for _, t := range c.Targets {
			if w.upstreams[t.Provider] != nil {
				continue
			}
			u := combotest.New()
			provider := t.Provider
			u.Handle("", func(c combotest.Call) combotest.Reply { return w.reply(provider, c) })
			w.upstreams[provider] = u
		}
	}
	return w
}

func (w *world) close() {
	for _, u := range w.upstreams {
		u.Close()
	}
}

// calls returns how many calls the providers received.
func (w *world) calls() int {
	n := 0
	for _, u := range w.upstreams {
		n += u.Total()
	}
	return n
}

// chatRequest is the part of a Chat Completions request the fakes read.
type chatRequest struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
}

// reply is the scripted behaviour of every provider.
func (w *world) reply(provider string, c combotest.Call) combotest.Reply {
	var req chatRequest
	_ = json.Unmarshal(c.Body, &req)
	phase := int(w.phase.Load())
	switch {
	case provider == "openai" && phase == phaseOutage:
		return combotest.Error(http.StatusServiceUnavailable, "Service Unavailable").After(latency)
	case provider == "openai" && c.Credential == "k1" && phase == phaseRateLimit:
		return combotest.RateLimited(2 * time.Second).After(latency)
	case provider == "openai" && c.Credential == "k1" && req.Model == "gpt-x" && phase >= phaseRetired:
		return combotest.Error(http.StatusNotFound, "The model `gpt-x` does not exist.").After(latency)
	case provider == "agentrouter":
		// Out of credit, but it says 403 Forbidden.
		return combotest.Error(http.StatusForbidden, "用户额度不足 (user quota is not enough)").After(latency)
	case provider == "slow" && req.Stream && phase == phaseStall:
		beats := make([]combotest.Event, 100)
		for i := range beats {
			beats[i] = combotest.Heartbeat()
		}
		return combotest.SSE(heartbeatPace, beats...)
	case req.Stream:
		return combotest.TextStream(5*time.Millisecond, "Hello", " from ", provider).After(latency)
	}
	return combotest.OK("Hello from " + provider).After(latency)
}

// send posts a Chat Completions request to target t, as a plain client of
// that provider would: the connection's key as bearer token, the model in
// the body.
func (w *world) send(ctx context.Context, t *combo.Target, stream bool) (*http.Response, error) {
	body := fmt.Sprintf(`{"model":%q,"stream":%t,"messages":[{"role":"user","content":"hi"}]}`, t.Model, stream)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		"http://"+t.Provider+".test/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+t.Connection)
	req.Header.Set("Content-Type", "application/json")
	return w.upstreams[t.Provider].Transport().RoundTrip(req)
}
