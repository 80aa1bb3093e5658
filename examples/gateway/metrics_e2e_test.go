package main

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// metricFamilies are the families the gateway's /metrics shows once its
// layers have seen a breaker change, a cooldown, a model lockout, an
// exclusion, a fallback, a stream cut, a streamed answer and a queue
// refusal.
var metricFamilies = []string{
	"routeguard_breaker_state",
	"routeguard_breaker_transitions_total",
	"routeguard_connection_up",
	"routeguard_connection_cooldowns_total",
	"routeguard_cooldown_until_timestamp_seconds",
	"routeguard_model_lockouts_total",
	"routeguard_exclusions_total",
	"routeguard_attempts_total",
	"routeguard_request_attempts",
	"routeguard_fallbacks_total",
	"routeguard_in_flight",
	"routeguard_queue_depth",
	"routeguard_queue_wait_seconds",
	"routeguard_queue_rejected_total",
	"routeguard_stream_cuts_total",
	"routeguard_router_overhead_seconds",
	"gen_ai_client_operation_duration_seconds",
	"gen_ai_client_operation_time_to_first_chunk_seconds",
}

// scrape fetches /metrics with the admin token and parses it.
func scrape(t *testing.T, g *gatewayProc) map[string]*dto.MetricFamily {
	t.Helper()
	a := g.admin(t, http.MethodGet, gw.MetricsPath, "")
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(a.body))
	require.NoError(t, err)
	return families
}

// After a demo-like run through the built binary (a provider failing with
// 503, a stream ending empty, a stream served, a connection whose one
// slot is taken), GET /metrics shows every family, the linter of the
// client library finds no problem, and the trail header tells the client
// what happened.
func TestE2EMetricsAfterADemoRun(t *testing.T) { demoMetrics(t, "") }

// demoMetrics runs TestE2EMetricsAfterADemoRun's scenario on a gateway
// started with -redis redisURL (none when empty) and returns what
// /metrics showed at its end.
func demoMetrics(t *testing.T, redisURL string) map[string]*dto.MetricFamily {
	t.Helper()
	up := upstreams(t, "p1", "p2", "empty", "busy")
	up["p1"].Script("", combotest.Error(503, "down"))
	up["empty"].Script("", combotest.SSE(0))
	up["p2"].Handle("", func(c combotest.Call) combotest.Reply {
		return combotest.TextStream(0, "Hello", " world")
	})
	up["busy"].Script("", combotest.OK("slow answer").After(time.Second))
	busy := provider("busy", up["busy"], "busy-a")
	busy.Connections[0].MaxConcurrent = 1
	cfg := config([]gw.Provider{provider("p1", up["p1"], "p1-a"), provider("p2", up["p2"], "p2-a"),
		provider("empty", up["empty"], "empty-a"), busy},
		gw.Combo{Name: "smart", Strategy: "priority", Targets: []gw.Target{{Provider: "p1", Model: "m"}, {Provider: "p2", Model: "m"}}},
		gw.Combo{Name: "stream", Strategy: "priority", Targets: []gw.Target{{Provider: "empty", Model: "m"}, {Provider: "p2", Model: "m"}}})
	cfg.Resilience.Lockout.Enabled = true
	cfg.Resilience.Breaker.APIKey = gw.BreakerProfile{OpenAt: 2, ResetMs: 60_000}
	cfg.Resilience.RequestQueue.MaxQueueWaitMs = 50
	var args []string
	if redisURL != "" {
		ns := make([]byte, 6)
		_, _ = rand.Read(ns)
		cfg.Redis.Namespace = "e2e-metrics-" + hex.EncodeToString(ns) // a shared Redis may hold others' keys
		args = []string{"-state", "memory", "-redis", redisURL}
	}
	g := startGateway(t, cfg, args...)

	// A fallback from p1 (503: breaker, cooldown, lockout) to p2, with the
	// trail asked for.
	a := g.chat(t, "smart", "hello", hdr(gw.TrailRequestHeader, "1"))
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Regexp(t, regexp.MustCompile(`^p1/m;failed;503;server_error;\d+,p2/m;succeeded;200;;\d+$`), a.Header.Get(gw.TrailHeader))
	// p1-a is cooling: excluded before dispatch.
	a = g.chat(t, "smart", "hello", hdr(gw.TrailRequestHeader, "1"))
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Regexp(t, regexp.MustCompile(`^p2/m;succeeded;200;;\d+$`), a.Header.Get(gw.TrailHeader))
	// A stream that ends before any event, then one served.
	a = g.do(t, http.MethodPost, "/v1/chat/completions", hdr("Content-Type", "application/json", gw.TrailRequestHeader, "1"),
		chatBody("stream", "stream please", true))
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Contains(t, a.body, "Hello")
	assert.Regexp(t, regexp.MustCompile(`^empty/m;failed;502;[a-z_]+;\d+,p2/m;succeeded;200;;\d+$`), a.Header.Get(gw.TrailHeader))
	// Two requests on a connection of one slot: the second is refused by
	// the queue after 50 ms.
	var wg sync.WaitGroup
	answers := make([]answer, 2)
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = g.chat(t, "busy/m", "hello", nil)
		}()
		if i == 0 {
			require.Eventually(t, func() bool { return up["busy"].Total() == 1 }, 5*time.Second, time.Millisecond)
		}
	}
	wg.Wait()
	statuses := []int{answers[0].StatusCode, answers[1].StatusCode}
	assert.ElementsMatch(t, []int{http.StatusOK, http.StatusTooManyRequests}, statuses)

	families := scrape(t, g)
	for _, name := range metricFamilies {
		assert.Contains(t, families, name)
	}
	list := make([]*dto.MetricFamily, 0, len(families))
	for _, mf := range families {
		list = append(list, mf)
	}
	problems, err := promlint.NewWithMetricFamilies(list).Lint()
	require.NoError(t, err)
	assert.Empty(t, problems)

	value := func(name string, labels ...string) float64 {
		t.Helper()
		mf := families[name]
		require.NotNil(t, mf, name)
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				ok := false
				for _, lp := range m.GetLabel() {
					ok = ok || lp.GetName() == labels[i] && lp.GetValue() == labels[i+1]
				}
				if !ok {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
		t.Fatalf("%s%v: no such series", name, labels)
		return 0
	}
	assert.Equal(t, 1.0, value("routeguard_fallbacks_total", "from_provider", "p1", "to_provider", "p2", "result", "succeeded"))
	assert.Equal(t, 1.0, value("routeguard_fallbacks_total", "from_provider", "empty", "to_provider", "p2", "result", "succeeded"))
	assert.Equal(t, 1.0, value("routeguard_stream_cuts_total", "cause", "empty_stream"))
	assert.Equal(t, 1.0, value("routeguard_connection_cooldowns_total", "connection", "p1-a", "reason", "server_error"))
	assert.Equal(t, 0.0, value("routeguard_connection_up", "connection", "p1-a"))
	assert.Greater(t, value("routeguard_cooldown_until_timestamp_seconds", "connection", "p1-a"), float64(time.Now().Unix()-60))
	assert.Equal(t, 1.0, value("routeguard_exclusions_total", "reason", "model_lockout"), "the second request: p1/m locked")
	assert.Equal(t, 1.0, value("routeguard_exclusions_total", "reason", "queue_full"), "the refused request, counted once")
	assert.Equal(t, 1.0, value("routeguard_queue_rejected_total", "connection", "busy-a", "reason", "queue_timeout"))
	assert.Equal(t, 3.0, value("gen_ai_client_operation_time_to_first_chunk_seconds", "gen_ai_provider_name", "p2"),
		"p2 streams all three of its answers")
	assert.Equal(t, 1.0, value("routeguard_breaker_state", "provider", "p1", "state", "degraded"))
	return families
}
