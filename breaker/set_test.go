package breaker

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/routeguard/routeguard"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func classOf(p string) routeguard.Class {
	switch p {
	case "claude", "codex":
		return OAuth
	case "ollama":
		return Local
	}
	return APIKey
}

func failN(t *testing.T, s *Set, provider string, n int) {
	t.Helper()
	for range n {
		done, err := s.Allow(provider)
		require.NoError(t, err)
		done(Failure)
	}
}

func TestSetProfilesByClass(t *testing.T) {
	s := NewSet(Config{ClassOf: classOf, Profiles: map[string]Profile{"tiny": {OpenAt: 2, Reset: time.Second}}})
	assert.Equal(t, defaultProfile(OAuth), s.ProfileOf("claude"))
	assert.Equal(t, defaultProfile(APIKey), s.ProfileOf("openai"))
	assert.Equal(t, defaultProfile(Local), s.ProfileOf("ollama"))
	assert.Equal(t, Profile{DegradedAt: 1, OpenAt: 2, Reset: time.Second, MaxMultiplier: 16, EscalationCount: 3}, s.ProfileOf("tiny"))
	assert.Equal(t, defaultProfile(OAuth), s.Get("claude").Profile())
}

func TestSetStateDoesNotCreate(t *testing.T) {
	s := NewSet(Config{})
	st, wait := s.State("nobody")
	assert.Equal(t, Closed, st)
	assert.Zero(t, wait)
	assert.Equal(t, 0, s.Len())
	assert.False(t, s.Reset("nobody"))
}

// Spec M1.3 #14: health counts (DEGRADED counts as closed), then reset all.
func TestScenarioSnapshotAndResetAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewSet(Config{ClassOf: classOf})
		failN(t, s, "claude", 8) // open
		failN(t, s, "codex", 5)  // degraded
		failN(t, s, "openai", 1) // closed
		snap := s.Snapshot()
		require.Len(t, snap, 3)
		assert.Equal(t, []string{"claude", "codex", "openai"}, []string{snap[0].Provider, snap[1].Provider, snap[2].Provider})
		assert.Equal(t, Record{Provider: "claude", State: Open, Failures: 8, LastFailure: time.Now(), OpenedAt: time.Now(), RetryAfter: time.Minute}, snap[0])
		assert.Equal(t, Degraded, snap[1].State)
		// The health page's counts (Degraded counting as closed) are
		// combo/admin's; see TestAdminHealth there.
		assert.Equal(t, []State{Open, Degraded, Closed}, []State{snap[0].State, snap[1].State, snap[2].State})

		assert.Equal(t, 3, s.ResetAll())
		for _, st := range s.Snapshot() {
			assert.Equal(t, Closed, st.State, st.Provider)
			assert.Equal(t, 0, st.Failures, st.Provider)
		}
		assert.True(t, s.Reset("claude"))
	})
}

func TestSetHookOutsideLocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s *Set
		var changes []Event
		T := time.Now()
		s = NewSet(Config{ClassOf: classOf, OnChange: func(c Event) {
			// Calling back into the Set would deadlock if a lock were held.
			s.Snapshot()
			s.State(c.Provider)
			changes = append(changes, c)
		}})
		failN(t, s, "ollama", 2)
		time.Sleep(15 * time.Second)
		s.Snapshot()
		s.ResetAll()
		require.Len(t, changes, 4)
		assert.Equal(t, Event{Provider: "ollama", From: Closed, To: Degraded, At: T, Failures: 1, LastFailure: T}, changes[0])
		assert.Equal(t, Event{Provider: "ollama", From: Degraded, To: Open, At: T, Until: T.Add(15 * time.Second), Failures: 2, LastFailure: T}, changes[1])
		assert.Equal(t, Event{Provider: "ollama", From: Open, To: HalfOpen, At: time.Now(), Failures: 2, LastFailure: T}, changes[2])
		assert.Equal(t, Event{Provider: "ollama", From: HalfOpen, To: Closed, At: time.Now(), Cause: "reset"}, changes[3], "a reset clears the count and the failure time")
	})
}

func TestSetEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewSet(Config{MaxBreakers: 3})
		failN(t, s, "a", 12) // open
		failN(t, s, "b", 1)  // closed with a failure
		time.Sleep(time.Second)
		failN(t, s, "c", 1) // closed with a later failure
		s.Get("d")          // full: b goes (closed, oldest failure)
		assert.Equal(t, []string{"a", "c", "d"}, providers(s.Snapshot()))
		s.Get("e") // d is idle (no failure): it goes first
		assert.Equal(t, []string{"a", "c", "e"}, providers(s.Snapshot()))
		failN(t, s, "c", 11)
		failN(t, s, "e", 12)
		s.Get("f") // all open: the oldest last failure (a) goes
		assert.Equal(t, []string{"c", "e", "f"}, providers(s.Snapshot()))
		assert.Equal(t, 3, s.Len())
	})
}

func TestSetIdleTTLDropsAllExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewSet(Config{MaxBreakers: 3})
		for _, p := range []string{"a", "b", "c"} {
			done, err := s.Allow(p)
			require.NoError(t, err)
			done(Failure)
			done, _ = s.Allow(p)
			done(Success) // idle again: count 0
		}
		time.Sleep(31 * time.Minute)
		s.Get("d")
		assert.Equal(t, []string{"d"}, providers(s.Snapshot()))
	})
}

func providers(st []Record) []string {
	out := make([]string, len(st))
	for i, s := range st {
		out[i] = s.Provider
	}
	return out
}

func TestSetHammer(t *testing.T) {
	const workers, rounds, nprov = 8, 500, 20
	s := NewSet(Config{APIKey: Profile{OpenAt: 1000}})
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				p := "p" + strconv.Itoa((w+i)%nprov)
				done, err := s.Allow(p)
				if err != nil {
					t.Error(err)
					return
				}
				admitted.Add(1)
				done(Failure)
				if st, _ := s.State(p); st == Open {
					t.Error("opened")
				}
				done, _ = s.Allow(p)
				admitted.Add(1)
				done(Success)
				if i%100 == 0 {
					s.Snapshot()
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(workers*rounds*2), admitted.Load())
	snap := s.Snapshot()
	assert.Len(t, snap, nprov)
	for _, st := range snap {
		assert.Equal(t, 0, st.Failures, st.Provider)
	}
}

func TestSetStateDoesNotAllocate(t *testing.T) {
	s := NewSet(Config{})
	s.Get("openai")
	assert.Zero(t, testing.AllocsPerRun(1000, func() { s.State("openai") }))
	assert.Zero(t, testing.AllocsPerRun(1000, func() { s.State("unknown-provider") }))
}

// A Set that drops a breaker to make room tells the hook (Removed, To
// Closed, the count at removal), judging idleness at the caller's time,
// not the wall clock's; a request admitted by the dropped breaker reports
// to it silently.
func TestSetEvictionReportsRemoved(t *testing.T) {
	T := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) // years ahead of the wall clock
	var evs []Event
	s := NewSet(Config{MaxBreakers: 2, OnChange: func(e Event) { evs = append(evs, e) }})
	for _, p := range []string{"a", "b"} {
		require.True(t, s.ReportAt(p, Report{Outcome: Failure}, T))
		require.True(t, s.ReportAt(p, Report{Outcome: Success}, T)) // idle: count 0, last failure T
	}
	late, err := s.AllowReportAt("a", T)
	require.NoError(t, err)
	require.Empty(t, evs, "no state changed")

	// 31 min later on the caller's clock both are past IdleTTL: both go.
	_, err = s.AllowReportAt("c", T.Add(31*time.Minute))
	require.NoError(t, err)
	assert.Equal(t, []string{"c"}, providers(s.SnapshotAt(T.Add(31*time.Minute))))
	assert.ElementsMatch(t, []Event{
		{Provider: "a", From: Closed, To: Closed, At: T.Add(31 * time.Minute), LastFailure: T, Removed: true},
		{Provider: "b", From: Closed, To: Closed, At: T.Add(31 * time.Minute), LastFailure: T, Removed: true},
	}, evs)

	// The dropped breaker still takes its request's report, without a word.
	evs = nil
	late(Report{Outcome: Failure, At: T.Add(32 * time.Minute)})
	assert.Empty(t, evs)

	// An open breaker dropped last keeps its state in the event's From.
	for range 12 {
		s.ReportAt("d", Report{Outcome: Failure}, T.Add(40*time.Minute))
	}
	evs = nil
	s.ReportAt("c", Report{Outcome: Failure}, T.Add(41*time.Minute))
	s.ReportAt("e", Report{Outcome: Failure}, T.Add(42*time.Minute)) // full: c (closed) goes before d (open)
	s.ReportAt("f", Report{Outcome: Failure}, T.Add(43*time.Minute)) // full: e (closed) goes
	require.NoError(t, s.RestoreAt([]Record{{Provider: "g", State: Closed}}, T.Add(44*time.Minute)))
	assert.Equal(t, []Event{
		{Provider: "c", From: Closed, To: Closed, At: T.Add(42 * time.Minute), Failures: 1, LastFailure: T.Add(41 * time.Minute), Removed: true},
		{Provider: "e", From: Closed, To: Closed, At: T.Add(43 * time.Minute), Failures: 1, LastFailure: T.Add(42 * time.Minute), Removed: true},
		{Provider: "f", From: Closed, To: Closed, At: T.Add(44 * time.Minute), Failures: 1, LastFailure: T.Add(43 * time.Minute), Removed: true},
	}, evs)
	assert.Equal(t, []string{"d", "g"}, providers(s.SnapshotAt(T.Add(44*time.Minute))))
}
