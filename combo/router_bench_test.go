package combo

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
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
// send that answers at once from memory. With send=reused the send hands
// back one response, reset for each call, so the figure is the router's
// alone; with send=fresh it builds a new response, header and body reader
// for each call (three allocations of the send's own), as a transport does.
func BenchmarkDoOverhead(b *testing.B) {
	var (
		resp http.Response
		body strings.Reader
		hdr  = http.Header{}
	)
	for _, bc := range []struct {
		name string
		send SendFunc
	}{
		{"send=reused", func(ctx context.Context, t *Target) (*http.Response, error) {
			body.Reset("ok")
			resp = http.Response{StatusCode: 200, Header: hdr, ContentLength: -1, Body: staticBody{&body}}
			return &resp, nil
		}},
		{"send=fresh", func(ctx context.Context, t *Target) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: staticBody{strings.NewReader("ok")}}, nil
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r, c := benchRouter(b, strategyPriority)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				res, err := r.Do(ctx, Request{Combo: c}, bc.send)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, res.Response.Body)
				res.Response.Body.Close()
			}
		})
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

// TestDoAllocations counts the router's own allocations per successful
// request with every layer on (the answers are made before counting): one
// for the answer's memory and one for the queue's release func; a request
// whose context can end adds context.WithCancel's two; a stream adds the
// watchdog's.
func TestDoAllocations(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		header http.Header
		body   string
		want   float64
	}{
		{"plain", context.Background(), http.Header{}, "ok", 2},
		{"stream", context.Background(), http.Header{"Content-Type": {"text/event-stream"}}, streamBody, 6},
		{"plain/cancelable", cancelled, http.Header{}, "ok", 4},
		{"stream/cancelable", cancelled, http.Header{"Content-Type": {"text/event-stream"}}, streamBody, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, c := benchRouter(t, strategyPriority)
			const runs = 200
			resps := make([]http.Response, runs+2)
			bodies := make([]strings.Reader, runs+2)
			next := 0
			send := func(ctx context.Context, _ *Target) (*http.Response, error) {
				resp := &resps[next]
				bodies[next].Reset(tc.body)
				*resp = http.Response{StatusCode: 200, Header: tc.header, ContentLength: -1,
					Body: staticBody{&bodies[next]}}
				next++
				return resp, nil
			}
			do := func() {
				res, err := r.Do(tc.ctx, Request{Combo: c}, send)
				if err != nil {
					t.Fatal(err)
				}
				if n, _ := io.Copy(io.Discard, res.Response.Body); n != int64(len(tc.body)) {
					t.Fatalf("body %d bytes, want %d", n, len(tc.body))
				}
				res.Response.Body.Close()
			}
			do() // warm the pools
			next = 0
			if got := testing.AllocsPerRun(runs, do); got != tc.want && !raceEnabled {
				t.Fatalf("Do allocates %v times per request, want %v", got, tc.want)
			}
		})
	}
}

// TestDoClockReads counts the router's readings of its clock for a
// successful plain request with every layer on: one when Do starts (the
// deadline, the screening and the attempt's start), one at the breaker's
// admission (the end of the admission waits), one at the answer's headers
// and one at its commit.
func TestDoClockReads(t *testing.T) {
	r, c := benchRouter(t, strategyPriority)
	base := time.Now()
	reads := 0
	r.cfg.Now = func() time.Time { reads++; return base }
	send := func(ctx context.Context, _ *Target) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: staticBody{strings.NewReader("ok")}}, nil
	}
	res, err := r.Do(context.Background(), Request{Combo: c}, send)
	if err != nil {
		t.Fatal(err)
	}
	res.Response.Body.Close()
	if reads != 4 {
		t.Fatalf("the clock was read %d times, want 4", reads)
	}
}

// TestAttemptTimersStayInTheirClock reuses one router on the wall clock,
// inside a synctest bubble and on the wall clock again: the attempt's
// timeout runs on the clock of the goroutine that makes the attempt, so the
// bubble's attempt is cut at exactly its fake timeout and no timer of the
// bubble is used outside it.
func TestAttemptTimersStayInTheirClock(t *testing.T) {
	r, c := benchRouter(t, strategyPriority)
	c.Settings.TargetTimeout = 5 * time.Second
	c.Settings.MaxAttempts = 1
	ok := func(ctx context.Context, _ *Target) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: staticBody{strings.NewReader("ok")}}, nil
	}
	hang := func(ctx context.Context, _ *Target) (*http.Response, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	wall := func() {
		for range 3 {
			res, err := r.Do(context.Background(), Request{Combo: c}, ok)
			if err != nil {
				t.Fatal(err)
			}
			res.Response.Body.Close()
		}
	}
	wall()
	synctest.Test(t, func(t *testing.T) {
		for range 3 {
			start := time.Now()
			res, err := r.Do(context.Background(), Request{Combo: c}, hang)
			if err == nil {
				res.Response.Body.Close()
				t.Fatal("a hanging send succeeded")
			}
			if d := time.Since(start); d != 5*time.Second {
				t.Fatalf("the attempt was cut after %v, want 5s", d)
			}
			res, err = r.Do(context.Background(), Request{Combo: c}, ok)
			if err != nil {
				t.Fatal(err)
			}
			res.Response.Body.Close()
		}
	})
	wall()
}
