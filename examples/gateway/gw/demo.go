package gw

import (
	_ "embed"
	"encoding/json"
	"time"

	"github.com/routeguard/routeguard/combo/combotest"
)

//go:embed demo.json
var demoConfig []byte

// DemoConfigJSON returns the embedded demo configuration as written, with
// placeholder base URLs.
func DemoConfigJSON() []byte { return append([]byte(nil), demoConfig...) }

// demoCallLog is how many of their latest calls the demo's fake providers
// keep (see combotest.Upstream.SetLogSize); older ones are dropped.
const demoCallLog = 32

// StartDemo starts the demo's two fake providers on loopback and returns
// the embedded demo configuration pointing at them, and a function that
// stops them. Provider "steady" always answers; provider "flaky" answers
// three requests, then fails three with 503, and so on, which opens its
// breaker and moves the demo combo to "steady" until a probe succeeds.
// Each keeps a log of only its last 32 calls, so a long-running demo
// holds bounded memory.
func StartDemo() (*Config, func(), error) {
	cfg, err := Decode(demoConfig)
	if err != nil {
		return nil, nil, err
	}
	flaky, steady := demoUpstream(), demoUpstream()
	stop := func() { flaky.Close(); steady.Close() }
	flaky.Handle("", func(c combotest.Call) combotest.Reply {
		if (c.N-1)/3%2 == 1 {
			return combotest.Error(503, "flaky is having a moment")
		}
		return demoReply(c, "flaky")
	})
	steady.Handle("", func(c combotest.Call) combotest.Reply { return demoReply(c, "steady") })
	for i := range cfg.Providers {
		switch cfg.Providers[i].ID {
		case "flaky":
			cfg.Providers[i].BaseURL = flaky.URL() + "/v1"
		case "steady":
			cfg.Providers[i].BaseURL = steady.URL() + "/v1"
		}
	}
	if err := cfg.Validate(); err != nil {
		stop()
		return nil, nil, err
	}
	return cfg, stop, nil
}

// demoUpstream is a fake provider of the demo. A demo runs for as long as
// anyone likes: the upstream keeps only its last demoCallLog calls, so its
// memory stays bounded.
func demoUpstream() *combotest.Upstream {
	u := combotest.New()
	u.SetLogSize(demoCallLog)
	return u
}

// demoReply answers in the shape the request asked for: a stream or a
// plain completion.
func demoReply(c combotest.Call, provider string) combotest.Reply {
	var req struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(c.Body, &req)
	if req.Stream {
		return combotest.TextStream(20*time.Millisecond, "Hello", " from ", provider, "!")
	}
	return combotest.OK("Hello from " + provider + "!")
}
