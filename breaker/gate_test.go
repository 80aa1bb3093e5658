package breaker

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func onGate(s GateSettings) *Gate {
	s.Enabled = true
	return NewGate(GateConfig{Settings: s, ClassOf: classOf})
}

// Spec M2.3 #1: off by default; failures never block.
func TestGateOffByDefault(t *testing.T) {
	g := NewGate(GateConfig{})
	assert.False(t, g.Enabled())
	for i := range 100 {
		g.RecordFailureAt("openai", "c1", t0.Add(time.Duration(i)*time.Second))
	}
	_, blocked := g.BlockedUntilAt("openai", t0.Add(100*time.Second))
	assert.False(t, blocked)
	_, blocked = g.ConnBlockedUntilAt("openai", "c1", t0.Add(100*time.Second))
	assert.False(t, blocked)
	assert.Empty(t, g.SnapshotAt(t0))
}

// Spec M2.3 #3: oauth trips on the 10th failure in 15 min, for 5 min.
func TestScenarioGateOAuth(t *testing.T) {
	g := onGate(GateSettings{})
	for i := range 9 {
		g.RecordFailureAt("claude", "", t0.Add(time.Duration(i)*time.Minute))
	}
	_, blocked := g.BlockedUntilAt("claude", t0.Add(9*time.Minute))
	assert.False(t, blocked)
	T := t0.Add(14 * time.Minute)
	g.RecordFailureAt("claude", "", T)
	until, blocked := g.BlockedUntilAt("claude", T)
	assert.True(t, blocked)
	assert.Equal(t, T.Add(5*time.Minute), until)
	_, blocked = g.BlockedUntilAt("claude", T.Add(300000*time.Millisecond-time.Millisecond))
	assert.True(t, blocked)
	_, blocked = g.BlockedUntilAt("claude", T.Add(300001*time.Millisecond))
	assert.False(t, blocked)
}

// Spec M2.3 #4: apikey trips on the 15th failure, for 10 min.
func TestScenarioGateAPIKey(t *testing.T) {
	g := onGate(GateSettings{})
	for i := range 14 {
		g.RecordFailureAt("openai", "", t0.Add(time.Duration(i)*2*time.Minute))
	}
	_, blocked := g.BlockedUntilAt("openai", t0.Add(28*time.Minute))
	assert.False(t, blocked)
	T := t0.Add(29 * time.Minute)
	g.RecordFailureAt("openai", "", T)
	until, blocked := g.BlockedUntilAt("openai", T)
	assert.True(t, blocked)
	assert.Equal(t, 10*time.Minute, until.Sub(T))
}

// Spec M2.3 #5: a sliding window; a failure exactly one window old is out.
func TestScenarioGateSlidingWindow(t *testing.T) {
	g := onGate(GateSettings{})
	for i := range 9 {
		g.RecordFailureAt("claude", "", t0.Add(time.Duration(i)*time.Minute))
	}
	// Minute 15: the failure of minute 0 is exactly one window old.
	g.RecordFailureAt("claude", "", t0.Add(15*time.Minute))
	_, blocked := g.BlockedUntilAt("claude", t0.Add(15*time.Minute))
	assert.False(t, blocked)
	// Minute 16: only minutes 2…8 and 15, 16 are inside.
	g.RecordFailureAt("claude", "", t0.Add(16*time.Minute))
	_, blocked = g.BlockedUntilAt("claude", t0.Add(16*time.Minute))
	assert.False(t, blocked)
	st := g.SnapshotAt(t0.Add(16 * time.Minute))
	require.Len(t, st, 1)
	assert.Equal(t, 9, st[0].Failures)
}

func TestGateSuccessClearsWindow(t *testing.T) {
	g := onGate(GateSettings{})
	for i := range 10 {
		g.RecordFailureAt("claude", "c1", t0.Add(time.Duration(i)*time.Second))
	}
	_, blocked := g.BlockedUntilAt("claude", t0.Add(10*time.Second))
	require.True(t, blocked)
	g.RecordSuccessAt("claude", "c1", t0.Add(10*time.Second))
	_, blocked = g.BlockedUntilAt("claude", t0.Add(10*time.Second))
	assert.False(t, blocked)
	_, blocked = g.ConnBlockedUntilAt("claude", "c1", t0.Add(10*time.Second))
	assert.False(t, blocked)
	assert.Len(t, g.SnapshotAt(t0), 2, "a success keeps the entries")
}

// Spec M2.3 #6: connection cooldown by failure count.
func TestScenarioGateConnectionCooldown(t *testing.T) {
	g := onGate(GateSettings{MinRetryCooldown: 5 * time.Second, MaxRetryCooldown: 5 * time.Minute})
	want := map[int]time.Duration{1: 5 * time.Second, 2: 10 * time.Second, 3: 20 * time.Second, 5: 80 * time.Second, 6: 80 * time.Second}
	for n, d := range want {
		assert.Equal(t, d, g.ConnCooldown(n), "ConnCooldown(%d)", n)
		conn := "c" + strconv.Itoa(n)
		for range n {
			g.RecordFailureAt("openai", conn, t0)
		}
		until, blocked := g.ConnBlockedUntilAt("openai", conn, t0.Add(d-time.Millisecond))
		assert.True(t, blocked)
		assert.Equal(t, t0.Add(d), until)
		_, blocked = g.ConnBlockedUntilAt("openai", conn, t0.Add(d))
		assert.False(t, blocked)
	}
	assert.Equal(t, time.Duration(0), g.ConnCooldown(0))
	small := onGate(GateSettings{MinRetryCooldown: time.Minute, MaxRetryCooldown: 2 * time.Minute})
	assert.Equal(t, 2*time.Minute, small.ConnCooldown(5), "capped at the max")
}

// Spec M2.3 #7 (env part in env_test.go): a threshold of 3 trips at 3.
func TestGateCustomThreshold(t *testing.T) {
	g := onGate(GateSettings{OAuth: WindowProfile{Threshold: 3}})
	for i := range 3 {
		_, blocked := g.BlockedUntilAt("claude", t0)
		assert.False(t, blocked, "after %d", i)
		g.RecordFailureAt("claude", "", t0)
	}
	_, blocked := g.BlockedUntilAt("claude", t0)
	assert.True(t, blocked)
}

// Spec M2.3 #8: empty and "unknown" providers are never stored.
func TestScenarioGateUnknownProvider(t *testing.T) {
	g := onGate(GateSettings{})
	for range 20 {
		g.RecordFailureAt("", "c1", t0)
		g.RecordFailureAt("unknown", "c1", t0)
	}
	assert.Empty(t, g.SnapshotAt(t0))
	_, blocked := g.BlockedUntilAt("unknown", t0)
	assert.False(t, blocked)
}

// Spec M2.3 #9: with max 1 h, 40 min idle survives, 61 min is dropped.
func TestScenarioGateCleanup(t *testing.T) {
	g := onGate(GateSettings{MaxRetryCooldown: time.Hour})
	g.RecordFailureAt("openai", "old", t0)
	g.RecordFailureAt("openai", "new", t0.Add(21*time.Minute))
	g.PruneAt(t0.Add(61 * time.Minute))
	st := g.SnapshotAt(t0.Add(61 * time.Minute))
	require.Len(t, st, 2)
	assert.Equal(t, "openai", st[0].Provider)
	assert.Equal(t, "", st[0].Connection)
	assert.Equal(t, "new", st[1].Connection)
}

// Spec M2.3 #10: Validate refuses max < min; Normalize raises max.
func TestScenarioGateValidate(t *testing.T) {
	s := GateSettings{MinRetryCooldown: 10 * time.Second, MaxRetryCooldown: 5 * time.Second}
	err := s.Validate()
	require.ErrorIs(t, err, ErrInvalidSettings)
	var se *SettingsError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 400, se.HTTPStatus())
	assert.Equal(t, 10*time.Second, s.Normalize().MaxRetryCooldown)
	assert.NoError(t, GateSettings{}.Validate())
}

func TestGateBoundedEntries(t *testing.T) {
	g := onGate(GateSettings{MaxEntries: 4})
	for i := range 10 {
		g.RecordFailureAt("p"+strconv.Itoa(i), "c", t0.Add(time.Duration(i)*time.Second))
	}
	st := g.SnapshotAt(t0)
	assert.Len(t, st, 8) // 4 providers, 4 connections
	assert.Equal(t, "p6", st[0].Provider)
}

func TestGateClockBackwards(t *testing.T) {
	g := onGate(GateSettings{OAuth: WindowProfile{Threshold: 2}})
	g.RecordFailureAt("claude", "", t0)
	g.RecordFailureAt("claude", "", t0.Add(-time.Hour)) // treated as t0
	until, blocked := g.BlockedUntilAt("claude", t0)
	assert.True(t, blocked)
	assert.Equal(t, t0.Add(5*time.Minute), until)
}

func TestGateClearAndChecksDoNotAllocate(t *testing.T) {
	g := onGate(GateSettings{})
	g.RecordFailureAt("openai", "c1", t0)
	assert.Zero(t, testing.AllocsPerRun(1000, func() {
		g.BlockedUntilAt("openai", t0)
		g.ConnBlockedUntilAt("openai", "c1", t0)
	}))
	g.Clear()
	assert.Empty(t, g.SnapshotAt(t0))
	g.RecordFailure("openai", "c1")
	g.RecordSuccess("openai", "c1")
	_, blocked := g.BlockedUntil("openai")
	assert.False(t, blocked)
	_, blocked = g.ConnBlockedUntil("openai", "c1")
	assert.False(t, blocked)
	assert.Len(t, g.Snapshot(), 2)
}
