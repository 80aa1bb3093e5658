package watchdog

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func chat(text string) string {
	b, _ := json.Marshal(text)
	return `data: {"choices":[{"delta":{"content":` + string(b) + `}}]}` + "\n\n"
}

const (
	ping        = "event: ping\ndata: {\"type\": \"ping\"}\n\n"
	comment     = ": keep-alive\n\n"
	usage       = "data: {\"usage\":{\"output_tokens\":99}}\n\n"
	emptyDelta  = "data: {\"choices\":[{\"delta\":{}}]}\n\n"
	toolDelta   = "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]}}]}\n\n"
	reasonSum   = "event: response.reasoning_summary_text.delta\ndata: {\"type\":\"response.reasoning_summary_text.delta\",\"delta\":\"plan\"}\n\n"
	thinking    = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}\n\n"
	respHello   = "data: {\"type\":\"response.output_text.delta\",\"delta\":\"hello\"}\n\n"
	chatDoneEvt = "data: [DONE]\n\n"
)

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

func enabled(warmup, window, rate, minBytes int64) Config {
	return Config{Throughput: true, Warmup: new(ms(warmup)), Window: ms(window), MinBytesPerSecond: rate, MinBytes: minBytes}
}

type step struct {
	ms    int64
	chunk string
	abort bool
}

func run(t *testing.T, o *Observer, steps []step) {
	t.Helper()
	for i, s := range steps {
		err := o.ObserveAt([]byte(s.chunk), at(s.ms))
		if got := err != nil; got != s.abort {
			t.Fatalf("step %d: ObserveAt(%q, t=%d) = %v, want abort %v", i, s.chunk, s.ms, err, s.abort)
		}
	}
}

// Scenario 1: a steady 14 B/s stream is never aborted.
func TestScenarioSteadyStream(t *testing.T) {
	o := NewObserver(enabled(1000, 2000, 2, 1))
	var steps []step
	for ms := int64(0); ms <= 8000; ms += 1000 {
		steps = append(steps, step{ms, chat("fourteen bytes"), false})
	}
	run(t, o, steps)
	st := o.StatsAt(at(8000))
	assert.Equal(t, int64(9*14), st.UsefulBytes)
	assert.Equal(t, int64(3*14), st.WindowBytes) // samples at 6000, 7000, 8000
	assert.InDelta(t, 21.0, st.Rate, 1e-9)
	assert.True(t, st.Ready)
}

// Scenario 2: no verdict before warm-up plus one window.
func TestScenarioWarmupPlusWindow(t *testing.T) {
	o := NewObserver(enabled(1000, 2000, 10, 1))
	run(t, o, []step{
		{0, chat("x"), false},
		{2999, ping, false},
		{3000, ping, true},
	})
	err := o.Err()
	var e *Error
	require.True(t, errors.As(err, &e))
	assert.Equal(t, CodeThroughputTooLow, e.Code)
	assert.Equal(t, ReasonThroughputTooLow, e.Reason)
	assert.Equal(t, 504, e.Status)
	assert.Equal(t, int64(0), e.WindowBytes)
	assert.Equal(t, ms(3000), e.Elapsed)
	assert.Equal(t, ms(2000), e.Limit)
	assert.ErrorIs(t, err, ErrThroughputTooLow)
	assert.NotErrorIs(t, err, ErrIdleTimeout)
	assert.False(t, e.Timeout())
	// Sticky.
	assert.Same(t, e, o.ObserveAt([]byte(chat(strings.Repeat("x", 100))), at(3001)))
}

// Scenario 3: pings, usage and empty deltas are not useful output.
func TestScenarioNoUsefulBytes(t *testing.T) {
	o := NewObserver(enabled(0, 1000, 1, 1))
	run(t, o, []step{
		{0, ping, false},
		{500, usage, false},
		{999, emptyDelta, false},
		{1000, ping, true},
	})
	st := o.StatsAt(at(1000))
	assert.Equal(t, int64(0), st.UsefulBytes)
	assert.Equal(t, int64(4), st.Events)
	assert.ErrorIs(t, st.Err, ErrThroughputTooLow)
}

// Scenario 4: tool calls and reasoning suspend judgement until text resumes.
func TestScenarioProtectedPhase(t *testing.T) {
	o := NewObserver(enabled(0, 1000, 100, 1))
	run(t, o, []step{{0, toolDelta, false}, {2000, ping, false}})
	assert.True(t, o.StatsAt(at(2000)).ProtectedPhase)
	run(t, o, []step{{2500, reasonSum, false}, {3000, thinking, false}})
	assert.True(t, o.StatsAt(at(3000)).ProtectedPhase)
	run(t, o, []step{{4000, ping, false}})
	assert.True(t, o.StatsAt(at(4000)).ProtectedPhase)
	// Text resumes: the phase ends and the rule applies again (6 B/s < 100).
	err := o.ObserveAt([]byte(chat("answer")), at(4100))
	assert.False(t, o.StatsAt(at(4100)).ProtectedPhase)
	assert.ErrorIs(t, err, ErrThroughputTooLow)
}

// Scenario 4, order inside one chunk: the last deciding event wins.
func TestProtectedPhaseOrderWithinChunk(t *testing.T) {
	o := NewObserver(enabled(0, 1000, 1, 1))
	require.NoError(t, o.ObserveAt([]byte(chat("hi")+toolDelta), at(0)))
	assert.True(t, o.StatsAt(at(0)).ProtectedPhase)
	require.NoError(t, o.ObserveAt([]byte(toolDelta+chat("hi")+ping+usage), at(10)))
	st := o.StatsAt(at(10))
	assert.False(t, st.ProtectedPhase)
	assert.Equal(t, int64(4), st.UsefulBytes)
}

// Scenario 5: a Responses API delta counts its bytes.
func TestScenarioResponsesDelta(t *testing.T) {
	o := NewObserver(enabled(0, 1000, 3, 1))
	run(t, o, []step{{0, respHello, false}, {1000, ping, false}})
	st := o.StatsAt(at(1000))
	assert.Equal(t, int64(5), st.WindowBytes)
	assert.InDelta(t, 5.0, st.Rate, 1e-9)
}

// Scenario 6: disabled never aborts and does not parse. Disabled means
// every guard off: the readiness timeout, on by default, is turned off too
// (TestReadinessTimeoutHeartbeatsOnly shows the default config on this
// stream).
func TestScenarioDisabled(t *testing.T) {
	o := NewObserver(Config{ReadinessTimeout: new(time.Duration(0))})
	for ms := int64(0); ms <= 120000; ms += 30000 {
		require.NoError(t, o.ObserveAt([]byte(ping), at(ms)))
	}
	st := o.StatsAt(at(120000))
	assert.False(t, st.Throughput)
	assert.Equal(t, int64(5), st.Chunks)
	assert.Equal(t, int64(0), st.Events)
	assert.Equal(t, at(0), st.Started)
}

// Scenario 8: a window with too few bytes to measure is not judged.
func TestScenarioNotMeasurable(t *testing.T) {
	o := NewObserver(enabled(0, 1000, 1000, 100))
	run(t, o, []step{{0, chat("hola"), false}, {1000, chat("hola"), false}})
	assert.Equal(t, int64(8), o.StatsAt(at(1000)).WindowBytes)
	// An empty window is measurable again.
	run(t, o, []step{{2500, ping, true}})
}

func TestWindowBoundaryKeepsSampleOneWindowOld(t *testing.T) {
	o := NewObserver(enabled(0, 1000, 2, 1))
	run(t, o, []step{
		{0, chat("ab"), false},
		{1000, ping, false}, // the sample at 0 is exactly one window old: kept, 2 B/s
		{1001, ping, true},  // now it is out
	})
}

func TestWindowRateUsesAtLeastOneSecond(t *testing.T) {
	// A 1.5 s window divides by 1.5.
	o := NewObserver(enabled(0, 1500, 2, 1))
	run(t, o, []step{{0, chat("abc"), false}, {1500, ping, false}})
	assert.InDelta(t, 2.0, o.StatsAt(at(1500)).Rate, 1e-9)
}

func TestSplittingVariants(t *testing.T) {
	stream := "data: {\"choices\":[{\"delta\":\r\ndata: {\"content\":\"héllo\"}}]}\r\n\r\n" + // two data lines joined with \n
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"abc\"}}\n\n" +
		": comment\r\n\r\n" +
		"id: 7\nretry: 10\ndata:{\"type\":\"response.output_text.delta\",\"delta\":\"xy\"}\n\n" +
		"data: " + `{"choices":[{"delta":{"content":"tail"}}]}` + "\n" // no blank line yet
	whole := NewObserver(enabled(0, 1000, 1, 1))
	require.NoError(t, whole.ObserveAt([]byte(stream), at(0)))
	st := whole.StatsAt(at(0))
	assert.Equal(t, int64(6+3+2), st.UsefulBytes)
	assert.Equal(t, int64(3), st.Events) // the comment block is not an event
	assert.Positive(t, st.Buffered, "the incomplete tail stays buffered")

	// Every two-way and byte-by-byte split gives the same count.
	for cut := 0; cut <= len(stream); cut++ {
		o := NewObserver(enabled(0, 1000, 1, 1))
		require.NoError(t, o.ObserveAt([]byte(stream[:cut]), at(0)))
		require.NoError(t, o.ObserveAt([]byte(stream[cut:]), at(0)))
		got := o.StatsAt(at(0))
		require.Equal(t, st.UsefulBytes, got.UsefulBytes, "cut %d", cut)
		require.Equal(t, st.Events, got.Events, "cut %d", cut)
	}
	o := NewObserver(enabled(0, 1000, 1, 1))
	for i := range len(stream) {
		require.NoError(t, o.ObserveAt([]byte{stream[i]}, at(0)))
	}
	assert.Equal(t, st.UsefulBytes, o.StatsAt(at(0)).UsefulBytes)

	// The tail counts once it is complete.
	require.NoError(t, whole.ObserveAt([]byte("\n"), at(1)))
	assert.Equal(t, int64(15), whole.StatsAt(at(1)).UsefulBytes)
	assert.Equal(t, 0, whole.StatsAt(at(1)).Buffered)
}

func TestOversizedEventIsDropped(t *testing.T) {
	cfg := enabled(0, 1000, 1, 1)
	cfg.MaxEventBytes = minMaxEventBytes
	big := chat(strings.Repeat("a", 2000))
	stream := big + chat("ok")
	for _, size := range []int{1, 7, 100, 1024, len(stream)} {
		o := NewObserver(cfg)
		for i := 0; i < len(stream); i += size {
			require.NoError(t, o.ObserveAt([]byte(stream[i:min(i+size, len(stream))]), at(0)))
			require.LessOrEqual(t, o.StatsAt(at(0)).Buffered, minMaxEventBytes)
			require.LessOrEqual(t, cap(o.carry)+cap(o.data), 2*minMaxEventBytes)
		}
		st := o.StatsAt(at(0))
		assert.Equal(t, int64(2), st.UsefulBytes, "chunk size %d", size)
		assert.Equal(t, int64(1), st.Events, "chunk size %d", size)
	}
	// An endless line without a newline never grows the buffer past the limit.
	o := NewObserver(cfg)
	chunk := []byte(strings.Repeat("x", 500))
	for range 100 {
		require.NoError(t, o.ObserveAt(chunk, at(0)))
	}
	assert.LessOrEqual(t, cap(o.carry), minMaxEventBytes)
	require.NoError(t, o.ObserveAt([]byte("\n\n"+chat("ok")), at(0)))
	assert.Equal(t, int64(2), o.StatsAt(at(0)).UsefulBytes)
}

func TestTimeGoingBackwards(t *testing.T) {
	o := NewObserver(enabled(0, 1000, 1, 1))
	run(t, o, []step{
		{5000, chat("a"), false},
		{1000, ping, false}, // treated as t=5000
		{5999, ping, false},
	})
	st := o.StatsAt(at(0))
	assert.Equal(t, at(5000), st.Started)
	assert.Equal(t, at(5999), st.LastChunk)
	run(t, o, []step{{6001, ping, true}})
}

func TestIdleTimeoutExplicitTime(t *testing.T) {
	o := NewObserver(Config{IdleTimeout: 10 * time.Second})
	o.StartAt(at(0))
	due, ok := o.DueAt(at(0))
	require.True(t, ok)
	assert.Equal(t, at(10000), due)
	assert.NoError(t, o.CheckAt(at(9999)))
	require.NoError(t, o.ObserveAt([]byte(ping), at(9999))) // any chunk resets the idle timer
	due, _ = o.DueAt(at(9999))
	assert.Equal(t, at(19999), due)
	assert.NoError(t, o.CheckAt(at(19998)))
	err := o.CheckAt(at(19999))
	var e *Error
	require.True(t, errors.As(err, &e))
	assert.Equal(t, CodeIdleTimeout, e.Code)
	assert.Equal(t, ReasonIdleTimeout, e.Reason)
	assert.Equal(t, 10*time.Second, e.Limit)
	assert.Equal(t, ms(19999), e.Elapsed)
	assert.True(t, e.Timeout())
	assert.ErrorIs(t, err, ErrIdleTimeout)
	_, ok = o.DueAt(at(19999))
	assert.False(t, ok)
	assert.Same(t, e, o.ObserveAt([]byte(ping), at(20000)))
}

func TestIdleTimeoutJudgedBeforeLateChunk(t *testing.T) {
	o := NewObserver(Config{IdleTimeout: time.Second})
	require.NoError(t, o.ObserveAt([]byte(chat("a")), at(0)))
	assert.ErrorIs(t, o.ObserveAt([]byte(chat("b")), at(1000)), ErrIdleTimeout)
}

func TestAttemptDeadlineExplicitTime(t *testing.T) {
	o := NewObserver(Config{AttemptDeadline: 5 * time.Second, IdleTimeout: 3 * time.Second})
	o.StartAt(at(0))
	o.StartAt(at(1000)) // only the first start counts
	for ms := int64(1000); ms < 5000; ms += 1000 {
		require.NoError(t, o.ObserveAt([]byte(chat("steady")), at(ms)))
	}
	due, ok := o.DueAt(at(4000))
	require.True(t, ok)
	assert.Equal(t, at(5000), due) // deadline earlier than idle (7000)
	err := o.ObserveAt([]byte(chat("late")), at(5000))
	var e *Error
	require.True(t, errors.As(err, &e))
	assert.Equal(t, CodeAttemptDeadline, e.Code)
	assert.Equal(t, ReasonAttemptDeadline, e.Reason)
	assert.ErrorIs(t, err, ErrAttemptDeadline)
	assert.True(t, e.Timeout())
	assert.Contains(t, e.Error(), "5s")
}

func TestCheckBeforeStartIsNoop(t *testing.T) {
	o := NewObserver(Config{IdleTimeout: time.Second, AttemptDeadline: time.Second})
	assert.NoError(t, o.CheckAt(at(100000)))
	_, ok := o.DueAt(at(100000))
	assert.False(t, ok)
}

func TestZeroObserver(t *testing.T) {
	var o Observer
	require.NoError(t, o.ObserveAt([]byte(ping), at(0)))
	assert.Equal(t, Config{}.Normalize(), o.Config())
	assert.NoError(t, o.Err())
	_, ok := o.ErrorEvent()
	assert.False(t, ok)
}

func TestSampleRingMergesOldest(t *testing.T) {
	o := NewObserver(enabled(0, 10000, 1, 1))
	for i := range int64(3 * maxSamples) {
		require.NoError(t, o.ObserveAt([]byte(chat("ab")), at(i)))
	}
	st := o.StatsAt(at(3*maxSamples - 1))
	assert.Equal(t, int64(2*3*maxSamples), st.WindowBytes)
	assert.Equal(t, maxSamples, o.n)
	assert.Equal(t, st.WindowBytes, o.windowBytes)
}

func TestObserverErrorEvent(t *testing.T) {
	o := NewObserver(enabled(0, 1000, 1, 1))
	require.NoError(t, o.ObserveAt([]byte(chat("a")+"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"), at(0)))
	ev, ok := o.ErrorEvent()
	require.True(t, ok)
	assert.Equal(t, "error", ev.Event)
	assert.Equal(t, "overloaded_error", ev.Type)
	assert.Equal(t, "Overloaded", ev.Message)
}

func TestObserverConcurrentUse(t *testing.T) {
	o := NewObserver(Config{Throughput: true, IdleTimeout: time.Minute})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				now := at(int64(g*1000 + i))
				switch i % 4 {
				case 0:
					_ = o.ObserveAt([]byte(chat("abc")), now)
				case 1:
					_ = o.CheckAt(now)
				case 2:
					_ = o.StatsAt(now)
				default:
					_, _ = o.DueAt(now)
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(4*125*3), o.StatsAt(at(5000)).UsefulBytes)
}

// A reasoning phase that never emits text is never judged by the throughput
// rule; the attempt deadline covers it.
func TestReasoningPhaseNeedsTheDeadline(t *testing.T) {
	cfg := enabled(0, 1000, 10, 1)
	cfg.AttemptDeadline = time.Minute
	o := NewObserver(cfg)
	for ms := int64(0); ms < 60000; ms += 1000 {
		require.NoError(t, o.ObserveAt([]byte(thinking), at(ms)), "t=%d", ms)
	}
	assert.True(t, o.StatsAt(at(59000)).ProtectedPhase)
	assert.ErrorIs(t, o.ObserveAt([]byte(thinking), at(60000)), ErrAttemptDeadline)
}

// StopParsing ends event parsing unless the throughput rule needs it.
func TestObserverStopParsing(t *testing.T) {
	held := NewObserver(Config{HoldHeartbeats: true})
	require.NoError(t, held.ObserveAt([]byte(chat("Hello")), at(0)))
	held.StopParsing()
	require.NoError(t, held.ObserveAt([]byte(chat(" world")+"event: error\ndata: {\"type\":\"error\"}\n\n"), at(10)))
	s := held.Stats()
	assert.Equal(t, int64(5), s.UsefulBytes, "counting stopped after the first delta")
	assert.Equal(t, int64(2), s.Chunks, "chunks are still counted")
	_, ok := held.ErrorEvent()
	assert.False(t, ok, "no event parsing after StopParsing")

	judged := NewObserver(enabled(0, 1000, 1, 1))
	require.NoError(t, judged.ObserveAt([]byte(chat("Hello")), at(0)))
	judged.StopParsing()
	require.NoError(t, judged.ObserveAt([]byte(chat(" world")), at(10)))
	assert.Equal(t, int64(11), judged.Stats().UsefulBytes, "the throughput rule keeps parsing on")
}
