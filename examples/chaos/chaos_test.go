package main

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRouteguardBeatsDirect(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a half-length demo in real time (about 12 s)")
	}
	out := &liveWriter{}
	start := time.Now()
	direct, routed := run(out, options{perPhase: 5, phase: 800 * time.Millisecond, clientTimeout: 3 * time.Second}) // 3 s: room for a loaded -race run
	elapsed := time.Since(start)
	log := out.String()
	t.Log("\n" + log)

	// The half-length run stays well inside the minute the full demo has,
	// and the timeline is printed as it happens, not at the end.
	assert.Less(t, elapsed, 45*time.Second)
	live, ok := out.firstAt("── phase 2")
	if assert.True(t, ok, "the routed run prints its phases") {
		assert.Greater(t, elapsed-live.Sub(start), 2*time.Second, "phase 2 printed %v before the end", elapsed-live.Sub(start))
	}
	for _, row := range []string{"requests", "succeeded", "failed", "upstream calls wasted", "p50 latency", "p99 latency"} {
		assert.Regexp(t, `(?m)^`+row+` +\d`, log)
	}

	assert.Equal(t, 30, direct.requests)
	assert.Equal(t, 30, routed.requests)
	assert.Equal(t, 30, routed.succeeded, "routeguard answers every request")
	assert.Less(t, direct.succeeded, routed.succeeded)
	assert.Less(t, routed.wasted(), direct.wasted())

	for _, want := range []string{
		"breaker openai: degraded → open",                     // outage: breaker
		"key k1 cooled for 1s (server_error)",                 // outage: key cooldown
		"agentrouter/r1/claude answered 403, restated to 429", // quota misstated as 403
		"model claude locked on r1",                           // … locks the model
		"served by anthropic/c1/claude",                       // traffic moves away
		"model gpt-x locked on k1 for 2m0s (not_found)",       // retired model
		"served by openai/k1/gpt-y",                           // another model on the same key
		"key k1 cooled for 2s (rate_limit_exceeded)",          // 429 with Retry-After
		"served by openai/k2/gpt-x",                           // the sibling key serves
		"stream from slow cut after",                          // watchdog
		"STREAM_THROUGHPUT_TOO_LOW",
		"retried on fast: served",
	} {
		assert.Contains(t, log, want)
	}
	assert.NotContains(t, log, "FAILED")
}

// liveWriter records when each write arrived.
type liveWriter struct {
	mu     sync.Mutex
	buf    strings.Builder
	writes []write
}

type write struct {
	at   time.Time
	text string
}

func (w *liveWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, write{at: time.Now(), text: string(p)})
	return w.buf.Write(p)
}

func (w *liveWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// firstAt returns when the first write containing s arrived.
func (w *liveWriter) firstAt(s string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, wr := range w.writes {
		if strings.Contains(wr.text, s) {
			return wr.at, true
		}
	}
	return time.Time{}, false
}

func TestPercentile(t *testing.T) {
	var s tally
	assert.Equal(t, time.Duration(0), s.percentile(50))
	for i := 100; i >= 1; i-- {
		s.add(true, time.Duration(i)*time.Millisecond)
	}
	assert.Equal(t, 50*time.Millisecond, s.percentile(50))
	assert.Equal(t, 99*time.Millisecond, s.percentile(99))
	assert.Equal(t, 100*time.Millisecond, s.percentile(100))
}

func TestRequestsFollowPhases(t *testing.T) {
	rs := requests(3)
	assert.Len(t, rs, 3*numPhases)
	assert.Equal(t, request{n: 5, phase: 1, stream: true}, rs[4])
	assert.Equal(t, phaseStall, rs[len(rs)-1].phase)
}
