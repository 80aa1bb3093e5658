package affinity

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTTLFor(t *testing.T) {
	ms := time.Millisecond
	// Scenario 6.
	s6 := Settings{TTL: 0, ProviderTTL: map[string]time.Duration{"claude": 3_600_000 * ms}}
	// Scenario 7.
	s7 := Settings{TTL: 3_600_000 * ms, ProviderTTL: map[string]time.Duration{"claude": 0}}
	tests := []struct {
		name     string
		s        Settings
		provider string
		request  time.Duration
		want     time.Duration
	}{
		{"provider entry", s6, "claude", 0, time.Hour},
		{"no entry, global 0", s6, "codex", 0, 0},
		{"request override", s6, "anthropic", 60_000 * ms, time.Minute},
		{"request beats provider 0", s7, "claude", 60_000 * ms, time.Minute},
		{"provider 0 disables", s7, "claude", 0, 0},
		{"global", s7, "codex", 0, time.Hour},
		{"negative request ignored", s7, "codex", -time.Second, time.Hour},
		{"request clamped", s7, "codex", 48 * time.Hour, MaxTTL},
		{"global clamped", Settings{TTL: 100 * time.Hour}, "x", 0, MaxTTL},
		{"negative global", Settings{TTL: -1}, "x", 0, 0},
		{"negative provider ignored", Settings{TTL: time.Hour, ProviderTTL: map[string]time.Duration{"x": -1}}, "x", 0, time.Hour},
		{"zero settings", Settings{}, "x", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.s.TTLFor(tt.provider, tt.request))
			assert.Equal(t, tt.want, tt.s.Normalize().TTLFor(tt.provider, tt.request))
		})
	}
}

func TestSettingsNormalize(t *testing.T) {
	in := Settings{TTL: -time.Second, ProviderTTL: map[string]time.Duration{"a": -1, "b": 0, "c": 25 * time.Hour, "d": time.Minute}}
	got := in.Normalize()
	assert.Equal(t, Settings{TTL: 0, ProviderTTL: map[string]time.Duration{"b": 0, "c": MaxTTL, "d": time.Minute}}, got)
	assert.Len(t, in.ProviderTTL, 4, "input map untouched")
	assert.Equal(t, Settings{TTL: MaxTTL}, Settings{TTL: MaxTTL + 1}.Normalize())
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestSettingsFromEnv(t *testing.T) {
	s, err := SettingsFromEnv(env(map[string]string{
		EnvTTL:         "3600000",
		EnvLegacyTTL:   "5",
		EnvProviderTTL: " claude=0 , codex = 60000 ,, ",
	}))
	require.NoError(t, err)
	assert.Equal(t, Settings{TTL: time.Hour, ProviderTTL: map[string]time.Duration{"claude": 0, "codex": time.Minute}}, s)

	s, err = SettingsFromEnv(env(map[string]string{EnvLegacyTTL: "120000"}))
	require.NoError(t, err)
	assert.Equal(t, Settings{TTL: 2 * time.Minute}, s)

	s, err = SettingsFromEnv(env(nil))
	require.NoError(t, err)
	assert.Equal(t, Settings{}, s)
}

func TestSettingsFromEnvBadValues(t *testing.T) {
	// The settings schema refuses -1, 86 400 001, 1.5 and non-numbers.
	for _, bad := range []string{"-1", "86400001", "1.5", "abc", "", "1e3"} {
		t.Run(bad, func(t *testing.T) {
			s, err := SettingsFromEnv(env(map[string]string{EnvTTL: bad}))
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidSetting)
			var se *SettingError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, EnvTTL, se.Name)
			assert.Equal(t, bad, se.Value)
			assert.Equal(t, Settings{}, s)
		})
	}
	s, err := SettingsFromEnv(env(map[string]string{EnvTTL: "86400000", EnvProviderTTL: "a=1.5,b=-1,=5,c,d=7"}))
	assert.Equal(t, Settings{TTL: MaxTTL, ProviderTTL: map[string]time.Duration{"d": 7 * time.Millisecond}}, s)
	var count int
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var se *SettingError
		require.True(t, errors.As(e, &se))
		assert.Equal(t, EnvProviderTTL, se.Name)
		count++
	}
	assert.Equal(t, 4, count)
	assert.Equal(t, `affinity: PROVIDER_SESSION_AFFINITY_TTL_MS="a=1.5": not an integer number of milliseconds`, err.(interface{ Unwrap() []error }).Unwrap()[0].Error())
}
