package affinity

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTTLFor(t *testing.T) {
	ms := time.Millisecond
	// Scenario 6.
	s6 := Config{TTL: 0, ProviderTTL: map[string]time.Duration{"claude": 3_600_000 * ms}}
	// Scenario 7.
	s7 := Config{TTL: 3_600_000 * ms, ProviderTTL: map[string]time.Duration{"claude": 0}}
	tests := []struct {
		name     string
		c        Config
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
		{"request clamped", s7, "codex", 48 * time.Hour, maxTTL},
		{"global clamped", Config{TTL: 100 * time.Hour}, "x", 0, maxTTL},
		{"negative global", Config{TTL: -1}, "x", 0, 0},
		{"negative provider ignored", Config{TTL: time.Hour, ProviderTTL: map[string]time.Duration{"x": -1}}, "x", 0, time.Hour},
		{"zero config", Config{}, "x", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.c.TTLFor(tt.provider, tt.request))
			assert.Equal(t, tt.want, tt.c.Normalize().TTLFor(tt.provider, tt.request))
			assert.Equal(t, tt.want, New(tt.c).TTLFor(tt.provider, tt.request))
		})
	}
}

// defaults is the normalised zero Config.
var defaults = Config{MaxPins: defaultMaxPins, MaxConnections: defaultMaxConnections}

func withTTL(c Config, ttl time.Duration, providers map[string]time.Duration) Config {
	c.TTL, c.ProviderTTL = ttl, providers
	return c
}

func TestNormalizeClampsAndFillsDefaults(t *testing.T) {
	in := Config{TTL: -time.Second, ProviderTTL: map[string]time.Duration{"a": -1, "b": 0, "c": 25 * time.Hour, "d": time.Minute}}
	got := in.Normalize()
	assert.Equal(t, withTTL(defaults, 0, map[string]time.Duration{"b": 0, "c": maxTTL, "d": time.Minute}), got)
	assert.Len(t, in.ProviderTTL, 4, "input map untouched")
	assert.Equal(t, time.Duration(-time.Second), in.TTL, "receiver untouched")
	assert.Zero(t, in.MaxPins, "receiver untouched")
	got.ProviderTTL["e"] = time.Second
	assert.Len(t, in.ProviderTTL, 4, "the copy shares no map with its receiver")

	assert.Equal(t, withTTL(defaults, maxTTL, nil), Config{TTL: maxTTL + 1}.Normalize())
	assert.Equal(t, defaults, Config{}.Normalize())
	assert.Equal(t, defaults, Config{MaxPins: -5, MaxConnections: -1}.Normalize())
	n := Config{MaxPins: 1 << 40, MaxConnections: 7}.Normalize()
	assert.Equal(t, maxBound, n.MaxPins)
	assert.Equal(t, 7, n.MaxConnections)
	assert.Equal(t, n, n.Normalize(), "idempotent")
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestFromEnv(t *testing.T) {
	c, err := FromEnv(env(map[string]string{
		envTTL:         "3600000",
		envLegacyTTL:   "5",
		envProviderTTL: " claude=0 , codex = 60000 ,, ",
	}))
	require.NoError(t, err)
	assert.Equal(t, Config{TTL: time.Hour, ProviderTTL: map[string]time.Duration{"claude": 0, "codex": time.Minute}}, c)

	c, err = FromEnv(env(map[string]string{envLegacyTTL: "120000"}))
	require.NoError(t, err)
	assert.Equal(t, Config{TTL: 2 * time.Minute}, c)

	c, err = FromEnv(env(nil))
	require.NoError(t, err)
	assert.Equal(t, Config{}, c)

	c, err = FromEnv(nil)
	require.NoError(t, err)
	assert.Equal(t, Config{}, c)
}

// FromEnv reads values with the library's one vocabulary: whole numbers of
// milliseconds, trimmed; a blank variable counts as unset, so a blank
// SESSION_AFFINITY_TTL_MS lets the legacy name decide.
func TestFromEnvSharedVocabulary(t *testing.T) {
	for v, want := range map[string]time.Duration{
		" 60000 ": time.Minute,
		"+5":      5 * time.Millisecond,
		"1e3":     time.Second,
		"0":       0,
	} {
		c, err := FromEnv(env(map[string]string{envTTL: v}))
		require.NoError(t, err, v)
		assert.Equal(t, Config{TTL: want}, c, v)
	}
	c, err := FromEnv(env(map[string]string{envTTL: "  ", envLegacyTTL: "7"}))
	require.NoError(t, err)
	assert.Equal(t, Config{TTL: 7 * time.Millisecond}, c)
	c, err = FromEnv(env(map[string]string{envTTL: "", envProviderTTL: " "}))
	require.NoError(t, err)
	assert.Equal(t, Config{}, c)
}

func TestFromEnvRefusalIsErrorWithInvalidConfigCode(t *testing.T) {
	// The settings schema refuses -1, 86 400 001, 1.5 and non-numbers.
	for bad, reason := range map[string]string{
		"-1":       "negative",
		"86400001": "more than 86400000 ms",
		"1.5":      "not a whole number",
		"abc":      "not a number",
		"NaN":      "not finite",
	} {
		t.Run(bad, func(t *testing.T) {
			c, err := FromEnv(env(map[string]string{envTTL: bad}))
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidConfig)
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, Error{Code: CodeInvalidConfig, Status: http.StatusBadRequest, Field: envTTL, Value: bad, Reason: reason, err: ErrInvalidConfig}, *e)
			assert.Equal(t, Config{}, c)
		})
	}
	c, err := FromEnv(env(map[string]string{envTTL: "86400000", envProviderTTL: "a=1.5,b=-1,=5,c,d=7"}))
	assert.Equal(t, Config{TTL: maxTTL, ProviderTTL: map[string]time.Duration{"d": 7 * time.Millisecond}}, c)
	errs := err.(interface{ Unwrap() []error }).Unwrap()
	require.Len(t, errs, 4)
	for _, e := range errs {
		var ae *Error
		require.True(t, errors.As(e, &ae))
		assert.Equal(t, envProviderTTL, ae.Field)
		assert.Equal(t, CodeInvalidConfig, ae.Code)
		assert.Same(t, ErrInvalidConfig, errors.Unwrap(e))
	}
	assert.Equal(t, `affinity: invalid_config: PROVIDER_SESSION_AFFINITY_TTL_MS="a=1.5": not a whole number`, errs[0].Error())
	assert.Equal(t, `affinity: invalid_config: PROVIDER_SESSION_AFFINITY_TTL_MS="=5": want provider=milliseconds`, errs[2].Error())

	// A refused global value is named by the variable that was read.
	_, err = FromEnv(env(map[string]string{envLegacyTTL: "x"}))
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, envLegacyTTL, e.Field)
}
