package metricstest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lockout"
	"github.com/routeguard/routeguard/queue"
)

// BenchCombo has eight targets over four providers; BenchRouter excludes
// two of them (a locked model, a cooling connection), as combo's own
// BenchmarkDoOverhead does.
var BenchCombo = func() *combo.Combo {
	c := &combo.Combo{Name: "bench"}
	for i := range 8 {
		c.Targets = append(c.Targets, combo.Target{
			Provider: fmt.Sprintf("p%d", i%4), Connection: fmt.Sprintf("c%d", i), Model: "m",
		})
	}
	return c
}()

// BenchRouter is a router over BenchCombo with every layer on, and m
// attached to every layer and to the router when m is not nil.
func BenchRouter(m Attacher) *combo.Router {
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
	for _, t := range BenchCombo.Targets {
		cfg.Breakers.StateAt(t.Provider, now)
	}
	if m != nil {
		m.Attach(&cfg)
	}
	return combo.New(cfg)
}

// staticBody is a reusable response body.
type staticBody struct{ *strings.Reader }

func (staticBody) Close() error { return nil }

// BenchSend answers at once from memory.
func BenchSend(context.Context, *combo.Target) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: staticBody{strings.NewReader("ok")}}, nil
}
