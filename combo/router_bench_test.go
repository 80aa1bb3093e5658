package combo

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
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lockout"
	"github.com/routeguard/routeguard/queue"
)

// benchRouter is a router with every layer on and a combo of eight targets
// over four providers, two of them excluded (a locked model, a cooling
// connection).
func benchRouter(b testing.TB, strategy string) (*Router, *Combo) {
	now := time.Now()
	cfg := Config{
		Breakers:  breaker.NewSet(breaker.Config{}),
		Gate:      breaker.NewGate(breaker.GateConfig{Enabled: true}),
		Cooldowns: cooldown.New(cooldown.Config{}),
		Lockouts:  lockout.New(lockout.Config{Enabled: true}),
		Pins:      affinity.New(affinity.Config{TTL: time.Hour}),
		Leases:    lease.New(lease.Config{}),
		Queue:     queue.New(queue.Config{}),
	}
	c := &Combo{Name: "bench", Strategy: strategy}
	for i := range 8 {
		c.Targets = append(c.Targets, Target{
			Provider: fmt.Sprintf("p%d", i%4), Connection: fmt.Sprintf("c%d", i), Model: "m",
		})
	}
	cfg.Lockouts.LockAt(lockout.Failure{Provider: "p1", Connection: "c1", Model: "m", Status: 429, Cooldown: time.Hour}, now)
	cfg.Cooldowns.FailAt("c2", cooldown.Failure{Status: 429, Cooldown: time.Hour}, now)
	for _, t := range c.Targets {
		cfg.Breakers.StateAt(t.Provider, now)
	}
	return New(cfg), c
}

// BenchmarkEligibilityAndOrder measures screening eight targets through
// every layer and ordering the eligible ones.
func BenchmarkEligibilityAndOrder(b *testing.B) {
	for _, name := range []string{strategyPriority, strategyRoundRobin} {
		b.Run(name, func(b *testing.B) {
			r, c := benchRouter(b, name)
			strat, _ := r.strategies.get(name)
			req := Request{Combo: c}
			st := r.getState(context.Background(), &req, c.Settings.norm(), strat, nil)
			for i := range c.Targets {
				st.all = append(st.all, &c.Targets[i])
			}
			now := time.Now()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				r.screen(st, now)
				r.order(st, now)
			}
			if len(st.eligible) != 6 {
				b.Fatalf("eligible = %d, want 6", len(st.eligible))
			}
		})
	}
}

func TestEligibilityAllocatesNothing(t *testing.T) {
	r, c := benchRouter(t, strategyRoundRobin)
	strat, _ := r.strategies.get(strategyRoundRobin)
	req := Request{Combo: c}
	st := r.getState(context.Background(), &req, c.Settings.norm(), strat, nil)
	for i := range c.Targets {
		st.all = append(st.all, &c.Targets[i])
	}
	now := time.Now()
	r.screen(st, now)
	allocs := testing.AllocsPerRun(200, func() {
		r.screen(st, now)
		r.order(st, now)
	})
	if allocs != 0 {
		t.Fatalf("screen+order allocates %v times, want 0", allocs)
	}
	if len(st.eligible) != 6 || len(st.excluded) != 2 {
		t.Fatalf("eligible %d excluded %d, want 6 and 2", len(st.eligible), len(st.excluded))
	}
}

// staticBody is a reusable response body.
type staticBody struct{ *strings.Reader }

func (staticBody) Close() error { return nil }

// BenchmarkDoOverhead measures the router's whole per-request work (screen,
// order, admission, breaker, success reporting, body finalisation) around a
// send that answers at once from memory.
func BenchmarkDoOverhead(b *testing.B) {
	r, c := benchRouter(b, strategyPriority)
	send := func(ctx context.Context, t *Target) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: staticBody{strings.NewReader("ok")}}, nil
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := r.Do(ctx, Request{Combo: c}, send)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Response.Body)
		res.Response.Body.Close()
	}
}

// BenchmarkDoOverheadParallel is BenchmarkDoOverhead from many goroutines.
func BenchmarkDoOverheadParallel(b *testing.B) {
	r, c := benchRouter(b, strategyRoundRobin)
	send := func(ctx context.Context, t *Target) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: staticBody{strings.NewReader("ok")}}, nil
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			res, err := r.Do(ctx, Request{Combo: c}, send)
			if err != nil {
				b.Fatal(err)
			}
			res.Response.Body.Close()
		}
	})
}
