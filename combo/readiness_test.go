package combo_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/watchdog"
)

// The stream-readiness timeout (spec watchdog.md): a stream that produces
// no event but heartbeats within the target's readiness timeout fails with
// 504 STREAM_READINESS_TIMEOUT before commit, and the request is served by
// the next target.
func TestStreamReadinessTimeoutMovesOnBeforeCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "slow", "fast")
		f.up["slow"].Script("", combotest.Reply{Status: 200, Stream: &combotest.Stream{
			Events: []combotest.Event{combotest.Heartbeat(), combotest.Heartbeat(), combotest.Heartbeat(), combotest.Heartbeat()},
			Pace:   time.Second, HangAfter: true}})
		f.up["fast"].Script("", combotest.TextStream(0, "hi"))
		slow := target("slow", "s1", "m")
		slow.ReadinessTimeout = new(2500 * time.Millisecond)
		c := &combo.Combo{Name: "s", Targets: []combo.Target{slow, target("fast", "f1", "m")}}

		start := time.Now()
		res, err := f.do(t, c)
		require.NoError(t, err)
		assert.Equal(t, "fast", res.Target.Provider)
		assert.Equal(t, 2500*time.Millisecond, time.Since(start), "cut at the target's readiness timeout")
		require.Len(t, res.Attempts, 2)
		assert.Equal(t, combo.OutcomeFailed, res.Attempts[0].Outcome)
		assert.Equal(t, 504, res.Attempts[0].Status)
		assert.ErrorIs(t, res.Attempts[0].Err, watchdog.ErrReadinessTimeout)
	})
}

// A target's ReadinessTimeout of 0 turns the check off for that target: a
// stream of heartbeats is then cut only by the other guards.
func TestStreamReadinessTimeoutZeroTurnsItOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "slow")
		beats := make([]combotest.Event, 200)
		for i := range beats {
			beats[i] = combotest.Heartbeat()
		}
		beats = append(beats, combotest.ChatDelta("late"))
		f.up["slow"].Script("", combotest.Reply{Status: 200, Stream: &combotest.Stream{Events: beats, Pace: time.Second}})
		slow := target("slow", "s1", "m")
		slow.ReadinessTimeout = new(time.Duration(0))
		c := &combo.Combo{Name: "s", Settings: combo.Settings{TargetTimeout: time.Hour}, Targets: []combo.Target{slow}}

		start := time.Now()
		res, err := f.do(t, c)
		require.NoError(t, err)
		assert.Equal(t, "slow", res.Target.Provider)
		assert.Equal(t, 200*time.Second, time.Since(start), "committed at its first text, past the 120 s default readiness timeout")
	})
}
