package breaker

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// returnsWithin reports whether fn returns within a second.
func returnsWithin(fn func()) bool {
	done := make(chan struct{})
	go func() {
		fn()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(time.Second):
		return false
	}
}

// A read of a closed breaker without a counting window does not take the
// breaker's lock: it answers while that lock is held.
func TestStateAtTakesNoLock(t *testing.T) {
	s := NewSet(Config{})
	s.ReportAt("openai", Report{Outcome: Failure}, t0)
	b := s.lookup("openai")
	require.NotNil(t, b)
	b.mu.Lock()
	var st State
	var wait time.Duration
	var admitErr error
	ok := returnsWithin(func() {
		st, wait = s.StateAt("openai", t0)
		_, admitErr = s.AllowReportAt("openai", t0)
	})
	b.mu.Unlock()
	require.True(t, ok, "StateAt and AllowReportAt waited for the breaker's lock")
	assert.Equal(t, Closed, st)
	assert.Zero(t, wait)
	assert.NoError(t, admitErr)
}

// Lookups take no lock of the Set: with its lock held, reads of a held
// closed breaker (clean or with a counted failure) and of a provider it
// does not hold, an admission and a success report all answer, exactly,
// and they allocate nothing.
func TestSetLookupsTakeNoSetLock(t *testing.T) {
	s := NewSet(Config{})
	s.ReportAt("openai", Report{Outcome: Failure}, t0)
	done, err := s.AllowReportAt("anthropic", t0)
	require.NoError(t, err)
	done(Report{Outcome: Success, At: t0})

	type answer struct {
		st   State
		wait time.Duration
	}
	var got [3]answer
	var admitErr [2]error
	var reported bool
	s.mu.Lock()
	ok := returnsWithin(func() {
		for i, p := range []string{"openai", "anthropic", "absent"} {
			got[i].st, got[i].wait = s.StateAt(p, t0)
		}
		_, admitErr[0] = s.AllowReportAt("openai", t0)
		var d func(Report)
		if d, admitErr[1] = s.AllowReportAt("anthropic", t0); d != nil {
			d(Report{Outcome: Success, At: t0})
		}
		reported = s.ReportAt("absent", Report{Outcome: Success}, t0)
	})
	s.mu.Unlock()
	require.True(t, ok, "a lookup waited for the Set's lock")
	assert.Equal(t, [3]answer{{Closed, 0}, {Closed, 0}, {Closed, 0}}, got)
	assert.Equal(t, [2]error{nil, nil}, admitErr)
	assert.False(t, reported, "a success for a provider without a breaker is not accounted")
	assert.Equal(t, []string{"anthropic", "openai"}, setNames(s), "a lookup created no breaker")

	for _, p := range []string{"openai", "anthropic", "absent"} {
		assert.Zero(t, testing.AllocsPerRun(100, func() { s.StateAt(p, t0) }), "StateAt(%s)", p)
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		d, err := s.AllowReportAt("anthropic", t0)
		if err != nil {
			t.Fatal(err)
		}
		d(Report{Outcome: Success, At: t0})
	}), "AllowReportAt of a clean closed breaker")
}

// A provider seen for the first time costs few allocations: its breaker
// builds the machine that decides a trip only on its first failure.
func TestNewProviderAllocations(t *testing.T) {
	s := NewSet(Config{MaxBreakers: 100_000})
	names := make([]string, 1000)
	for i := range names {
		names[i] = "provider-" + strconv.Itoa(i)
	}
	i := 0
	allocs := testing.AllocsPerRun(500, func() {
		done, err := s.AllowReportAt(names[i], t0)
		if err != nil {
			t.Fatal(err)
		}
		done(Report{Outcome: Success, At: t0})
		i++
	})
	t.Logf("a new provider costs %v allocations", allocs)
	assert.LessOrEqual(t, allocs, 3.0)
}

// Lock-free readers run beside writers that trip, reset, create and evict
// breakers (run with -race); afterwards the Set answers exactly.
func TestLockFreeReadsWithWriters(t *testing.T) {
	const max = 6
	s := NewSet(Config{MaxBreakers: max, APIKey: Profile{OpenAt: 2, DegradedAt: 1}})
	names := []string{"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"}
	var readers, writers sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		readers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n := names[i%len(names)]
				st, wait := s.StateAt(n, t0)
				if st > HalfOpen || wait < 0 || (st.admits() && wait != 0) {
					t.Errorf("StateAt(%s) = %v, %v", n, st, wait)
					return
				}
				if done, err := s.AllowReportAt(n, t0); err == nil {
					done(Report{Outcome: Success, At: t0})
				}
			}
		})
	}
	for w := range 2 {
		writers.Go(func() {
			for i := range 2000 {
				n := names[(i+w)%len(names)]
				s.ReportAt(n, Report{Outcome: Failure}, t0)
				if i%3 == 0 {
					s.ResetAt(n, t0)
				}
				s.ReportAt("new-"+strconv.Itoa(w)+"-"+strconv.Itoa(i), Report{Outcome: Failure}, t0)
			}
		})
	}
	writers.Wait()
	close(stop)
	readers.Wait()

	assert.Equal(t, max, s.Len())
	assert.Len(t, setNames(s), max)
	s.ResetAllAt(t0)
	for _, n := range setNames(s) {
		st, wait := s.StateAt(n, t0)
		assert.Equal(t, Closed, st, n)
		assert.Zero(t, wait, n)
	}
	s.ReportAt("p0", Report{Outcome: Failure}, t0)
	st, _ := s.StateAt("p0", t0)
	assert.Equal(t, Degraded, st)
	s.ReportAt("p0", Report{Outcome: Failure}, t0)
	st, wait := s.StateAt("p0", t0)
	assert.Equal(t, Open, st)
	assert.Equal(t, s.lookup("p0").p.Reset, wait)
	_, err := s.AllowReportAt("p0", t0)
	assert.ErrorIs(t, err, ErrOpen)
}

// Admitting to a clean closed breaker and reporting its success take no
// lock; a success after a counted failure still lowers the count.
func TestCleanSuccessTakesNoLock(t *testing.T) {
	s := NewSet(Config{})
	done, err := s.AllowReportAt("openai", t0)
	require.NoError(t, err)
	b := s.lookup("openai")
	b.mu.Lock()
	ok := returnsWithin(func() {
		d, _ := s.AllowReportAt("openai", t0)
		d(Report{Outcome: Success, At: t0})
		done(Report{Outcome: Success, At: t0})
	})
	b.mu.Unlock()
	require.True(t, ok, "a clean success waited for the breaker's lock")

	for range 4 {
		s.ReportAt("openai", Report{Outcome: Failure, Conn: "c1"}, t0.Add(time.Minute))
	}
	before := s.SnapshotAt(t0.Add(time.Minute))
	require.Len(t, before, 1)
	require.Equal(t, 1, before[0].Failures, "one failure counted per connection within its window")
	done, err = s.AllowReportAt("openai", t0.Add(time.Minute))
	require.NoError(t, err)
	done(Report{Outcome: Success, At: t0.Add(time.Minute)})
	after := s.SnapshotAt(t0.Add(time.Minute))
	assert.Equal(t, Closed, after[0].State)
	assert.Equal(t, 0, after[0].Failures, "the success lowered the count")
}
