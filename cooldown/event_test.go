package cooldown

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard"
)

// recorder returns a Config whose OnChange appends to the returned slice.
func recorder(c Config) (Config, *[]Event) {
	var events []Event
	c.OnChange = func(e Event) { events = append(events, e) }
	return c, &events
}

// An event carries the key, the caller's now, what happened, the state
// before and the whole status after the change, for every kind of change.
func TestEventCarriesStateAfterChange(t *testing.T) {
	cfg, events := recorder(Config{})
	tr := New(cfg)
	tr.RegisterAt("k1", Options{Provider: "openai"}, t0)
	tr.FailAt("k1", rateLimit, t0)
	tr.FailAt("k1", Failure{Status: 429, Reason: "quota_exhausted", Cooldown: time.Minute}, t0.Add(time.Second))
	tr.SucceedAt("k1", t0.Add(2*time.Minute))
	tr.FailAt("k1", Failure{Status: 503, Reason: "server_error", Cooldown: time.Hour}, t0.Add(3*time.Minute))
	tr.ClearAt(Selector{IDs: []string{"k1"}}, t0.Add(4*time.Minute))
	tr.FailAt("k1", Failure{Status: 401, Reason: "auth_error"}, t0.Add(5*time.Minute))
	tr.ResetAt(Selector{All: true}, t0.Add(6*time.Minute))

	assert.Equal(t, []Event{
		{Conn: "k1", Provider: "openai", At: t0, Action: Episode, State: Cooling, Until: t0.Add(3 * time.Second),
			Reason: "rate_limit_exceeded", Level: 1, From: Available},
		{Conn: "k1", Provider: "openai", At: t0.Add(time.Second), Action: Extended, State: Cooling,
			Until: t0.Add(time.Second + time.Minute), Reason: "quota_exhausted", Level: 1, From: Cooling},
		{Conn: "k1", Provider: "openai", At: t0.Add(2 * time.Minute), Action: Succeeded, State: Available, From: Available},
		{Conn: "k1", Provider: "openai", At: t0.Add(3 * time.Minute), Action: Episode, State: Cooling,
			Until: t0.Add(3*time.Minute + time.Hour), Reason: "server_error", From: Available},
		{Conn: "k1", Provider: "openai", At: t0.Add(4 * time.Minute), Action: Cleared, State: Available, From: Cooling},
		{Conn: "k1", Provider: "openai", At: t0.Add(5 * time.Minute), Action: Terminated, State: Expired,
			Reason: "auth_error", From: Available},
		{Conn: "k1", Provider: "openai", At: t0.Add(6 * time.Minute), Action: Reset, State: Available, From: Expired},
	}, *events)
}

// A success, clear or reset that leaves nothing to keep removes the entry,
// and its event says so.
func TestClearThatDropsTheEntryReportsRemoved(t *testing.T) {
	cfg, events := recorder(Config{})
	tr := New(cfg)
	tr.FailAt("k1", rateLimit, t0)
	tr.SucceedAt("k1", t0.Add(time.Second))
	require.Len(t, *events, 2)
	assert.Equal(t, Event{Conn: "k1", At: t0.Add(time.Second), Action: Succeeded, State: Available, From: Cooling, Removed: true}, (*events)[1])
	assert.Empty(t, tr.SnapshotAt(t0), "the entry is gone")

	tr.FailAt("k2", Failure{Status: 403, Reason: "auth_error", Permanent: true}, t0)
	tr.ResetAt(Selector{IDs: []string{"k2"}}, t0.Add(time.Second))
	assert.Equal(t, Event{Conn: "k2", At: t0.Add(time.Second), Action: Reset, State: Available, From: Banned, Removed: true}, (*events)[3])
}

// ForgetAt and RegisterAt with zero Options report the entries they drop;
// nothing is reported for a connection without an entry.
func TestForgetAndUnregisterReportRemoved(t *testing.T) {
	cfg, events := recorder(Config{})
	tr := New(cfg)
	tr.ForgetAt("nobody", t0)
	tr.RegisterAt("nobody", Options{}, t0)
	assert.Empty(t, *events)

	tr.RegisterAt("k1", Options{Provider: "openai", Class: routeguard.OAuth}, t0)
	tr.FailAt("k1", Failure{Status: 401, Reason: "auth_error"}, t0)
	tr.ForgetAt("k1", t0.Add(time.Minute))
	require.Len(t, *events, 2)
	assert.Equal(t, Event{Conn: "k1", Provider: "openai", At: t0.Add(time.Minute), Action: Dropped, State: Available,
		From: Expired, Removed: true}, (*events)[1])
	assert.Equal(t, Status{}, tr.StatusAt("k1", t0.Add(time.Minute)))

	tr.RegisterAt("k2", Options{Provider: "openai"}, t0)
	tr.RegisterAt("k2", Options{}, t0)
	require.Len(t, *events, 3)
	assert.Equal(t, Event{Conn: "k2", Provider: "openai", At: t0, Action: Dropped, State: Available, From: Available, Removed: true}, (*events)[2])
}

// The lazy pruning of idle entries and the eviction under MaxEntries report
// every entry they drop, after the event of the write that caused them.
func TestPruneAndEvictionReportRemoved(t *testing.T) {
	cfg, events := recorder(Config{})
	tr := New(cfg)
	f := Failure{Status: 503, Reason: "server_error", Cooldown: time.Second}
	for i := range 1000 {
		tr.FailAt(fmt.Sprint("c", i), f, t0)
	}
	*events = (*events)[:0]
	later := t0.Add(time.Minute)
	for i := range minSweepInterval {
		tr.FailAt(fmt.Sprint("d", i), f, later)
	}
	pruned := map[string]bool{}
	first := -1
	for i, e := range *events {
		if e.Removed {
			assert.Equal(t, Event{Conn: e.Conn, At: later, Action: Dropped, State: Available, From: Available, Removed: true, Cause: causeIdle}, e)
			assert.False(t, pruned[e.Conn], "%s reported twice", e.Conn)
			pruned[e.Conn] = true
			if first < 0 {
				first = i
			}
		}
	}
	assert.Len(t, pruned, 1000, "every lapsed entry is reported")
	require.Positive(t, first)
	assert.Equal(t, Episode, (*events)[first-1].Action, "the write's own event comes first")
	assert.Equal(t, "d", (*events)[first-1].Conn[:1])
	for c := range pruned {
		assert.Equal(t, "c", c[:1])
	}

	cfg, events = recorder(Config{MaxEntries: 16})
	tr = New(cfg)
	for i := range 17 {
		tr.FailAt(fmt.Sprintf("c%02d", i), Failure{Status: 503, Cooldown: time.Duration(i+1) * time.Minute}, t0)
	}
	// The 17th write went over the cap: the earliest-ending cooldowns were
	// evicted, down to nine tenths of the cap, after that write's event.
	evicted := (*events)[17:]
	require.Equal(t, Episode, (*events)[16].Action)
	require.Len(t, evicted, 17-16*9/10)
	got := map[string]bool{}
	for _, e := range evicted {
		assert.Equal(t, Event{Conn: e.Conn, At: t0, Action: Dropped, State: Available, From: Cooling, Removed: true, Cause: causeMaxEntries}, e)
		assert.Equal(t, Status{}, tr.StatusAt(e.Conn, t0))
		got[e.Conn] = true
	}
	assert.Equal(t, map[string]bool{"c00": true, "c01": true, "c02": true}, got, "the earliest-ending cooldowns")
}

// A sibling cooled by the egress-IP family lockout names the connection
// whose failure cooled it; one that was cooling already is extended.
func TestEgressSiblingEventNamesSource(t *testing.T) {
	cfg, events := recorder(Config{})
	tr := egressFixture(cfg)
	tr.FailAt("S1", Failure{Status: 503, Reason: "server_error", Cooldown: time.Second}, t0)
	*events = (*events)[:0]
	tr.FailAt("C", egressLimit, t0)
	require.Len(t, *events, 3)
	until := t0.Add(3 * time.Second)
	assert.Equal(t, Event{Conn: "S1", Provider: "opencode-go", At: t0, Action: Extended, State: Cooling, Until: until,
		Reason: "rate_limit_exceeded", From: Cooling, Source: "C"}, (*events)[1])
	assert.Equal(t, Event{Conn: "S2", Provider: "opencode-go", At: t0, Action: Episode, State: Cooling, Until: until,
		Reason: "rate_limit_exceeded", From: Available, Source: "C"}, (*events)[2])
}
