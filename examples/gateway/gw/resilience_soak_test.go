package gw_test

import (
	"errors"
	"io"
	"math"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// TestSoakLoopback runs a bounded load, maxRequests or maxDuration
// whichever ends first, from many goroutines against the gateway on
// loopback, over a healthy upstream and a flaky one in seeded chaos mode
// (503s, 429s with Retry-After, connection resets, answers that stall
// halfway, added latency). No request may be lost or hung: each one gets
// its whole answer or a typed error within its deadline, and a stream that
// a stall broke after its commit ends with an error the client sees. The
// flaky upstream's faults are the sequence of its seed. Afterwards the
// goroutine count must come back to where it was before the load, and
// nothing may leak once the servers are closed.
func TestSoakLoopback(t *testing.T) {
	if testing.Short() {
		t.Skip("soak test skipped in -short mode")
	}
	const (
		clients     = 32
		maxRequests = 2000
		maxDuration = 10 * time.Second
		// deadline is each request's own deadline: far above the slowest
		// answer seen on a loaded machine (a few seconds), so that only a
		// request the gateway never answers runs into it.
		deadline = 10 * time.Second
		// goroutineSlack is how far above its value before the load the
		// goroutine count may settle: a runtime or net/http helper that
		// outlives its request by a moment, never one per request.
		goroutineSlack = 4
	)
	ignore := goleak.IgnoreCurrent()

	steady, flaky := combotest.New(), combotest.New()
	steady.Handle("", func(c combotest.Call) combotest.Reply { return streamOrPlain(c, time.Millisecond, "steady ", "answer") })
	flaky.Handle("", func(c combotest.Call) combotest.Reply { return streamOrPlain(c, time.Millisecond, "flaky ", "answer") })
	flaky.SetLogSize(100_000) // every call, for the comparison with the seed's sequence
	flaky.Chaos(soakChaos)
	texts := map[string]string{"steady/" + rigModel: "steady answer", "flaky/" + rigModel: "flaky answer"}
	cfg := &gw.Config{
		Providers: []gw.Provider{provider("steady", steady, 2), provider("flaky", flaky, 2)},
		Combos: []gw.Combo{
			comboOf("flaky-first", 2*time.Second, "flaky", "steady"),
			comboOf("steady-first", 2*time.Second, "steady", "flaky"),
		},
	}
	cfg.Combos = append(cfg.Combos, gw.Combo{Name: "rotate", Strategy: "round-robin",
		Settings: gw.ComboSettings{TargetTimeoutMs: 2000},
		Targets:  []gw.Target{{Provider: "flaky", Model: rigModel}, {Provider: "steady", Model: rigModel}}})
	cfg.Resilience.Breaker.APIKey = gw.BreakerProfile{OpenAt: 5, ResetMs: 1000, MaxMultiplier: 1}
	cfg.Resilience.Cooldown.APIKey = gw.CooldownProfile{BaseMs: 20, Steps: 1, MaxMs: 100}
	cfg.Resilience.ThroughputWatchdog = gw.WatchdogConfig{Enabled: true, IdleTimeoutMs: 2000}
	r := newRig(t, cfg, map[string]*combotest.Upstream{"steady": steady, "flaky": flaky})

	// Only routes with a short per-target timeout lead to flaky: a direct
	// "flaky/m" request has the default 120 s per attempt, which a stalled
	// answer would use up, far beyond the deadline.
	models := []string{"flaky-first", "steady-first", "rotate", "steady/" + rigModel}
	// One warm-up request per model, then the goroutine count with every
	// server started and idle.
	for _, m := range models {
		r.chat(m, false, deadline)
	}
	before := steadyGoroutines(time.Second, r.closeIdle)

	var issued, done, ok, typed, health, lost, broken, untrue atomic.Int64
	var peak atomic.Int64
	var worst atomic.Int64 // nanoseconds
	var mu sync.Mutex
	statuses := map[int]int{}
	var walls []time.Duration
	stopAt := time.Now().Add(maxDuration)
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stopAt) {
				n := issued.Add(1)
				if n > maxRequests {
					issued.Add(-1)
					return
				}
				var res result
				streamed := false
				if n%20 == 0 {
					res = r.health(deadline)
					if res.Status == http.StatusOK && res.Err == nil {
						health.Add(1)
					}
				} else {
					streamed = n%4 == 0
					res = r.chat(models[(int(n)+c)%len(models)], streamed, deadline)
				}
				done.Add(1)
				raise(&peak, int64(runtime.NumGoroutine()))
				raise(&worst, int64(res.Wall))
				mu.Lock()
				statuses[res.Status]++
				walls = append(walls, res.Wall)
				mu.Unlock()
				switch {
				case streamed && res.Status == http.StatusOK && errors.Is(res.Err, io.ErrUnexpectedEOF) &&
					!strings.Contains(string(res.Body), "data: [DONE]"):
					broken.Add(1) // cut after its commit, and the client saw the cut
				case !res.answered():
					if lost.Add(1) <= 3 {
						t.Errorf("request %d lost: status %d, err %v, after %v, body %q", n, res.Status, res.Err, res.Wall, res.Body)
					}
				case res.Status < 300:
					ok.Add(1)
					if n%20 != 0 {
						if err := wholeAnswer(res, streamed, texts); err != nil && untrue.Add(1) <= 3 {
							t.Errorf("request %d: %v", n, err)
						}
					}
				default:
					typed.Add(1)
					if err := boundedRetryAfter(res); err != nil && untrue.Add(1) <= 3 {
						t.Errorf("request %d: %v", n, err)
					}
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	// Close the idle keep-alive connections on both hops, then let the
	// goroutine count settle.
	afterLoad := settleGoroutines(before+goroutineSlack, 2*time.Second, r.closeIdle)

	t.Logf("soak: %d requests (%d health checks) from %d clients in %v (%.0f req/s): %d 2xx, %d typed errors, %d lost; "+
		"statuses %v; latency p50 %v, p99 %v, max %v", done.Load(), health.Load(), clients, elapsed.Round(time.Millisecond),
		float64(done.Load())/elapsed.Seconds(), ok.Load(), typed.Load(), lost.Load(), statuses,
		quantile(walls, 0.50), quantile(walls, 0.99), time.Duration(worst.Load()).Round(time.Millisecond))
	t.Logf("soak: upstream calls: steady %d, flaky %d; goroutines before %d, peak sampled %d, after %d",
		steady.Total(), flaky.Total(), before, peak.Load(), afterLoad)
	calls := flaky.Calls()
	t.Logf("soak: flaky (seed %d) faults %+v; %d streams broken after their commit", soakChaos.Seed, flaky.Faults(), broken.Load())
	assert.Len(t, calls, flaky.Total(), "the flaky log holds every call")
	assert.Equal(t, soakChaos.Draws(len(calls)), combotest.DrawsOf(calls),
		"the faults and latencies of flaky's calls, in order, are those of seed %d", soakChaos.Seed)
	streamStalls := 0
	for _, c := range calls {
		if c.Fault == combotest.FaultStall && strings.Contains(string(c.Body), `"stream":true`) {
			streamStalls++
		}
	}
	assert.LessOrEqual(t, broken.Load(), int64(streamStalls), "broken streams, against flaky's streamed calls that stalled")
	assert.Zero(t, untrue.Load(), "answers that are not the whole answer of their target, or errors with a bad Retry-After")
	f := flaky.Faults()
	assert.True(t, f.ServerError > 0 && f.RateLimit > 0 && f.Reset > 0 && f.Stall > 0 && f.Delayed > 0, "every fault injected: %+v", f)

	assert.Equal(t, issued.Load(), done.Load(), "every issued request returned")
	assert.Equal(t, done.Load(), ok.Load()+typed.Load()+lost.Load()+broken.Load(), "every request classified")
	assert.Zero(t, lost.Load(), "lost or hung requests")
	assert.GreaterOrEqual(t, 2*ok.Load(), done.Load(), "most requests succeed: a healthy target backs every combo")
	assert.True(t, done.Load() == maxRequests || elapsed >= maxDuration, "the load stopped early: %d requests in %v",
		done.Load(), elapsed)
	assert.LessOrEqual(t, time.Duration(worst.Load()), deadline, "the slowest request")
	assert.LessOrEqual(t, afterLoad, before+goroutineSlack, "goroutines after the load (before: %d)", before)

	r.close()
	goleak.VerifyNone(t, ignore)
}

// soakChaos is the flaky upstream's faults in TestSoakLoopback: about one
// call in three fails in some way, and every call is delayed by up to
// 30 ms.
var soakChaos = combotest.Chaos{Seed: 7, ServerError: 0.12, RateLimit: 0.06, Reset: 0.08, Stall: 0.04,
	Latency: 30 * time.Millisecond}

// quantile returns the q-quantile of ds (nearest rank), rounded to 0.1 ms.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(i, 0)].Round(100 * time.Microsecond)
}

// raise sets v to n if n is larger.
func raise(v *atomic.Int64, n int64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}

// steadyGoroutines waits, for at most d, until the goroutine count has not
// changed over five samples 20 ms apart, and returns it. It calls tidy
// before each sample.
func steadyGoroutines(d time.Duration, tidy func()) int {
	end := time.Now().Add(d)
	tidy()
	last, same := runtime.NumGoroutine(), 0
	for same < 5 && time.Now().Before(end) {
		time.Sleep(20 * time.Millisecond)
		tidy()
		n := runtime.NumGoroutine()
		if n == last {
			same++
		} else {
			last, same = n, 0
		}
	}
	return last
}

// settleGoroutines polls the goroutine count until it is at most want, for
// at most d, and returns the last count. It calls tidy before each sample.
func settleGoroutines(want int, d time.Duration, tidy func()) int {
	end := time.Now().Add(d)
	for {
		tidy()
		n := runtime.NumGoroutine()
		if n <= want || time.Now().After(end) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}
