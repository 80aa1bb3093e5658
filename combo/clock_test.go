package combo_test

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/watchdog"
)

// skewedClock is a router clock a day ahead of the wall clock that the test
// can move on without any time passing.
type skewedClock struct{ jump atomic.Int64 }

func (c *skewedClock) now() time.Time {
	return time.Now().Add(24*time.Hour + time.Duration(c.jump.Load()))
}

func (c *skewedClock) advance(d time.Duration) { c.jump.Add(int64(d)) }

// One clock drives every layer: a router built with Config.Now cuts idle
// and overdue streams, recovers breakers and ends cooldowns on that clock,
// not on the wall clock.
func TestOneClockForEveryLayer(t *testing.T) {
	t.Run("idle cut", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFleet(t, "slow", "fast")
			clock := &skewedClock{}
			f.cfg.Now = clock.now
			f.cfg.Watchdog = watchdog.Config{IdleTimeout: 5 * time.Second}
			f.rebuild()
			f.up["slow"].Script("", combotest.Reply{Status: 200, Stream: &combotest.Stream{
				Events: []combotest.Event{combotest.Heartbeat()}, HangAfter: true}})
			f.up["fast"].Script("", combotest.TextStream(0, "hi"))
			c := &combo.Combo{Name: "s", Targets: []combo.Target{target("slow", "s1", "m"), target("fast", "f1", "m")}}

			start := time.Now()
			res, err := f.do(t, c)
			require.NoError(t, err)
			assert.Equal(t, "fast", res.Target.Provider)
			assert.Equal(t, 5*time.Second, time.Since(start), "cut after the idle timeout, measured on the router's clock")
			assert.Equal(t, combo.OutcomeFailed, res.Attempts[0].Outcome)
		})
	})
	t.Run("deadline cut", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFleet(t, "slow", "fast")
			clock := &skewedClock{}
			f.cfg.Now = clock.now
			f.cfg.Watchdog = watchdog.Config{AttemptDeadline: 7 * time.Second}
			f.rebuild()
			beats := make([]combotest.Event, 100)
			for i := range beats {
				beats[i] = combotest.Heartbeat()
			}
			f.up["slow"].Script("", combotest.Reply{Status: 200, Stream: &combotest.Stream{
				Events: beats, Pace: time.Second, HangAfter: true}})
			f.up["fast"].Script("", combotest.TextStream(0, "hi"))
			c := &combo.Combo{Name: "s", Targets: []combo.Target{target("slow", "s1", "m"), target("fast", "f1", "m")}}

			start := time.Now()
			res, err := f.do(t, c)
			require.NoError(t, err)
			assert.Equal(t, "fast", res.Target.Provider)
			assert.Equal(t, 7*time.Second, time.Since(start), "cut at the attempt deadline, measured on the router's clock")
		})
	})
	t.Run("breaker recovery", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := breakerOnly(t, "openai", breaker.Profile{OpenAt: 1, Reset: time.Minute})
			clock := &skewedClock{}
			f.cfg.Now = clock.now
			f.rebuild()
			f.up["openai"].Script("", combotest.Error(503, "unavailable"), combotest.OK("back"))
			c := &combo.Combo{Name: "solo", Targets: []combo.Target{target("openai", "k1", "m")}}

			_, err := f.do(t, c)
			require.ErrorIs(t, err, combo.ErrUpstream)
			clock.advance(time.Minute - time.Millisecond)
			_, err = f.do(t, c)
			require.ErrorIs(t, err, combo.ErrAllCoolingDown, "still open 1 ms before the open time ends on the router's clock")
			assert.Equal(t, 1, f.up["openai"].Total(), "an open breaker costs no upstream call")

			clock.advance(time.Millisecond)
			res, err := f.do(t, c)
			require.NoError(t, err, "half-open exactly when the open time ends on the router's clock")
			assert.Equal(t, "openai", res.Target.Provider)
			s, _ := f.cfg.Breakers.StateAt("openai", clock.now())
			assert.Equal(t, breaker.Closed, s, "the successful probe closes the breaker")
		})
	})
	t.Run("cooldown expiry", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFleet(t, "openai")
			clock := &skewedClock{}
			f.cfg.Now = clock.now
			f.cfg.Breakers = nil
			f.rebuild()
			f.up["openai"].Script("k1", combotest.RateLimited(30*time.Second), combotest.OK("k1 again"))
			f.up["openai"].Script("k2", combotest.OK("k2"))
			c := &combo.Combo{Name: "keys", Targets: []combo.Target{target("openai", "k1", "m"), target("openai", "k2", "m")}}

			res, err := f.do(t, c)
			require.NoError(t, err)
			assert.Equal(t, "k2", res.Target.Connection, "k1 answered 429 and cooled")
			clock.advance(30*time.Second - time.Millisecond)
			res, err = f.do(t, c)
			require.NoError(t, err)
			assert.Equal(t, "k2", res.Target.Connection, "k1 still cooling 1 ms before its Retry-After ends")
			clock.advance(time.Millisecond)
			assert.Equal(t, cooldown.Available, f.cfg.Cooldowns.StatusAt("k1", clock.now()).State,
				"the cooldown ends at its Retry-After on the router's clock")
			// The model lock that came with the 429 holds through its end
			// instant (spec lockout.md); one more millisecond ends it too.
			clock.advance(time.Millisecond)
			res, err = f.do(t, c)
			require.NoError(t, err)
			assert.Equal(t, "k1", res.Target.Connection, "k1 serves again when its cooldown ends on the router's clock")
			assert.Equal(t, 2, f.up["openai"].Count("k1"))
		})
	})
}
