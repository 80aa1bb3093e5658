package breaker

import (
	"testing"
	"time"

	"github.com/routeguard/routeguard"
	"github.com/stretchr/testify/assert"
)

// Spec M1.3 #11 and the clamps of every field.
func TestProfileNormalize(t *testing.T) {
	cases := []struct {
		name string
		in   Profile
		want Profile
	}{
		{"zero", Profile{}, Profile{DegradedAt: 3, OpenAt: 5, Reset: 30 * time.Second, MaxMultiplier: 16, EscalationCount: 3}},
		{"degraded above open", Profile{OpenAt: 3, DegradedAt: 10}, Profile{DegradedAt: 2, OpenAt: 3, Reset: 30 * time.Second, MaxMultiplier: 16, EscalationCount: 3}},
		{"threshold 1", Profile{OpenAt: 1, DegradedAt: 5}, Profile{DegradedAt: 1, OpenAt: 1, Reset: 30 * time.Second, MaxMultiplier: 16, EscalationCount: 3}},
		{"reset 500ms", Profile{Reset: 500 * time.Millisecond}, Profile{DegradedAt: 3, OpenAt: 5, Reset: time.Second, MaxMultiplier: 16, EscalationCount: 3}},
		{"upper clamps", Profile{OpenAt: 5000, DegradedAt: 5000, Reset: 48 * time.Hour, MaxMultiplier: 1 << 20, EscalationCount: 1000, Window: 10000 * time.Hour},
			Profile{DegradedAt: 999, OpenAt: 1000, Reset: 24 * time.Hour, MaxMultiplier: 1024, EscalationCount: 100, Window: 720 * time.Hour}},
		{"negatives", Profile{OpenAt: -1, DegradedAt: -1, Reset: -1, MaxMultiplier: -1, EscalationCount: -1, Window: -1},
			Profile{DegradedAt: 1, OpenAt: 1, Reset: time.Second, MaxMultiplier: 1, EscalationCount: 1}},
		{"short window", Profile{Window: time.Millisecond}, Profile{DegradedAt: 3, OpenAt: 5, Reset: 30 * time.Second, MaxMultiplier: 16, EscalationCount: 3, Window: time.Second}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.in.normalize())
			assert.Equal(t, tc.want, tc.want.normalize(), "idempotent")
		})
	}
}

func TestConfigNormalize(t *testing.T) {
	n := Config{}.Normalize()
	assert.Equal(t, defaultProfile(OAuth), n.OAuth)
	assert.Equal(t, defaultProfile(APIKey), n.APIKey)
	assert.Equal(t, defaultProfile(Local), n.Local)
	assert.Equal(t, 500, n.MaxBreakers)
	assert.Equal(t, 30*time.Minute, n.IdleTTL)
	assert.Nil(t, n.Profiles)
	n = Config{Local: Profile{OpenAt: 6}, OAuth: Profile{OpenAt: 3}, MaxBreakers: -5, IdleTTL: time.Second}.Normalize()
	assert.Equal(t, 5, n.Local.DegradedAt, "local derives openAt-1")
	assert.Equal(t, 2, n.OAuth.DegradedAt, "the class default is clamped below openAt")
	assert.Equal(t, 1, n.MaxBreakers)
	assert.Equal(t, time.Minute, n.IdleTTL)
	assert.Equal(t, defaultProfile(routeguard.Class(9)), defaultProfile(APIKey))
	assert.Equal(t, defaultProfile(routeguard.Unknown), defaultProfile(APIKey))
	assert.Equal(t, Config{MaxBreakers: 2_000_000}.Normalize().MaxBreakers, 1_000_000)
	assert.Equal(t, Config{IdleTTL: 48 * time.Hour}.Normalize().IdleTTL, 24*time.Hour)

	// Normalize returns a copy: the caller's map is neither written nor
	// shared, and each per-provider profile takes the generic defaults.
	in := Config{Profiles: map[string]Profile{"tiny": {OpenAt: 2, Reset: time.Millisecond}}}
	n = in.Normalize()
	assert.Equal(t, Profile{OpenAt: 2, Reset: time.Millisecond}, in.Profiles["tiny"])
	assert.Equal(t, Profile{DegradedAt: 1, OpenAt: 2, Reset: time.Second, MaxMultiplier: 16, EscalationCount: 3}, n.Profiles["tiny"])
	n.Profiles["other"] = Profile{}
	assert.Len(t, in.Profiles, 1)
	assert.Equal(t, n.Profiles["tiny"], n.Normalize().Profiles["tiny"], "idempotent")
}

// An Unknown class is treated as APIKey, by the Set and by the gate; Local
// keeps its own profile.
func TestUnknownClassIsAPIKey(t *testing.T) {
	s := NewSet(Config{ClassOf: func(p string) routeguard.Class {
		if p == "ollama" {
			return routeguard.Local
		}
		return routeguard.Unknown
	}})
	assert.Equal(t, defaultProfile(APIKey), s.ProfileOf("mystery"))
	assert.Equal(t, defaultProfile(Local), s.ProfileOf("ollama"))
	g := NewGate(GateConfig{Enabled: true, ClassOf: func(string) routeguard.Class { return routeguard.Unknown }})
	for range 14 {
		g.RecordFailureAt("mystery", "", t0)
	}
	_, blocked := g.BlockedUntilAt("mystery", "", t0)
	assert.False(t, blocked, "APIKey's threshold is 15")
	g.RecordFailureAt("mystery", "", t0)
	until, blocked := g.BlockedUntilAt("mystery", "", t0)
	assert.True(t, blocked)
	assert.Equal(t, t0.Add(10*time.Minute), until, "APIKey's cooldown")
}

func TestGateConfigNormalize(t *testing.T) {
	n := GateConfig{}.Normalize()
	assert.Equal(t, new(5*time.Second), n.MinRetry)
	assert.Equal(t, 5*time.Minute, n.MaxRetry)
	assert.Equal(t, defaultWindowProfile(OAuth), n.OAuth)
	assert.Equal(t, defaultWindowProfile(APIKey), n.APIKey)
	assert.Equal(t, defaultWindowProfile(Local), n.Local)
	assert.Equal(t, 10000, n.MaxEntries)
	n = GateConfig{MinRetry: new(time.Duration(-1)), MaxRetry: 100 * time.Hour, MaxEntries: -1,
		OAuth: WindowProfile{Threshold: -3, Window: time.Millisecond, Cooldown: 90 * time.Hour}}.Normalize()
	assert.Equal(t, time.Duration(0), *n.MinRetry, "−1 clamps to 0, not 1 ms")
	assert.Equal(t, 24*time.Hour, n.MaxRetry)
	assert.Equal(t, 1, n.MaxEntries)
	assert.Equal(t, WindowProfile{Threshold: 1, Window: time.Second, Cooldown: 24 * time.Hour}, n.OAuth)
	assert.Equal(t, n.OAuth, GateConfig{OAuth: n.OAuth}.Normalize().OAuth)
	assert.Equal(t, time.Millisecond, GateConfig{MinRetry: new(time.Duration(0)), MaxRetry: time.Nanosecond}.Normalize().MaxRetry,
		"at least 1 ms")
	assert.Equal(t, defaultWindowProfile(APIKey), defaultWindowProfile(routeguard.Unknown))
}

func TestOpenDurationBounds(t *testing.T) {
	p := Profile{Reset: 24 * time.Hour, MaxMultiplier: 1024, EscalationCount: 1}.normalize()
	for c := range 200 {
		d := p.openDuration(c)
		assert.GreaterOrEqual(t, d, p.Reset)
		assert.LessOrEqual(t, d, p.maxOpenDuration())
	}
	assert.Equal(t, p.maxOpenDuration(), p.openDuration(1000))
}
