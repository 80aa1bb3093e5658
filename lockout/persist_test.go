package lockout_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/lockout"
)

// recordOf is what a store keeps of a lock event: the event's fields, its
// At as the last failure.
func recordOf(e lockout.Event) lockout.Record {
	return lockout.Record{Provider: e.Provider, Connection: e.Connection, Model: e.Model, Scope: e.Scope,
		Reason: e.Reason, LockedAt: e.LockedAt, Until: e.Until, FailureCount: e.FailureCount, LastFailure: e.At}
}

// A lockout restored from its last lock event escalates the next failure
// exactly as the lockout that lived through: the same count, lock length
// and end, with and without the lock still holding at the restart.
func TestRestoredLockoutContinuesEscalation(t *testing.T) {
	for _, scope := range []lockout.Scope{lockout.ScopeModel, lockout.ScopeExact, lockout.ScopeFamily} {
		for _, restartAt := range []time.Duration{3 * time.Second, 9 * time.Minute} {
			t.Run(scope.String()+"/"+restartAt.String(), func(t *testing.T) {
				var last lockout.Event
				cfg := enabled(lockout.Config{})
				lived := lockout.New(cfg)
				hooked := cfg
				hooked.OnChange = func(e lockout.Event) { last = e }
				before := lockout.New(hooked)
				f := lockout.Failure{Provider: "openai", Connection: "c1", Model: "GPT-4o", Status: 503, Scope: scope}
				// Three failures, each once the previous lock has ended:
				// 120 s, 240 s, 480 s (ends at t0+840 s+2 ms).
				at := t0
				for _, d := range []time.Duration{0, 120*time.Second + time.Millisecond, 240*time.Second + time.Millisecond} {
					at = at.Add(d)
					lived.RecordFailureAt(f, at)
					before.RecordFailureAt(f, at)
				}
				require.Equal(t, 3, last.FailureCount)
				require.Equal(t, 480*time.Second, last.Until.Sub(last.At))

				restart := at.Add(restartAt)
				after := lockout.New(cfg)
				require.Equal(t, 1, after.RestoreAt([]lockout.Record{recordOf(last)}, restart))
				wantUntil, wantReason, wantLocked := lived.LockedAt("openai", "c1", "gpt-4o", restart)
				until, reason, locked := after.LockedAt("openai", "c1", "gpt-4o", restart)
				assert.Equal(t, wantLocked, locked)
				assert.Equal(t, wantUntil, until)
				assert.Equal(t, wantReason, reason)

				next := at.Add(10 * time.Minute)
				want := lived.RecordFailureAt(f, next)
				got := after.RecordFailureAt(f, next)
				assert.Equal(t, 4, want.FailureCount)
				assert.Equal(t, want, got, "the fourth failure escalates from the restored count")
				assert.Equal(t, 960*time.Second, got.Cooldown)
			})
		}
	}
}

func TestRestoreAtTable(t *testing.T) {
	now := t0.Add(time.Hour)
	cases := []struct {
		name   string
		r      lockout.Record
		n      int
		locked bool
		count  int // FailureCount of the next failure's Result
	}{
		{"active lock", lockout.Record{Provider: "openai", Connection: "c1", Model: "m", Scope: lockout.ScopeModel,
			Until: now.Add(time.Minute), FailureCount: 2, LastFailure: now.Add(-time.Minute)}, 1, true, 3},
		{"manual lock: no escalation", lockout.Record{Provider: "openai", Connection: "c1", Model: "m", Scope: lockout.ScopeModel,
			Until: now.Add(time.Minute), FailureCount: 5}, 1, true, 1},
		{"count alone inside its window", lockout.Record{Provider: "openai", Connection: "c1", Model: "m", Scope: lockout.ScopeModel,
			Until: now.Add(-time.Minute), FailureCount: 2, LastFailure: now.Add(-3 * time.Minute)}, 1, false, 3},
		{"window over: skipped", lockout.Record{Provider: "openai", Connection: "c1", Model: "m", Scope: lockout.ScopeModel,
			Until: now.Add(-38 * time.Minute), FailureCount: 2, LastFailure: now.Add(-40 * time.Minute)}, 0, false, 1},
		{"no model: skipped", lockout.Record{Provider: "openai", Connection: "c1", Scope: lockout.ScopeModel,
			Until: now.Add(time.Minute), FailureCount: 1, LastFailure: now}, 0, false, 1},
		{"auto scope: skipped", lockout.Record{Provider: "openai", Connection: "c1", Model: "m",
			Until: now.Add(time.Minute), FailureCount: 1, LastFailure: now}, 0, false, 1},
		{"negative count, future failure", lockout.Record{Provider: "openai", Connection: "c1", Model: "m", Scope: lockout.ScopeModel,
			Until: now.Add(time.Minute), FailureCount: -4, LastFailure: now.Add(time.Hour)}, 1, true, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := lockout.New(enabled(lockout.Config{}))
			assert.Equal(t, tc.n, l.RestoreAt([]lockout.Record{tc.r}, now))
			assertLocked(t, l, "openai", "c1", "m", now, tc.locked)
			res := l.RecordFailureAt(lockout.Failure{Provider: "openai", Connection: "c1", Model: "m", Status: 404}, now.Add(2*time.Minute))
			assert.Equal(t, tc.count, res.FailureCount)
		})
	}
	off := lockout.New(lockout.Config{})
	assert.Zero(t, off.RestoreAt([]lockout.Record{{Model: "m", Scope: lockout.ScopeModel, Until: now.Add(time.Minute)}}, now))
}

func TestRestoreAtTellsTheHook(t *testing.T) {
	var evs []lockout.Event
	l := lockout.New(enabled(lockout.Config{OnChange: func(e lockout.Event) { evs = append(evs, e) }}))
	until := t0.Add(time.Minute)
	l.RestoreAt([]lockout.Record{{Provider: "openai", Connection: "c1", Model: "exact:gpt-4o", Scope: lockout.ScopeExact,
		Reason: lockout.ReasonRateLimited, LockedAt: t0.Add(-time.Minute), Until: until, FailureCount: 2, LastFailure: t0.Add(-time.Minute)}}, t0)
	require.Len(t, evs, 1)
	assert.Equal(t, lockout.Event{Kind: lockout.EventLocked, Provider: "openai", Connection: "c1", Model: "exact:gpt-4o",
		Scope: lockout.ScopeExact, At: t0, Reason: lockout.ReasonRateLimited, FailureCount: 2, LockedAt: t0.Add(-time.Minute), Until: until}, evs[0])
	info := l.SnapshotAt(t0)
	require.Len(t, info, 1)
	assert.Equal(t, "exact:gpt-4o", info[0].Model)
	assertLocked(t, l, "openai", "c1", " GPT-4o ", t0, true)
}
