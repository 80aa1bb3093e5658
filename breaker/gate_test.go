package breaker

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func onGate(c GateConfig) *Gate {
	c.Enabled = true
	c.ClassOf = classOf
	return NewGate(c)
}

// Spec M2.3 #1: off by default; failures never block.
func TestGateOffByDefault(t *testing.T) {
	g := NewGate(GateConfig{})
	assert.False(t, g.Enabled())
	for i := range 100 {
		g.RecordFailureAt("openai", "c1", t0.Add(time.Duration(i)*time.Second))
	}
	_, blocked := g.BlockedUntilAt("openai", "", t0.Add(100*time.Second))
	assert.False(t, blocked)
	_, blocked = g.ConnBlockedUntilAt("openai", "c1", t0.Add(100*time.Second))
	assert.False(t, blocked)
	assert.Empty(t, g.SnapshotAt(t0))
}

// Spec M2.3 #3: oauth trips on the 10th failure in 15 min, for 5 min.
func TestScenarioGateOAuth(t *testing.T) {
	g := onGate(GateConfig{})
	for i := range 9 {
		g.RecordFailureAt("claude", "", t0.Add(time.Duration(i)*time.Minute))
	}
	_, blocked := g.BlockedUntilAt("claude", "", t0.Add(9*time.Minute))
	assert.False(t, blocked)
	T := t0.Add(14 * time.Minute)
	g.RecordFailureAt("claude", "", T)
	until, blocked := g.BlockedUntilAt("claude", "", T)
	assert.True(t, blocked)
	assert.Equal(t, T.Add(5*time.Minute), until)
	_, blocked = g.BlockedUntilAt("claude", "", T.Add(300000*time.Millisecond-time.Millisecond))
	assert.True(t, blocked)
	until, blocked = g.BlockedUntilAt("claude", "", T.Add(300000*time.Millisecond))
	assert.True(t, blocked, "cooling until T+300000, that instant included")
	assert.Equal(t, T.Add(5*time.Minute), until)
	_, blocked = g.BlockedUntilAt("claude", "", T.Add(300001*time.Millisecond))
	assert.False(t, blocked)
}

// The end of a provider cooldown is inclusive: cooling at T+cooldown, not at
// T+cooldown+1ns, in BlockedUntilAt and in snapshots alike; the entry is not
// pruned while cooling.
func TestGateCooldownEndInclusive(t *testing.T) {
	g := onGate(GateConfig{OAuth: WindowProfile{Threshold: 2, Cooldown: time.Minute}})
	T := t0.Add(time.Second)
	g.RecordFailureAt("claude", "", t0)
	g.RecordFailureAt("claude", "", T)
	end := T.Add(time.Minute)
	for _, tc := range []struct {
		at      time.Time
		blocked bool
	}{{T, true}, {end.Add(-time.Nanosecond), true}, {end, true}, {end.Add(time.Nanosecond), false}, {end.Add(time.Hour), false}} {
		until, blocked := g.BlockedUntilAt("claude", "", tc.at)
		assert.Equal(t, tc.blocked, blocked, "at end%+v", tc.at.Sub(end))
		snap := g.SnapshotAt(tc.at)
		require.Len(t, snap, 1)
		if tc.blocked {
			assert.Equal(t, end, until)
			assert.Equal(t, end, snap[0].Until, "snapshot at end%+v", tc.at.Sub(end))
		} else {
			assert.True(t, until.IsZero())
			assert.True(t, snap[0].Until.IsZero(), "snapshot at end%+v", tc.at.Sub(end))
		}
	}
	// With a long cooldown, the entry outlives the retention while it cools,
	// up to and including the end instant.
	long := onGate(GateConfig{OAuth: WindowProfile{Threshold: 1, Cooldown: 2 * time.Hour}})
	long.RecordFailureAt("claude", "", t0)
	long.PruneAt(t0.Add(2 * time.Hour))
	assert.Len(t, long.SnapshotAt(t0), 1, "cooling at its end instant: kept")
	long.PruneAt(t0.Add(2*time.Hour + time.Nanosecond))
	assert.Empty(t, long.SnapshotAt(t0))
}

// Zero is a value for the minimum retry cooldown: MinRetry nil is the
// default 5 s, 0 is 0 (a connection never cools), −1 clamps to 0 and not
// to 1 ms, and the top of the range is 1 h.
func TestGateZeroMinRetryCooldown(t *testing.T) {
	cases := []struct {
		name string
		min  *time.Duration
		want time.Duration
	}{
		{"nil", nil, 5 * time.Second},
		{"zero", new(time.Duration(0)), 0},
		{"minus one", new(time.Duration(-1)), 0},
		{"negative", new(-time.Hour), 0},
		{"one ms", new(time.Millisecond), time.Millisecond},
		{"above the range", new(2 * time.Hour), time.Hour},
	}
	for _, tc := range cases {
		s := GateConfig{Enabled: true, MinRetry: tc.min}
		n := s.Normalize()
		require.NotNil(t, n.MinRetry, tc.name)
		assert.Equal(t, tc.want, *n.MinRetry, tc.name)
		assert.Equal(t, n, n.Normalize(), "%s: idempotent", tc.name)
		assert.NotSame(t, n.MinRetry, n.Normalize().MinRetry, "%s: a new pointer every time", tc.name)
		assert.GreaterOrEqual(t, n.MaxRetry, tc.want, tc.name)
		assert.NoError(t, s.Validate(), tc.name)
		if tc.min != nil {
			assert.NotSame(t, tc.min, n.MinRetry, "%s: the caller's pointer is not shared", tc.name)
			assert.Equal(t, tc.min, s.MinRetry, "%s: the caller's pointer is not written", tc.name)
		}
		g := NewGate(s)
		assert.Equal(t, tc.want, g.ConnCooldown(1), tc.name)
		assert.Equal(t, min(tc.want*16, n.MaxRetry), g.ConnCooldown(9), tc.name)
	}
	g := onGate(GateConfig{MinRetry: new(time.Duration(0))})
	for range 6 {
		g.RecordFailureAt("openai", "c1", t0)
	}
	_, blocked := g.ConnBlockedUntilAt("openai", "c1", t0)
	assert.False(t, blocked, "a zero cooldown never cools the connection")
	snap := g.SnapshotAt(t0)
	require.Len(t, snap, 2)
	assert.True(t, snap[1].Until.IsZero())
	assert.Equal(t, 6, snap[1].Failures)
	// A zero minimum with an explicit maximum is valid; a maximum below an
	// explicit minimum is refused.
	assert.NoError(t, GateConfig{MinRetry: new(time.Duration(0)), MaxRetry: time.Second}.Validate())
	assert.ErrorIs(t, GateConfig{MinRetry: new(time.Minute), MaxRetry: time.Second}.Validate(), ErrInvalidConfig)
}

// Spec M2.3 #4: apikey trips on the 15th failure, for 10 min.
func TestScenarioGateAPIKey(t *testing.T) {
	g := onGate(GateConfig{})
	for i := range 14 {
		g.RecordFailureAt("openai", "", t0.Add(time.Duration(i)*2*time.Minute))
	}
	_, blocked := g.BlockedUntilAt("openai", "", t0.Add(28*time.Minute))
	assert.False(t, blocked)
	T := t0.Add(29 * time.Minute)
	g.RecordFailureAt("openai", "", T)
	until, blocked := g.BlockedUntilAt("openai", "", T)
	assert.True(t, blocked)
	assert.Equal(t, 10*time.Minute, until.Sub(T))
}

// Spec M2.3 #5: a sliding window; a failure exactly one window old is out.
func TestScenarioGateSlidingWindow(t *testing.T) {
	g := onGate(GateConfig{})
	for i := range 9 {
		g.RecordFailureAt("claude", "", t0.Add(time.Duration(i)*time.Minute))
	}
	// Minute 15: the failure of minute 0 is exactly one window old.
	g.RecordFailureAt("claude", "", t0.Add(15*time.Minute))
	_, blocked := g.BlockedUntilAt("claude", "", t0.Add(15*time.Minute))
	assert.False(t, blocked)
	// Minute 16: only minutes 2…8 and 15, 16 are inside.
	g.RecordFailureAt("claude", "", t0.Add(16*time.Minute))
	_, blocked = g.BlockedUntilAt("claude", "", t0.Add(16*time.Minute))
	assert.False(t, blocked)
	st := g.SnapshotAt(t0.Add(16 * time.Minute))
	require.Len(t, st, 1)
	assert.Equal(t, 9, st[0].Failures)
}

func TestGateSuccessClearsWindow(t *testing.T) {
	g := onGate(GateConfig{})
	for i := range 10 {
		g.RecordFailureAt("claude", "c1", t0.Add(time.Duration(i)*time.Second))
	}
	_, blocked := g.BlockedUntilAt("claude", "", t0.Add(10*time.Second))
	require.True(t, blocked)
	g.RecordSuccessAt("claude", "c1", t0.Add(10*time.Second))
	_, blocked = g.BlockedUntilAt("claude", "", t0.Add(10*time.Second))
	assert.False(t, blocked)
	_, blocked = g.ConnBlockedUntilAt("claude", "c1", t0.Add(10*time.Second))
	assert.False(t, blocked)
	assert.Len(t, g.SnapshotAt(t0), 2, "a success keeps the entries")
}

// Spec M2.3 #6: connection cooldown by failure count.
func TestScenarioGateConnectionCooldown(t *testing.T) {
	g := onGate(GateConfig{MinRetry: new(5 * time.Second), MaxRetry: 5 * time.Minute})
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
	small := onGate(GateConfig{MinRetry: new(time.Minute), MaxRetry: 2 * time.Minute})
	assert.Equal(t, 2*time.Minute, small.ConnCooldown(5), "capped at the max")
}

// Spec M2.3 #7 (env part in env_test.go): a threshold of 3 trips at 3.
func TestGateCustomThreshold(t *testing.T) {
	g := onGate(GateConfig{OAuth: WindowProfile{Threshold: 3}})
	for i := range 3 {
		_, blocked := g.BlockedUntilAt("claude", "", t0)
		assert.False(t, blocked, "after %d", i)
		g.RecordFailureAt("claude", "", t0)
	}
	_, blocked := g.BlockedUntilAt("claude", "", t0)
	assert.True(t, blocked)
}

// Spec M2.3 #8: empty and "unknown" providers are never stored.
func TestScenarioGateUnknownProvider(t *testing.T) {
	g := onGate(GateConfig{})
	for range 20 {
		g.RecordFailureAt("", "c1", t0)
		g.RecordFailureAt("unknown", "c1", t0)
	}
	assert.Empty(t, g.SnapshotAt(t0))
	_, blocked := g.BlockedUntilAt("unknown", "", t0)
	assert.False(t, blocked)
}

// Spec M2.3 #9: with max 1 h, 40 min idle survives, 61 min is dropped.
func TestScenarioGateCleanup(t *testing.T) {
	g := onGate(GateConfig{MaxRetry: time.Hour})
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
	s := GateConfig{MinRetry: new(10 * time.Second), MaxRetry: 5 * time.Second}
	err := s.Validate()
	require.ErrorIs(t, err, ErrInvalidConfig)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, 400, e.Status)
	assert.Equal(t, CodeInvalidConfig, e.Code)
	assert.Equal(t, "MaxRetry", e.Field)
	assert.Equal(t, "breaker: invalid_config: MaxRetry=\"5s\": below MinRetry 10s", e.Error())
	assert.Equal(t, 10*time.Second, s.Normalize().MaxRetry)
	assert.NoError(t, GateConfig{}.Validate())
	assert.NoError(t, GateConfig{MaxRetry: time.Millisecond}.Validate(), "no explicit minimum: nothing to refuse")
}

func TestGateBoundedEntries(t *testing.T) {
	g := onGate(GateConfig{MaxEntries: 4})
	for i := range 10 {
		g.RecordFailureAt("p"+strconv.Itoa(i), "c", t0.Add(time.Duration(i)*time.Second))
	}
	st := g.SnapshotAt(t0)
	assert.Len(t, st, 8) // 4 providers, 4 connections
	assert.Equal(t, "p6", st[0].Provider)
}

func TestGateClockBackwards(t *testing.T) {
	g := onGate(GateConfig{OAuth: WindowProfile{Threshold: 2}})
	g.RecordFailureAt("claude", "", t0)
	g.RecordFailureAt("claude", "", t0.Add(-time.Hour)) // treated as t0
	until, blocked := g.BlockedUntilAt("claude", "", t0)
	assert.True(t, blocked)
	assert.Equal(t, t0.Add(5*time.Minute), until)
}

func TestGateChecksDoNotAllocate(t *testing.T) {
	g := onGate(GateConfig{})
	g.RecordFailureAt("openai", "c1", t0)
	assert.Zero(t, testing.AllocsPerRun(1000, func() {
		g.BlockedUntilAt("openai", "", t0)
		g.BlockedUntilAt("openai", "c1", t0)
		g.BlockedUntilAt("nobody", "c1", t0)
	}))
	off := NewGate(GateConfig{})
	assert.Zero(t, testing.AllocsPerRun(1000, func() { off.BlockedUntilAt("openai", "c1", t0) }), "a disabled gate's check")
}

// BlockedUntilAt with a connection asks the provider first, then the
// connection: the provider's until (inclusive) wins while it cools, then
// the connection's (exclusive).
func TestGateBlockedUntilProviderThenConnection(t *testing.T) {
	g := onGate(GateConfig{MinRetry: new(time.Hour), MaxRetry: time.Hour,
		OAuth: WindowProfile{Threshold: 1, Cooldown: time.Minute}})
	g.RecordFailureAt("claude", "c1", t0)
	until, blocked := g.BlockedUntilAt("claude", "c1", t0)
	assert.True(t, blocked)
	assert.Equal(t, t0.Add(time.Minute), until, "the provider's cooldown first")
	until, blocked = g.BlockedUntilAt("claude", "c1", t0.Add(2*time.Minute))
	assert.True(t, blocked)
	assert.Equal(t, t0.Add(time.Hour), until, "then the connection's")
	until, blocked = g.BlockedUntilAt("claude", "", t0.Add(2*time.Minute))
	assert.False(t, blocked, "without a connection only the provider counts")
	assert.True(t, until.IsZero())
	_, blocked = g.BlockedUntilAt("claude", "c2", t0.Add(2*time.Minute))
	assert.False(t, blocked, "another connection")
	_, blocked = g.BlockedUntilAt("claude", "c1", t0.Add(time.Hour))
	assert.False(t, blocked, "the connection's end is exclusive")
}

// The gate's hook hears each start, extension and end of a cooldown, and
// the removal of an entry it has heard of; the events carry the state
// after the change.
func TestGateOnChange(t *testing.T) {
	var evs []Event
	var g *Gate
	g = NewGate(GateConfig{Enabled: true, ClassOf: classOf, MinRetry: new(time.Second), MaxRetry: time.Minute,
		OAuth: WindowProfile{Threshold: 2, Window: time.Minute, Cooldown: time.Minute},
		OnChange: func(e Event) {
			g.BlockedUntilAt(e.Provider, e.Connection, e.At) // no lock is held
			evs = append(evs, e)
		}})
	T := t0
	g.RecordFailureAt("claude", "", T) // one failure: no cooldown, no event
	assert.Empty(t, evs)
	g.RecordFailureAt("claude", "", T.Add(time.Second)) // the threshold: cooling
	g.RecordFailureAt("claude", "", T.Add(2*time.Second))
	g.RecordFailureAt("claude", "a1", T.Add(3*time.Minute)) // lapsed, one failure in the window; a1 cools 1 s
	g.RecordSuccessAt("claude", "a1", T.Add(3*time.Minute))
	assert.Equal(t, []Event{
		{Provider: "claude", From: Closed, To: Open, At: T.Add(time.Second), Until: T.Add(time.Second + time.Minute),
			Failures: 2, LastFailure: T.Add(time.Second)},
		{Provider: "claude", From: Open, To: Open, At: T.Add(2 * time.Second), Until: T.Add(2*time.Second + time.Minute),
			Failures: 2, LastFailure: T.Add(2 * time.Second)},
		{Provider: "claude", From: Open, To: Closed, At: T.Add(3 * time.Minute), Failures: 1, LastFailure: T.Add(3 * time.Minute)},
		{Provider: "claude", Connection: "a1", From: Closed, To: Open, At: T.Add(3 * time.Minute),
			Until: T.Add(3*time.Minute + time.Second), Failures: 1, LastFailure: T.Add(3 * time.Minute)},
		{Provider: "claude", Connection: "a1", From: Open, To: Closed, At: T.Add(3 * time.Minute),
			LastFailure: T.Add(3 * time.Minute)},
	}, evs)

	// Pruning removes the entries the hook has heard of, and says so.
	evs = nil
	g.RecordFailureAt("openai", "", T.Add(3*time.Minute)) // never cools: never told
	g.PruneAt(T.Add(time.Hour))
	assert.ElementsMatch(t, []Event{
		{Provider: "claude", From: Closed, To: Closed, At: T.Add(time.Hour), LastFailure: T.Add(3 * time.Minute), Removed: true},
		{Provider: "claude", Connection: "a1", From: Closed, To: Closed, At: T.Add(time.Hour), LastFailure: T.Add(3 * time.Minute), Removed: true},
	}, evs)
	assert.Empty(t, g.SnapshotAt(T.Add(time.Hour)))
}

// A cooldown that ends without a write to its entry is reported by the
// next prune, and a full gate's eviction of a cooling entry is a removal.
func TestGateOnChangeLazyEndAndEviction(t *testing.T) {
	var evs []Event
	g := NewGate(GateConfig{Enabled: true, ClassOf: classOf, MaxEntries: 1,
		OAuth:    WindowProfile{Threshold: 1, Cooldown: time.Minute},
		OnChange: func(e Event) { evs = append(evs, e) }})
	g.RecordFailureAt("claude", "", t0)
	require.Len(t, evs, 1)
	g.PruneAt(t0.Add(2 * time.Minute))
	require.Len(t, evs, 2)
	assert.Equal(t, Event{Provider: "claude", From: Open, To: Closed, At: t0.Add(2 * time.Minute), Failures: 1, LastFailure: t0}, evs[1])

	g.RecordFailureAt("codex", "", t0.Add(3*time.Minute)) // cooling
	evs = nil
	g.RecordFailureAt("openai", "", t0.Add(4*time.Minute)) // full: codex, the oldest, goes
	assert.Equal(t, []Event{{Provider: "codex", From: Open, To: Closed, At: t0.Add(4 * time.Minute),
		LastFailure: t0.Add(3 * time.Minute), Removed: true}}, evs)
}
