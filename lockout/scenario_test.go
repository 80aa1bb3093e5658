package lockout_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/lockout"
)

var t0 = time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

func enabled(c lockout.Config) lockout.Config {
	c.Enabled = true
	return c
}

func assertLocked(t *testing.T, l *lockout.Lockout, p, c, m string, now time.Time, want bool) {
	t.Helper()
	_, _, got := l.LockedAt(p, c, m, now)
	assert.Equalf(t, want, got, "LockedAt(%q, %q, %q, %v)", p, c, m, now)
}

// Scenario 1: a lock holds until and including its end.
func TestScenarioLockHoldsThroughUntil(t *testing.T) {
	l := lockout.New(enabled(lockout.Config{}))
	res := l.LockAt(lockout.Failure{Provider: "openai", Connection: "c1", Model: "gpt-4o",
		Reason: lockout.ReasonRateLimited, Scope: lockout.ScopeModel, Cooldown: ms(60000)}, t0)
	require.True(t, res.Locked)
	assert.Equal(t, t0.Add(ms(60000)), res.Until)

	until, reason, locked := l.LockedAt("openai", "c1", "gpt-4o", t0.Add(ms(60000)))
	assert.True(t, locked)
	assert.Equal(t, t0.Add(ms(60000)), until)
	assert.Equal(t, lockout.ReasonRateLimited, reason)
	assertLocked(t, l, "openai", "c1", "gpt-4o", t0.Add(ms(60001)), false)
}

// Scenario 2: a shorter lock never shortens a longer one.
func TestScenarioLockNeverShortens(t *testing.T) {
	l := lockout.New(enabled(lockout.Config{}))
	f := lockout.Failure{Provider: "openai", Connection: "c1", Model: "gpt-4o", Scope: lockout.ScopeModel}
	f.Cooldown = ms(120000)
	l.LockAt(f, t0)
	f.Cooldown = ms(30000)
	res := l.LockAt(f, t0)
	assert.Equal(t, t0.Add(ms(120000)), res.Until)
	assert.Equal(t, ms(30000), res.Cooldown)
	until, _, _ := l.LockedAt("openai", "c1", "gpt-4o", t0)
	assert.Equal(t, t0.Add(ms(120000)), until)

	// The same holds for recorded failures: a short one keeps the long lock.
	rf := l.RecordFailureAt(lockout.Failure{Provider: "openai", Connection: "c1", Model: "gpt-4o",
		Status: 404, Cooldown: ms(10000)}, t0.Add(time.Second))
	assert.Equal(t, t0.Add(ms(120000)), rf.Until)
	assert.Equal(t, 1, rf.FailureCount, "a manual lock is not a failure to escalate from")
}

// Scenario 3, adjusted by D6: the settings' base and steps apply on every
// path and the base is at least 5 s, so base 5 s with 5 steps gives
// 5, 10, 20, 40, 80, 160, 160 s.
func TestScenarioEscalation(t *testing.T) {
	l := lockout.New(enabled(lockout.Config{BaseCooldown: 5 * time.Second, MaxBackoffSteps: new(5)}))
	want := []time.Duration{5, 10, 20, 40, 80, 160, 160}
	now := t0
	for i, w := range want {
		res := l.RecordFailureAt(lockout.Failure{Provider: "openai", Connection: "k", Model: "gpt-4o",
			Status: 503, ResetAfter: 30 * time.Second}, now)
		require.True(t, res.Locked)
		assert.Equalf(t, i+1, res.FailureCount, "failure %d count", i+1)
		assert.Equalf(t, w*time.Second, res.Cooldown, "failure %d cooldown", i+1)
		assert.Equal(t, now.Add(w*time.Second), res.Until)
		assert.Equal(t, 30*time.Second, res.ResetAfter)
		now = now.Add(time.Second)
	}
}

func TestEscalationDefaultsAndCaps(t *testing.T) {
	tests := []struct {
		name string
		s    lockout.Config
		want []time.Duration
	}{
		{"defaults: 120 s doubling to the 30 min cap", lockout.Config{},
			[]time.Duration{2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 30 * time.Minute, 30 * time.Minute}},
		{"fixed cooldown", lockout.Config{FixedCooldown: true},
			[]time.Duration{2 * time.Minute, 2 * time.Minute, 2 * time.Minute}},
		{"negative steps mean no escalation", lockout.Config{MaxBackoffSteps: new(-1), BaseCooldown: 10 * time.Second},
			[]time.Duration{10 * time.Second, 10 * time.Second}},
		{"one step", lockout.Config{MaxBackoffSteps: new(1), BaseCooldown: 10 * time.Second},
			[]time.Duration{10 * time.Second, 20 * time.Second, 20 * time.Second}},
		{"max cap", lockout.Config{BaseCooldown: 10 * time.Second, MaxCooldown: 25 * time.Second},
			[]time.Duration{10 * time.Second, 20 * time.Second, 25 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := lockout.New(enabled(tt.s))
			for i, w := range tt.want {
				res := l.RecordFailureAt(lockout.Failure{Provider: "p", Connection: "c", Model: "m", Status: 502}, t0.Add(time.Duration(i)*time.Second))
				assert.Equalf(t, w, res.Cooldown, "failure %d", i+1)
			}
		})
	}
}

func TestEscalationWindow(t *testing.T) {
	f := lockout.Failure{Provider: "p", Connection: "c", Model: "m", Status: 502, ResetAfter: 30 * time.Second}
	t.Run("profile reset plus last cooldown", func(t *testing.T) {
		l := lockout.New(enabled(lockout.Config{BaseCooldown: 10 * time.Second}))
		assert.Equal(t, 1, l.RecordFailureAt(f, t0).FailureCount)
		// Window: 30 s reset + 10 s cooldown = 40 s; exactly 40 s later is inside.
		assert.Equal(t, 2, l.RecordFailureAt(f, t0.Add(40*time.Second)).FailureCount)
		// Now 30 s + 20 s = 50 s; 50 s + 1 ms later starts again.
		res := l.RecordFailureAt(f, t0.Add(90*time.Second+time.Millisecond))
		assert.Equal(t, 1, res.FailureCount)
		assert.Equal(t, 10*time.Second, res.Cooldown)
	})
	t.Run("zero reset means 30 min", func(t *testing.T) {
		l := lockout.New(enabled(lockout.Config{BaseCooldown: 10 * time.Second}))
		g := f
		g.ResetAfter = 0
		assert.Equal(t, 30*time.Minute, l.RecordFailureAt(g, t0).ResetAfter)
		assert.Equal(t, 2, l.RecordFailureAt(g, t0.Add(30*time.Minute+10*time.Second)).FailureCount)
	})
	t.Run("setting overrides the profile reset", func(t *testing.T) {
		l := lockout.New(enabled(lockout.Config{BaseCooldown: 10 * time.Second, EscalationWindow: 5 * time.Second}))
		l.RecordFailureAt(f, t0)
		assert.Equal(t, 2, l.RecordFailureAt(f, t0.Add(15*time.Second)).FailureCount)
		assert.Equal(t, 1, l.RecordFailureAt(f, t0.Add(40*time.Second+time.Millisecond)).FailureCount)
	})
}

// Scenario 4: quota_exhausted without an exact value locks until local
// midnight, capped by the maximum.
func TestScenarioQuotaUntilMidnight(t *testing.T) {
	zone := time.FixedZone("UTC+2", 2*3600)
	at := func(h, m int) time.Time { return time.Date(2025, 3, 14, h, m, 0, 0, zone) }
	tests := []struct {
		name string
		max  time.Duration
		now  time.Time
		want time.Duration
	}{
		{"22:00 with the 30 min default cap", 0, at(22, 0), ms(1800000)},
		{"22:00 with a 1 h cap", time.Hour, at(22, 0), time.Hour},
		{"23:45 with a 1 h cap", time.Hour, at(23, 45), 15 * time.Minute},
		{"00:00 is a full day, capped", time.Hour, at(0, 0), time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := lockout.New(lockout.Config{Enabled: true, MaxCooldown: tt.max, Location: zone})
			res := l.RecordFailureAt(lockout.Failure{Provider: "p", Connection: "c", Model: "m",
				Status: 429, Reason: lockout.ReasonQuotaExhausted}, tt.now.UTC())
			assert.Equal(t, tt.want, res.Cooldown)
			assert.Equal(t, lockout.ScopeFamily, res.Scope)
		})
	}
}

func TestExactCooldown(t *testing.T) {
	l := lockout.New(enabled(lockout.Config{}))
	f := lockout.Failure{Provider: "p", Connection: "c", Model: "m", Status: 429, Cooldown: 2 * time.Hour}
	assert.Equal(t, 30*time.Minute, l.RecordFailureAt(f, t0).Cooldown, "clamped to the max")
	f.Model, f.UpstreamReset = "n", true
	res := l.RecordFailureAt(f, t0)
	assert.Equal(t, 2*time.Hour, res.Cooldown, "an upstream reset is honoured in full")
	assertLocked(t, l, "p", "c", "n", t0.Add(2*time.Hour), true)
}

// Scenario 5: a 429 locks the codex family, a 502 only the exact model.
func TestScenarioCodexFamily(t *testing.T) {
	t.Run("429 locks every gpt-5 model", func(t *testing.T) {
		l := lockout.New(enabled(lockout.Config{}))
		res := l.RecordFailureAt(lockout.Failure{Provider: "codex", Connection: "c1", Model: "gpt-5.6-luna", Status: 429}, t0)
		assert.Equal(t, lockout.ScopeFamily, res.Scope)
		assertLocked(t, l, "codex", "c1", "gpt-5.6-sol", t0, true)
		assertLocked(t, l, "cx", "c1", "gpt-5.6-sol", t0, true) // alias
		assertLocked(t, l, "codex", "c1", "o3-spark", t0, false)
		assertLocked(t, l, "codex", "c2", "gpt-5.6-sol", t0, false)
	})
	t.Run("502 locks only the exact model", func(t *testing.T) {
		l := lockout.New(enabled(lockout.Config{}))
		res := l.RecordFailureAt(lockout.Failure{Provider: "codex", Connection: "c1", Model: "gpt-5.6-luna", Status: 502}, t0)
		assert.Equal(t, lockout.ScopeExact, res.Scope)
		assertLocked(t, l, "codex", "c1", "gpt-5.6-sol", t0, false)
		assertLocked(t, l, "codex", "c1", "gpt-5.6-luna", t0, true)
		assertLocked(t, l, "codex", "c1", "  GPT-5.6-Luna ", t0, true) // exact is trimmed and case-blind
	})
}

// Scenario 6: a 404 locks only the model that was not found.
func TestScenarioNotFoundLocksModelOnly(t *testing.T) {
	l := lockout.New(enabled(lockout.Config{}))
	res := l.RecordFailureAt(lockout.Failure{Provider: "antigravity", Connection: "c", Model: "gemini-3.6", Status: 404}, t0)
	assert.Equal(t, lockout.ScopeModel, res.Scope)
	assert.Equal(t, lockout.ReasonNotFound, l.SnapshotAt(t0)[0].Reason)
	assertLocked(t, l, "antigravity", "c", "gemini-3.6", t0, true)
	assertLocked(t, l, "antigravity", "c", "gemini-3.1-flash-lite", t0, false)
}

func TestScopeResolution(t *testing.T) {
	tests := []struct {
		explicit lockout.Scope
		status   int
		want     lockout.Scope
	}{
		{lockout.ScopeAuto, 429, lockout.ScopeFamily},
		{lockout.ScopeAuto, 403, lockout.ScopeFamily},
		{lockout.ScopeAuto, 402, lockout.ScopeFamily},
		{lockout.ScopeAuto, 404, lockout.ScopeModel},
		{lockout.ScopeAuto, 502, lockout.ScopeExact},
		{lockout.ScopeAuto, 0, lockout.ScopeExact},
		{lockout.ScopeExact, 429, lockout.ScopeExact},
		{lockout.ScopeFamily, 502, lockout.ScopeFamily},
		{lockout.ScopeModel, 429, lockout.ScopeModel},
		{lockout.Scope(9), 404, lockout.ScopeModel},
	}
	for _, tt := range tests {
		assert.Equalf(t, tt.want, lockout.ResolveScope(tt.explicit, tt.status), "ResolveScope(%v, %d)", tt.explicit, tt.status)
	}
}

func TestAntigravityExactScopeWins(t *testing.T) {
	l := lockout.New(enabled(lockout.Config{}))
	res := l.RecordFailureAt(lockout.Failure{Provider: "antigravity", Connection: "c", Model: "Gemini-3.6", Status: 429, Scope: lockout.ScopeExact}, t0)
	assert.Equal(t, lockout.ScopeExact, res.Scope)
	snap := l.SnapshotAt(t0)
	require.Len(t, snap, 1)
	assert.Equal(t, "exact:gemini-3.6", snap[0].Model)
	assert.Equal(t, lockout.ReasonRateLimited, snap[0].Reason)
}

// lockAllShapes writes a family, a model and an exact lock for
// codex/c1/gpt-5.6-luna.
func lockAllShapes(t *testing.T, l *lockout.Lockout) {
	t.Helper()
	for _, st := range []int{429, 404, 502} {
		res := l.RecordFailureAt(lockout.Failure{Provider: "codex", Connection: "c1", Model: "gpt-5.6-luna", Status: st}, t0)
		require.True(t, res.Locked)
	}
	snap := l.SnapshotAt(t0)
	require.Len(t, snap, 3)
	var models []string
	for _, in := range snap {
		models = append(models, in.Model)
	}
	assert.Equal(t, []string{"codex", "exact:gpt-5.6-luna", "gpt-5.6-luna"}, models)
}

// Scenario 7: clearing removes every shape; a second clear finds nothing.
func TestScenarioClearAllShapes(t *testing.T) {
	l := lockout.New(enabled(lockout.Config{}))
	lockAllShapes(t, l)
	assert.True(t, l.ClearAt("codex", "c1", "gpt-5.6-luna", t0))
	assertLocked(t, l, "codex", "c1", "gpt-5.6-luna", t0, false)
	assertLocked(t, l, "codex", "c1", "gpt-5.6-sol", t0, false)
	assert.Empty(t, l.SnapshotAt(t0))
	assert.Equal(t, 0, l.Len())
	assert.False(t, l.ClearAt("codex", "c1", "gpt-5.6-luna", t0))
}

func TestClearByListedName(t *testing.T) {
	l := lockout.New(enabled(lockout.Config{}))
	l.RecordFailureAt(lockout.Failure{Provider: "p", Connection: "c", Model: "A:B", Status: 502}, t0)
	l.RecordFailureAt(lockout.Failure{Provider: "codex", Connection: "c", Model: "gpt-5", Status: 429}, t0)
	assert.True(t, l.ClearAt("p", "c", "exact:a:b", t0))
	assert.True(t, l.ClearAt("codex", "c", "codex", t0), "a family is cleared by its listed name")
	assert.Empty(t, l.SnapshotAt(t0))
	assert.False(t, l.ClearAt("p", "c", "", t0))
}

// Scenario 8 with D6: decay halves the count on every shape and removes
// the lock at 0.
func TestScenarioDecay(t *testing.T) {
	l := lockout.New(enabled(lockout.Config{}))
	for i := range 5 {
		l.RecordFailureAt(lockout.Failure{Provider: "p", Connection: "c", Model: "m", Status: 429}, t0.Add(time.Duration(i)*time.Second))
	}
	assert.Equal(t, 5, l.SnapshotAt(t0)[0].FailureCount)
	type step struct {
		count   int
		cleared bool
	}
	var got []step
	for range 3 {
		n, c := l.DecayAt("p", "c", "m", t0.Add(time.Minute))
		got = append(got, step{n, c})
	}
	assert.Equal(t, []step{{2, false}, {1, false}, {0, true}}, got)
	assertLocked(t, l, "p", "c", "m", t0.Add(time.Minute), false)
	assert.Equal(t, 0, l.Len())
	n, c := l.DecayAt("p", "c", "m", t0.Add(time.Minute))
	assert.Equal(t, 0, n)
	assert.False(t, c)
}

func TestDecayWalksAllShapes(t *testing.T) {
	l := lockout.New(enabled(lockout.Config{}))
	lockAllShapes(t, l)
	// Two more family failures: family 3, model 1, exact 1.
	l.RecordFailureAt(lockout.Failure{Provider: "codex", Connection: "c1", Model: "gpt-5.6-sol", Status: 429}, t0)
	l.RecordFailureAt(lockout.Failure{Provider: "codex", Connection: "c1", Model: "gpt-5.6-sol", Status: 429}, t0)
	n, cleared := l.DecayAt("cx", "c1", "GPT-5.6-luna", t0)
	assert.Equal(t, 1, n)
	assert.True(t, cleared)
	snap := l.SnapshotAt(t0)
	require.Len(t, snap, 2, "model key gpt-5.6-luna is case-sensitive and stays; exact is removed")
	n, cleared = l.DecayAt("codex", "c1", "gpt-5.6-luna", t0)
	assert.Equal(t, 0, n)
	assert.True(t, cleared)
	assert.Empty(t, l.SnapshotAt(t0))
}

// Scenario 9: an exact key lists its model as "exact:<model>".
func TestScenarioListExact(t *testing.T) {
	l := lockout.New(enabled(lockout.Config{}))
	l.RecordFailureAt(lockout.Failure{Provider: "p", Connection: "c", Model: "A:B", Status: 503}, t0)
	snap := l.SnapshotAt(t0.Add(30 * time.Second))
	require.Len(t, snap, 1)
	assert.Equal(t, lockout.Info{
		Provider:     "p",
		Connection:   "c",
		Model:        "exact:a:b",
		Scope:        lockout.ScopeExact,
		Reason:       lockout.ReasonServerError,
		Remaining:    90 * time.Second,
		FailureCount: 1,
		LockedAt:     t0,
		Until:        t0.Add(2 * time.Minute),
	}, snap[0])
}

// Scenario 11 with D6: a status outside the error codes never locks, on
// every path.
func TestScenarioStatusOutsideCodes(t *testing.T) {
	l := lockout.New(enabled(lockout.Config{}))
	res := l.RecordFailureAt(lockout.Failure{Provider: "gemini", Connection: "c", Model: "m", Status: 500}, t0)
	assert.Equal(t, lockout.Result{}, res)
	assertLocked(t, l, "gemini", "c", "m", t0, false)
	assert.Equal(t, 0, l.Len())

	res = l.RecordFailureAt(lockout.Failure{Provider: "gemini", Connection: "c", Model: "m", Status: 503}, t0)
	assert.True(t, res.Locked)
	assert.Equal(t, 2*time.Minute, res.Cooldown)
	assertLocked(t, l, "gemini", "c", "m", t0, true)

	custom := lockout.New(enabled(lockout.Config{ErrorCodes: []int{400}}))
	assert.False(t, custom.RecordFailureAt(lockout.Failure{Provider: "p", Connection: "c", Model: "m", Status: 503}, t0).Locked)
	assert.True(t, custom.RecordFailureAt(lockout.Failure{Provider: "p", Connection: "c", Model: "m", Status: 400}, t0).Locked)
}

func TestDisabled(t *testing.T) {
	l := lockout.New(lockout.Config{})
	f := lockout.Failure{Provider: "p", Connection: "c", Model: "m", Status: 429, Cooldown: time.Minute}
	assert.Equal(t, lockout.Result{}, l.RecordFailureAt(f, t0))
	assert.Equal(t, lockout.Result{}, l.LockAt(f, t0))
	assert.Equal(t, 0, l.Len())

	l.SetConfig(lockout.Config{Enabled: true})
	l.RecordFailureAt(f, t0)
	assertLocked(t, l, "p", "c", "m", t0, true)
	l.SetConfig(lockout.Config{})
	assertLocked(t, l, "p", "c", "m", t0, false)
	assert.NoError(t, l.CheckAt("p", "c", "m", t0))

	var zero lockout.Lockout
	assert.Equal(t, lockout.Result{}, zero.RecordFailureAt(f, t0))
	assertLocked(t, &zero, "p", "c", "m", t0, false)
	zero.SetConfig(lockout.Config{Enabled: true})
	assert.True(t, zero.RecordFailureAt(f, t0).Locked)
	assertLocked(t, &zero, "p", "c", "m", t0, true)
}

func TestEmptyModel(t *testing.T) {
	l := lockout.New(enabled(lockout.Config{}))
	assert.Equal(t, lockout.Result{}, l.RecordFailureAt(lockout.Failure{Provider: "p", Connection: "c", Status: 429}, t0))
	assert.Equal(t, lockout.Result{}, l.LockAt(lockout.Failure{Provider: "p", Connection: "c", Cooldown: time.Minute}, t0))
	assert.Equal(t, lockout.Result{}, l.LockAt(lockout.Failure{Provider: "p", Connection: "c", Model: "m"}, t0), "no cooldown")
	assertLocked(t, l, "p", "c", "", t0, false)
}

func TestLatestUntilWins(t *testing.T) {
	l := lockout.New(enabled(lockout.Config{}))
	l.LockAt(lockout.Failure{Provider: "codex", Connection: "c", Model: "gpt-5a", Scope: lockout.ScopeModel, Reason: lockout.ReasonNotFound, Cooldown: time.Minute}, t0)
	l.LockAt(lockout.Failure{Provider: "codex", Connection: "c", Model: "gpt-5a", Scope: lockout.ScopeFamily, Reason: lockout.ReasonQuotaExhausted, Cooldown: 3 * time.Minute}, t0)
	l.LockAt(lockout.Failure{Provider: "codex", Connection: "c", Model: "gpt-5a", Scope: lockout.ScopeExact, Reason: lockout.ReasonServerError, Cooldown: 2 * time.Minute}, t0)
	until, reason, locked := l.LockedAt("codex", "c", "gpt-5a", t0)
	assert.True(t, locked)
	assert.Equal(t, t0.Add(3*time.Minute), until)
	assert.Equal(t, lockout.ReasonQuotaExhausted, reason)

	err := l.CheckAt("codex", "c", "gpt-5a", t0.Add(time.Minute))
	require.ErrorIs(t, err, lockout.ErrLocked)
	var le *lockout.Error
	require.True(t, errors.As(err, &le))
	assert.Equal(t, 2*time.Minute, le.RetryAfter)
	assert.Equal(t, t0.Add(3*time.Minute), le.Until)
	assert.Equal(t, lockout.ReasonQuotaExhausted, le.Reason)
	assert.Equal(t, "model_lockout", le.Code)
	assert.Equal(t, lockout.CodeLocked, le.Code)
	assert.Equal(t, 503, le.Status)
	assert.NotErrorIs(t, err, lockout.ErrInvalidConfig)
	assert.Equal(t, "lockout: model_lockout: model gpt-5a locked on codex/c (quota_exhausted) for 2m0s", le.Error())
}

func TestClockJumpsBackwards(t *testing.T) {
	l := lockout.New(enabled(lockout.Config{BaseCooldown: 10 * time.Second}))
	f := lockout.Failure{Provider: "p", Connection: "c", Model: "m", Status: 502, ResetAfter: time.Second}
	l.RecordFailureAt(f, t0)
	// An hour earlier: counts as no time passed, so the failure escalates
	// and the lock (which already ends later) is kept.
	res := l.RecordFailureAt(f, t0.Add(-time.Hour))
	assert.Equal(t, 2, res.FailureCount)
	assert.Equal(t, t0.Add(10*time.Second), res.Until)
	assertLocked(t, l, "p", "c", "m", t0.Add(-time.Hour), true)
	assert.Len(t, l.SnapshotAt(t0.Add(-time.Hour)), 1)
}

func TestPruneOnAccess(t *testing.T) {
	l := lockout.New(enabled(lockout.Config{BaseCooldown: 10 * time.Second}))
	for i := range 50 {
		l.RecordFailureAt(lockout.Failure{Provider: "p", Connection: "c", Model: "m" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Status: 502, ResetAfter: time.Second}, t0)
	}
	assert.Equal(t, 50, l.Len())
	// After lock (10 s) and window (1 s + 10 s) everything is expired.
	later := t0.Add(21*time.Second + time.Millisecond)
	l.RecordFailureAt(lockout.Failure{Provider: "p", Connection: "c", Model: "fresh", Status: 502}, later)
	assert.Equal(t, 1, l.Len())
	assert.Len(t, l.SnapshotAt(later), 1)
	// A listing prunes too.
	assert.Empty(t, l.SnapshotAt(later.Add(time.Hour)))
	assert.Equal(t, 0, l.Len())
}

func TestCapEvictsClosestToExpiry(t *testing.T) {
	var changes []lockout.Event
	l := lockout.New(lockout.Config{
		Enabled: true, MaxEntries: 16,
		OnChange: func(c lockout.Event) { changes = append(changes, c) },
	})
	for i := range 16 {
		l.LockAt(lockout.Failure{Provider: "p", Connection: "c" + string(rune('a'+i)), Model: "m",
			Scope: lockout.ScopeModel, Cooldown: time.Duration(i+1) * time.Minute}, t0)
	}
	assert.Equal(t, 16, l.Len())
	changes = nil
	l.LockAt(lockout.Failure{Provider: "p", Connection: "z", Model: "m", Scope: lockout.ScopeModel, Cooldown: time.Hour}, t0)
	// 17 > 16: evict down to 14, the three closest to expiry (ca, cb, cc).
	assert.Equal(t, 14, l.Len())
	for _, c := range []string{"ca", "cb", "cc"} {
		assertLocked(t, l, "p", c, "m", t0, false)
	}
	assertLocked(t, l, "p", "cd", "m", t0, true)
	assertLocked(t, l, "p", "z", "m", t0, true)
	var evicted []string
	for _, c := range changes {
		if c.Kind == lockout.EventEvicted {
			evicted = append(evicted, c.Connection)
		}
	}
	assert.Equal(t, []string{"ca", "cb", "cc"}, evicted)
}

// A write that pushes the count over the cap never evicts its own entry,
// even when that entry is the closest to expiry: it was just reported
// locked.
func TestCapSparesTheEntryJustWritten(t *testing.T) {
	l := lockout.New(lockout.Config{Enabled: true, MaxEntries: 16})
	for i := range 16 {
		l.LockAt(lockout.Failure{Provider: "p", Connection: "c" + string(rune('a'+i)), Model: "m",
			Scope: lockout.ScopeModel, Cooldown: time.Duration(i+10) * time.Minute}, t0)
	}
	res := l.LockAt(lockout.Failure{Provider: "p", Connection: "z", Model: "m", Scope: lockout.ScopeModel, Cooldown: time.Minute}, t0)
	require.True(t, res.Locked)
	assert.Equal(t, t0.Add(time.Minute), res.Until)
	assert.Equal(t, 14, l.Len())
	assertLocked(t, l, "p", "z", "m", t0, true)
	for _, c := range []string{"ca", "cb", "cc"} {
		assertLocked(t, l, "p", c, "m", t0, false)
	}
	assertLocked(t, l, "p", "cd", "m", t0, true)
}

func TestHooks(t *testing.T) {
	var got []string
	l := lockout.New(lockout.Config{
		Enabled:  true,
		OnChange: func(c lockout.Event) { got = append(got, c.Kind.String()+" "+c.Model) },
	})
	f := lockout.Failure{Provider: "p", Connection: "c", Model: "m", Status: 404}
	l.RecordFailureAt(f, t0)
	l.RecordFailureAt(f, t0) // 4 min > 2 min: extended
	f.Cooldown = time.Second
	l.RecordFailureAt(f, t0) // shorter: no change
	l.ClearAt("p", "c", "m", t0)
	l.RecordFailureAt(lockout.Failure{Provider: "p", Connection: "c", Model: "n", Status: 404}, t0)
	l.DecayAt("p", "c", "n", t0)
	assert.Equal(t, []string{"locked m", "locked m", "cleared m", "locked n", "decayed n"}, got)
}

func TestReset(t *testing.T) {
	l := lockout.New(enabled(lockout.Config{}))
	lockAllShapes(t, l)
	l.Reset()
	assert.Equal(t, 0, l.Len())
	assert.Empty(t, l.SnapshotAt(t0))
}

func TestCustomFamiliesAndAliases(t *testing.T) {
	l := lockout.New(lockout.Config{
		Enabled: true,
		Families: map[string]lockout.FamilyFunc{"gemini": func(m string) string {
			if len(m) >= 9 && m[:9] == "gemini-3." {
				return "gemini-3"
			}
			return m
		}},
		Aliases: map[string]string{"gm": "gemini"},
	})
	l.RecordFailureAt(lockout.Failure{Provider: "gm", Connection: "c", Model: "gemini-3.6", Status: 429}, t0)
	assertLocked(t, l, "gemini", "c", "gemini-3.1-flash-lite", t0, true)
	assertLocked(t, l, "gemini", "c", "gemini-2.5", t0, false)
	// Custom tables replace the defaults: codex has no family any more.
	l.RecordFailureAt(lockout.Failure{Provider: "cx", Connection: "c", Model: "gpt-5a", Status: 429}, t0)
	assertLocked(t, l, "codex", "c", "gpt-5a", t0, false)
	assertLocked(t, l, "cx", "c", "gpt-5b", t0, false)
}

func TestStringers(t *testing.T) {
	assert.Equal(t, "auto family model exact scope(7)",
		lockout.ScopeAuto.String()+" "+lockout.ScopeFamily.String()+" "+lockout.ScopeModel.String()+" "+lockout.ScopeExact.String()+" "+lockout.Scope(7).String())
	assert.Equal(t, "locked cleared decayed evicted event(0)",
		lockout.EventLocked.String()+" "+lockout.EventCleared.String()+" "+lockout.EventDecayed.String()+" "+lockout.EventEvicted.String()+" "+lockout.EventKind(0).String())
	for st, want := range map[int]lockout.Reason{404: "not_found", 429: "rate_limited", 402: "quota_exhausted", 403: "forbidden", 401: "forbidden", 503: "server_error"} {
		assert.Equal(t, want, lockout.ReasonForStatus(st))
	}
}

func TestExactNameEdgeCases(t *testing.T) {
	l := lockout.New(enabled(lockout.Config{}))
	long := strings.Repeat("X", 200)
	for _, m := range []string{long, "ÉCLAIR-1", "MiXeD"} {
		l.RecordFailureAt(lockout.Failure{Provider: "p", Connection: "c", Model: m, Status: 502}, t0)
		assertLocked(t, l, "p", "c", strings.ToLower(m), t0, true)
		assertLocked(t, l, "p", "c", " "+m+" ", t0, true)
	}
	assertLocked(t, l, "p", "c", strings.Repeat("x", 199), t0, false)
}

// Events carry the key, the caller's now and the state after the change;
// a removal carries Removed and no lock.
func TestEventCarriesStateAfterChange(t *testing.T) {
	var got []lockout.Event
	l := lockout.New(lockout.Config{Enabled: true, OnChange: func(e lockout.Event) { got = append(got, e) }})
	l.RecordFailureAt(lockout.Failure{Provider: "cx", Connection: "c1", Model: "gpt-5.6-luna", Status: 429}, t0)
	l.RecordFailureAt(lockout.Failure{Provider: "p", Connection: "c2", Model: "A:B", Status: 503}, t0.Add(time.Second))
	l.ClearAt("p", "c2", "exact:a:b", t0.Add(2*time.Second))
	assert.Equal(t, []lockout.Event{
		{Kind: lockout.EventLocked, Provider: "codex", Connection: "c1", Model: "codex", Scope: lockout.ScopeFamily,
			At: t0, Reason: lockout.ReasonRateLimited, FailureCount: 1, LockedAt: t0, Until: t0.Add(2 * time.Minute)},
		{Kind: lockout.EventLocked, Provider: "p", Connection: "c2", Model: "exact:a:b", Scope: lockout.ScopeExact,
			At: t0.Add(time.Second), Reason: lockout.ReasonServerError, FailureCount: 1, LockedAt: t0.Add(time.Second),
			Until: t0.Add(time.Second + 2*time.Minute)},
		{Kind: lockout.EventCleared, Provider: "p", Connection: "c2", Model: "exact:a:b", Scope: lockout.ScopeExact,
			At: t0.Add(2 * time.Second), Removed: true},
	}, got)
}

// OnChange runs after the Lockout's locks are released, so it may call
// back into the Lockout.
func TestOnChangeMayCallBack(t *testing.T) {
	var l *lockout.Lockout
	var seen []bool
	l = lockout.New(lockout.Config{Enabled: true, MaxEntries: 16, OnChange: func(e lockout.Event) {
		_, _, locked := l.LockedAt(e.Provider, e.Connection, e.Model, e.At)
		seen = append(seen, locked)
		l.SnapshotAt(e.At)
	}})
	l.LockAt(lockout.Failure{Provider: "p", Connection: "c", Model: "m", Scope: lockout.ScopeModel, Cooldown: time.Minute}, t0)
	l.ClearAt("p", "c", "m", t0)
	assert.Equal(t, []bool{true, false}, seen)
}

// Entries equally close to expiry are evicted in key order, whatever
// order the maps hold them in.
func TestCapEvictsTiesInKeyOrder(t *testing.T) {
	for range 5 {
		var evicted []string
		l := lockout.New(lockout.Config{Enabled: true, MaxEntries: 16, OnChange: func(e lockout.Event) {
			if e.Kind == lockout.EventEvicted {
				evicted = append(evicted, e.Connection)
			}
		}})
		for i := range 16 {
			l.LockAt(lockout.Failure{Provider: "p", Connection: "c" + string(rune('p'-i)), Model: "m",
				Scope: lockout.ScopeModel, Cooldown: time.Minute}, t0)
		}
		l.LockAt(lockout.Failure{Provider: "p", Connection: "z", Model: "m", Scope: lockout.ScopeModel, Cooldown: time.Minute}, t0)
		assert.Equal(t, []string{"ca", "cb", "cc"}, evicted)
		assertLocked(t, l, "p", "z", "m", t0, true)
		assert.Equal(t, 14, l.Len())
	}
}
