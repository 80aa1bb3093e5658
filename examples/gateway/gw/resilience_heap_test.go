package gw_test

import (
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// TestHeapGrowthStreams sends 500 streamed answers through the gateway, the
// router and the stream watchdog, and fails if the live heap after a full GC
// has grown by more than heapCeiling since the warm-up.
func TestHeapGrowthStreams(t *testing.T) {
	const (
		warmup  = 50
		streams = 500
		workers = 4
		// heapCeiling is the allowed growth of the live heap over the 500
		// streams. What legitimately stays: the fake upstream keeps every
		// call it received (headers and body, under 1 KiB each, so about
		// 0.5 MiB for 500 calls), and the connection pools may keep a few
		// more keep-alive connections than after the warm-up, with their
		// buffers (some tens of KiB each). A leak of the per-stream state
		// (the held prefix and read buffers of the router, the watchdog's
		// counters, the 32 KiB relay buffer or an unclosed body with its
		// connection) costs at least 8 KiB per stream, so 4 MiB or more
		// over 500 streams; 4 MiB sits above the legitimate growth with
		// room to spare and at the size of the smallest leak it must catch.
		heapCeiling = 4 << 20
	)
	chunks := []string{"The ", "quick ", "brown ", "fox ", "jumps ", "over ", "the ", "lazy ", "dog."}
	up := combotest.New()
	up.Handle("", func(c combotest.Call) combotest.Reply { return streamOrPlain(c, 0, chunks...) })
	cfg := &gw.Config{
		Providers: []gw.Provider{provider("p", up, 2)},
		Combos:    []gw.Combo{comboOf("stream", 5*time.Second, "p")},
	}
	cfg.Resilience.ThroughputWatchdog = gw.WatchdogConfig{Enabled: true, IdleTimeoutMs: 5000}
	r := newRig(t, cfg, map[string]*combotest.Upstream{"p": up})
	want := strings.Join(chunks, "")

	var bad atomic.Int64
	run := func(n int) {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(n) {
					res := r.chat("stream", true, 10*time.Second)
					if res.Status != http.StatusOK || res.Err != nil || !strings.Contains(string(res.Body), "data: [DONE]") ||
						deltaText(res.Body) != want {
						if bad.Add(1) == 1 {
							t.Errorf("stream answer: status %d, err %v, body %q", res.Status, res.Err, res.Body)
						}
					}
				}
			}()
		}
		wg.Wait()
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}

	run(warmup)
	before := heap()
	start := time.Now()
	run(streams)
	elapsed := time.Since(start)
	after := heap()
	require.Zero(t, bad.Load(), "incomplete streams")
	require.Equal(t, warmup+streams, up.Total(), "one upstream call per stream")

	growth := int64(after) - int64(before)

	// For the log: the same streams sent straight to the fake upstream,
	// without the gateway, show what the upstream's call log alone keeps.
	direct := func(n int) {
		for range n {
			req, err := http.NewRequest(http.MethodPost, up.URL()+"/v1/chat/completions",
				strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer sk-p-1")
			res := r.send(req)
			require.Equal(t, want, deltaText(res.Body))
		}
	}
	direct(warmup)
	base := heap()
	direct(streams)
	upstreamOnly := int64(heap()) - int64(base)

	t.Logf("heap: %d streams through the gateway in %v; HeapAlloc %d → %d bytes, growth %d bytes (%.1f KiB, %d bytes per stream); "+
		"ceiling %d; the fake upstream alone keeps %d bytes for as many calls, so the gateway's share is %d bytes",
		streams, elapsed.Round(time.Millisecond), before, after, growth, float64(growth)/1024, growth/streams, heapCeiling,
		upstreamOnly, growth-upstreamOnly)
	assert.LessOrEqual(t, growth, int64(heapCeiling), "live heap growth over %d streams", streams)
}
