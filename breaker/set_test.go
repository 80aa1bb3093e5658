package breaker

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func classOf(p string) Class {
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
	assert.Equal(t, DefaultProfile(OAuth), s.ProfileOf("claude"))
	assert.Equal(t, DefaultProfile(APIKey), s.ProfileOf("openai"))
	assert.Equal(t, DefaultProfile(Local), s.ProfileOf("ollama"))
	assert.Equal(t, Profile{DegradedAt: 1, OpenAt: 2, Reset: time.Second, MaxMultiplier: 16, EscalationCount: 3}, s.ProfileOf("tiny"))
	assert.Equal(t, DefaultProfile(OAuth), s.Get("claude").Profile())
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
		assert.Equal(t, Status{Provider: "claude", State: Open, Failures: 8, LastFailure: time.Now(), RetryAfter: time.Minute}, snap[0])
		assert.Equal(t, Degraded, snap[1].State)
		assert.Equal(t, Summary{Open: 1, HalfOpen: 0, Closed: 2, Total: 3}, Summarize(snap))

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
		var changes []Change
		s = NewSet(Config{ClassOf: classOf, OnStateChange: func(c Change) {
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
		assert.Equal(t, Change{Provider: "ollama", From: Open, To: HalfOpen, At: time.Now()}, changes[2])
		assert.Equal(t, Change{Provider: "ollama", From: HalfOpen, To: Closed, At: time.Now()}, changes[3])
	})
}

func TestSetEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewSet(Config{Settings: Settings{MaxBreakers: 3}})
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
		s := NewSet(Config{Settings: Settings{MaxBreakers: 3}})
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

func providers(st []Status) []string {
	out := make([]string, len(st))
	for i, s := range st {
		out[i] = s.Provider
	}
	return out
}

func TestSetHammer(t *testing.T) {
	const workers, rounds, nprov = 8, 500, 20
	s := NewSet(Config{Settings: Settings{APIKey: Profile{OpenAt: 1000}}})
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
