package breaker

import (
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/routeguard/routeguard"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type timedReport struct {
	at time.Duration // after t0
	r  Report
}

func fail(conn string) Report { return Report{Outcome: Failure, Conn: conn} }

func netFail(conn string) Report { return Report{Outcome: Failure, Conn: conn, Network: true} }

// Spec M1.3 #9: per-connection dedup (5 s), provider-wide network dedup
// (10 s), queue timeouts never count.
func TestScenarioFailureDedup(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name    string
		reports []timedReport
		counted []bool
		want    int
	}{
		{"same connection 4999 ms apart counts once",
			[]timedReport{{0, fail("c1")}, {4999 * ms, fail("c1")}}, []bool{true, false}, 1},
		{"same connection 5000 ms apart counts twice",
			[]timedReport{{0, fail("c1")}, {5000 * ms, fail("c1")}}, []bool{true, true}, 2},
		{"a deduplicated failure does not extend the window",
			[]timedReport{{0, fail("c1")}, {4999 * ms, fail("c1")}, {5000 * ms, fail("c1")}}, []bool{true, false, true}, 2},
		{"two connections count apart",
			[]timedReport{{0, fail("c1")}, {ms, fail("c2")}}, []bool{true, true}, 2},
		{"network errors on c1 and c2 within 10 s count once",
			[]timedReport{{0, netFail("c1")}, {9999 * ms, netFail("c2")}}, []bool{true, false}, 1},
		{"network errors 10 s apart count twice",
			[]timedReport{{0, netFail("c1")}, {10 * time.Second, netFail("c2")}}, []bool{true, true}, 2},
		{"a network error still meets the connection window",
			[]timedReport{{0, fail("c1")}, {ms, netFail("c1")}}, []bool{true, false}, 1},
		{"queue timeouts count zero",
			[]timedReport{{0, Report{Outcome: Failure, Conn: "c1", QueueTimeout: true}}, {ms, Report{Outcome: Failure, QueueTimeout: true}}}, []bool{false, false}, 0},
		{"without a connection nothing is deduplicated",
			[]timedReport{{0, fail("")}, {ms, fail("")}}, []bool{true, true}, 2},
		{"a success clears the connection's entry",
			[]timedReport{{0, fail("c1")}, {ms, Report{Outcome: Success, Conn: "c1"}}, {2 * ms, fail("c1")}}, []bool{true, true, true}, 1},
		{"ignored reports change nothing",
			[]timedReport{{0, Report{Conn: "c1"}}, {ms, fail("c1")}}, []bool{false, true}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSet(Config{ClassOf: func(string) routeguard.Class { return OAuth }})
			for i, tr := range tc.reports {
				got := s.ReportAt("p", tr.r, t0.Add(tr.at))
				assert.Equal(t, tc.counted[i], got, "report %d counted", i)
			}
			assert.Equal(t, tc.want, s.Get("p").Status().Failures)
		})
	}
}

func TestReportProviderFilter(t *testing.T) {
	s := NewSet(Config{})
	assert.False(t, s.ReportAt("", fail("c1"), t0))
	assert.False(t, s.ReportAt("unknown", fail("c1"), t0))
	assert.False(t, s.ReportAt("openai", Report{Outcome: Success}, t0), "a success creates no breaker")
	assert.False(t, s.ReportAt("openai", Report{Outcome: Failure, QueueTimeout: true}, t0))
	assert.Equal(t, 0, s.Len())
	assert.True(t, s.Report("openai", fail("c1")))
	assert.Equal(t, 1, s.Len())
}

// A direct failure while open is not counted and does not restart the open
// period; a direct success while open changes nothing (spec M1.3 #8 on the
// direct path).
func TestReportWhileOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("p", oauth, nil)
		reportN(t, b, Failure, 8)
		time.Sleep(10 * time.Second)
		assert.False(t, b.Report(fail("c1")))
		assert.False(t, b.Report(Report{Outcome: Success}))
		requireState(t, b, Open, 50*time.Second)
		assert.Equal(t, 8, b.Status().Failures)
	})
}

// A direct failure while half-open reopens with one cycle even while a probe
// is out; the probe's late result is ignored. A direct success closes a
// half-open breaker.
func TestReportWhileHalfOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("p", oauth, nil)
		reportN(t, b, Failure, 8)
		time.Sleep(time.Minute)
		probe, err := b.Allow()
		require.NoError(t, err)
		assert.True(t, b.Report(fail("c1")))
		st := b.Status()
		assert.Equal(t, Open, st.State)
		assert.Equal(t, 1, st.OpenCycles)
		assert.Equal(t, time.Minute, st.RetryAfter)
		probe(Success) // older generation
		requireState(t, b, Open, time.Minute)

		time.Sleep(time.Minute)
		requireState(t, b, HalfOpen, 0)
		assert.True(t, b.Report(Report{Outcome: Success, Conn: "c1"}))
		st = b.Status()
		assert.Equal(t, Closed, st.State)
		assert.Equal(t, 0, st.Failures)
		assert.Equal(t, 0, st.OpenCycles)

		// Without a probe out, a direct failure takes the slot itself.
		reportN(t, b, Failure, 8)
		time.Sleep(time.Minute)
		assert.True(t, b.Report(fail("")))
		requireState(t, b, Open, time.Minute)
		assert.Equal(t, 1, b.Status().OpenCycles)
	})
}

// The admitted path takes the same report: connection dedup for ordinary
// requests, never for the probe.
func TestAllowReportDedup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := defaultProfile(Local) // degraded 1, opens at 2, reset 15 s
		b := New("p", p, nil)
		for range 3 {
			done, err := b.AllowReport()
			require.NoError(t, err)
			done(fail("c1"))
		}
		assert.Equal(t, 1, b.Status().Failures)
		time.Sleep(5 * time.Second)
		done, err := b.AllowReport()
		require.NoError(t, err)
		done(fail("c1"))
		requireState(t, b, Open, 15*time.Second)

		time.Sleep(15 * time.Second)
		probe, err := b.AllowReport()
		require.NoError(t, err)
		probe(Report{Outcome: Failure, Conn: "c1", QueueTimeout: true}) // frees the slot only
		requireState(t, b, HalfOpen, 0)
		probe, err = b.AllowReport()
		require.NoError(t, err)
		probe(fail("c1")) // within 5 s of nothing counted: the probe always counts
		requireState(t, b, Open, 15*time.Second)
		assert.Equal(t, 1, b.Status().OpenCycles)
	})
}

// The connection entries are bounded: expired entries go first, then the
// oldest.
func TestDedupBounded(t *testing.T) {
	p := oauth
	p.MaxConns = 4
	p.OpenAt = 1000
	b := New("p", p, nil)
	for i := range 10 {
		b.ReportAt(fail("c"+strconv.Itoa(i)), t0.Add(time.Duration(i)*time.Millisecond))
		assert.LessOrEqual(t, b.dedupLen(), 4)
	}
	assert.Equal(t, 10, b.Status().Failures)
	// c9 is the newest and still deduplicated; c0 was evicted and counts.
	assert.False(t, b.ReportAt(fail("c9"), t0.Add(20*time.Millisecond)))
	assert.True(t, b.ReportAt(fail("c0"), t0.Add(20*time.Millisecond)))
	// Later, every entry has expired: a new connection sweeps them.
	assert.True(t, b.ReportAt(fail("x"), t0.Add(time.Minute)))
	assert.True(t, b.ReportAt(fail("y"), t0.Add(time.Minute)))
	assert.Equal(t, 2, b.dedupLen())
	b.Reset()
	assert.Equal(t, 0, b.dedupLen())
}

// A clock that steps backwards keeps deduplicating and never panics.
func TestDedupBackwardsClock(t *testing.T) {
	b := New("p", oauth, nil)
	assert.True(t, b.ReportAt(netFail("c1"), t0))
	assert.False(t, b.ReportAt(netFail("c2"), t0.Add(-time.Hour)))
	assert.False(t, b.ReportAt(fail("c1"), t0.Add(-time.Hour)))
	assert.Equal(t, 1, b.Status().Failures)
}

// The plain done func still costs one allocation and the report path none
// beyond it.
func TestAllowReportAllocs(t *testing.T) {
	b := New("p", oauth, nil)
	allocs := testing.AllocsPerRun(1000, func() {
		done, _ := b.AllowReport()
		done(Report{Outcome: Success, Conn: "c1"})
	})
	assert.LessOrEqual(t, allocs, 1.0)
}

// Hammer: goroutines report failures of the same connections at the same
// instant, directly and through admissions; each connection counts exactly
// once. Inside a synctest bubble the clock stands still while they run.
func TestHammerDedup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const workers, conns = 8, 50
		p := oauth
		p.OpenAt = 1000
		s := NewSet(Config{Profiles: map[string]Profile{"p": p}})
		now := time.Now()
		var counted [workers]int
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for c := range conns {
					conn := "c" + strconv.Itoa((c+w)%conns)
					if w%2 == 0 {
						if s.ReportAt("p", fail(conn), now) {
							counted[w]++
						}
					} else if dn, err := s.AllowReport("p"); err == nil {
						dn(fail(conn))
					}
				}
			})
		}
		wg.Wait()
		total := 0
		for _, n := range counted {
			total += n
		}
		assert.LessOrEqual(t, total, conns)
		assert.Equal(t, conns, s.Get("p").Status().Failures, "one count per connection")
	})
}

func TestDedupCheckDoesNotAllocate(t *testing.T) {
	b := New("p", oauth, nil)
	b.ReportAt(netFail("c1"), t0)
	allocs := testing.AllocsPerRun(1000, func() {
		b.ReportAt(netFail("c1"), t0.Add(time.Second))
		b.ReportAt(fail("c1"), t0.Add(time.Second))
	})
	assert.Zero(t, allocs)
	assert.Equal(t, 1, b.Status().Failures)
}
