package breaker

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// notClosed counts the Set's breakers whose state is not Closed, under
// their locks.
func notClosed(s *Set) int64 {
	var n int64
	for _, b := range s.breakers() {
		b.mu.Lock()
		if b.state != Closed {
			n++
		}
		b.mu.Unlock()
	}
	return n
}

// TestSetCountsBreakersNotClosed follows the Set's count of breakers not
// Closed through every way a breaker changes state or leaves the Set, and
// checks that StateAt answers from it only while it is zero.
func TestSetCountsBreakersNotClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewSet(Config{ClassOf: classOf, MaxBreakers: 3})
		failN(t, s, "openai", 1) // closed with a failure
		assert.Equal(t, int64(0), s.unusual.Load())
		failN(t, s, "codex", 5) // degraded
		assert.Equal(t, int64(1), s.unusual.Load())
		st, _ := s.StateAt("codex", time.Now())
		assert.Equal(t, Degraded, st)
		failN(t, s, "claude", 8) // open
		assert.Equal(t, int64(2), s.unusual.Load())
		st, wait := s.StateAt("claude", time.Now())
		assert.Equal(t, Open, st)
		assert.Equal(t, time.Minute, wait)
		st, _ = s.StateAt("openai", time.Now())
		assert.Equal(t, Closed, st)

		// Open turns half-open lazily, and a probe's success closes it.
		time.Sleep(time.Minute)
		st, _ = s.StateAt("claude", time.Now())
		assert.Equal(t, HalfOpen, st)
		assert.Equal(t, int64(2), s.unusual.Load())
		done, err := s.Allow("claude")
		require.NoError(t, err)
		done(Success)
		assert.Equal(t, int64(1), s.unusual.Load())

		// A reset closes; an eviction of a breaker not closed uncounts it.
		assert.True(t, s.Reset("codex"))
		assert.Equal(t, int64(0), s.unusual.Load())
		failN(t, s, "claude", 8)
		for range 12 {
			s.ReportAt("openai", Report{Outcome: Failure}, time.Now())
		}
		assert.Equal(t, int64(2), s.unusual.Load())
		s.Get("new") // full: the closed one goes
		assert.Equal(t, 3, s.Len())
		assert.Equal(t, notClosed(s), s.unusual.Load())
		assert.Equal(t, int64(2), s.unusual.Load())
		for range 12 {
			s.ReportAt("new", Report{Outcome: Failure}, time.Now())
		}
		assert.Equal(t, int64(3), s.unusual.Load())
		s.Get("newer") // full, every breaker open: one of them goes
		assert.Equal(t, int64(2), s.unusual.Load())
		assert.Equal(t, notClosed(s), s.unusual.Load())

		// A restored breaker not closed counts.
		r := NewSet(Config{})
		require.NoError(t, r.RestoreAt(s.SnapshotAt(time.Now()), time.Now()))
		assert.Equal(t, int64(2), r.unusual.Load())
		assert.Equal(t, notClosed(r), r.unusual.Load())
		assert.Equal(t, 3, r.ResetAll())
		assert.Equal(t, int64(0), r.unusual.Load())
	})
}

// TestSetAllClosedAnswersWithoutLookup checks that StateAt answers from the
// count while it is zero, without finding the breaker: an open breaker
// with its count forced to zero reads Closed, and Open again once counted.
func TestSetAllClosedAnswersWithoutLookup(t *testing.T) {
	s := NewSet(Config{})
	now := time.Now()
	for range 12 {
		s.ReportAt("a", Report{Outcome: Failure}, now)
	}
	st, _ := s.StateAt("a", now)
	require.Equal(t, Open, st)
	s.unusual.Store(0)
	st, wait := s.StateAt("a", now)
	assert.Equal(t, Closed, st)
	assert.Zero(t, wait)
	s.unusual.Store(1)
	st, _ = s.StateAt("a", now)
	assert.Equal(t, Open, st)
	assert.Equal(t, 0.0, testing.AllocsPerRun(100, func() { s.StateAt("b", now) }))
}

// TestSetNotClosedCountUnderChurn drives breakers through failures,
// successes, probes, resets and evictions from several goroutines, and
// checks at the end that the count equals the breakers not Closed; while it
// runs, a breaker held open is always seen open.
func TestSetNotClosedCountUnderChurn(t *testing.T) {
	s := NewSet(Config{MaxBreakers: 16})
	now := time.Now()
	for range 12 {
		s.ReportAt("held-open", Report{Outcome: Failure}, now)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if st, _ := s.StateAt("held-open", now); st != Open {
				t.Errorf("the held-open breaker read %v", st)
				return
			}
		}
	})
	var workers sync.WaitGroup
	for w := range 4 {
		workers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range 3000 {
				p := "p" + strconv.Itoa(rng.IntN(24))
				at := now.Add(time.Duration(i) * time.Second)
				switch rng.IntN(4) {
				case 0, 1:
					s.ReportAt(p, Report{Outcome: Failure, At: at}, at)
				case 2:
					if done, err := s.AllowReportAt(p, at); err == nil {
						done(Report{Outcome: Success, At: at})
					}
				case 3:
					s.ResetAt(p, at)
				}
				s.StateAt(p, at)
				for range 12 { // keep it open whatever evicted it
					s.ReportAt("held-open", Report{Outcome: Failure, At: now}, now)
				}
			}
		})
	}
	workers.Wait()
	close(stop)
	wg.Wait()
	assert.Equal(t, notClosed(s), s.unusual.Load())
}

// BenchmarkSetStateAllClosed asks a Set of closed breakers about eight
// providers, as the router does for the candidates of a request; with one
// breaker open every StateAt looks its breaker up.
func BenchmarkSetStateAllClosed(b *testing.B) {
	for _, open := range []bool{false, true} {
		b.Run("one-open="+strconv.FormatBool(open), func(b *testing.B) {
			s := NewSet(Config{})
			now := time.Now()
			names := make([]string, 8)
			for i := range names {
				names[i] = "p" + strconv.Itoa(i)
				s.ReportAt(names[i], Report{Outcome: Success}, now)
			}
			if open {
				for range 12 {
					s.ReportAt("other", Report{Outcome: Failure}, now)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				for _, p := range names {
					s.StateAt(p, now)
				}
			}
		})
	}
}
