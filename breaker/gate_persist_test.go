package breaker

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A snapshot restored into a new gate at a later now keeps cooling what was
// cooling, until the same instants; the restored gate's snapshot matches.
func TestGateRestoreKeepsRemainingCooldown(t *testing.T) {
	var heard []Event
	src := onGate(GateConfig{})
	// claude (OAuth: 10 in 15 min, 5 min) trips at t0+9 s.
	for i := range 10 {
		src.RecordFailureAt("claude", "", t0.Add(time.Duration(i)*time.Second))
	}
	// c1 of openai: 3 failures, the last at t0+9 s: 5 s·2² = 20 s.
	for i := range 3 {
		src.RecordFailureAt("openai", "c1", t0.Add(time.Duration(7+i)*time.Second))
	}
	snap := src.SnapshotAt(t0.Add(9 * time.Second))
	b, err := json.Marshal(snap)
	require.NoError(t, err)
	var recs []Record
	require.NoError(t, json.Unmarshal(b, &recs))
	require.Equal(t, snap, recs, "records survive JSON")

	later := t0.Add(12 * time.Second) // the restart
	dst := onGate(GateConfig{OnChange: func(e Event) { heard = append(heard, e) }})
	require.NoError(t, dst.RestoreAt(recs, later))

	until, blocked := dst.BlockedUntilAt("claude", "", later)
	assert.True(t, blocked)
	assert.Equal(t, t0.Add(9*time.Second+5*time.Minute), until, "provider cools until its recorded end")
	until, blocked = dst.ConnBlockedUntilAt("openai", "c1", later)
	assert.True(t, blocked)
	assert.Equal(t, t0.Add(29*time.Second), until, "connection cools until its last failure plus its cooldown")
	until, blocked = dst.ConnBlockedUntilAt("openai", "c1", t0.Add(29*time.Second))
	assert.False(t, blocked, "and not after")
	assert.Equal(t, time.Time{}, until)
	_, blocked = dst.BlockedUntilAt("claude", "", t0.Add(9*time.Second+5*time.Minute+1))
	assert.False(t, blocked)

	assert.Equal(t, src.SnapshotAt(later), dst.SnapshotAt(later))
	require.Len(t, heard, 2, "the hook hears the restored cooldowns")
	assert.Equal(t, Event{Provider: "claude", From: Closed, To: Open, At: later, Until: t0.Add(9*time.Second + 5*time.Minute),
		Failures: 10, LastFailure: t0.Add(9 * time.Second)}, heard[0])

	// The restored connection escalates: its 4th failure cools it 40 s.
	dst.RecordFailureAt("openai", "c1", t0.Add(time.Minute))
	until, _ = dst.ConnBlockedUntilAt("openai", "c1", t0.Add(time.Minute))
	assert.Equal(t, t0.Add(time.Minute+40*time.Second), until)
}

func TestGateRestoreTable(t *testing.T) {
	now := t0.Add(time.Hour)
	cases := []struct {
		name     string
		r        Record
		blocked  bool
		until    time.Time
		failures int // of the entry afterwards; -1: no entry
	}{
		{"cooling provider", Record{Provider: "openai", State: Open, Failures: 15, LastFailure: now.Add(-time.Minute), Until: now.Add(9 * time.Minute)},
			true, now.Add(9 * time.Minute), 15},
		{"cooldown ended: dropped from cooling, one below the threshold", Record{Provider: "openai", State: Open, Failures: 15, LastFailure: now.Add(-11 * time.Minute), Until: now.Add(-time.Minute)},
			false, time.Time{}, 14},
		{"until beyond the profile is capped", Record{Provider: "openai", State: Open, Failures: 15, LastFailure: now, Until: now.Add(time.Hour)},
			true, now.Add(10 * time.Minute), 15},
		{"closed record does not cool", Record{Provider: "openai", Failures: 3, LastFailure: now.Add(-time.Minute), Until: now.Add(time.Minute)},
			false, time.Time{}, 3},
		{"failures outside the window are not counted", Record{Provider: "claude", Failures: 3, LastFailure: now.Add(-20 * time.Minute)},
			false, time.Time{}, 0},
		{"nothing left: dropped", Record{Provider: "openai", Failures: 3, LastFailure: now.Add(-2 * time.Hour)},
			false, time.Time{}, -1},
		{"future times are now", Record{Provider: "openai", State: Open, Failures: 20, LastFailure: now.Add(time.Hour), Until: now.Add(time.Minute)},
			true, now.Add(time.Minute), 15},
		{"cooling connection", Record{Provider: "openai", Connection: "c1", State: Open, Failures: 1, LastFailure: now.Add(-time.Second)},
			true, now.Add(4 * time.Second), 1},
		{"connection's Until is not read", Record{Provider: "openai", Connection: "c1", State: Open, Failures: 2, LastFailure: now, Until: now.Add(time.Hour)},
			true, now.Add(10 * time.Second), 2},
		{"connection past its cooldown keeps its count", Record{Provider: "openai", Connection: "c1", Failures: 5, LastFailure: now.Add(-10 * time.Minute)},
			false, time.Time{}, 5},
		{"idle connection dropped", Record{Provider: "openai", Connection: "c1", Failures: 5, LastFailure: now.Add(-31 * time.Minute)},
			false, time.Time{}, -1},
		{"negative count", Record{Provider: "openai", Connection: "c1", Failures: -3, LastFailure: now},
			false, time.Time{}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := onGate(GateConfig{})
			require.NoError(t, g.RestoreAt([]Record{tc.r}, now))
			var until time.Time
			var blocked bool
			if tc.r.Connection == "" {
				until, blocked = g.BlockedUntilAt(tc.r.Provider, "", now)
			} else {
				until, blocked = g.ConnBlockedUntilAt(tc.r.Provider, tc.r.Connection, now)
			}
			assert.Equal(t, tc.blocked, blocked)
			assert.Equal(t, tc.until, until)
			snap := g.SnapshotAt(now)
			if tc.failures < 0 {
				assert.Empty(t, snap)
				return
			}
			require.Len(t, snap, 1)
			assert.Equal(t, tc.failures, snap[0].Failures)
		})
	}
}

// A restored provider one failure below its threshold trips on the next
// failure inside the window, as it would have without the restart.
func TestGateRestoredProviderTripsOnNextFailure(t *testing.T) {
	g := onGate(GateConfig{})
	require.NoError(t, g.RestoreAt([]Record{{Provider: "openai", Failures: 14, LastFailure: t0}}, t0.Add(time.Minute)))
	g.RecordFailureAt("openai", "", t0.Add(2*time.Minute))
	until, blocked := g.BlockedUntilAt("openai", "", t0.Add(2*time.Minute))
	assert.True(t, blocked)
	assert.Equal(t, t0.Add(12*time.Minute), until)
}

func TestGateRestoreRefusesAndReplaces(t *testing.T) {
	g := onGate(GateConfig{})
	err := g.RestoreAt([]Record{{Provider: ""}, {Provider: "unknown"}, {Provider: "openai", Connection: "c1", Failures: 1, LastFailure: t0}}, t0)
	require.ErrorIs(t, err, ErrInvalidRecord)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, CodeInvalidRecord, e.Code)
	_, blocked := g.ConnBlockedUntilAt("openai", "c1", t0)
	assert.True(t, blocked, "the valid record is restored")

	// A record replaces the entry of its key.
	require.NoError(t, g.RestoreAt([]Record{{Provider: "openai", Connection: "c1", Failures: 0, LastFailure: t0}}, t0))
	_, blocked = g.ConnBlockedUntilAt("openai", "c1", t0)
	assert.False(t, blocked)

	off := NewGate(GateConfig{})
	require.NoError(t, off.RestoreAt([]Record{{Provider: "openai", State: Open, Failures: 15, LastFailure: t0, Until: t0.Add(time.Minute)}}, t0))
	assert.Empty(t, off.SnapshotAt(t0), "a disabled gate restores nothing")
}

func TestGateRestoreRespectsMaxEntries(t *testing.T) {
	g := onGate(GateConfig{MaxEntries: 2})
	recs := []Record{
		{Provider: "a", Failures: 1, LastFailure: t0},
		{Provider: "b", Failures: 1, LastFailure: t0.Add(time.Second)},
		{Provider: "c", Failures: 1, LastFailure: t0.Add(2 * time.Second)},
	}
	require.NoError(t, g.RestoreAt(recs, t0.Add(time.Minute)))
	snap := g.SnapshotAt(t0.Add(time.Minute))
	require.Len(t, snap, 2)
	assert.Equal(t, []string{"b", "c"}, []string{snap[0].Provider, snap[1].Provider}, "the oldest entry goes first")
}
