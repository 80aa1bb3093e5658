package combo_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/queue"
	"github.com/routeguard/routeguard/watchdog"
)

// The trail's timings count from each attempt's start on the router's
// clock: the admission wait, the answer's headers, a stream's first useful
// output and, for a stream cut before it, the cause.
func TestAttemptTimings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "slow", "fast")
		f.cfg.Queue = queue.New(queue.Config{MaxConcurrency: 1, MaxQueueWait: time.Minute})
		f.cfg.Watchdog = watchdog.Config{IdleTimeout: 4 * time.Second}
		var seen []combo.Attempt
		f.cfg.OnAttempt = func(a combo.Attempt) { seen = append(seen, a) }
		f.rebuild()
		// slow answers its headers after 2 s, then one heartbeat, then hangs:
		// the idle guard cuts it 4 s later.
		f.up["slow"].Script("", combotest.Reply{Status: 200, Latency: 2 * time.Second, Stream: &combotest.Stream{
			Events: []combotest.Event{combotest.Heartbeat()}, HangAfter: true}})
		// fast answers after 1 s, with a heartbeat and then "hello" 3 s later.
		fast := combotest.SSE(3*time.Second, combotest.Heartbeat(), combotest.ChatDelta("hello"), combotest.Done())
		fast.Latency = time.Second
		f.up["fast"].Script("", fast)
		// Another request holds slow's only slot for 1.5 s.
		release, err := f.cfg.Queue.Acquire(context.Background(), "s1")
		require.NoError(t, err)
		go func() {
			time.Sleep(1500 * time.Millisecond)
			release()
		}()

		c := &combo.Combo{Name: "s", Targets: []combo.Target{target("slow", "s1", "m"), target("fast", "f1", "m")}}
		res, err := f.do(t, c)
		require.NoError(t, err)
		require.Len(t, res.Attempts, 2)
		assert.Equal(t, res.Attempts, seen, "OnAttempt sees the trail's entries")

		cut := res.Attempts[0]
		assert.Equal(t, combo.OutcomeFailed, cut.Outcome)
		assert.Equal(t, 1500*time.Millisecond, cut.QueueWait)
		assert.Equal(t, 3500*time.Millisecond, cut.FirstByte)
		assert.Zero(t, cut.FirstOutput)
		assert.Zero(t, cut.UsefulBytes)
		assert.Equal(t, watchdog.ReasonIdleTimeout, cut.Cut)
		assert.Equal(t, 7500*time.Millisecond, cut.Duration)

		ok := res.Attempts[1]
		assert.Equal(t, combo.OutcomeSucceeded, ok.Outcome)
		assert.Zero(t, ok.QueueWait)
		assert.Equal(t, time.Second, ok.FirstByte)
		assert.Equal(t, 4*time.Second, ok.FirstOutput)
		assert.Equal(t, int64(len("hello")), ok.UsefulBytes)
		assert.Empty(t, ok.Cut)
		assert.Equal(t, 4*time.Second, ok.Duration)
	})
}

// A plain answer has a first byte and no stream timings; an empty stream
// and a stream that ends in an error event name their cut.
func TestAttemptCutCauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "empty", "errev", "plain")
		f.up["empty"].Script("", combotest.SSE(0).After(time.Second))
		f.up["errev"].Script("", combotest.SSE(0, combotest.Event{Data: `{"error":{"message":"overloaded","type":"overloaded_error"}}`}))
		f.up["plain"].Script("", combotest.Reply{Status: 200, Body: `{"ok":true}`, Latency: 2 * time.Second})
		c := &combo.Combo{Name: "c", Targets: []combo.Target{
			target("empty", "e1", "m"), target("errev", "x1", "m"), target("plain", "p1", "m")}}
		res, err := f.do(t, c)
		require.NoError(t, err)
		require.Len(t, res.Attempts, 3)
		assert.Equal(t, combo.CutEmptyStream, res.Attempts[0].Cut)
		assert.Equal(t, time.Second, res.Attempts[0].FirstByte)
		assert.Equal(t, combo.CutErrorEvent, res.Attempts[1].Cut)
		plain := res.Attempts[2]
		assert.Equal(t, 2*time.Second, plain.FirstByte)
		assert.Zero(t, plain.FirstOutput)
		assert.Zero(t, plain.UsefulBytes)
		assert.Empty(t, plain.Cut)
	})
}

// OnRequest is told once per Do, with the trail, the error and Do's
// duration on the router's clock.
func TestOnRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "a", "b")
		var ends []combo.RequestEnd
		f.cfg.OnRequest = func(e combo.RequestEnd) { ends = append(ends, e) }
		f.rebuild()
		f.up["a"].Script("", combotest.Error(500, "boom").After(time.Second))
		f.up["b"].Script("", combotest.Reply{Status: 200, Body: `{}`, Latency: 2 * time.Second})
		c := &combo.Combo{Name: "smart", Targets: []combo.Target{target("a", "a1", "m"), target("b", "b1", "m")}}
		start := time.Now()
		res, err := f.do(t, c)
		require.NoError(t, err)
		require.Len(t, ends, 1)
		e := ends[0]
		assert.Equal(t, "smart", e.Combo)
		assert.NoError(t, e.Err)
		assert.Equal(t, res.Attempts, e.Attempts)
		assert.Equal(t, start, e.Start)
		assert.Equal(t, 3*time.Second, e.Duration)

		f.up["a"].Script("", combotest.Error(500, "boom"))
		_, err = f.do(t, &combo.Combo{Name: "one", Targets: []combo.Target{target("a", "a2", "m")}})
		require.Error(t, err)
		require.Len(t, ends, 2)
		assert.Equal(t, err, ends[1].Err)
		require.Len(t, ends[1].Attempts, 1)
		assert.Equal(t, "one", ends[1].Combo)
		assert.Equal(t, 500, ends[1].Attempts[0].Status)
	})
}
