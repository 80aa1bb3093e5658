package lockout_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/lockout"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestNormalizeDefaults(t *testing.T) {
	assert.Equal(t, lockout.Settings{
		ErrorCodes:      []int{403, 404, 429, 502, 503, 504},
		BaseCooldown:    120 * time.Second,
		MaxCooldown:     30 * time.Minute,
		MaxBackoffSteps: 10,
		MaxEntries:      100_000,
	}, lockout.Settings{}.Normalize())
}

func TestNormalizeClamps(t *testing.T) {
	tests := []struct {
		name string
		in   lockout.Settings
		want func(*lockout.Settings)
	}{
		{"low base", lockout.Settings{BaseCooldown: time.Second}, func(s *lockout.Settings) { s.BaseCooldown = 5 * time.Second }},
		{"negative base", lockout.Settings{BaseCooldown: -time.Second}, func(s *lockout.Settings) { s.BaseCooldown = 5 * time.Second }},
		{"high base raises max", lockout.Settings{BaseCooldown: time.Hour}, func(s *lockout.Settings) {
			s.BaseCooldown, s.MaxCooldown = 10*time.Minute, 30*time.Minute
		}},
		{"max below base", lockout.Settings{BaseCooldown: 200 * time.Second, MaxCooldown: 100 * time.Second}, func(s *lockout.Settings) {
			s.BaseCooldown, s.MaxCooldown = 200*time.Second, 200*time.Second
		}},
		{"high max", lockout.Settings{MaxCooldown: 2 * time.Hour}, func(s *lockout.Settings) { s.MaxCooldown = time.Hour }},
		{"low max", lockout.Settings{BaseCooldown: 5 * time.Second, MaxCooldown: time.Second}, func(s *lockout.Settings) {
			s.BaseCooldown, s.MaxCooldown = 5*time.Second, 5*time.Second
		}},
		{"steps 50", lockout.Settings{MaxBackoffSteps: 50}, func(s *lockout.Settings) { s.MaxBackoffSteps = 20 }},
		{"negative steps", lockout.Settings{MaxBackoffSteps: -4}, func(s *lockout.Settings) { s.FixedCooldown = true }},
		{"codes", lockout.Settings{ErrorCodes: []int{99, 429, 700, 429, 599, 100}}, func(s *lockout.Settings) { s.ErrorCodes = []int{429, 599, 100} }},
		{"codes all bad", lockout.Settings{ErrorCodes: []int{0, 600}}, func(*lockout.Settings) {}},
		{"window", lockout.Settings{EscalationWindow: 48 * time.Hour}, func(s *lockout.Settings) { s.EscalationWindow = 24 * time.Hour }},
		{"negative window", lockout.Settings{EscalationWindow: -time.Second}, func(*lockout.Settings) {}},
		{"cap low", lockout.Settings{MaxEntries: 3}, func(s *lockout.Settings) { s.MaxEntries = 16 }},
		{"cap negative", lockout.Settings{MaxEntries: -3}, func(s *lockout.Settings) { s.MaxEntries = 16 }},
		{"cap high", lockout.Settings{MaxEntries: 1 << 40}, func(s *lockout.Settings) { s.MaxEntries = 10_000_000 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := lockout.Settings{}.Normalize()
			want.Enabled = tt.in.Enabled
			tt.want(&want)
			got := tt.in.Normalize()
			assert.Equal(t, want, got)
			assert.Equal(t, got, got.Normalize(), "idempotent")
		})
	}
}

// Scenario 10: settings outside tests are clamped.
func TestScenarioSettingsFromEnv(t *testing.T) {
	t.Run("clamps and filters", func(t *testing.T) {
		s, err := lockout.FromEnv(env(map[string]string{
			lockout.EnvBaseCooldownMs:  "1000",
			lockout.EnvMaxCooldownMs:   "10000",
			lockout.EnvMaxBackoffSteps: "50",
			lockout.EnvErrorCodes:      "99, 429, 700",
		}))
		assert.Equal(t, 5*time.Second, s.BaseCooldown)
		assert.Equal(t, 10*time.Second, s.MaxCooldown)
		assert.Equal(t, 20, s.MaxBackoffSteps)
		assert.Equal(t, []int{429}, s.ErrorCodes)
		require.ErrorIs(t, err, lockout.ErrInvalidSetting, "dropped codes are reported")
		var se *lockout.SettingError
		require.True(t, errors.As(err, &se))
		assert.Equal(t, lockout.EnvErrorCodes, se.Name)
		assert.Equal(t, "99", se.Value)
		assert.Equal(t, `lockout: MODEL_LOCKOUT_ERROR_CODES="99": not a status code in [100, 599]`, se.Error())
	})
	t.Run("max raised to base", func(t *testing.T) {
		s, err := lockout.FromEnv(env(map[string]string{lockout.EnvBaseCooldownMs: "200000", lockout.EnvMaxCooldownMs: "100000"}))
		require.NoError(t, err)
		assert.Equal(t, 200*time.Second, s.BaseCooldown)
		assert.Equal(t, 200*time.Second, s.MaxCooldown)
	})
	t.Run("empty base is 0 and clamps up", func(t *testing.T) {
		s, err := lockout.FromEnv(env(map[string]string{lockout.EnvBaseCooldownMs: ""}))
		require.NoError(t, err)
		assert.Equal(t, 5*time.Second, s.BaseCooldown)
	})
}

func TestFromEnv(t *testing.T) {
	s, err := lockout.FromEnv(env(nil))
	require.NoError(t, err)
	assert.Equal(t, lockout.Settings{}.Normalize(), s)

	s, err = lockout.FromEnv(env(map[string]string{
		lockout.EnvEnabled:          "1",
		lockout.EnvExponential:      "false",
		lockout.EnvBaseCooldownMs:   "7500.9",
		lockout.EnvMaxCooldownMs:    " 60000 ",
		lockout.EnvMaxBackoffSteps:  "3",
		lockout.EnvEscalationWindow: "45000",
		lockout.EnvEvictionCap:      "5000",
		lockout.EnvErrorCodes:       "400 401,429",
	}))
	require.NoError(t, err)
	assert.Equal(t, lockout.Settings{
		Enabled:          true,
		ErrorCodes:       []int{400, 401, 429},
		BaseCooldown:     7500 * time.Millisecond,
		MaxCooldown:      time.Minute,
		MaxBackoffSteps:  3,
		FixedCooldown:    true,
		EscalationWindow: 45 * time.Second,
		MaxEntries:       5000,
	}, s)

	s, err = lockout.FromEnv(env(map[string]string{lockout.EnvMaxBackoffSteps: "0", lockout.EnvEnabled: "TRUE"}))
	require.NoError(t, err)
	assert.True(t, s.Enabled)
	assert.True(t, s.FixedCooldown, "0 steps means no escalation")

	bad := map[string]string{
		lockout.EnvEnabled:          "yes",
		lockout.EnvExponential:      "maybe",
		lockout.EnvBaseCooldownMs:   "abc",
		lockout.EnvMaxCooldownMs:    "NaN",
		lockout.EnvMaxBackoffSteps:  "Inf",
		lockout.EnvEscalationWindow: "x",
		lockout.EnvEvictionCap:      "1e",
		lockout.EnvErrorCodes:       "429.5,abc",
	}
	s, err = lockout.FromEnv(env(bad))
	assert.Equal(t, lockout.Settings{}.Normalize(), s, "bad values keep the defaults")
	require.ErrorIs(t, err, lockout.ErrInvalidSetting)
	var n int
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var se *lockout.SettingError
		require.True(t, errors.As(e, &se))
		n++
	}
	assert.Equal(t, 10, n, "one error per bad value, plus the empty code list")
}
