package gw_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// chaosKind is one kind of request of the chaos load.
type chaosKind struct {
	name     string
	model    string
	deadline time.Duration
	// mustAnswer: the gateway can always answer within the deadline, so
	// the client must get an answer (the target timeouts and the healthy
	// fallback make sure of it). Otherwise the client may give up first and
	// only the deadline is checked.
	mustAnswer bool
	// fallback: a healthy target follows the faulty one, so the answer
	// must be a success.
	fallback bool
	// stream asks for a streamed answer every time; otherwise every third
	// request does.
	stream bool
}

// TestChaosBreakersOpenAndRecover sends concurrent requests through the
// gateway while four providers fail (503s, connection resets, hangs, and
// streams that stall before their first token) and two are healthy (one
// fast, one slow). Every request must be answered with
// a success or a typed error before its deadline, the faulty providers'
// breakers must open while the healthy ones never do, and once the faults
// stop each opened breaker must go half-open and then close on its probe.
func TestChaosBreakersOpenAndRecover(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test skipped in -short mode")
	}
	const (
		// breakerReset is the smallest open time the breaker profile
		// allows (its range starts at 1 s); MaxMultiplier 1 keeps every
		// reopened period at that length too.
		breakerReset = time.Second
		// hangTimeout bounds an attempt on the hanging provider.
		hangTimeout = 300 * time.Millisecond
		// stallTimeout is the watchdog's idle timeout, which cuts the
		// stalled streams; it is well below the combo's target timeout so
		// that the watchdog, not the target timeout, ends those attempts.
		stallTimeout = 200 * time.Millisecond
		// slack is the time a request may take past its deadline: the
		// client's own cancellation under -race on a busy machine.
		slack   = 500 * time.Millisecond
		workers = 16
		// Each worker sends at least rounds requests and keeps going until
		// the faults have lasted minFault, so that the opened breakers
		// also go half-open and fail their probes while the faults last.
		rounds   = 20
		minFault = 2*breakerReset + breakerReset/2
	)
	steady, u503, reset, hang, slow, stall := combotest.New(), combotest.New(), combotest.New(), combotest.New(),
		combotest.New(), combotest.New()
	steady.Handle("", func(c combotest.Call) combotest.Reply { return streamOrPlain(c, 0, "steady") })
	u503.Script("", combotest.Error(http.StatusServiceUnavailable, "service unavailable"))
	reset.Script("", combotest.Reset())
	hang.Script("", combotest.Hang())
	slow.Script("", combotest.OK("slow").After(80*time.Millisecond))
	// A 200 event stream that sends one heartbeat and then nothing.
	stall.Script("", combotest.Reply{Stream: &combotest.Stream{Events: []combotest.Event{combotest.Heartbeat()}, HangAfter: true}})

	cfg := &gw.Config{
		Providers: []gw.Provider{
			provider("steady", steady, 2), provider("down", u503, 1), provider("resetting", reset, 1),
			provider("hanging", hang, 1), provider("slow", slow, 1), provider("stalling", stall, 1),
		},
		Combos: []gw.Combo{
			comboOf("via-down", 2*time.Second, "down", "steady"),
			comboOf("via-reset", 2*time.Second, "resetting", "steady"),
			comboOf("via-hang", hangTimeout, "hanging", "steady"),
			comboOf("via-slow", 2*time.Second, "slow", "steady"),
			comboOf("via-stall", 2*time.Second, "stalling", "steady"),
		},
	}
	// Every faulty provider has one connection: with the default 5 s
	// per-connection (and 10 s network) deduplication its breaker would
	// need 15 s to open, longer than the load runs.
	cfg.Resilience.Breaker.APIKey = gw.BreakerProfile{OpenAt: 3, ResetMs: int(breakerReset / time.Millisecond), MaxMultiplier: 1,
		ConnDedupMs: 1, NetworkDedupMs: 1}
	// Short connection cooldowns, so that a failing connection keeps
	// reaching its provider and the breaker, not the cooldown, decides.
	cfg.Resilience.Cooldown.APIKey = gw.CooldownProfile{BaseMs: 20, Steps: 1, MaxMs: 100}
	cfg.Resilience.ThroughputWatchdog = gw.WatchdogConfig{Enabled: true, IdleTimeoutMs: int(stallTimeout / time.Millisecond)}
	r := newRig(t, cfg, map[string]*combotest.Upstream{"steady": steady, "down": u503, "resetting": reset, "hanging": hang,
		"slow": slow, "stalling": stall})

	kinds := []chaosKind{
		{name: "503 then fallback", model: "via-down", deadline: 3 * time.Second, mustAnswer: true, fallback: true},
		{name: "reset then fallback", model: "via-reset", deadline: 3 * time.Second, mustAnswer: true, fallback: true},
		{name: "hang then fallback", model: "via-hang", deadline: 3 * time.Second, mustAnswer: true, fallback: true},
		{name: "slow then fallback", model: "via-slow", deadline: 3 * time.Second, mustAnswer: true, fallback: true},
		{name: "stall then fallback", model: "via-stall", deadline: 3 * time.Second, mustAnswer: true, fallback: true, stream: true},
		{name: "healthy direct", model: "steady/" + rigModel, deadline: 3 * time.Second, mustAnswer: true, fallback: true},
		{name: "503 direct", model: "down/" + rigModel, deadline: 3 * time.Second, mustAnswer: true},
		{name: "reset direct", model: "resetting/" + rigModel, deadline: 3 * time.Second, mustAnswer: true},
		// The client gives up before the hanging attempt times out.
		{name: "hang, tight deadline", model: "via-hang", deadline: 150 * time.Millisecond},
	}

	// A monitor records every breaker state seen while the faults last.
	seen := map[string]map[string]bool{}
	stop := make(chan struct{})
	var mon sync.WaitGroup
	mon.Add(1)
	go func() {
		defer mon.Done()
		for {
			if states, err := r.breakerStates(); err == nil {
				for p, s := range states {
					if seen[p] == nil {
						seen[p] = map[string]bool{}
					}
					seen[p][s] = true
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()

	type record struct {
		kind chaosKind
		res  result
	}
	results := make([][]record, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds || time.Since(start) < minFault; i++ {
				k := kinds[(w+i)%len(kinds)]
				results[w] = append(results[w], record{k, r.chat(k.model, k.stream || (w+i)%3 == 0, k.deadline)})
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	// The state right after the load, before anything can recover: every
	// faulty breaker is open, or half-open waiting for its next probe.
	after, err := r.breakerStates()
	close(stop)
	mon.Wait()
	require.NoError(t, err)

	counts := map[int]int{}
	var total, answered, ok, typed, gaveUp, noExec int
	var worstOver time.Duration
	for _, rs := range results {
		for _, rec := range rs {
			k, res := rec.kind, rec.res
			total++
			if over := res.Wall - k.deadline; over > worstOver {
				worstOver = over
			}
			assert.LessOrEqual(t, res.Wall, k.deadline+slack, "%s: took %v, deadline %v", k.name, res.Wall, k.deadline)
			if res.answered() {
				answered++
				counts[res.Status]++
				if res.Code == "model_not_found" {
					noExec++
				}
				if res.Status < 300 {
					ok++
				} else {
					typed++
				}
			} else {
				gaveUp++
				if res.Err == nil && res.Status != 0 {
					t.Errorf("%s: an error answer without a typed error body: status %d, body %q", k.name, res.Status, res.Body)
				}
				assert.False(t, k.mustAnswer, "%s: no answer within %v: status %d, err %v, body %q",
					k.name, k.deadline, res.Status, res.Err, res.Body)
			}
			if k.fallback && k.mustAnswer {
				assert.Equal(t, http.StatusOK, res.Status, "%s: a healthy fallback must serve it: %q", k.name, res.Body)
			}
		}
	}
	t.Logf("chaos: %d requests in %v: %d answered (%d 2xx, %d typed errors), %d given up by the client; statuses %v; "+
		"worst wall time past a deadline %v", total, elapsed.Round(time.Millisecond), answered, ok, typed, gaveUp,
		counts, worstOver.Round(time.Millisecond))
	// A request to a single-target combo whose breaker is half-open with its
	// probe out gets 404 no_executable_targets where 503
	// all_targets_cooling_down is due: the router forgets an exclusion made
	// at admission when it screens the combo again. It is a typed error, so
	// it is counted above; the number is logged, not asserted.
	t.Logf("chaos: %d answers were 404 no_executable_targets", noExec)
	t.Logf("chaos: upstream calls: steady %d, down %d, resetting %d, hanging %d, stalling %d, slow %d",
		steady.Total(), u503.Total(), reset.Total(), hang.Total(), stall.Total(), slow.Total())
	t.Logf("chaos: breaker states seen %v; after the load %v", seen, after)

	faulty := []string{"down", "resetting", "hanging", "stalling"}
	for _, p := range faulty {
		assert.True(t, seen[p]["OPEN"], "the breaker of %s never opened: seen %v", p, seen[p])
		assert.Contains(t, []string{"OPEN", "HALF_OPEN"}, after[p], "the breaker of %s after the load", p)
	}
	for _, p := range []string{"steady", "slow"} {
		assert.False(t, seen[p]["OPEN"] || seen[p]["HALF_OPEN"], "the breaker of healthy %s opened: seen %v", p, seen[p])
	}
	// An open breaker saves upstream calls: fewer calls reached each faulty
	// provider than the requests of any one kind that routes to it first.
	perKind := total / len(kinds)
	for p, u := range map[string]*combotest.Upstream{"down": u503, "resetting": reset, "hanging": hang, "stalling": stall} {
		assert.Less(t, u.Total(), perKind, "calls that reached %s (%d requests per kind)", p, perKind)
	}

	// The faults stop. With no traffic each open breaker turns half-open
	// after its reset time; one request is then the probe that closes it,
	// and the provider serves again as the combo's first target.
	u503.Script("", combotest.OK("down is back"))
	reset.Script("", combotest.OK("resetting is back"))
	hang.Script("", combotest.OK("hanging is back"))
	stall.Handle("", func(c combotest.Call) combotest.Reply { return streamOrPlain(c, 0, "stalling ", "is back") })
	probes := map[string]string{"down": "via-down", "resetting": "via-reset", "hanging": "via-hang", "stalling": "via-stall"}
	for _, p := range faulty {
		require.Equal(t, breakerView{State: "HALF_OPEN"}, r.waitProbeSlot(p, 3*breakerReset), "the breaker of %s", p)
		res := r.chat(probes[p], p == "stalling", 3*time.Second)
		require.Equal(t, http.StatusOK, res.Status, "probe of %s: %q", p, res.Body)
		assert.Equal(t, p+"/"+rigModel, res.Target, "the probe goes to the recovered provider")
		states, err := r.breakerStates()
		require.NoError(t, err)
		assert.Equal(t, "CLOSED", states[p], "the breaker of %s after a successful probe", p)
	}
	for _, p := range faulty {
		res := r.chat(probes[p], false, 3*time.Second)
		assert.Equal(t, http.StatusOK, res.Status)
		assert.Equal(t, p+"/"+rigModel, res.Target, "%s serves its combo again", p)
	}
}
