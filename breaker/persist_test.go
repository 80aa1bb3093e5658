package breaker

import (
	"encoding/json"
	"reflect"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/routeguard/routeguard"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func oauthSet(hook func(Event)) *Set {
	return NewSet(Config{ClassOf: func(string) routeguard.Class { return OAuth }, OnChange: hook})
}

// Spec M1.3 #13: the row ('openai','OPEN',8,T,{openCycleCount:2}) restored
// at T+30000 is open with 30000 left; then it turns half-open on time and a
// good probe closes it.
func TestScenarioRestoreOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		T := time.Now()
		time.Sleep(30 * time.Second) // the process restarts at T+30000
		s := oauthSet(nil)
		require.NoError(t, s.Restore([]Record{{Provider: "openai", State: Open, Failures: 8, LastFailure: T, OpenCycles: 2}}))
		state, wait := s.State("openai")
		assert.Equal(t, Open, state)
		assert.Equal(t, 30*time.Second, wait)
		_, err := s.Allow("openai")
		var oe *Error
		require.ErrorAs(t, err, &oe)
		assert.Equal(t, 30*time.Second, oe.RetryAfter)
		st := s.Get("openai").Status()
		assert.Equal(t, Record{Provider: "openai", State: Open, Failures: 8, LastFailure: T, RetryAfter: 30 * time.Second, OpenCycles: 2, OpenedAt: T}, st)

		b := s.Get("openai")
		time.Sleep(30*time.Second - time.Nanosecond)
		requireState(t, b, Open, time.Nanosecond)
		time.Sleep(time.Nanosecond)
		requireState(t, b, HalfOpen, 0)
		report(t, b, Success)
		st = b.Status()
		assert.Equal(t, Closed, st.State)
		assert.Equal(t, 0, st.Failures)
		assert.Equal(t, 0, st.OpenCycles)
		assert.Equal(t, KindNone, b.Export().LastKind)
		reportN(t, b, Failure, 8)
		requireState(t, b, Open, time.Minute)
	})
}

// Spec M1.3 #13, saved and restored again: Export → Restore → Export gives
// the same records while the row is open (30000 left) and after its open
// time has run out (half-open, opened at T), however often it is repeated
// and whenever.
func TestScenarioRestoreOpenRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		T := time.Now()
		time.Sleep(30 * time.Second)
		s := oauthSet(nil)
		require.NoError(t, s.Restore([]Record{{Provider: "openai", State: Open, Failures: 8, LastFailure: T, OpenCycles: 2}}))
		open := []Record{{Provider: "openai", State: Open, Failures: 8, LastFailure: T, OpenCycles: 2, OpenedAt: T, RetryAfter: 30 * time.Second}}
		for i := range 3 {
			recs := s.Export()
			require.Equal(t, open, recs, "round %d", i)
			require.NoError(t, s.Restore(recs))
			_, wait := s.State("openai")
			assert.Equal(t, 30*time.Second, wait, "round %d", i)
		}
		time.Sleep(time.Hour) // the open time has long run out
		half := []Record{{Provider: "openai", State: HalfOpen, Failures: 8, LastFailure: T, OpenCycles: 2, OpenedAt: T}}
		for i := range 3 {
			recs := s.Export()
			require.Equal(t, half, recs, "round %d", i)
			require.NoError(t, s.Restore(recs))
			time.Sleep(time.Minute)
		}
		st, _ := s.State("openai")
		assert.Equal(t, HalfOpen, st)
	})
}

// The same row decoded from JSON, with the state spelled the way a
// database keeps it.
func TestScenarioRestoreOpenFromJSON(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		T := time.Now().UTC().Truncate(time.Millisecond)
		time.Sleep(30 * time.Second)
		row := `{"provider":"openai","state":"OPEN","failures":8,"lastFailure":"` + T.Format(time.RFC3339Nano) + `","openCycles":2}`
		var r Record
		require.NoError(t, json.Unmarshal([]byte(row), &r))
		assert.Equal(t, Record{Provider: "openai", State: Open, Failures: 8, LastFailure: T, OpenCycles: 2}, r)
		s := oauthSet(nil)
		require.NoError(t, s.Restore([]Record{r}))
		st, wait := s.State("openai")
		assert.Equal(t, Open, st)
		assert.Equal(t, 30*time.Second, wait)
	})
}

// Spec M1.3 #13: a restored HALF_OPEN row gets its one probe slot back; the
// probe's failure reopens with one more cycle.
func TestScenarioRestoreHalfOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		T := time.Now()
		time.Sleep(2 * time.Minute)
		b := New("openai", oauth, nil)
		require.NoError(t, b.Restore(Record{Provider: "openai", State: HalfOpen, Failures: 8, LastFailure: T, OpenCycles: 2, OpenedAt: T}))
		requireState(t, b, HalfOpen, 0)
		probe, err := b.Allow()
		require.NoError(t, err)
		_, err = b.Allow()
		var oe *Error
		require.ErrorAs(t, err, &oe)
		assert.Equal(t, HalfOpen, oe.State)
		assert.Equal(t, time.Minute, oe.RetryAfter)
		assert.True(t, b.Status().ProbeInFlight)

		probe(Failure) // cycle 3: 60 s·2
		st := b.Status()
		assert.Equal(t, Open, st.State)
		assert.Equal(t, 3, st.OpenCycles)
		assert.Equal(t, 2*time.Minute, st.RetryAfter)
		time.Sleep(2 * time.Minute)
		requireState(t, b, HalfOpen, 0)
		report(t, b, Success)
		st = b.Status()
		assert.Equal(t, Closed, st.State)
		assert.Equal(t, 0, st.Failures)
		assert.Equal(t, 0, st.OpenCycles)
	})
}

// A restored probe that never reports is re-issued after the reset time,
// like any probe, and one that is ignored frees the slot.
func TestRestoredProbeLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("p", oauth, nil)
		require.NoError(t, b.Restore(Record{State: HalfOpen, Failures: 8}))
		lost, err := b.Allow()
		require.NoError(t, err)
		time.Sleep(time.Minute)
		requireState(t, b, HalfOpen, 0)
		probe, err := b.Allow()
		require.NoError(t, err)
		lost(Failure) // late: ignored
		requireState(t, b, HalfOpen, time.Minute)
		probe(Ignored)
		requireState(t, b, HalfOpen, 0)
		assert.True(t, b.Report(Report{Outcome: Success}), "a direct success closes it")
		requireState(t, b, Closed, 0)
	})
}

func TestRestoreCases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		hints := withHints(oauth)
		cases := []struct {
			name      string
			p         Profile
			r         Record
			wantState State
			wantWait  time.Duration
			want      Record // Export right after; Provider "p" is added
		}{
			{"open, escalated", oauth,
				Record{State: Open, Failures: 8, LastFailure: now.Add(-time.Minute), OpenCycles: 3, OpenedAt: now.Add(-time.Minute)},
				Open, time.Minute,
				Record{State: Open, Failures: 8, LastFailure: now.Add(-time.Minute), OpenCycles: 3, OpenedAt: now.Add(-time.Minute)}},
			{"open, quota hint", hints,
				Record{State: Open, Failures: 8, LastFailure: now.Add(-time.Minute), LastKind: KindQuotaExhausted},
				Open, 59 * time.Minute,
				Record{State: Open, Failures: 8, LastFailure: now.Add(-time.Minute), LastKind: KindQuotaExhausted, OpenedAt: now.Add(-time.Minute)}},
			{"open, period over", oauth,
				Record{State: Open, Failures: 8, LastFailure: now.Add(-time.Hour)},
				HalfOpen, 0,
				Record{State: HalfOpen, Failures: 8, LastFailure: now.Add(-time.Hour), OpenedAt: now.Add(-time.Hour)}},
			{"open without a time", oauth,
				Record{State: Open, Failures: 8},
				HalfOpen, 0,
				Record{State: HalfOpen, Failures: 8, OpenedAt: now}},
			{"open in the future", oauth,
				Record{State: Open, Failures: 8, LastFailure: now.Add(time.Hour), OpenedAt: now.Add(time.Hour)},
				Open, time.Minute,
				Record{State: Open, Failures: 8, LastFailure: now, OpenedAt: now}},
			{"degraded", oauth,
				Record{State: Degraded, Failures: 5, LastFailure: now.Add(-time.Hour)},
				Degraded, 0,
				Record{State: Degraded, Failures: 5, LastFailure: now.Add(-time.Hour)}},
			{"closed above the threshold", oauth,
				Record{State: Closed, Failures: 50, OpenCycles: 4, OpenedAt: now},
				Degraded, 0,
				Record{State: Degraded, Failures: 7}},
			{"negative counts", oauth,
				Record{State: Open, Failures: -3, OpenCycles: -1, LastFailure: now, KindFailures: map[Kind]int{KindRateLimit: -2, KindTransient: 5000}},
				Open, time.Minute,
				Record{State: Open, LastFailure: now, OpenedAt: now, KindFailures: map[Kind]int{KindTransient: 1000}}},
			{"unknown kind", oauth,
				Record{State: Closed, Failures: 1, LastKind: Kind(7), KindFailures: map[Kind]int{Kind(7): 3, KindNone: 2}},
				Closed, 0,
				Record{State: Closed, Failures: 1}},
			{"too many cycles", hints,
				Record{State: Open, Failures: 8, LastFailure: now, OpenCycles: 1 << 40, LastKind: KindQuotaExhausted},
				Open, 8 * time.Hour,
				Record{State: Open, Failures: 8, LastFailure: now, OpenCycles: 10000, LastKind: KindQuotaExhausted, OpenedAt: now}},
		}
		for _, tc := range cases {
			b := New("p", tc.p, nil)
			require.NoError(t, b.Restore(tc.r), tc.name)
			st, wait := b.State()
			assert.Equal(t, tc.wantState, st, tc.name)
			assert.Equal(t, tc.wantWait, wait, tc.name)
			tc.want.Provider = "p"
			tc.want.RetryAfter = tc.wantWait // the snapshot carries the wait too
			assert.Equal(t, tc.want, b.Export(), tc.name)
		}
	})
}

// Save and restore round-trip: an exported record restores to a breaker
// that exports the same record, for every state, at once and after time
// has passed (through JSON too). In particular an Open record whose open
// time has run out keeps its OpenedAt instead of taking the restore time.
func TestSaveRestoreRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		hints := withHints(oauth)
		hints.Window = time.Hour
		for _, r := range []Record{
			{State: Open, Failures: 8, LastFailure: now.Add(-time.Hour)},
			{State: Open, Failures: 8, LastFailure: now.Add(-time.Hour), OpenedAt: now.Add(-2 * time.Hour), OpenCycles: 4},
			{State: Open, Failures: 8, LastFailure: now.Add(-time.Second), LastKind: KindQuotaExhausted, KindFailures: map[Kind]int{KindQuotaExhausted: 3}},
			{State: Open},
			{State: HalfOpen, Failures: 8, LastFailure: now.Add(-time.Hour), OpenCycles: 1},
			{State: HalfOpen},
			{State: Degraded, Failures: 5, LastFailure: now.Add(-time.Minute), LastKind: KindTransient, KindFailures: map[Kind]int{KindTransient: 5}},
			{State: Closed, Failures: 5, LastFailure: now.Add(-time.Minute)},
			{State: Closed, Failures: 2},
			{State: Closed},
		} {
			for _, p := range []Profile{oauth, hints} {
				b := New("p", p, nil)
				require.NoError(t, b.Restore(r))
				first := b.Export()
				for step := range 4 {
					require.NoError(t, b.Restore(first))
					again := b.Export()
					require.Equal(t, first, again, "%+v step %d", r, step)
					raw, err := json.Marshal(again)
					require.NoError(t, err)
					var back Record
					require.NoError(t, json.Unmarshal(raw, &back))
					require.NoError(t, b.Restore(back))
					viaJSON := b.Export()
					assert.True(t, sameRecord(first, viaJSON), "%+v step %d via JSON: %+v", r, step, viaJSON)
					time.Sleep(45 * time.Second)
					first = b.Export() // the state may have moved on with time
				}
			}
		}
	})
}

// sameRecord compares records with time.Time.Equal for the times.
func sameRecord(a, b Record) bool {
	if !a.LastFailure.Equal(b.LastFailure) || !a.OpenedAt.Equal(b.OpenedAt) {
		return false
	}
	a.LastFailure, b.LastFailure, a.OpenedAt, b.OpenedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

func TestRestoreRefuses(t *testing.T) {
	b := New("p", oauth, nil)
	reportN(t, b, Failure, 3)
	for _, r := range []Record{
		{Provider: "q", State: Open},
		{State: State(4)},
		{State: State(255), Failures: 2},
	} {
		err := b.Restore(r)
		require.ErrorIs(t, err, ErrInvalidRecord)
		var re *Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, "invalid_record", re.Code)
		assert.Equal(t, 400, re.Status)
	}
	assert.Equal(t, 3, b.Status().Failures, "a refused record changes nothing")

	var st State
	assert.Error(t, json.Unmarshal([]byte(`"opening"`), &st))
	var r Record
	assert.Error(t, json.Unmarshal([]byte(`{"state":"open","lastKind":"quota"}`), &r))
	assert.Error(t, json.Unmarshal([]byte(`{"state":"open","kindFailures":{"bogus":1}}`), &r))
}

func TestStateText(t *testing.T) {
	for in, want := range map[string]State{
		"closed": Closed, "CLOSED": Closed, "Degraded": Degraded, "OPEN": Open,
		"half-open": HalfOpen, "HALF_OPEN": HalfOpen, " half_open ": HalfOpen,
	} {
		got, err := parseState(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "halfopen", "state(4)"} {
		_, err := parseState(in)
		assert.Error(t, err, in)
	}
}

// Requests admitted before a restore report into an older generation.
func TestRestoreIgnoresOlder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("p", oauth, nil)
		early, err := b.Allow()
		require.NoError(t, err)
		require.NoError(t, b.Restore(Record{State: Closed, Failures: 2}))
		early(Failure)
		assert.Equal(t, 2, b.Status().Failures)
	})
}

// A restored counting window lets the restored failures expire a window
// after the last failure.
func TestRestoreWithWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := oauth
		p.Window = 10 * time.Minute
		b := New("p", p, nil)
		require.NoError(t, b.Restore(Record{State: Degraded, Failures: 6, LastFailure: time.Now().Add(-9 * time.Minute)}))
		requireState(t, b, Degraded, 0)
		report(t, b, Failure)
		assert.Equal(t, 7, b.Status().Failures)
		time.Sleep(time.Minute)
		assert.Equal(t, 1, b.Status().Failures)
	})
}

// Export, JSON, Restore into a fresh Set gives the same records, and the
// hook sees the restored states.
func TestSetExportRestoreRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := oauthSet(nil)
		failN(t, s, "claude", 8) // open
		time.Sleep(time.Minute)
		done, err := s.Allow("claude") // half-open, probe out
		require.NoError(t, err)
		done(Failure)            // open, cycle 1
		failN(t, s, "codex", 5)  // degraded
		failN(t, s, "gemini", 1) // closed
		s.Report("mistral", Report{Outcome: Failure, Kind: KindRateLimit})
		time.Sleep(10 * time.Second)
		recs := s.Export()
		require.Len(t, recs, 4)
		assert.Equal(t, []string{"claude", "codex", "gemini", "mistral"}, []string{recs[0].Provider, recs[1].Provider, recs[2].Provider, recs[3].Provider})
		assert.Equal(t, Open, recs[0].State)
		assert.Equal(t, 1, recs[0].OpenCycles)
		assert.Equal(t, map[Kind]int{KindRateLimit: 1}, recs[3].KindFailures)

		raw, err := json.Marshal(recs)
		require.NoError(t, err)
		assert.Contains(t, string(raw), `"state":"OPEN"`)
		assert.Contains(t, string(raw), `"kindFailures":{"rate_limit":1}`)
		var back []Record
		require.NoError(t, json.Unmarshal(raw, &back))

		var mu sync.Mutex
		var changes []string
		s2 := oauthSet(func(c Event) {
			mu.Lock()
			changes = append(changes, c.Provider+":"+c.From.String()+"→"+c.To.String())
			mu.Unlock()
		})
		require.NoError(t, s2.Restore(back))
		assert.Equal(t, []string{"claude:closed→open", "codex:closed→degraded"}, changes)
		again := s2.Export()
		require.Len(t, again, 4)
		for i := range recs {
			assert.Equal(t, recs[i].State, again[i].State, recs[i].Provider)
			assert.Equal(t, recs[i].Failures, again[i].Failures, recs[i].Provider)
			assert.Equal(t, recs[i].OpenCycles, again[i].OpenCycles, recs[i].Provider)
			assert.Equal(t, recs[i].KindFailures, again[i].KindFailures, recs[i].Provider)
			assert.True(t, recs[i].LastFailure.Equal(again[i].LastFailure), recs[i].Provider)
			assert.True(t, recs[i].OpenedAt.Equal(again[i].OpenedAt), recs[i].Provider)
		}
		assert.Equal(t, s.Snapshot()[0].RetryAfter, s2.Snapshot()[0].RetryAfter)
	})
}

func TestSetRestoreSkipsBadRecords(t *testing.T) {
	s := oauthSet(nil)
	err := s.Restore([]Record{
		{State: Open},
		{Provider: "a", State: State(9)},
		{Provider: "b", State: Degraded, Failures: 5},
	})
	require.ErrorIs(t, err, ErrInvalidRecord)
	assert.Equal(t, 1, s.Len(), "a refused record creates no breaker")
	st, _ := s.State("b")
	assert.Equal(t, Degraded, st)
	assert.NoError(t, s.Restore(nil))
}
