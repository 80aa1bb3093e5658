package gw_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/combo/promcollector"
	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// fallbackRig is a gateway over p (answering 503) and q, with the combo
// smart trying p first.
func fallbackRig(t *testing.T, edit func(*gw.Config)) *rig {
	t.Helper()
	up := map[string]*combotest.Upstream{"p": combotest.New(), "q": combotest.New()}
	up["p"].Script("", combotest.Error(http.StatusServiceUnavailable, "down"))
	cfg := &gw.Config{Providers: []gw.Provider{provider("p", up["p"], 1), provider("q", up["q"], 1)},
		Combos: []gw.Combo{comboOf("smart", 5*time.Second, "p", "q")}}
	cfg.Resilience.ComboCooldownWait.Disabled = true
	if edit != nil {
		edit(cfg)
	}
	return newRig(t, cfg, up)
}

// get sends a GET with an optional bearer token.
func (r *rig) get(path, token string) result {
	req, err := http.NewRequest(http.MethodGet, r.srv.URL+path, nil)
	if err != nil {
		return result{Err: err}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return r.send(req)
}

// /metrics answers the admin token only, in the Prometheus text format,
// with the fallback counted once and the breaker states of every
// configured provider; the client library's linter finds no problem.
func TestMetricsBehindTheAdminToken(t *testing.T) {
	r := fallbackRig(t, func(c *gw.Config) {
		c.APIKeys = []gw.APIKey{{ID: "client", Key: "ck-1"}}
	})
	req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"smart","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer ck-1")
	res := r.send(req)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

	assert.Equal(t, http.StatusUnauthorized, r.get(gw.MetricsPath, "").Status)
	assert.Equal(t, http.StatusForbidden, r.get(gw.MetricsPath, "ck-1").Status, "a client key is not the admin token")
	m := r.get(gw.MetricsPath, rigAdminToken)
	require.Equal(t, http.StatusOK, m.Status, "%s", m.Body)
	assert.True(t, strings.HasPrefix(m.Header.Get("Content-Type"), "text/plain"), m.Header.Get("Content-Type"))

	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(m.Body)))
	require.NoError(t, err)
	for _, name := range []string{"routeguard_breaker_state", "routeguard_fallbacks_total", "routeguard_attempts_total",
		"routeguard_router_overhead_seconds", "routeguard_queue_wait_seconds", "gen_ai_client_operation_duration_seconds"} {
		assert.Contains(t, families, name)
	}
	problems, err := promlint.NewWithMetricFamilies(mapValues(families)).Lint()
	require.NoError(t, err)
	assert.Empty(t, problems)

	reg := r.gw.Registry()
	require.NotNil(t, reg)
	want := `
# HELP routeguard_fallbacks_total Moves of a request from a failed target to the next one, by the result of the next one.
# TYPE routeguard_fallbacks_total counter
routeguard_fallbacks_total{from_provider="p",result="succeeded",to_provider="q"} 1
`
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "routeguard_fallbacks_total"))
	n, err := testutil.GatherAndCount(reg, "routeguard_breaker_state")
	require.NoError(t, err)
	assert.Equal(t, 8, n, "two providers, four states each")
}

func mapValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// With metrics.listen set, the main listener does not serve /metrics and
// MetricsHandler serves it without a token; with metrics.disabled nothing
// is served or recorded.
func TestMetricsListenerAndDisabled(t *testing.T) {
	t.Run("listen", func(t *testing.T) {
		r := fallbackRig(t, func(c *gw.Config) { c.Metrics.Listen = "127.0.0.1:0" })
		assert.Equal(t, http.StatusNotFound, r.get(gw.MetricsPath, rigAdminToken).Status)
		h := r.gw.MetricsHandler()
		require.NotNil(t, h)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, gw.MetricsPath, nil))
		assert.Equal(t, http.StatusOK, rec.Code)
		assert.Contains(t, rec.Body.String(), `routeguard_breaker_state{provider="q",state="closed"} 1`)
	})
	t.Run("disabled", func(t *testing.T) {
		r := fallbackRig(t, func(c *gw.Config) { c.Metrics.Disabled = true })
		res := r.chat("smart", false, 5*time.Second)
		require.Equal(t, http.StatusOK, res.Status)
		assert.Equal(t, http.StatusNotFound, r.get(gw.MetricsPath, rigAdminToken).Status)
		assert.Nil(t, r.gw.MetricsHandler())
		assert.Nil(t, r.gw.Registry())
	})
	t.Run("bad listen refused", func(t *testing.T) {
		cfg := &gw.Config{Providers: []gw.Provider{{ID: "p", BaseURL: "http://127.0.0.1:1/v1",
			Connections: []gw.Connection{{ID: "p-1", APIKey: "k"}}}}, Metrics: gw.MetricsConfig{Listen: "nowhere"}}
		err := cfg.Validate()
		require.Error(t, err)
		var ce *gw.ConfigError
		found := false
		for _, p := range gw.Problems(err) {
			if p.Field == "metrics.listen" {
				found, ce = true, p
			}
		}
		assert.True(t, found, "%v", err)
		if ce != nil {
			assert.Contains(t, ce.Problem, "host:port")
		}
	})
}

// A client that sends X-Routeguard-Trail: 1 gets the attempts in the
// answer's X-Routeguard-Trail header, without connection ids; one that does
// not gets no trail. A failed request carries its trail too.
func TestTrailHeaderThroughTheGateway(t *testing.T) {
	r := fallbackRig(t, nil)
	chat := func(model string, trail bool) result {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, r.srv.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
		if trail {
			req.Header.Set(gw.TrailRequestHeader, "1")
		}
		return r.send(req)
	}
	res := chat("smart", true)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	got := res.Header.Get(gw.TrailHeader)
	assert.Regexp(t, regexp.MustCompile(`^p/m;failed;503;server_error;\d+,q/m;succeeded;200;;\d+$`), got)
	assert.NotContains(t, got, "p-1")
	assert.NotContains(t, got, "sk-")

	res = chat("smart", false)
	require.Equal(t, http.StatusOK, res.Status)
	assert.Empty(t, res.Header.Values(gw.TrailHeader))

	r.ups["p"].Script("", combotest.Error(http.StatusServiceUnavailable, "down"))
	res = chat("p/m", true)
	assert.Equal(t, http.StatusServiceUnavailable, res.Status, "%s", res.Body)
	assert.Regexp(t, regexp.MustCompile(`^(p/m;failed;503;server_error;\d+)?$`), res.Header.Get(gw.TrailHeader))
}

// Every metric name the Grafana dashboard's queries use is one the
// collector exports.
func TestDashboardUsesExportedMetrics(t *testing.T) {
	data, err := os.ReadFile("../dashboard.json")
	require.NoError(t, err)
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(data, &d))
	require.NotEmpty(t, d.Panels)

	exported := map[string]bool{}
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		promcollector.New(promcollector.Options{}).Describe(ch)
		close(ch)
	}()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for desc := range ch {
		if m := fq.FindStringSubmatch(desc.String()); m != nil {
			exported[m[1]] = true
		}
	}
	require.Contains(t, exported, "routeguard_breaker_state")

	ident := regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	grouping := regexp.MustCompile(`\b(by|without)\s*\([^)]*\)`) // label names, not metrics
	for _, p := range d.Panels {
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			used := 0
			for _, name := range ident.FindAllString(grouping.ReplaceAllString(tg.Expr, ""), -1) {
				if !strings.HasPrefix(name, "routeguard_") && !strings.HasPrefix(name, "gen_ai_") {
					continue
				}
				used++
				base := name
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(name, suffix); ok && exported[b] {
						base = b
					}
				}
				assert.True(t, exported[base], "panel %q uses %s, which the collector does not export", p.Title, name)
			}
			assert.NotZero(t, used, "panel %q: %s names no routeguard metric", p.Title, tg.Expr)
		}
	}
	for _, title := range []string{"Breaker state by provider", "Cooling connections: until when", "Fallbacks",
		"Router overhead (p50, p99)", "Time to first token (p50, p95) by provider",
		"Shared state: replication lag and degraded"} {
		found := false
		for _, p := range d.Panels {
			found = found || p.Title == title
		}
		assert.True(t, found, "the dashboard has a panel %q", title)
	}
}

// With Redis attached, /metrics carries the replicator's lag and degraded
// flag (store "redis"); without it, neither family.
func TestMetricsSharedStoreGauges(t *testing.T) {
	mr := miniredis.RunT(t)
	up := combotest.New()
	cfg := &gw.Config{Providers: []gw.Provider{provider("p", up, 1)},
		Redis: gw.RedisConfig{URL: "redis://" + mr.Addr(), Namespace: "gwmetrics"}}
	r := redisRig(t, cfg, map[string]*combotest.Upstream{"p": up})
	reg := r.gw.Registry()
	require.NotNil(t, reg)
	assert.Equal(t, 2, testutil.CollectAndCount(reg, "routeguard_replication_lag_seconds", "routeguard_shared_store_degraded"))
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP routeguard_shared_store_degraded 1 while the shared state store's last remote call failed, else 0.
# TYPE routeguard_shared_store_degraded gauge
routeguard_shared_store_degraded{store="redis"} 0
`), "routeguard_shared_store_degraded"))

	plain := fallbackRig(t, nil)
	assert.Equal(t, 0, testutil.CollectAndCount(plain.gw.Registry(), "routeguard_replication_lag_seconds", "routeguard_shared_store_degraded"))
}
