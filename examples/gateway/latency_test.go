package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// The load measurements compare paths on loopback: a client calling the
// fake upstream directly ("direct"), the same client calling the gateway
// binary, which routes to that upstream ("gateway"), and the gateway's
// handler served in the test process ("inprocess", no second process to
// wake). The difference to direct is the latency the gateway adds: one
// more HTTP hop, the JSON handling and the router.
//
//	go test -run='^$' -bench=Gateway -benchtime=200ms ./examples/gateway/
//
// The side-by-side comparison with a bare httputil.ReverseProxy in front
// of the same upstream, in interleaved rounds, is the command
// ./cmd/proxybench (go run ./examples/gateway/cmd/proxybench).
//
// BenchmarkGatewayLatency sends at a fixed rate (open loop) for a fixed
// time and reports p50-µs and p99-µs; its ns/op is the mean latency.
// BenchmarkGatewayPeak runs closed-loop workers and reports rps with the
// latency percentiles under that load.
const (
	loadRate     = 200             // requests per second of the fixed-rate run
	loadDuration = 3 * time.Second // length of the fixed-rate run
	peakWorkers  = 16              // concurrent clients of the closed-loop run
)

// loadRig is a fake upstream and a gateway in front of it.
type loadRig struct {
	client  *http.Client
	direct  string // URL of the upstream's chat route
	gateway string // URL of the gateway binary's chat route
	inproc  string // URL of an in-process gateway's chat route
	body    string
}

func newLoadRig(tb testing.TB) *loadRig {
	tb.Helper()
	up := combotest.New()
	tb.Cleanup(up.Close)
	cfg := &gw.Config{
		AdminToken: adminToken,
		Providers: []gw.Provider{{ID: "bench", BaseURL: up.URL() + "/v1",
			Connections: []gw.Connection{{ID: "b1", APIKey: "sk-b1"}}}},
		Combos: []gw.Combo{{Name: "bench", Strategy: "priority", Targets: []gw.Target{{Provider: "bench", Model: "m"}}}},
	}
	g := startGateway(tb, cfg)
	srv, err := gw.New(cfg, gw.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.Close)
	hs := httptest.NewServer(srv)
	tb.Cleanup(hs.Close)
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, DisableCompression: true}
	tb.Cleanup(tr.CloseIdleConnections)
	return &loadRig{
		client:  &http.Client{Transport: tr, Timeout: 10 * time.Second},
		direct:  up.URL() + "/v1/chat/completions",
		gateway: g.base + "/v1/chat/completions",
		inproc:  hs.URL + "/v1/chat/completions",
		body:    chatBody("bench", "ping", false),
	}
}

// call sends one chat request to url and reports how long the whole
// answer took.
func (r *loadRig) call(ctx context.Context, url string) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(r.body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-b1")
	start := time.Now()
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return d, err
}

// paths lists the three ways to the upstream.
func (r *loadRig) paths() []string { return []string{r.direct, r.gateway, r.inproc} }

// warm opens a few keep-alive connections on both paths.
func (r *loadRig) warm(tb testing.TB) {
	tb.Helper()
	for range 20 {
		for _, u := range r.paths() {
			if _, err := r.call(context.Background(), u); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// fixedRate sends rate requests per second to url for d, each on its own
// goroutine at its scheduled time (open loop: a slow answer delays no
// other request), and returns the latency of every request, from sending
// it to the end of its answer.
func (r *loadRig) fixedRate(url string, rate int, d time.Duration) ([]time.Duration, error) {
	n := int(d.Seconds() * float64(rate))
	interval := time.Second / time.Duration(rate)
	lat := make([]time.Duration, n)
	var failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		at := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(at))
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := r.call(context.Background(), url)
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
			lat[i] = d
		}()
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		return lat, fmt.Errorf("%d of %d requests failed, first: %v", f, n, firstErr.Load())
	}
	return lat, nil
}

// percentile returns the p-th percentile (0 < p ≤ 100) of sorted, by the
// nearest-rank method.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(percentile(lat, 50).Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(percentile(lat, 99).Nanoseconds())/1e3, "p99-µs")
}

// BenchmarkGatewayLatency measures latency at a fixed rate of loadRate
// requests per second for loadDuration, straight to the upstream and
// through the gateway. One invocation is one whole run, whatever b.N is.
func BenchmarkGatewayLatency(b *testing.B) {
	rig := newLoadRig(b)
	rig.warm(b)
	for _, path := range []struct{ name, url string }{
		{"direct", rig.direct}, {"gateway", rig.gateway}, {"inprocess", rig.inproc},
	} {
		b.Run(path.name, func(b *testing.B) {
			lat, err := rig.fixedRate(path.url, loadRate, loadDuration)
			if err != nil {
				b.Fatal(err)
			}
			reportLatency(b, lat)
			b.ReportMetric(float64(mean(lat).Nanoseconds()), "ns/op")
			b.ReportMetric(float64(loadRate), "req/s")
		})
	}
}

// BenchmarkGatewayPeak measures the peak request rate with peakWorkers
// closed-loop clients, straight to the upstream and through the gateway.
func BenchmarkGatewayPeak(b *testing.B) {
	rig := newLoadRig(b)
	rig.warm(b)
	for _, path := range []struct{ name, url string }{
		{"direct", rig.direct}, {"gateway", rig.gateway}, {"inprocess", rig.inproc},
	} {
		b.Run(path.name, func(b *testing.B) {
			b.ReportAllocs()
			var mu sync.Mutex
			var all []time.Duration
			var failed atomic.Int64
			b.SetParallelism(max(1, peakWorkers/runtime.GOMAXPROCS(0)))
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				var mine []time.Duration
				for pb.Next() {
					d, err := rig.call(context.Background(), path.url)
					if err != nil {
						failed.Add(1)
						continue
					}
					mine = append(mine, d)
				}
				mu.Lock()
				all = append(all, mine...)
				mu.Unlock()
			})
			elapsed := time.Since(start)
			if f := failed.Load(); f > 0 {
				b.Fatalf("%d requests failed", f)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "rps")
			reportLatency(b, all)
		})
	}
}

// TestLoadRig runs the fixed-rate generator briefly on both paths, so the
// measuring code is exercised by the ordinary test run.
func TestLoadRig(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the gateway binary")
	}
	rig := newLoadRig(t)
	rig.warm(t)
	for _, u := range rig.paths() {
		lat, err := rig.fixedRate(u, 100, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if len(lat) != 30 {
			t.Fatalf("got %d latencies, want 30", len(lat))
		}
		slices.Sort(lat)
		if p50, p99 := percentile(lat, 50), percentile(lat, 99); p50 <= 0 || p99 < p50 {
			t.Fatalf("p50 %v, p99 %v", p50, p99)
		}
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i))
	}
	for _, tt := range []struct {
		p    float64
		want time.Duration
	}{{50, 50}, {99, 99}, {100, 100}, {1, 1}, {0.5, 1}} {
		if got := percentile(ds, tt.p); got != tt.want {
			t.Errorf("percentile(%v) = %v, want %v", tt.p, got, tt.want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("percentile of nothing = %v", got)
	}
}
