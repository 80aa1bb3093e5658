package breaker

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clockReport asks b at now and reports o at the same time.
func clockReport(t *testing.T, b *Breaker, o Outcome, now time.Time) {
	t.Helper()
	done, err := b.AllowReportAt(now)
	require.NoError(t, err, "at %v", now)
	done(Report{Outcome: o, At: now})
}

func requireStateAt(t *testing.T, b *Breaker, now time.Time, want State, wantWait time.Duration) {
	t.Helper()
	got, wait := b.StateAt(now)
	require.Equal(t, want, got, "state at %v", now)
	require.Equal(t, wantWait, wait, "wait at %v", now)
}

// One clock: with a clock a day ahead of the wall clock, an open breaker
// turns half-open exactly when its open time has passed on that clock, the
// probe rule holds, and a good probe closes it. The changes carry the
// injected times.
func TestOneClockOpenHalfOpenClosed(t *testing.T) {
	T := time.Now().Add(24 * time.Hour)
	var changes []Event
	b := New("openai", oauth, func(c Event) { changes = append(changes, c) })
	for i := range 8 {
		clockReport(t, b, Failure, T.Add(time.Duration(i)*time.Millisecond))
	}
	T = T.Add(7 * time.Millisecond) // the 8th failure opens it
	requireStateAt(t, b, T, Open, time.Minute)
	requireStateAt(t, b, T.Add(10*time.Second), Open, 50*time.Second)
	_, err := b.AllowReportAt(T.Add(59*time.Second + 999*time.Millisecond))
	var oe *Error
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, Open, oe.State)
	assert.Equal(t, time.Millisecond, oe.RetryAfter)

	end := T.Add(time.Minute)
	requireStateAt(t, b, end, HalfOpen, 0)
	probe, err := b.AllowReportAt(end)
	require.NoError(t, err)
	_, err = b.AllowReportAt(end.Add(time.Second))
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, HalfOpen, oe.State)
	assert.Equal(t, 59*time.Second, oe.RetryAfter, "until the probe slot is re-issued")
	st := b.SnapshotAt(end.Add(time.Second))
	assert.True(t, st.ProbeInFlight)
	assert.Equal(t, 59*time.Second, st.RetryAfter)

	probe(Report{Outcome: Success, At: end.Add(2 * time.Second)})
	st = b.SnapshotAt(end.Add(2 * time.Second))
	assert.Equal(t, Record{Provider: "openai", State: Closed, LastFailure: T}, st)

	// The events carry the state after each change: the count, the last
	// failure and, for an open breaker, the end of its open period.
	assert.Equal(t, []Event{
		{Provider: "openai", From: Closed, To: Degraded, At: T.Add(-3 * time.Millisecond), Failures: 5, LastFailure: T.Add(-3 * time.Millisecond)},
		{Provider: "openai", From: Degraded, To: Open, At: T, Until: end, Failures: 8, LastFailure: T},
		{Provider: "openai", From: Open, To: HalfOpen, At: end, Failures: 8, LastFailure: T},
		{Provider: "openai", From: HalfOpen, To: Closed, At: end.Add(2 * time.Second), LastFailure: T},
	}, changes)
}

// One clock: the wall clock never ends an open period that an explicit
// clock started, however far it moves. In a bubble the wall clock is
// advanced by two minutes while the injected clock advances by one second.
func TestOneClockWallClockDoesNotDecide(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		T := time.Now().Add(24 * time.Hour)
		b := New("p", oauth, nil)
		for range 8 {
			clockReport(t, b, Failure, T)
		}
		time.Sleep(2 * time.Minute) // gobreaker's timer, if it ran, would have fired
		requireStateAt(t, b, T.Add(time.Second), Open, 59*time.Second)
		_, err := b.AllowReportAt(T.Add(time.Second))
		require.ErrorIs(t, err, ErrOpen)
		requireStateAt(t, b, T.Add(time.Minute), HalfOpen, 0)
	})
}

// One clock: escalation of open times is measured on the injected clock, a
// fixed 2030 date: 60, 60, 120, 240, 480, 480 s for oauth.
func TestOneClockEscalation(t *testing.T) {
	now := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	b := New("p", oauth, nil)
	for range 8 {
		clockReport(t, b, Failure, now)
	}
	now = now.Add(time.Minute)
	for i, w := range []time.Duration{60, 60, 120, 240, 480, 480} {
		requireStateAt(t, b, now, HalfOpen, 0)
		clockReport(t, b, Failure, now) // the probe fails
		want := w * time.Second
		requireStateAt(t, b, now, Open, want)
		st := b.SnapshotAt(now)
		assert.Equal(t, i+1, st.OpenCycles)
		assert.Equal(t, now, st.LastFailure)
		requireStateAt(t, b, now.Add(want-time.Millisecond), Open, time.Millisecond)
		now = now.Add(want)
	}
	requireStateAt(t, b, now, HalfOpen, 0)
	clockReport(t, b, Success, now)
	st := b.SnapshotAt(now)
	assert.Equal(t, Closed, st.State)
	assert.Equal(t, 0, st.OpenCycles)
}

// One clock: a clock that jumps backwards is treated as "no time passed":
// the open period neither shrinks nor grows, a failure reported at an
// earlier time counts at the latest time seen, and the changes never go
// back in time.
func TestOneClockBackwardsNoTimePassed(t *testing.T) {
	T := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var changes []Event
	b := New("p", oauth, func(c Event) { changes = append(changes, c) })
	for range 8 {
		clockReport(t, b, Failure, T)
	}
	requireStateAt(t, b, T.Add(-time.Hour), Open, time.Minute)
	requireStateAt(t, b, T.Add(30*time.Second), Open, 30*time.Second)
	requireStateAt(t, b, T.Add(10*time.Second), Open, 30*time.Second)
	requireStateAt(t, b, T.Add(-24*time.Hour), Open, 30*time.Second)
	requireStateAt(t, b, T.Add(59*time.Second), Open, time.Second)
	requireStateAt(t, b, T.Add(time.Minute), HalfOpen, 0)
	requireStateAt(t, b, T, HalfOpen, 0) // no way back into the open period

	// A probe reported "before" it was admitted reopens at the latest time.
	probe, err := b.AllowReportAt(T.Add(time.Minute))
	require.NoError(t, err)
	probe(Report{Outcome: Failure, At: T})
	st := b.SnapshotAt(T)
	assert.Equal(t, Open, st.State)
	assert.Equal(t, T.Add(time.Minute), st.LastFailure)
	assert.Equal(t, time.Minute, st.RetryAfter)
	requireStateAt(t, b, T.Add(2*time.Minute-time.Nanosecond), Open, time.Nanosecond)
	requireStateAt(t, b, T.Add(2*time.Minute), HalfOpen, 0)

	// The probe lease is measured the same way.
	lost, err := b.AllowReportAt(T.Add(2 * time.Minute))
	require.NoError(t, err)
	requireStateAt(t, b, T, HalfOpen, time.Minute)
	requireStateAt(t, b, T.Add(3*time.Minute), HalfOpen, 0)
	lost(Report{Outcome: Success, At: T.Add(3 * time.Minute)}) // re-issued: late, ignored
	requireStateAt(t, b, T.Add(3*time.Minute), HalfOpen, 0)

	for i := 1; i < len(changes); i++ {
		assert.False(t, changes[i].At.Before(changes[i-1].At), "change %d goes back in time: %+v", i, changes)
	}
}

// One clock: the generation rule holds on an injected clock. A success and
// a failure admitted before the trip change nothing, and a lost probe's
// late result is ignored once the slot has been re-issued.
func TestOneClockGenerations(t *testing.T) {
	T := time.Now().Add(24 * time.Hour)
	b := New("p", oauth, nil)
	lateSuccess, err := b.AllowReportAt(T)
	require.NoError(t, err)
	lateFailure, err := b.AllowReportAt(T)
	require.NoError(t, err)
	for range 8 {
		clockReport(t, b, Failure, T)
	}
	lateSuccess(Report{Outcome: Success, At: T.Add(10 * time.Second)})
	requireStateAt(t, b, T.Add(10*time.Second), Open, 50*time.Second)
	lateFailure(Report{Outcome: Failure, At: T.Add(20 * time.Second)})
	requireStateAt(t, b, T.Add(20*time.Second), Open, 40*time.Second)
	assert.Equal(t, 8, b.SnapshotAt(T.Add(20*time.Second)).Failures)

	end := T.Add(time.Minute)
	lost, err := b.AllowReportAt(end)
	require.NoError(t, err)
	_, err = b.AllowReportAt(end.Add(time.Minute - time.Nanosecond))
	require.ErrorIs(t, err, ErrOpen)
	probe, err := b.AllowReportAt(end.Add(time.Minute))
	require.NoError(t, err)
	lost(Report{Outcome: Failure, At: end.Add(time.Minute)})
	requireStateAt(t, b, end.Add(time.Minute), HalfOpen, time.Minute)
	probe(Report{Outcome: Success, At: end.Add(time.Minute)})
	requireStateAt(t, b, end.Add(time.Minute), Closed, 0)
}

// One clock on a Set: admission, direct reports, state, snapshots, export
// and restore all follow the caller's time, a day ahead of the wall clock.
// Scenario 13 on that clock: an open row restored at T+30000 has 30000 left.
func TestOneClockSet(t *testing.T) {
	T := time.Now().Add(24 * time.Hour)
	s := oauthSet(nil)
	for i := range 8 {
		done, err := s.AllowReportAt("openai", T)
		require.NoError(t, err, "failure %d", i)
		done(Report{Outcome: Failure, At: T})
	}
	assert.True(t, s.ReportAt("claude", Report{Outcome: Failure}, T))
	st, wait := s.StateAt("openai", T.Add(10*time.Second))
	assert.Equal(t, Open, st)
	assert.Equal(t, 50*time.Second, wait)
	snap := s.SnapshotAt(T.Add(20 * time.Second))
	require.Len(t, snap, 2)
	assert.Equal(t, Record{Provider: "claude", State: Closed, Failures: 1, LastFailure: T}, snap[0])
	assert.Equal(t, Record{Provider: "openai", State: Open, Failures: 8, LastFailure: T, OpenedAt: T, RetryAfter: 40 * time.Second}, snap[1])

	recs := s.SnapshotAt(T.Add(30 * time.Second))
	require.Len(t, recs, 2)
	assert.Equal(t, Record{Provider: "openai", State: Open, Failures: 8, LastFailure: T, OpenedAt: T, RetryAfter: 30 * time.Second}, recs[1])

	s2 := oauthSet(nil)
	require.NoError(t, s2.RestoreAt(recs, T.Add(30*time.Second)))
	st, wait = s2.StateAt("openai", T.Add(30*time.Second))
	assert.Equal(t, Open, st)
	assert.Equal(t, 30*time.Second, wait)
	assert.Equal(t, recs, s2.SnapshotAt(T.Add(30*time.Second)))
	st, _ = s2.StateAt("openai", T.Add(time.Minute))
	assert.Equal(t, HalfOpen, st)
	done, err := s2.AllowReportAt("openai", T.Add(time.Minute))
	require.NoError(t, err)
	done(Report{Outcome: Success, At: T.Add(time.Minute)})
	st, _ = s2.StateAt("openai", T.Add(time.Minute))
	assert.Equal(t, Closed, st)

	assert.True(t, s2.ResetAt("claude", T.Add(2*time.Minute)))
	assert.Equal(t, 2, s2.ResetAllAt(T.Add(2*time.Minute)))
	snap = s2.SnapshotAt(T.Add(2 * time.Minute))
	require.Len(t, snap, 2)
	for _, r := range snap {
		assert.Equal(t, Closed, r.State, r.Provider)
	}
}

// A zero time is time.Now(): in a bubble, a Set driven by both agrees, on
// every explicit-time method.
func TestZeroTimeIsWallClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := oauthSet(nil)
		for range 8 {
			done, err := s.AllowReportAt("p", time.Time{})
			require.NoError(t, err)
			done(Report{Outcome: Failure}) // zero At: accounted at time.Now()
		}
		assert.True(t, s.ReportAt("q", Report{Outcome: Failure}, time.Time{}))
		time.Sleep(10 * time.Second)
		st, wait := s.StateAt("p", time.Time{})
		st2, wait2 := s.StateAt("p", time.Now())
		assert.Equal(t, Open, st)
		assert.Equal(t, 50*time.Second, wait)
		assert.Equal(t, st, st2)
		assert.Equal(t, wait, wait2)
		assert.Equal(t, s.SnapshotAt(time.Now()), s.SnapshotAt(time.Time{}))
		assert.Equal(t, time.Now().Add(-10*time.Second), s.SnapshotAt(time.Time{})[1].LastFailure)
		_, err := s.AllowReportAt("p", time.Time{})
		var be *Error
		require.ErrorAs(t, err, &be)
		assert.Equal(t, 50*time.Second, be.RetryAfter)
		require.NoError(t, s.RestoreAt(s.SnapshotAt(time.Now()), time.Time{}))
		st, wait = s.StateAt("p", time.Now())
		assert.Equal(t, Open, st)
		assert.Equal(t, 50*time.Second, wait)
		assert.True(t, s.ResetAt("p", time.Time{}))
		assert.Equal(t, 2, s.ResetAllAt(time.Time{}))
	})
}

func TestStateAtDoesNotAllocate(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	b := New("p", oauth, nil)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { b.StateAt(now) }))
	for range 8 {
		clockReport(t, b, Failure, now)
	}
	assert.Zero(t, testing.AllocsPerRun(1000, func() { b.StateAt(now) }))
	s := oauthSet(nil)
	s.Get("p")
	assert.Zero(t, testing.AllocsPerRun(1000, func() { s.StateAt("p", now) }))
	allocs := testing.AllocsPerRun(1000, func() {
		done, _ := b.AllowReportAt(now.Add(time.Hour))
		if done != nil {
			done(Report{Outcome: Success, At: now.Add(time.Hour)})
		}
	})
	assert.LessOrEqual(t, allocs, 1.0)
}

func TestAllowReportAtClosedAllocatesNothing(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := oauthSet(nil)
	s.StateAt("p", now)
	if done, err := s.AllowReportAt("p", now); assert.NoError(t, err) {
		done(Report{Outcome: Success, At: now})
	}
	allocs := testing.AllocsPerRun(1000, func() {
		done, err := s.AllowReportAt("p", now)
		if err == nil {
			done(Report{Outcome: Success, At: now})
		}
	})
	assert.Zero(t, allocs)
	// A done func issued before the breaker opens counts for nothing after.
	stale, err := s.AllowReportAt("p", now)
	require.NoError(t, err)
	for range 20 {
		s.ReportAt("p", Report{Outcome: Failure}, now)
	}
	st, _ := s.StateAt("p", now)
	require.Equal(t, Open, st)
	stale(Report{Outcome: Success, At: now})
	st, _ = s.StateAt("p", now)
	assert.Equal(t, Open, st)
}
