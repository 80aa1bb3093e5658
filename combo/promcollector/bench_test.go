package promcollector_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/promcollector"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lockout"
	"github.com/routeguard/routeguard/queue"
)

// benchCombo has eight targets over four providers; benchRouter excludes
// two of them (a locked model, a cooling connection), as combo's own
// BenchmarkDoOverhead does.
var benchCombo = func() *combo.Combo {
	c := &combo.Combo{Name: "bench"}
	for i := range 8 {
		c.Targets = append(c.Targets, combo.Target{
			Provider: fmt.Sprintf("p%d", i%4), Connection: fmt.Sprintf("c%d", i), Model: "m",
		})
	}
	return c
}()

// benchRouter is a router with every layer on, attached to m when m is not
// nil; it returns m, or a collector attached to nothing.
func benchRouter(m *promcollector.Collector) (*combo.Router, *promcollector.Collector) {
	now := time.Now()
	bc, gc, cc, lc, qc := breaker.Config{}, breaker.GateConfig{Enabled: true}, cooldown.Config{}, lockout.Config{Enabled: true}, queue.Config{}
	if m != nil {
		m.AttachBreaker(&bc)
		m.AttachCooldown(&cc)
		m.AttachLockout(&lc)
		m.AttachQueue(&qc)
	}
	cfg := combo.Config{
		Breakers:  breaker.NewSet(bc),
		Gate:      breaker.NewGate(gc),
		Cooldowns: cooldown.New(cc),
		Lockouts:  lockout.New(lc),
		Pins:      affinity.New(affinity.Config{TTL: time.Hour}),
		Leases:    lease.New(lease.Config{}),
		Queue:     queue.New(qc),
	}
	cfg.Lockouts.LockAt(lockout.Failure{Provider: "p1", Connection: "c1", Model: "m", Status: 429, Cooldown: time.Hour}, now)
	cfg.Cooldowns.FailAt("c2", cooldown.Failure{Status: 429, Cooldown: time.Hour}, now)
	for _, t := range benchCombo.Targets {
		cfg.Breakers.StateAt(t.Provider, now)
	}
	if m == nil {
		m = promcollector.New(promcollector.Options{})
	} else {
		m.Attach(&cfg)
	}
	return combo.New(cfg), m
}

// staticBody is a reusable response body.
type staticBody struct{ *strings.Reader }

func (staticBody) Close() error { return nil }

func benchSend(ctx context.Context, t *combo.Target) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: staticBody{strings.NewReader("ok")}}, nil
}

// BenchmarkDoOverhead measures the router's whole per-request work around a
// send that answers at once from memory: bare, and with the collector
// attached to every layer and recording the request.
func BenchmarkDoOverhead(b *testing.B) {
	ctx := context.Background()
	req := combo.Request{Combo: benchCombo}
	drain := func(res *combo.Result, err error) {
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Response.Body)
		res.Response.Body.Close()
	}
	b.Run("bare", func(b *testing.B) {
		r, _ := benchRouter(nil)
		b.ReportAllocs()
		for b.Loop() {
			drain(r.Do(ctx, req, benchSend))
		}
	})
	b.Run("collector", func(b *testing.B) {
		r, _ := benchRouter(promcollector.New(promcollector.Options{}))
		b.ReportAllocs()
		for b.Loop() {
			drain(r.Do(ctx, req, benchSend))
		}
	})
}

// BenchmarkRecord measures the collector's own work for one routed
// request as BenchmarkDoOverhead makes it: one successful attempt, then
// the request with its two exclusions.
func BenchmarkRecord(b *testing.B) {
	c := promcollector.New(promcollector.Options{})
	rc := combo.Config{}
	c.Attach(&rc)
	tg := combo.Target{Provider: "p0", Connection: "c0", Model: "m"}
	a := combo.Attempt{Target: tg, Outcome: combo.OutcomeSucceeded, Status: 200, Duration: 3 * time.Microsecond}
	end := combo.RequestEnd{Combo: "bench", Attempts: []combo.Attempt{a}, Duration: 8 * time.Microsecond,
		Excluded: []combo.Exclusion{{Provider: "p1", Connection: "c1", Model: "m", Reason: combo.ReasonModelLockout},
			{Provider: "p2", Connection: "c2", Model: "m", Reason: combo.ReasonConnectionCooldown}}}
	b.ReportAllocs()
	for b.Loop() {
		rc.OnAttempt(a)
		rc.OnRequest(end)
	}
}
