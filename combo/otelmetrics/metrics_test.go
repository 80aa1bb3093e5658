package otelmetrics_test

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/otelmetrics"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/internal/metricscore/metricstest"
	"github.com/routeguard/routeguard/lockout"
	"github.com/routeguard/routeguard/queue"
	"github.com/routeguard/routeguard/watchdog"
)

func newMetrics(t *testing.T) (*otelmetrics.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	m, err := otelmetrics.New(otelmetrics.Options{MeterProvider: mp, Providers: []string{"openai", "anthropic", "gemini"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m, reader
}

func collect(t *testing.T, reader *sdkmetric.ManualReader) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// matches reports whether set has every name=value pair of labels (an
// empty value matches a missing attribute).
func matches(set attribute.Set, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		v, _ := set.Value(attribute.Key(labels[i]))
		if v.AsString() != labels[i+1] {
			return false
		}
	}
	return true
}

// value finds one sample: a counter, a gauge, or a histogram's _count or
// _sum.
//
// The GenAI client metrics are named as their Prometheus twins
// (gen_ai_client_operation_duration_seconds, its labels
// gen_ai_provider_name…): they are looked up under their OpenTelemetry
// names and attributes.
func value(rm metricdata.ResourceMetrics, name string, labels []string) (float64, bool) {
	family, part := name, ""
	for _, suffix := range []string{"_count", "_sum"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && (strings.HasSuffix(base, "_seconds") || strings.HasSuffix(base, "_attempts") || strings.HasSuffix(base, "_usage")) {
			family, part = base, suffix
		}
	}
	if otel, ok := genAINames[family]; ok {
		family = otel
		labels = slices.Clone(labels)
		for i := 0; i < len(labels); i += 2 {
			if k, ok := strings.CutPrefix(labels[i], "gen_ai_"); ok {
				labels[i] = "gen_ai." + strings.ReplaceAll(k, "_", ".")
			}
			if labels[i] == "error_type" {
				labels[i] = "error.type"
			}
		}
	}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name != family {
				continue
			}
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if matches(p.Attributes, labels) {
						return float64(p.Value), true
					}
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					if matches(p.Attributes, labels) {
						return float64(p.Value), true
					}
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					if matches(p.Attributes, labels) {
						return p.Value, true
					}
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					if matches(p.Attributes, labels) {
						if part == "_count" {
							return float64(p.Count), true
						}
						return float64(p.Sum), true
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if matches(p.Attributes, labels) {
						if part == "_count" {
							return float64(p.Count), true
						}
						return p.Sum, true
					}
				}
			}
		}
	}
	return 0, false
}

// genAINames are the OpenTelemetry names of the GenAI metrics' Prometheus
// twins.
var genAINames = map[string]string{
	"gen_ai_client_operation_duration_seconds":            "gen_ai.client.operation.duration",
	"gen_ai_client_operation_time_to_first_chunk_seconds": "gen_ai.client.operation.time_to_first_chunk",
	"gen_ai_client_token_usage":                           "gen_ai.client.token.usage",
}

// TestScenarios drives the scenarios shared with promcollector's tests
// (metricstest.Scenarios) through the router and finds the same numbers.
func TestScenarios(t *testing.T) {
	for _, sc := range metricstest.Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m, reader := newMetrics(t)
				sc.Run(t, m)
				rm := collect(t, reader)
				for _, w := range sc.Want {
					got, ok := value(rm, w.Name, w.Labels)
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

// TestGenAIOperationDuration: every attempt made is one
// gen_ai.client.operation.duration measurement with the semantic
// conventions' attributes and buckets; error.type only on failures.
func TestGenAIOperationDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, reader := newMetrics(t)
		metricstest.ScenarioStreamCut(t, m)
		rm := collect(t, reader)
		var h metricdata.Histogram[float64]
		for _, sm := range rm.ScopeMetrics {
			if sm.Scope.Name != otelmetrics.ScopeName {
				t.Errorf("scope %q", sm.Scope.Name)
			}
			for _, mt := range sm.Metrics {
				if mt.Name == "gen_ai.client.operation.duration" {
					if mt.Unit != "s" {
						t.Errorf("unit %q, want s", mt.Unit)
					}
					h = mt.Data.(metricdata.Histogram[float64])
				}
			}
		}
		if len(h.DataPoints) != 2 {
			t.Fatalf("%d data points, want 2", len(h.DataPoints))
		}
		wantBounds := []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
		for _, p := range h.DataPoints {
			if !slicesEqual(p.Bounds, wantBounds) {
				t.Errorf("bounds %v", p.Bounds)
			}
			prov, _ := p.Attributes.Value("gen_ai.provider.name")
			op, _ := p.Attributes.Value("gen_ai.operation.name")
			model, _ := p.Attributes.Value("gen_ai.request.model")
			et, hasErr := p.Attributes.Value("error.type")
			switch prov.AsString() {
			case "openai": // cut by the 1 s readiness timeout
				if op.AsString() != "chat" || model.AsString() != "gpt-4o" || et.AsString() != "504" || p.Count != 1 || p.Sum != 1 {
					t.Errorf("openai point %v count %d sum %v", p.Attributes.ToSlice(), p.Count, p.Sum)
				}
			case "anthropic":
				if hasErr || model.AsString() != "claude" || p.Count != 1 || p.Sum != 0 {
					t.Errorf("anthropic point %v count %d sum %v", p.Attributes.ToSlice(), p.Count, p.Sum)
				}
			default:
				t.Errorf("point %v", p.Attributes.ToSlice())
			}
		}
	})
}

func slicesEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestNilMeterProvider: the zero Options record nowhere, without failing.
func TestNilMeterProvider(t *testing.T) {
	m, err := otelmetrics.New(otelmetrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rc := combo.Config{}
	m.Attach(&rc)
	rc.OnAttempt(combo.Attempt{Outcome: combo.OutcomeSucceeded, Status: 200})
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestAttachKeepsHooks: every Attach keeps the hook that was there and
// calls it before the metrics.
func TestAttachKeepsHooks(t *testing.T) {
	m, reader := newMetrics(t)
	var got []string
	bc := breaker.Config{OnChange: func(breaker.Event) { got = append(got, "breaker") }}
	cc := cooldown.Config{OnChange: func(cooldown.Event) { got = append(got, "cooldown") }}
	lc := lockout.Config{Enabled: true, OnChange: func(lockout.Event) { got = append(got, "lockout") }}
	qc := queue.Config{OnChange: func(queue.Event) { got = append(got, "queue") }}
	rc := combo.Config{OnAttempt: func(combo.Attempt) { got = append(got, "attempt") }}
	m.AttachBreaker(&bc)
	m.AttachCooldown(&cc)
	m.AttachLockout(&lc)
	m.AttachQueue(&qc)
	m.Attach(&rc)
	bc.OnChange(breaker.Event{Provider: "openai", From: breaker.Closed, To: breaker.Open})
	cc.OnChange(cooldown.Event{Conn: "sk-1", Action: cooldown.Episode, State: cooldown.Cooling, Reason: "server_error"})
	lc.OnChange(lockout.Event{Kind: lockout.EventLocked, Provider: "openai", Model: "m", Reason: lockout.ReasonServerError})
	qc.OnChange(queue.Event{Kind: queue.EventQueueFull, Key: "sk-1"})
	rc.OnAttempt(combo.Attempt{Target: combo.Target{Provider: "openai", Model: "m"}, Outcome: combo.OutcomeSucceeded, Status: 200})
	if strings.Join(got, ",") != "breaker,cooldown,lockout,queue,attempt" {
		t.Errorf("hooks called: %v", got)
	}
	rm := collect(t, reader)
	for _, w := range []metricstest.Sample{
		{Name: "routeguard_breaker_transitions_total", Labels: []string{"provider", "openai", "from", "closed", "to", "open"}, Value: 1},
		{Name: "routeguard_connection_cooldowns_total", Labels: []string{"connection", "sk-1", "reason", "server_error"}, Value: 1},
		{Name: "routeguard_model_lockouts_total", Labels: []string{"provider", "openai", "model", "m", "reason", "server_error"}, Value: 1},
		{Name: "routeguard_queue_rejected_total", Labels: []string{"connection", "sk-1", "reason", "queue_full"}, Value: 1},
		{Name: "routeguard_attempts_total", Labels: []string{"provider", "openai", "outcome", "succeeded", "status_class", "2xx"}, Value: 1},
		{Name: "routeguard_breaker_state", Labels: []string{"provider", "openai", "state", "open"}, Value: 1},
		{Name: "routeguard_connection_up", Labels: []string{"connection", "sk-1"}, Value: 0},
	} {
		if got, ok := value(rm, w.Name, w.Labels); !ok || got != w.Value {
			t.Errorf("%s%v = %v, want %v", w.Name, w.Labels, got, w.Value)
		}
	}
}

// TestRecordingAllocatesNothing: once a label combination is known, the
// hooks allocate nothing through the SDK, and a routed request costs no
// more allocations with the metrics than without.
func TestRecordingAllocatesNothing(t *testing.T) {
	m, _ := newMetrics(t)
	bc, cc, lc, qc, rc := breaker.Config{}, cooldown.Config{}, lockout.Config{}, queue.Config{}, combo.Config{}
	m.AttachBreaker(&bc)
	m.AttachCooldown(&cc)
	m.AttachLockout(&lc)
	m.AttachQueue(&qc)
	m.Attach(&rc)
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
	with := metricstest.BenchRouter(m)
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
		t.Errorf("a request allocates %v times with the metrics, %v without", nWith, nBare)
	}
}
