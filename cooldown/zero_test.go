package cooldown

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard"
)

// M3.1: baseCooldownMs is clamped to [0, 86400000]; 0 is a value. A base of
// 0 gives backoff and base failures no cooldown (the level still rises), the
// egress family falls back to EgressCooldown, and hints and fixed cooldowns
// are unaffected.
func TestZeroBaseIsAValue(t *testing.T) {
	tr := New(Config{APIKey: Profile{Base: new(time.Duration(0))}})
	r := tr.FailAt("k1", rateLimit, t0)
	assert.Equal(t, Recorded, r.Action)
	assert.Equal(t, time.Duration(0), r.Cooldown)
	assert.Equal(t, Status{Level: 1}, r.Status)
	r = tr.FailAt("k1", Failure{Status: 409, Reason: "unknown", Base: true}, t0)
	assert.Equal(t, Recorded, r.Action)
	assert.Equal(t, Status{Level: 1}, r.Status)
	r = tr.FailAt("k2", Failure{Status: 429, Reason: "rate_limit_exceeded", RetryAfter: 17 * time.Second}, t0)
	assert.Equal(t, Episode, r.Action)
	assert.Equal(t, 17*time.Second, r.Cooldown)
	r = tr.FailAt("k3", Failure{Status: 429, Reason: "quota_exhausted", Cooldown: time.Hour}, t0)
	assert.Equal(t, time.Hour, r.Cooldown)

	// The egress branch: the failure yields no cooldown, so the family
	// cooldown applies to the connection and its siblings.
	eg := egressFixture(Config{APIKey: Profile{Base: new(time.Duration(0))}})
	r = eg.FailAt("C", Failure{Status: 429, Reason: "rate_limit_exceeded", Backoff: true}, t0)
	assert.Equal(t, Episode, r.Action)
	assert.Equal(t, defaultEgressCooldown, r.Cooldown)
	assert.Equal(t, []string{"S1", "S2"}, r.Egress)
	assert.Equal(t, t0.Add(2*time.Minute), eg.StatusAt("S1", t0).Until)

	// The OAuth class keeps its own default.
	tr.RegisterAt("o1", Options{Class: routeguard.OAuth}, t0)
	assert.Equal(t, 5*time.Second, tr.FailAt("o1", rateLimit, t0).Cooldown)
}

// nil means the class default; values are clamped into [0, 24 h] and
// [0, 32].
func TestProfilePointerDefaults(t *testing.T) {
	tests := []struct {
		name  string
		p     Profile
		class routeguard.Class
		base  time.Duration
		steps int
	}{
		{"nil apikey", Profile{}, routeguard.APIKey, 3 * time.Second, 5},
		{"nil oauth", Profile{}, routeguard.OAuth, 5 * time.Second, 8},
		{"zero", Profile{Base: new(time.Duration(0)), Steps: new(0)}, routeguard.OAuth, 0, 0},
		{"negative", Profile{Base: new(-time.Second), Steps: new(-3)}, routeguard.APIKey, 0, 0},
		{"too large", Profile{Base: new(48 * time.Hour), Steps: new(40)}, routeguard.APIKey, 24 * time.Hour, 32},
		{"sub-millisecond kept", Profile{Base: new(time.Microsecond)}, routeguard.APIKey, time.Microsecond, 5},
	}
	for _, tt := range tests {
		got := tt.p.normalize(tt.class)
		require.NotNil(t, got.Base, tt.name)
		require.NotNil(t, got.Steps, tt.name)
		assert.Equal(t, tt.base, *got.Base, tt.name)
		assert.Equal(t, tt.steps, *got.Steps, tt.name)
	}

	// New copies the values: the caller's variables and the Tracker's
	// settings never alias.
	base, steps := 2*time.Second, 3
	tr := New(Config{APIKey: Profile{Base: &base, Steps: &steps}})
	base, steps = time.Hour, 30
	assert.Equal(t, 2*time.Second, tr.FailAt("k1", rateLimit, t0).Cooldown)
	assert.Equal(t, 2*time.Second, *tr.cfg.APIKey.Base)
	assert.Equal(t, 3, *tr.cfg.APIKey.Steps)

	// Backoff accepts any Profile: unset fields take the APIKey defaults.
	assert.Equal(t, 12*time.Second, backoff(Profile{}, 2))
	assert.Equal(t, time.Duration(0), backoff(Profile{Base: new(time.Duration(0))}, 3))
	assert.Equal(t, time.Second, backoff(Profile{Base: new(time.Second), Steps: new(0)}, 3))
}

// M3.1: maxBackoffSteps is clamped to [0, 32]; 0 means no escalation: every
// backoff cooldown is the base and the level stays 0.
func TestZeroStepsIsAValue(t *testing.T) {
	tr := New(Config{APIKey: Profile{Steps: new(0)}})
	for i, at := range []time.Duration{0, time.Minute, 2 * time.Minute} {
		r := tr.FailAt("k1", rateLimit, t0.Add(at))
		assert.Equal(t, Episode, r.Action, "episode %d", i)
		assert.Equal(t, 3*time.Second, r.Cooldown, "episode %d", i)
		assert.Equal(t, 0, r.Status.Level, "episode %d", i)
	}
}

func TestFromEnvNilLookup(t *testing.T) {
	c, err := FromEnv(nil)
	require.NoError(t, err)
	c = c.Normalize()
	assert.Equal(t, 3*time.Second, *c.APIKey.Base)
	assert.Equal(t, defaultEgressProviders(), c.EgressProviders)
}
