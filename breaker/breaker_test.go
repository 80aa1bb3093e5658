package breaker

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// oauth is the profile of the acceptance scenarios: degraded at 5, opens at
// 8, reset 60 s, multiplier 8, escalation 2.
var oauth = defaultProfile(OAuth)

// report asks b and reports o, failing the test if b refuses.
func report(t *testing.T, b *Breaker, o Outcome) {
	t.Helper()
	done, err := b.Allow()
	require.NoError(t, err)
	done(o)
}

func reportN(t *testing.T, b *Breaker, o Outcome, n int) {
	t.Helper()
	for range n {
		report(t, b, o)
	}
}

func requireState(t *testing.T, b *Breaker, want State, wantWait time.Duration) {
	t.Helper()
	got, wait := b.State()
	require.Equal(t, want, got, "state")
	require.Equal(t, wantWait, wait, "wait")
}

// Spec M1.3 #1: four failures leave it closed, the fifth degrades it.
func TestScenarioDegradedAtFive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("p", oauth, nil)
		reportN(t, b, Failure, 4)
		requireState(t, b, Closed, 0)
		assert.Equal(t, 4, b.Status().Failures)
		report(t, b, Failure)
		requireState(t, b, Degraded, 0)
		assert.True(t, Degraded.admits())
		_, err := b.Allow()
		assert.NoError(t, err)
	})
}

// Spec M1.3 #2: a success in DEGRADED lowers the count by one and closes.
func TestScenarioSuccessLeavesDegraded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("p", oauth, nil)
		reportN(t, b, Failure, 5)
		requireState(t, b, Degraded, 0)
		report(t, b, Success)
		requireState(t, b, Closed, 0)
		assert.Equal(t, 4, b.Status().Failures)
		reportN(t, b, Success, 10)
		assert.Equal(t, 0, b.Status().Failures, "the count never goes below zero")

		// Entered above the level: the success that comes back to the
		// level closes it.
		reportN(t, b, Failure, 6)
		requireState(t, b, Degraded, 0)
		report(t, b, Success)
		requireState(t, b, Closed, 0)
		assert.Equal(t, 5, b.Status().Failures)
	})
}

// A success in DEGRADED subtracts one, and DEGRADED becomes CLOSED when the
// new count is at or below the degraded level. The state is kept: the
// failure that reaches the level enters DEGRADED, the success that comes
// back to it leaves; the hook, the status and Export/Restore agree.
func TestSuccessInDegradedAtLevelCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []string
		b := New("p", oauth, func(c Event) { got = append(got, c.From.String()+"→"+c.To.String()) })
		reportN(t, b, Failure, 6)
		requireState(t, b, Degraded, 0)
		report(t, b, Success) // 6 → 5: at the level
		requireState(t, b, Closed, 0)
		st := b.Status()
		assert.Equal(t, Closed, st.State)
		assert.Equal(t, 5, st.Failures)
		rec := b.Export()
		assert.Equal(t, Closed, rec.State)
		assert.Equal(t, 5, rec.Failures)

		report(t, b, Failure) // 5 → 6: the failure that reaches the level again
		requireState(t, b, Degraded, 0)
		report(t, b, Success)
		requireState(t, b, Closed, 0)
		report(t, b, Success) // 5 → 4 while closed
		requireState(t, b, Closed, 0)
		report(t, b, Failure) // 4 → 5: reaching the level from below degrades
		requireState(t, b, Degraded, 0)
		assert.Equal(t, Degraded, b.Export().State)
		assert.Equal(t, []string{"closed→degraded", "degraded→closed", "closed→degraded",
			"degraded→closed", "closed→degraded"}, got)

		// Restore keeps the state at the level: a Closed record at 5 is
		// closed, a Degraded one degraded; away from the level the count
		// decides.
		for _, tc := range []struct {
			r    Record
			want State
		}{
			{Record{State: Closed, Failures: 5}, Closed},
			{Record{State: Degraded, Failures: 5}, Degraded},
			{Record{State: Closed, Failures: 6}, Degraded},
			{Record{State: Degraded, Failures: 4}, Closed},
		} {
			require.NoError(t, b.Restore(tc.r))
			requireState(t, b, tc.want, 0)
			again := b.Export()
			assert.Equal(t, tc.want, again.State, "%+v", tc.r)
			require.NoError(t, b.Restore(again))
			assert.Equal(t, again, b.Export(), "%+v round trip", tc.r)
		}
		require.NoError(t, b.Restore(Record{State: Closed, Failures: 5}))
		report(t, b, Failure)
		requireState(t, b, Degraded, 0)
		report(t, b, Success)
		requireState(t, b, Closed, 0)
	})
}

// With a counting window, failures that expire bring a degraded breaker
// back to its level, and it closes there too.
func TestDegradedWindowExpiryAtLevelCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := oauth
		p.Window = 10 * time.Minute
		b := New("p", p, nil)
		report(t, b, Failure)
		time.Sleep(time.Minute)
		reportN(t, b, Failure, 5)
		requireState(t, b, Degraded, 0)
		time.Sleep(9 * time.Minute) // the first failure expires: 6 → 5
		requireState(t, b, Closed, 0)
		assert.Equal(t, 5, b.Status().Failures)
	})
}

// Spec M1.3 #3: the 8th failure opens; 10 s later the wait is 50 s and the
// refusal carries code, status and Retry-After.
func TestScenarioOpensAtEight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("openai", oauth, nil)
		reportN(t, b, Failure, 7)
		requireState(t, b, Degraded, 0)
		report(t, b, Failure)
		requireState(t, b, Open, 60*time.Second)
		time.Sleep(10 * time.Second)
		requireState(t, b, Open, 50*time.Second)

		done, err := b.Allow()
		require.Nil(t, done)
		require.ErrorIs(t, err, ErrOpen)
		var oe *Error
		require.ErrorAs(t, err, &oe)
		assert.Equal(t, "openai", oe.Provider)
		assert.Equal(t, Open, oe.State)
		assert.Equal(t, 50*time.Second, oe.RetryAfter)
		assert.Equal(t, 503, oe.Status)
		assert.Equal(t, "provider_circuit_open", oe.Code)
		assert.Equal(t, CodeOpen, oe.Code)
		assert.Equal(t, KindNone, oe.Kind)
		// The gate's HTTP answer (503, Retry-After 50, the breaker header
		// and the error envelope) is rendered by combo/admin; see
		// TestBreakerOpenScenarioOpensAtEight there.
	})
}

// Spec M1.3 #4: lazy recovery exactly at the reset time.
func TestScenarioLazyHalfOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("p", oauth, nil)
		reportN(t, b, Failure, 8)
		time.Sleep(60*time.Second - time.Millisecond)
		requireState(t, b, Open, time.Millisecond)
		time.Sleep(time.Millisecond)
		requireState(t, b, HalfOpen, 0)
	})
}

// Spec M1.3 #5: one probe at a time.
func TestScenarioSingleProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("p", oauth, nil)
		reportN(t, b, Failure, 8)
		time.Sleep(60 * time.Second)
		probe, err := b.Allow()
		require.NoError(t, err)
		require.NotNil(t, probe)
		time.Sleep(time.Second)
		_, err = b.Allow()
		var oe *Error
		require.ErrorAs(t, err, &oe)
		assert.Equal(t, HalfOpen, oe.State)
		assert.Equal(t, 59*time.Second, oe.RetryAfter, "until the probe slot is re-issued")
		requireState(t, b, HalfOpen, 59*time.Second)
		assert.True(t, b.Status().ProbeInFlight)
		probe(Success)
		requireState(t, b, Closed, 0)
	})
}

// Spec M1.3 #6: a probe's success closes and clears; its failure reopens
// with one cycle, for another full reset time.
func TestScenarioProbeResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("p", oauth, nil)
		reportN(t, b, Failure, 8)
		time.Sleep(60 * time.Second)
		report(t, b, Success)
		st := b.Status()
		assert.Equal(t, Closed, st.State)
		assert.Equal(t, 0, st.Failures)
		assert.Equal(t, 0, st.OpenCycles)

		reportN(t, b, Failure, 8)
		time.Sleep(60 * time.Second)
		report(t, b, Failure)
		st = b.Status()
		assert.Equal(t, Open, st.State)
		assert.Equal(t, 1, st.OpenCycles)
		assert.Equal(t, 60*time.Second, st.RetryAfter)
		time.Sleep(60*time.Second - time.Nanosecond)
		requireState(t, b, Open, time.Nanosecond)
		time.Sleep(time.Nanosecond)
		requireState(t, b, HalfOpen, 0)
	})
}

// Spec M1.3 #7: open time by failed-probe cycle, for oauth and apikey.
func TestScenarioEscalation(t *testing.T) {
	cases := []struct {
		name string
		p    Profile
		want []time.Duration // open time after cycles 1, 2, …
	}{
		{"oauth", oauth, []time.Duration{60, 60, 120, 240, 480, 480}},
		{"apikey", defaultProfile(APIKey), []time.Duration{30, 30, 30, 60, 120, 120}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i, w := range tc.want {
				assert.Equal(t, w*time.Second, tc.p.openDuration(i+1), "OpenDuration(%d)", i+1)
			}
			synctest.Test(t, func(t *testing.T) {
				b := New("p", tc.p, nil)
				reportN(t, b, Failure, tc.p.OpenAt)
				time.Sleep(tc.p.Reset)
				for i, w := range tc.want {
					report(t, b, Failure) // the probe fails
					want := w * time.Second
					requireState(t, b, Open, want)
					assert.Equal(t, i+1, b.Status().OpenCycles)
					time.Sleep(want - time.Millisecond)
					requireState(t, b, Open, time.Millisecond)
					time.Sleep(time.Millisecond)
					requireState(t, b, HalfOpen, 0)
				}
				report(t, b, Success)
				st := b.Status()
				assert.Equal(t, Closed, st.State)
				assert.Equal(t, 0, st.OpenCycles)
			})
		})
	}
}

// Spec M1.3 #8, as decided in D2: a success admitted before the trip does
// not close the breaker, and a failure admitted before it does not restart
// the open timer.
func TestScenarioOlderGenerationIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("p", oauth, nil)
		lateSuccess, err := b.Allow()
		require.NoError(t, err)
		lateFailure, err := b.Allow()
		require.NoError(t, err)
		reportN(t, b, Failure, 8)
		time.Sleep(10 * time.Second)
		lateSuccess(Success)
		requireState(t, b, Open, 50*time.Second)
		lateFailure(Failure)
		requireState(t, b, Open, 50*time.Second)
		assert.Equal(t, 8, b.Status().Failures)
	})
}

// Spec M1.3 #10 on a breaker: 503 counts, 200 succeeds, the rest is ignored.
func TestScenarioTripStatusesOnBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("p", oauth, nil)
		report(t, b, Classify(503, nil, nil))
		assert.Equal(t, 1, b.Status().Failures)
		for _, o := range []Outcome{
			Classify(429, nil, nil),
			Classify(502, []byte(`{"error":{"type":"overloaded_error","message":"Overloaded"}}`), nil),
			Classify(529, nil, nil),
			Classify(502, []byte(`{"error":{"code":"proxy_unreachable"}}`), nil),
		} {
			report(t, b, o)
		}
		assert.Equal(t, 1, b.Status().Failures)
		report(t, b, Classify(200, nil, nil))
		assert.Equal(t, 0, b.Status().Failures)
	})
}

// Spec M1.3 #12, as decided in D2: local degrades at openAt−1.
func TestScenarioLocalProfile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := Config{}.Normalize().Local
		assert.Equal(t, Profile{DegradedAt: 1, OpenAt: 2, Reset: 15 * time.Second, MaxMultiplier: 16, EscalationCount: 3}, p)
		b := New("ollama", p, nil)
		report(t, b, Failure)
		requireState(t, b, Degraded, 0)
		report(t, b, Failure)
		requireState(t, b, Open, 15*time.Second)
	})
}

// Spec M1.3 #15: a local error neither counts nor is swallowed.
func TestScenarioLocalErrorIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("p", oauth, nil)
		report(t, b, Failure)
		errClosed := errors.New("Controller is already closed")
		report(t, b, Classify(0, nil, errClosed))
		assert.Equal(t, 1, b.Status().Failures)
	})
}

// A probe that never reports (#13836) is re-issued after the reset time; its
// late result is then ignored.
func TestLostProbeReissued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("p", oauth, nil)
		reportN(t, b, Failure, 8)
		time.Sleep(60 * time.Second)
		lost, err := b.Allow()
		require.NoError(t, err)
		time.Sleep(60*time.Second - time.Millisecond)
		_, err = b.Allow()
		require.ErrorIs(t, err, ErrOpen)
		time.Sleep(time.Millisecond)
		requireState(t, b, HalfOpen, 0)
		probe, err := b.Allow()
		require.NoError(t, err)
		lost(Failure) // late: ignored
		requireState(t, b, HalfOpen, 60*time.Second)
		probe(Success)
		requireState(t, b, Closed, 0)
	})
}

// An ignored probe frees the slot at once: it says nothing about the
// provider, and the next request may probe.
func TestIgnoredProbeFreesSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("p", oauth, nil)
		reportN(t, b, Failure, 8)
		time.Sleep(60 * time.Second)
		report(t, b, Ignored)
		requireState(t, b, HalfOpen, 0)
		report(t, b, Success)
		requireState(t, b, Closed, 0)
	})
}

// Combo success closes a half-open breaker (#9207) and an open breaker with
// zero failures recovers (#930): a reset breaker is closed.
func TestResetClosesAndIgnoresOlder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("p", oauth, nil)
		early, err := b.Allow()
		require.NoError(t, err)
		reportN(t, b, Failure, 8)
		b.Reset()
		st := b.Status()
		assert.Equal(t, Record{Provider: "p", State: Closed}, st)
		early(Failure)
		assert.Equal(t, 0, b.Status().Failures)
	})
}

func TestCountingWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := oauth
		p.Window = 10 * time.Minute
		b := New("p", p, nil)
		reportN(t, b, Failure, 5)
		requireState(t, b, Degraded, 0)
		time.Sleep(5 * time.Minute)
		reportN(t, b, Failure, 2)
		assert.Equal(t, 7, b.Status().Failures)
		time.Sleep(5*time.Minute - time.Nanosecond)
		assert.Equal(t, 7, b.Status().Failures)
		time.Sleep(time.Nanosecond) // the first five are exactly one window old
		assert.Equal(t, 2, b.Status().Failures)
		requireState(t, b, Closed, 0)
		report(t, b, Success)
		assert.Equal(t, 1, b.Status().Failures)
		reportN(t, b, Failure, 7)
		requireState(t, b, Open, 60*time.Second)
	})
}

func TestWithoutWindowFailuresNeverExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("p", oauth, nil)
		for range 7 {
			report(t, b, Failure)
			time.Sleep(24 * time.Hour)
		}
		requireState(t, b, Degraded, 0)
		report(t, b, Failure)
		requireState(t, b, Open, time.Minute)
	})
}

func TestHookSeesEveryChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var got []string
		var b *Breaker
		b = New("p", defaultProfile(Local), func(c Event) {
			// The hook may call back into the breaker: no lock is held.
			b.State()
			mu.Lock()
			got = append(got, c.From.String()+"→"+c.To.String())
			mu.Unlock()
		})
		reportN(t, b, Failure, 2)
		time.Sleep(15 * time.Second)
		report(t, b, Failure)
		time.Sleep(15 * time.Second)
		report(t, b, Success)
		reportN(t, b, Failure, 1)
		b.Reset()
		assert.Equal(t, []string{
			"closed→degraded", "degraded→open", "open→half-open", "half-open→open",
			"open→half-open", "half-open→closed", "closed→degraded", "degraded→closed",
		}, got)
	})
}

// A clock step backwards keeps every wait within its period. The breaker
// reads the wall clock, so the period arithmetic is checked directly.
func TestUntilClampsBackwardsClock(t *testing.T) {
	b := New("p", oauth, nil)
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	assert.Equal(t, time.Minute, b.untilLocked(start, time.Minute, start.Add(-time.Hour)))
	assert.Equal(t, time.Duration(0), b.untilLocked(start, time.Minute, start.Add(time.Hour)))
	assert.Equal(t, 30*time.Second, b.untilLocked(start, time.Minute, start.Add(30*time.Second)))
}

func TestStateCheckDoesNotAllocate(t *testing.T) {
	b := New("p", oauth, nil)
	allocs := testing.AllocsPerRun(1000, func() { b.State() })
	assert.Zero(t, allocs)
	report(t, b, Failure)
	allocs = testing.AllocsPerRun(1000, func() {
		done, _ := b.Allow()
		done(Success)
	})
	assert.LessOrEqual(t, allocs, 1.0)
}

// Hammer: many goroutines each report a failure then a success; the count
// never reaches the threshold, so every request is admitted and the count
// ends at zero.
func TestHammerClosed(t *testing.T) {
	const workers, rounds = 8, 2000
	b := New("p", Profile{OpenAt: 100, DegradedAt: 50}, nil)
	var wg sync.WaitGroup
	counts := make([]int, workers)
	for w := range workers {
		wg.Go(func() {
			for range rounds {
				for _, o := range []Outcome{Failure, Success, Ignored} {
					done, err := b.Allow()
					if err != nil {
						t.Error(err)
						return
					}
					counts[w]++
					done(o)
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for _, c := range counts {
		total += c
	}
	assert.Equal(t, workers*rounds*3, total)
	st := b.Status()
	assert.Equal(t, Closed, st.State)
	assert.Equal(t, 0, st.Failures)
}

// Hammer: concurrent askers of a half-open breaker get exactly one probe.
func TestHammerOneProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("p", oauth, nil)
		reportN(t, b, Failure, 8)
		time.Sleep(time.Minute)
		const workers = 64
		var wg sync.WaitGroup
		var mu sync.Mutex
		probes, refused := 0, 0
		var probe func(Outcome)
		for range workers {
			wg.Go(func() {
				done, err := b.Allow()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					refused++
					return
				}
				probes++
				probe = done
			})
		}
		wg.Wait()
		assert.Equal(t, 1, probes)
		assert.Equal(t, workers-1, refused)
		probe(Success)
		requireState(t, b, Closed, 0)
	})
}
