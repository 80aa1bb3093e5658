package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/otelmetrics"
	"github.com/routeguard/routeguard/combo/promcollector"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lockout"
	"github.com/routeguard/routeguard/queue"
)

// attachable is what both metric modules offer.
type attachable interface {
	Attach(*combo.Config)
	AttachBreaker(*breaker.Config)
	AttachCooldown(*cooldown.Config)
	AttachLockout(*lockout.Config)
	AttachQueue(*queue.Config)
}

// overheadCombo has eight targets over four providers; overheadRouter
// excludes two of them (a locked model, a cooling connection), as combo's
// BenchmarkDoOverhead does.
var overheadCombo = func() *combo.Combo {
	c := &combo.Combo{Name: "bench"}
	for i := range 8 {
		c.Targets = append(c.Targets, combo.Target{
			Provider: fmt.Sprintf("p%d", i%4), Connection: fmt.Sprintf("c%d", i), Model: "m",
		})
	}
	return c
}()

// overheadRouter is a router with every layer on, attached to m (none when
// nil).
func overheadRouter(m attachable) *combo.Router {
	now := time.Now()
	bc, cc, lc, qc := breaker.Config{}, cooldown.Config{}, lockout.Config{Enabled: true}, queue.Config{}
	if m != nil {
		m.AttachBreaker(&bc)
		m.AttachCooldown(&cc)
		m.AttachLockout(&lc)
		m.AttachQueue(&qc)
	}
	cfg := combo.Config{
		Breakers:  breaker.NewSet(bc),
		Gate:      breaker.NewGate(breaker.GateConfig{Enabled: true}),
		Cooldowns: cooldown.New(cc),
		Lockouts:  lockout.New(lc),
		Pins:      affinity.New(affinity.Config{TTL: time.Hour}),
		Leases:    lease.New(lease.Config{}),
		Queue:     queue.New(qc),
	}
	cfg.Lockouts.LockAt(lockout.Failure{Provider: "p1", Connection: "c1", Model: "m", Status: 429, Cooldown: time.Hour}, now)
	cfg.Cooldowns.FailAt("c2", cooldown.Failure{Status: 429, Cooldown: time.Hour}, now)
	for _, t := range overheadCombo.Targets {
		cfg.Breakers.StateAt(t.Provider, now)
	}
	if m != nil {
		m.Attach(&cfg)
	}
	return combo.New(cfg)
}

type memBody struct{ *strings.Reader }

func (memBody) Close() error { return nil }

func memSend(context.Context, *combo.Target) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: memBody{strings.NewReader("ok")}}, nil
}

// BenchmarkRouterOverhead measures the router's whole per-request work
// around a send that answers at once from memory, in one run: with no
// metrics module, with combo/promcollector, and with combo/otelmetrics
// without an SDK (the no-op meter) and with the SDK's meter provider.
//
//	go test -run='^$' -bench=RouterOverhead -count=6 ./examples/gateway/
func BenchmarkRouterOverhead(b *testing.B) {
	ctx := context.Background()
	req := combo.Request{Combo: overheadCombo}
	run := func(b *testing.B, r *combo.Router) {
		b.ReportAllocs()
		for b.Loop() {
			res, err := r.Do(ctx, req, memSend)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Response.Body)
			res.Response.Body.Close()
		}
	}
	b.Run("bare", func(b *testing.B) { run(b, overheadRouter(nil)) })
	b.Run("promcollector", func(b *testing.B) {
		run(b, overheadRouter(promcollector.New(promcollector.Options{})))
	})
	b.Run("otelmetrics-noop", func(b *testing.B) {
		m, err := otelmetrics.New(otelmetrics.Options{})
		if err != nil {
			b.Fatal(err)
		}
		run(b, overheadRouter(m))
	})
	b.Run("otelmetrics-sdk", func(b *testing.B) {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		m, err := otelmetrics.New(otelmetrics.Options{MeterProvider: mp})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = m.Close() })
		run(b, overheadRouter(m))
	})
}
