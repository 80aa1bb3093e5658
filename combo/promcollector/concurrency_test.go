package promcollector_test

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/promcollector"
)

// flatten gathers reg into one value per counter, gauge, histogram count,
// sum and cumulative bucket, keyed by name, labels and part.
func flatten(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, lp.GetName()+"="+lp.GetValue())
			}
			sort.Strings(ls)
			k := mf.GetName() + "{" + strings.Join(ls, ",") + "}"
			switch {
			case m.Counter != nil:
				out[k] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[k] = m.Gauge.GetValue()
			case m.Histogram != nil:
				out[k+"_count"] = float64(m.Histogram.GetSampleCount())
				out[k+"_sum"] = m.Histogram.GetSampleSum()
				for _, b := range m.Histogram.GetBucket() {
					out[fmt.Sprintf("%s_bucket{le=%g}", k, b.GetUpperBound())] = float64(b.GetCumulativeCount())
				}
			}
		}
	}
	return out
}

// tally is what a worker of TestConcurrentTotalsExact recorded.
type tally struct {
	succeeded, failed, skipped, requests, attempts, lockouts, cooldowns, circuitOpen, fallbacks int
	durationNs, waitNs, overheadNs, waitsOver1ms                                                int64
}

// TestConcurrentTotalsExact: requests recorded from several goroutines
// while the collector is gathered over and over add up exactly (counts,
// sums, the exclusions counted with a request and those counted one by
// one), and no counter, histogram count, sum or bucket ever goes down
// between two gatherings.
func TestConcurrentTotalsExact(t *testing.T) {
	c := promcollector.New(promcollector.Options{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	rc := combo.Config{}
	c.Attach(&rc)
	openai := combo.Target{Provider: "openai", Connection: "sk-1", Model: "gpt-4o"}
	anthropic := combo.Target{Provider: "anthropic", Connection: "ak-1", Model: "claude"}
	lockout := combo.Exclusion{Provider: "gemini", Connection: "gk-1", Model: "g", Reason: combo.ReasonModelLockout}
	cooling := combo.Exclusion{Provider: "mistral", Connection: "mk-1", Model: "m", Reason: combo.ReasonConnectionCooldown}

	// The gatherer runs first; each worker records perWorker requests and
	// goes on until three gatherings have run alongside.
	const workers, perWorker = 4, 3000
	var gathers atomic.Int64
	done := make(chan struct{})
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		prev := flatten(t, reg)
		for n := 0; ; n++ {
			gathers.Add(1)
			select {
			case <-done:
				return
			default:
			}
			cur := flatten(t, reg)
			for k, v := range prev {
				if got, ok := cur[k]; !ok || got < v {
					t.Errorf("gathering %d: %s = %v (present %v), was %v", n, k, got, ok, v)
				}
			}
			prev = cur
		}
	}()
	tallies := make([]tally, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			tl := &tallies[w]
			for i := 0; i < perWorker || gathers.Load() < 4; i++ {
				ok := combo.Attempt{Target: openai, Outcome: combo.OutcomeSucceeded, Status: 200,
					Duration: time.Duration(i%7+1) * time.Millisecond}
				if i%2 == 1 {
					ok.QueueWait = time.Duration(i%5) * time.Millisecond
				}
				e := combo.RequestEnd{Combo: "smart", Duration: ok.Duration + time.Duration(i%4+1)*time.Microsecond}
				overhead := time.Duration(i%4+1) * time.Microsecond
				switch i % 5 {
				case 0, 1: // a plain request
					e.Attempts = []combo.Attempt{ok}
				case 2: // two exclusions, counted with the request
					e.Attempts, e.Excluded = []combo.Attempt{ok}, []combo.Exclusion{lockout, cooling}
					tl.lockouts++
					tl.cooldowns++
				case 3: // a skip, a failure and a fallback: exclusions counted one by one
					skip := combo.Attempt{Target: combo.Target{Provider: "gemini", Model: "g"}, Outcome: combo.OutcomeSkipped,
						Reason: combo.ReasonCircuitOpen}
					fail := combo.Attempt{Target: openai, Outcome: combo.OutcomeFailed, Status: 503, Code: "server_error",
						Duration: 2 * time.Millisecond}
					ok.Target = anthropic
					e.Attempts, e.Excluded = []combo.Attempt{skip, fail, ok}, []combo.Exclusion{cooling}
					e.Duration += fail.Duration
					rc.OnAttempt(skip)
					rc.OnAttempt(fail)
					tl.skipped++
					tl.failed++
					tl.circuitOpen++
					tl.cooldowns++
					tl.fallbacks++
					tl.attempts++
					tl.durationNs += int64(fail.Duration)
				case 4: // nothing routed: the caller's context ended
					e.Attempts, e.Err = []combo.Attempt{ok}, fmt.Errorf("canceled")
					overhead = -1
				}
				rc.OnAttempt(ok)
				rc.OnRequest(e)
				tl.succeeded++
				tl.durationNs += int64(ok.Duration)
				tl.waitNs += int64(ok.QueueWait)
				if ok.QueueWait > time.Millisecond {
					tl.waitsOver1ms++
				}
				if overhead >= 0 {
					tl.requests++
					tl.attempts++
					tl.overheadNs += int64(overhead + ok.QueueWait) // a wait is the router's time
				}
			}
		})
	}
	wg.Wait()
	close(done)
	<-scraped

	var sum tally
	for _, tl := range tallies {
		sum.succeeded += tl.succeeded
		sum.failed += tl.failed
		sum.skipped += tl.skipped
		sum.requests += tl.requests
		sum.attempts += tl.attempts
		sum.lockouts += tl.lockouts
		sum.cooldowns += tl.cooldowns
		sum.circuitOpen += tl.circuitOpen
		sum.fallbacks += tl.fallbacks
		sum.durationNs += tl.durationNs
		sum.waitNs += tl.waitNs
		sum.overheadNs += tl.overheadNs
		sum.waitsOver1ms += tl.waitsOver1ms
	}
	got := flatten(t, reg)
	const opLabels = "gen_ai_operation_name=chat,gen_ai_provider_name=%s,gen_ai_request_model=%s"
	const openaiOK = "routeguard_attempts_total{model=gpt-4o,outcome=succeeded,provider=openai,reason=,status_class=2xx}"
	const anthropicOK = "routeguard_attempts_total{model=claude,outcome=succeeded,provider=anthropic,reason=,status_class=2xx}"
	for k, want := range map[string]float64{
		"routeguard_attempts_total{model=gpt-4o,outcome=failed,provider=openai,reason=server_error,status_class=5xx}": float64(sum.failed),
		"routeguard_attempts_total{model=g,outcome=skipped,provider=gemini,reason=circuit_open,status_class=none}":    float64(sum.skipped),
		"routeguard_exclusions_total{reason=model_lockout}":                                                           float64(sum.lockouts),
		"routeguard_exclusions_total{reason=connection_cooldown}":                                                     float64(sum.cooldowns),
		"routeguard_exclusions_total{reason=circuit_open}":                                                            float64(sum.circuitOpen),
		"routeguard_fallbacks_total{from_provider=openai,result=succeeded,to_provider=anthropic}":                     float64(sum.fallbacks),
		"routeguard_request_attempts{combo=smart}_count":                                                              float64(sum.requests),
		"routeguard_request_attempts{combo=smart}_sum":                                                                float64(sum.attempts),
		"routeguard_router_overhead_seconds{}_count":                                                                  float64(sum.requests),
		"routeguard_router_overhead_seconds{}_sum":                                                                    float64(sum.overheadNs) / 1e9,
		"routeguard_queue_wait_seconds{provider=openai}_count":                                                        float64(sum.succeeded - sum.fallbacks + sum.failed),
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
	if n := got[openaiOK] + got[anthropicOK]; n != float64(sum.succeeded) {
		t.Errorf("successful attempts %v, want %d", n, sum.succeeded)
	}
	if got[anthropicOK] != float64(sum.fallbacks) {
		t.Errorf("%s = %v, want %d", anthropicOK, got[anthropicOK], sum.fallbacks)
	}
	ops := 0.0
	opSum := 0.0
	for _, l := range []string{fmt.Sprintf(opLabels, "openai", "gpt-4o") + ",error_type=", fmt.Sprintf(opLabels, "openai", "gpt-4o") + ",error_type=503",
		fmt.Sprintf(opLabels, "anthropic", "claude") + ",error_type="} {
		ls := strings.Split(l, ",")
		sort.Strings(ls)
		k := "gen_ai_client_operation_duration_seconds{" + strings.Join(ls, ",") + "}"
		ops += got[k+"_count"]
		opSum += got[k+"_sum"]
	}
	if ops != float64(sum.succeeded+sum.failed) {
		t.Errorf("operation durations %v, want %d", ops, sum.succeeded+sum.failed)
	}
	// Every duration is whole milliseconds: the sum of the three series
	// is exact to the nanosecond.
	if ns := int64(opSum*1e9 + 0.5); ns != sum.durationNs {
		t.Errorf("operation duration sum %d ns, want %d", ns, sum.durationNs)
	}
	waitSum := got["routeguard_queue_wait_seconds{provider=openai}_sum"] + got["routeguard_queue_wait_seconds{provider=anthropic}_sum"]
	if ns := int64(waitSum*1e9 + 0.5); ns != sum.waitNs {
		t.Errorf("queue wait sum %d ns, want %d", ns, sum.waitNs)
	}
	over1ms := got["routeguard_queue_wait_seconds{provider=openai}_count"] + got["routeguard_queue_wait_seconds{provider=anthropic}_count"] -
		got["routeguard_queue_wait_seconds{provider=openai}_bucket{le=0.001}"] - got["routeguard_queue_wait_seconds{provider=anthropic}_bucket{le=0.001}"]
	if over1ms != float64(sum.waitsOver1ms) {
		t.Errorf("queue waits over 1 ms: %v, want %d", over1ms, sum.waitsOver1ms)
	}
}

// TestManyRequestKinds: past the bound on the kinds of request that count
// their exclusions with them, requests count them one by one, and every
// total stays exact.
func TestManyRequestKinds(t *testing.T) {
	c, reg := newCollector()
	rc := combo.Config{}
	c.Attach(&rc)
	a := combo.Attempt{Target: combo.Target{Provider: "openai", Connection: "sk-1", Model: "gpt-4o"}, Outcome: combo.OutcomeSucceeded,
		Status: 200, Duration: time.Millisecond}
	x := []combo.Exclusion{{Provider: "anthropic", Connection: "ak-1", Model: "claude", Reason: combo.ReasonModelLockout},
		{Provider: "gemini", Connection: "gk-1", Model: "g", Reason: combo.ReasonConnectionCooldown}}
	const combos = 1500
	for round := range 2 {
		for i := range combos {
			rc.OnAttempt(a)
			rc.OnRequest(combo.RequestEnd{Combo: fmt.Sprintf("c%d", i), Attempts: []combo.Attempt{a}, Excluded: x[:1+i%2],
				Duration: time.Millisecond + time.Duration(round+1)*time.Microsecond})
		}
	}
	got := flatten(t, reg)
	for k, want := range map[string]float64{
		"routeguard_exclusions_total{reason=model_lockout}":       2 * combos,
		"routeguard_exclusions_total{reason=connection_cooldown}": combos,
		"routeguard_request_attempts{combo=c0}_count":             2,
		"routeguard_request_attempts{combo=c1499}_count":          2,
		"routeguard_request_attempts{combo=c1499}_sum":            2,
		"routeguard_router_overhead_seconds{}_count":              2 * combos,
		"routeguard_router_overhead_seconds{}_sum":                combos * 3e-6,
	} {
		if v := got[k]; v != want && (!strings.HasSuffix(k, "_sum") || v < want*(1-1e-12) || v > want*(1+1e-12)) {
			t.Errorf("%s = %v, want %v", k, v, want)
		}
	}
}

// TestLabelsOfSharedBytes: strings that start at the same byte but differ
// in length (a name and its prefix) are different label values.
func TestLabelsOfSharedBytes(t *testing.T) {
	c, reg := newCollector()
	rc := combo.Config{}
	c.Attach(&rc)
	long := strings.Repeat("openai-eu", 1)
	short := long[:6]
	for _, p := range []string{long, short, short} {
		a := combo.Attempt{Target: combo.Target{Provider: p, Connection: long[:2], Model: long[:1]}, Outcome: combo.OutcomeSucceeded, Status: 200}
		rc.OnAttempt(a)
		rc.OnRequest(combo.RequestEnd{Combo: p, Attempts: []combo.Attempt{a}, Excluded: []combo.Exclusion{{Reason: combo.Reason(p)}}})
	}
	got := flatten(t, reg)
	for k, want := range map[string]float64{
		"routeguard_attempts_total{model=o,outcome=succeeded,provider=openai-eu,reason=,status_class=2xx}": 1,
		"routeguard_attempts_total{model=o,outcome=succeeded,provider=openai,reason=,status_class=2xx}":    2,
		"routeguard_request_attempts{combo=openai-eu}_count":                                               1,
		"routeguard_request_attempts{combo=openai}_count":                                                  2,
		"routeguard_exclusions_total{reason=openai-eu}":                                                    1,
		"routeguard_exclusions_total{reason=openai}":                                                       2,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
}
