package breaker

import (
	"testing"
	"time"

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
			assert.Equal(t, tc.want, tc.in.Normalize())
			assert.Equal(t, tc.want, tc.want.Normalize(), "idempotent")
		})
	}
}

func TestSettingsNormalize(t *testing.T) {
	n := Settings{}.Normalize()
	assert.Equal(t, DefaultProfile(OAuth), n.OAuth)
	assert.Equal(t, DefaultProfile(APIKey), n.APIKey)
	assert.Equal(t, DefaultProfile(Local), n.Local)
	assert.Equal(t, 500, n.MaxBreakers)
	assert.Equal(t, 30*time.Minute, n.IdleTTL)
	n = Settings{Local: Profile{OpenAt: 6}, OAuth: Profile{OpenAt: 3}, MaxBreakers: -5, IdleTTL: time.Second}.Normalize()
	assert.Equal(t, 5, n.Local.DegradedAt, "local derives openAt-1")
	assert.Equal(t, 2, n.OAuth.DegradedAt, "the class default is clamped below openAt")
	assert.Equal(t, 1, n.MaxBreakers)
	assert.Equal(t, time.Minute, n.IdleTTL)
	assert.Equal(t, DefaultProfile(Class(9)), DefaultProfile(APIKey))
}

func TestGateSettingsNormalize(t *testing.T) {
	n := GateSettings{}.Normalize()
	assert.Equal(t, 5*time.Second, n.MinRetryCooldown)
	assert.Equal(t, 5*time.Minute, n.MaxRetryCooldown)
	assert.Equal(t, DefaultWindowProfile(OAuth), n.OAuth)
	assert.Equal(t, DefaultWindowProfile(APIKey), n.APIKey)
	assert.Equal(t, DefaultWindowProfile(Local), n.Local)
	assert.Equal(t, 10000, n.MaxEntries)
	n = GateSettings{MinRetryCooldown: -1, MaxRetryCooldown: 100 * time.Hour, OAuth: WindowProfile{Threshold: -3, Window: time.Millisecond, Cooldown: 90 * time.Hour}}.Normalize()
	assert.Equal(t, time.Millisecond, n.MinRetryCooldown)
	assert.Equal(t, 24*time.Hour, n.MaxRetryCooldown)
	assert.Equal(t, WindowProfile{Threshold: 1, Window: time.Second, Cooldown: 24 * time.Hour}, n.OAuth)
	assert.Equal(t, n.OAuth, GateSettings{OAuth: n.OAuth}.Window(OAuth))
}

func TestOpenDurationBounds(t *testing.T) {
	p := Profile{Reset: 24 * time.Hour, MaxMultiplier: 1024, EscalationCount: 1}.Normalize()
	for c := range 200 {
		d := p.OpenDuration(c)
		assert.GreaterOrEqual(t, d, p.Reset)
		assert.LessOrEqual(t, d, p.MaxOpenDuration())
	}
	assert.Equal(t, p.MaxOpenDuration(), p.OpenDuration(1000))
}
