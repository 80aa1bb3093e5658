package promcollector_test

import (
	"context"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/promcollector"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/internal/metricscore/metricstest"
	"github.com/routeguard/routeguard/lockout"
	"github.com/routeguard/routeguard/queue"
	"github.com/routeguard/routeguard/watchdog"
)

func newCollector() (*promcollector.Collector, *prometheus.Registry) {
	c := promcollector.New(promcollector.Options{Providers: []string{"openai", "anthropic", "gemini"}})
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return c, reg
}

// value finds one sample in what reg gathers; ok is false when the series
// does not exist.
func value(t *testing.T, reg *prometheus.Registry, name string, labels []string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	family, part := name, ""
	for _, suffix := range []string{"_count", "_sum"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && (strings.HasSuffix(base, "_seconds") || strings.HasSuffix(base, "_attempts") || strings.HasSuffix(base, "_usage")) {
			family, part = base, suffix
		}
	}
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue metrics
				}
			}
			return read(m, part), true
		}
	}
	return 0, false
}

func read(m *dto.Metric, part string) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil && part == "_count":
		return float64(m.Histogram.GetSampleCount())
	case m.Histogram != nil:
		return m.Histogram.GetSampleSum()
	}
	return -1
}

// TestScenarios drives each scenario through the router and checks every
// expected sample exactly.
func TestScenarios(t *testing.T) {
	for _, sc := range metricstest.Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, reg := newCollector()
				sc.Run(t, c)
				for _, w := range sc.Want {
					got, ok := value(t, reg, w.Name, w.Labels)
					if w.Value == metricstest.Absent {
						if ok {
							t.Errorf("%s%v = %v, want no such series", w.Name, w.Labels, got)
						}
						continue
					}
					if !ok || got != w.Value {
						t.Errorf("%s%v = %v (present %v), want %v", w.Name, w.Labels, got, ok, w.Value)
					}
				}
			})
		})
	}
}

// TestBreakerTransitionsExposition compares the exposition of the breaker
// scenario's counters byte for byte.
func TestBreakerTransitionsExposition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newCollector()
		metricstest.ScenarioBreaker(t, c)
		want := `
# HELP routeguard_breaker_transitions_total Provider circuit breaker state changes.
# TYPE routeguard_breaker_transitions_total counter
routeguard_breaker_transitions_total{from="closed",provider="openai",to="degraded"} 1
routeguard_breaker_transitions_total{from="degraded",provider="openai",to="open"} 1
# HELP routeguard_fallbacks_total Moves of a request from a failed target to the next one, by the result of the next one.
# TYPE routeguard_fallbacks_total counter
routeguard_fallbacks_total{from_provider="openai",result="succeeded",to_provider="anthropic"} 2
# HELP routeguard_breaker_state Provider circuit breaker state: 1 for the current state, 0 for the others.
# TYPE routeguard_breaker_state gauge
routeguard_breaker_state{provider="anthropic",state="closed"} 1
routeguard_breaker_state{provider="anthropic",state="degraded"} 0
routeguard_breaker_state{provider="anthropic",state="half-open"} 0
routeguard_breaker_state{provider="anthropic",state="open"} 0
routeguard_breaker_state{provider="gemini",state="closed"} 1
routeguard_breaker_state{provider="gemini",state="degraded"} 0
routeguard_breaker_state{provider="gemini",state="half-open"} 0
routeguard_breaker_state{provider="gemini",state="open"} 0
routeguard_breaker_state{provider="openai",state="closed"} 0
routeguard_breaker_state{provider="openai",state="degraded"} 0
routeguard_breaker_state{provider="openai",state="half-open"} 0
routeguard_breaker_state{provider="openai",state="open"} 1
`
		if err := testutil.CollectAndCompare(c, strings.NewReader(want),
			"routeguard_breaker_transitions_total", "routeguard_fallbacks_total", "routeguard_breaker_state"); err != nil {
			t.Error(err)
		}
		// Thirty seconds after it opened, the breaker is half-open at the
		// next collection, though no event has told of it.
		time.Sleep(30 * time.Second)
		reg := prometheus.NewRegistry()
		reg.MustRegister(c)
		if got, _ := value(t, reg, "routeguard_breaker_state", []string{"provider", "openai", "state", "half-open"}); got != 1 {
			t.Errorf("half-open after the open period = %v, want 1", got)
		}
	})
}

// TestBreakerStatePresentFromConstruction: the providers of Options have
// their closed series before anything happened.
func TestBreakerStatePresentFromConstruction(t *testing.T) {
	c := promcollector.New(promcollector.Options{Providers: []string{"openai"}})
	want := `
# HELP routeguard_breaker_state Provider circuit breaker state: 1 for the current state, 0 for the others.
# TYPE routeguard_breaker_state gauge
routeguard_breaker_state{provider="openai",state="closed"} 1
routeguard_breaker_state{provider="openai",state="degraded"} 0
routeguard_breaker_state{provider="openai",state="half-open"} 0
routeguard_breaker_state{provider="openai",state="open"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "routeguard_breaker_state"); err != nil {
		t.Error(err)
	}
}

func TestCooldownUntilExposition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newCollector()
		metricstest.ScenarioCooldown(t, c)
		want := `
# HELP routeguard_cooldown_until_timestamp_seconds Unix time at which the connection's cooldown (or known credits recovery) ends; 0 when none.
# TYPE routeguard_cooldown_until_timestamp_seconds gauge
routeguard_cooldown_until_timestamp_seconds{connection="ak-1"} 0
routeguard_cooldown_until_timestamp_seconds{connection="sk-1"} 9.4668489e+08
# HELP routeguard_connection_up 1 when the connection may be used, 0 while it cools down or is in a terminal state.
# TYPE routeguard_connection_up gauge
routeguard_connection_up{connection="ak-1"} 1
routeguard_connection_up{connection="sk-1"} 0
`
		if err := testutil.CollectAndCompare(c, strings.NewReader(want),
			"routeguard_cooldown_until_timestamp_seconds", "routeguard_connection_up"); err != nil {
			t.Error(err)
		}
		// At the cooldown's end the connection is up again and has no end.
		time.Sleep(90 * time.Second)
		want = `
# HELP routeguard_cooldown_until_timestamp_seconds Unix time at which the connection's cooldown (or known credits recovery) ends; 0 when none.
# TYPE routeguard_cooldown_until_timestamp_seconds gauge
routeguard_cooldown_until_timestamp_seconds{connection="ak-1"} 0
routeguard_cooldown_until_timestamp_seconds{connection="sk-1"} 0
# HELP routeguard_connection_up 1 when the connection may be used, 0 while it cools down or is in a terminal state.
# TYPE routeguard_connection_up gauge
routeguard_connection_up{connection="ak-1"} 1
routeguard_connection_up{connection="sk-1"} 1
`
		if err := testutil.CollectAndCompare(c, strings.NewReader(want),
			"routeguard_cooldown_until_timestamp_seconds", "routeguard_connection_up"); err != nil {
			t.Error(err)
		}
	})
}

func TestStreamCutExposition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newCollector()
		metricstest.ScenarioStreamCut(t, c)
		want := `
# HELP routeguard_stream_cuts_total Streamed attempts failed before their first useful output, by cause.
# TYPE routeguard_stream_cuts_total counter
routeguard_stream_cuts_total{cause="readiness_timeout"} 1
# HELP gen_ai_client_operation_duration_seconds GenAI operation duration: one attempt, up to the router's commit (a plain answer read whole, or a stream's first useful output).
# TYPE gen_ai_client_operation_duration_seconds histogram
`
		// The operation histogram: the cut attempt took the 1 s readiness
		// timeout; anthropic answered at once.
		want += opHist("", "anthropic", "claude", 0, 1) + opHist("504", "openai", "gpt-4o", 1, 1)
		if err := testutil.CollectAndCompare(c, strings.NewReader(want),
			"routeguard_stream_cuts_total", "gen_ai_client_operation_duration_seconds"); err != nil {
			t.Error(err)
		}
	})
}

// opHist is the exposition of one gen_ai operation histogram whose every
// observation is v seconds.
func opHist(errType, provider, model string, v float64, n int) string {
	bounds := []string{"0.01", "0.02", "0.04", "0.08", "0.16", "0.32", "0.64", "1.28", "2.56", "5.12", "10.24", "20.48", "40.96", "81.92", "+Inf"}
	vals := []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92, 1e9}
	labels := `error_type="` + errType + `",gen_ai_operation_name="chat",gen_ai_provider_name="` + provider + `",gen_ai_request_model="` + model + `"`
	var b strings.Builder
	for i, le := range bounds {
		c := 0
		if v <= vals[i] {
			c = n
		}
		b.WriteString("gen_ai_client_operation_duration_seconds_bucket{" + labels + `,le="` + le + `"} ` + itoa(c) + "\n")
	}
	b.WriteString("gen_ai_client_operation_duration_seconds_sum{" + labels + "} " + ftoa(v*float64(n)) + "\n")
	b.WriteString("gen_ai_client_operation_duration_seconds_count{" + labels + "} " + itoa(n) + "\n")
	return b.String()
}

// TestLint runs the client library's linter over everything the shared
// scenarios (metricstest.Scenarios) produce.
func TestLint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newCollector()
		for _, sc := range metricstest.Scenarios {
			sc.Run(t, c)
		}
		problems, err := testutil.CollectAndLint(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
		if n := testutil.CollectAndCount(c); n < 30 {
			t.Errorf("collected %d series, want the metricstest.Scenarios' (≥ 30)", n)
		}
	})
}

// TestAttachKeepsHooks: every Attach keeps the hook that was there and
// calls it before the collector.
func TestAttachKeepsHooks(t *testing.T) {
	c, reg := newCollector()
	var got []string
	bc := breaker.Config{OnChange: func(breaker.Event) { got = append(got, "breaker") }}
	cc := cooldown.Config{OnChange: func(cooldown.Event) { got = append(got, "cooldown") }}
	lc := lockout.Config{Enabled: true, OnChange: func(lockout.Event) { got = append(got, "lockout") }}
	qc := queue.Config{OnChange: func(queue.Event) { got = append(got, "queue") }}
	rc := combo.Config{OnAttempt: func(combo.Attempt) { got = append(got, "attempt") }}
	c.AttachBreaker(&bc)
	c.AttachCooldown(&cc)
	c.AttachLockout(&lc)
	c.AttachQueue(&qc)
	c.Attach(&rc)
	bc.OnChange(breaker.Event{Provider: "openai", From: breaker.Closed, To: breaker.Open})
	cc.OnChange(cooldown.Event{Conn: "sk-1", Action: cooldown.Episode, State: cooldown.Cooling, Reason: "server_error"})
	lc.OnChange(lockout.Event{Kind: lockout.EventLocked, Provider: "openai", Model: "m", Reason: lockout.ReasonServerError})
	qc.OnChange(queue.Event{Kind: queue.EventQueueFull, Key: "sk-1"})
	rc.OnAttempt(combo.Attempt{Target: combo.Target{Provider: "openai", Model: "m"}, Outcome: combo.OutcomeSucceeded, Status: 200})
	if strings.Join(got, ",") != "breaker,cooldown,lockout,queue,attempt" {
		t.Errorf("hooks called: %v", got)
	}
	for _, w := range []metricstest.Sample{
		{Name: "routeguard_breaker_transitions_total", Labels: []string{"provider", "openai", "from", "closed", "to", "open"}, Value: 1},
		{Name: "routeguard_connection_cooldowns_total", Labels: []string{"connection", "sk-1", "reason", "server_error"}, Value: 1},
		{Name: "routeguard_model_lockouts_total", Labels: []string{"provider", "openai", "model", "m", "reason", "server_error"}, Value: 1},
		{Name: "routeguard_queue_rejected_total", Labels: []string{"connection", "sk-1", "reason", "queue_full"}, Value: 1},
		{Name: "routeguard_attempts_total", Labels: []string{"provider", "openai", "outcome", "succeeded", "status_class", "2xx"}, Value: 1},
	} {
		if got, ok := value(t, reg, w.Name, w.Labels); !ok || got != w.Value {
			t.Errorf("%s%v = %v, want %v", w.Name, w.Labels, got, w.Value)
		}
	}
}

// TestFreeTextNeverBecomesALabel: a skip detail or a reason that is not a
// code is recorded as "other".
func TestFreeTextNeverBecomesALabel(t *testing.T) {
	c, reg := newCollector()
	rc := combo.Config{}
	c.Attach(&rc)
	rc.OnAttempt(combo.Attempt{Target: combo.Target{Provider: "openai", Model: "m"}, Outcome: combo.OutcomeFailed,
		Status: 500, Code: "upstream said: key sk-secret is bad"})
	if got, _ := value(t, reg, "routeguard_attempts_total", []string{"reason", "other", "status_class", "5xx"}); got != 1 {
		t.Errorf("attempts with reason other = %v, want 1", got)
	}
}

// TestRecordingAllocatesNothing: once a label combination is known, the
// hooks allocate nothing, and a routed request costs no more allocations
// with the collector than without.
func TestRecordingAllocatesNothing(t *testing.T) {
	c, _ := newCollector()
	bc, cc, lc, qc, rc := breaker.Config{}, cooldown.Config{}, lockout.Config{}, queue.Config{}, combo.Config{}
	c.AttachBreaker(&bc)
	c.AttachCooldown(&cc)
	c.AttachLockout(&lc)
	c.AttachQueue(&qc)
	c.Attach(&rc)
	tg := combo.Target{Provider: "openai", Connection: "sk-1", Model: "gpt-4o"}
	cut := &watchdog.Error{Code: watchdog.CodeReadinessTimeout, Reason: watchdog.ReasonReadinessTimeout}
	calls := map[string]func(){
		"success": func() { rc.OnAttempt(combo.Attempt{Target: tg, Outcome: combo.OutcomeSucceeded, Status: 200}) },
		"usage": func() {
			rc.OnAttempt(combo.Attempt{Target: tg, Outcome: combo.OutcomeSucceeded, Status: 200, FirstOutput: time.Second,
				Usage: combo.Usage{InputTokens: 12, OutputTokens: 34}})
		},
		"failure": func() {
			rc.OnAttempt(combo.Attempt{Target: tg, Outcome: combo.OutcomeFailed, Status: 503, Code: "server_error"})
		},
		"stream_cut": func() { rc.OnAttempt(combo.Attempt{Target: tg, Outcome: combo.OutcomeFailed, Status: 504, Err: cut}) },
		"empty": func() {
			rc.OnAttempt(combo.Attempt{Target: tg, Outcome: combo.OutcomeFailed, Status: 502, Err: combo.ErrEmptyStream})
		},
		"skip": func() {
			rc.OnAttempt(combo.Attempt{Target: tg, Outcome: combo.OutcomeSkipped, Reason: combo.ReasonCircuitOpen})
		},
		"breaker":  func() { bc.OnChange(breaker.Event{Provider: "openai", From: breaker.Closed, To: breaker.Degraded}) },
		"cooldown": func() { cc.OnChange(cooldown.Event{Conn: "sk-1", Action: cooldown.Episode, State: cooldown.Cooling}) },
		"lockout":  func() { lc.OnChange(lockout.Event{Kind: lockout.EventLocked, Provider: "openai", Model: "gpt-4o"}) },
		"queue":    func() { qc.OnChange(queue.Event{Kind: queue.EventQueueTimeout, Key: "sk-1"}) },
	}
	for name, f := range calls {
		f()
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations, want 0", name, n)
		}
	}

	if raceEnabled {
		return // sync.Pool drops items at random under the race detector
	}
	bare := metricstest.BenchRouter(nil)
	with := metricstest.BenchRouter(c)
	ctx := context.Background()
	req := combo.Request{Combo: metricstest.BenchCombo}
	one := func(do func() (*combo.Result, error)) {
		res, err := do()
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Response.Body)
		res.Response.Body.Close()
	}
	one(func() (*combo.Result, error) { return with.Do(ctx, req, metricstest.BenchSend) })
	nBare := testing.AllocsPerRun(200, func() { one(func() (*combo.Result, error) { return bare.Do(ctx, req, metricstest.BenchSend) }) })
	nWith := testing.AllocsPerRun(200, func() { one(func() (*combo.Result, error) { return with.Do(ctx, req, metricstest.BenchSend) }) })
	if nWith > nBare {
		t.Errorf("a request allocates %v times with the collector, %v without", nWith, nBare)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func ftoa(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
