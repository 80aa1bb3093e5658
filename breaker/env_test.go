package breaker

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestFromEnv(t *testing.T) {
	c, err := FromEnv(env(map[string]string{
		"OMNIROUTE_CIRCUIT_BREAKER_OAUTH_THRESHOLD":                   "10",
		"OMNIROUTE_CIRCUIT_BREAKER_OAUTH_RESET_MS":                    " 90000 ",
		"OMNIROUTE_PROVIDER_BREAKER_OAUTH_DEGRADATION_THRESHOLD":      "7",
		"OMNIROUTE_PROVIDER_BREAKER_API_KEY_MAX_BACKOFF_MULTIPLIER":   "2",
		"OMNIROUTE_PROVIDER_BREAKER_API_KEY_BACKOFF_ESCALATION_COUNT": "0",
		"OMNIROUTE_CIRCUIT_BREAKER_LOCAL_THRESHOLD":                   "abc",
		"OMNIROUTE_CIRCUIT_BREAKER_LOCAL_RESET_MS":                    "-1",
		"OMNIROUTE_PROVIDER_BREAKER_LOCAL_DEGRADATION_THRESHOLD":      "6.2",
		"OMNIROUTE_CIRCUIT_BREAKER_API_KEY_THRESHOLD":                 "",
		"OMNIROUTE_CIRCUIT_BREAKER_API_KEY_RESET_MS":                  "Inf",
	}))
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrInvalidConfig)
	for _, name := range []string{"LOCAL_THRESHOLD", "LOCAL_RESET_MS", "LOCAL_DEGRADATION_THRESHOLD", "API_KEY_RESET_MS"} {
		assert.Contains(t, err.Error(), name)
	}
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, CodeInvalidConfig, e.Code)
	assert.Equal(t, 400, e.Status)
	assert.Equal(t, "OMNIROUTE_CIRCUIT_BREAKER_API_KEY_RESET_MS", e.Field, "the first refusal, in reading order")
	assert.Equal(t, "Inf", e.Value)
	assert.Equal(t, Profile{OpenAt: 10, Reset: 90 * time.Second, DegradedAt: 7}, c.OAuth)
	assert.Equal(t, Profile{MaxMultiplier: 2, EscalationCount: 1}, c.APIKey)
	assert.Equal(t, Profile{}, c.Local)
	assert.Equal(t, Config{OAuth: c.OAuth, APIKey: c.APIKey}, c, "only the profiles are read")
	n := c.Normalize()
	assert.Equal(t, Profile{DegradedAt: 7, OpenAt: 10, Reset: 90 * time.Second, MaxMultiplier: 8, EscalationCount: 2}, n.OAuth)
	assert.Equal(t, defaultProfile(Local), n.Local)
}

// The one vocabulary of environment values: whole numbers only (a fraction
// or a negative number is refused and keeps the default), zero is the
// smallest allowed value, a _MS value below the field's floor is the floor.
func TestFromEnvNumbers(t *testing.T) {
	cases := []struct {
		raw     string
		open    int
		reset   time.Duration
		wantErr bool
	}{
		{"3", 3, time.Second, false},
		{" 12 ", 12, time.Second, false},
		{"2500", 1000, 2500 * time.Millisecond, false},
		{"0", 1, time.Second, false},
		{"6.2", 0, 0, true},
		{"-1", 0, 0, true},
		{"abc", 0, 0, true},
		{"NaN", 0, 0, true},
		{"1e400", 0, 0, true},
		{"", 0, 0, false},
	}
	for _, tc := range cases {
		c, err := FromEnv(env(map[string]string{
			"OMNIROUTE_CIRCUIT_BREAKER_OAUTH_THRESHOLD": tc.raw,
			"OMNIROUTE_CIRCUIT_BREAKER_OAUTH_RESET_MS":  tc.raw,
		}))
		assert.Equal(t, tc.wantErr, err != nil, "%q: %v", tc.raw, err)
		n := c.OAuth.OpenAt
		if n > 1000 {
			n = c.Normalize().OAuth.OpenAt // the reader keeps it; Normalize clamps
		}
		assert.Equal(t, tc.open, n, "%q", tc.raw)
		assert.Equal(t, tc.reset, c.OAuth.Reset, "%q", tc.raw)
	}
}

func TestFromEnvEmpty(t *testing.T) {
	c, err := FromEnv(env(nil))
	assert.NoError(t, err)
	assert.Equal(t, Profile{}, c.OAuth)
	assert.Equal(t, Profile{}, c.APIKey)
	assert.Equal(t, Profile{}, c.Local)
	assert.Nil(t, c.Profiles)
	g, err := GateFromEnv(env(nil))
	assert.NoError(t, err)
	assert.Equal(t, GateConfig{}, g)
	c, err = FromEnv(nil)
	assert.NoError(t, err)
	assert.Equal(t, Profile{}, c.OAuth)
	g, err = GateFromEnv(nil)
	assert.NoError(t, err)
	assert.Equal(t, GateConfig{}, g)
}

// Spec M2.3 #2, in the library's one switch vocabulary: 1, true, yes, on
// (any case, trimmed) turn the gate on; 0, false, no, off leave it off; any
// other value leaves it off and is refused.
func TestScenarioGateSwitch(t *testing.T) {
	cases := []struct {
		raw     string
		want    bool
		wantErr bool
	}{
		{" ON ", true, false}, {"1", true, false}, {"true", true, false}, {"TRUE", true, false}, {"yes", true, false},
		{"0", false, false}, {"off", false, false}, {"no", false, false}, {"", false, false},
		{"enabled", false, true}, {"2", false, true},
	}
	for _, tc := range cases {
		g, err := GateFromEnv(env(map[string]string{"PROVIDER_COOLDOWN_ENABLED": tc.raw}))
		assert.Equal(t, tc.wantErr, err != nil, "%q: %v", tc.raw, err)
		if tc.wantErr {
			var e *Error
			require.ErrorAs(t, err, &e, "%q", tc.raw)
			assert.Equal(t, "PROVIDER_COOLDOWN_ENABLED", e.Field)
		}
		assert.Equal(t, tc.want, g.Enabled, "%q", tc.raw)
	}
}

// Spec M2.3 #7: an env threshold of 3 trips at 3; "abc" and "-1" keep 10;
// "0" is the smallest threshold, 1.
func TestScenarioGateEnvThreshold(t *testing.T) {
	cases := []struct {
		raw     string
		want    int
		wantErr bool
	}{{"3", 3, false}, {"abc", 10, true}, {"-1", 10, true}, {"0", 1, false}}
	for _, tc := range cases {
		c, err := GateFromEnv(env(map[string]string{
			"PROVIDER_COOLDOWN_ENABLED":                          "on",
			"OMNIROUTE_PROVIDER_BREAKER_OAUTH_FAILURE_THRESHOLD": tc.raw,
		}))
		assert.Equal(t, tc.wantErr, err != nil, "%q: %v", tc.raw, err)
		c.ClassOf = classOf
		g := NewGate(c)
		n := 0
		for {
			n++
			g.RecordFailureAt("claude", "", t0)
			if _, b := g.BlockedUntilAt("claude", "", t0); b {
				break
			}
		}
		assert.Equal(t, tc.want, n, "%q", tc.raw)
	}
}

func TestGateFromEnvDurations(t *testing.T) {
	c, err := GateFromEnv(env(map[string]string{
		"PROVIDER_COOLDOWN_MIN_MS":                             "1000",
		"PROVIDER_COOLDOWN_MAX_MS":                             "60000",
		"OMNIROUTE_PROVIDER_BREAKER_API_KEY_FAILURE_WINDOW_MS": "120000",
		"OMNIROUTE_PROVIDER_BREAKER_LOCAL_COOLDOWN_MS":         "1e400",
		"OMNIROUTE_PROVIDER_BREAKER_OAUTH_COOLDOWN_MS":         "0",
	}))
	require.Error(t, err)
	var e *Error
	require.True(t, errors.As(err, &e))
	assert.Equal(t, "OMNIROUTE_PROVIDER_BREAKER_LOCAL_COOLDOWN_MS", e.Field)
	require.NotNil(t, c.MinRetry)
	assert.Equal(t, time.Second, *c.MinRetry)
	assert.Equal(t, time.Minute, c.MaxRetry)
	assert.Equal(t, 2*time.Minute, c.APIKey.Window)
	assert.Zero(t, c.Local.Cooldown)
	assert.Equal(t, time.Second, c.OAuth.Cooldown, "0 is the floor, 1 s")
}

// Zero is a value for PROVIDER_COOLDOWN_MIN_MS: range [0, 3600000], 0 kept;
// unset or bad input (a negative or fractional number too) keeps the
// default 5 s; Normalize clamps the top of the range.
func TestGateEnvMinRetryZeroIsAValue(t *testing.T) {
	cases := []struct {
		raw     string
		set     bool          // MinRetry is set by the reader
		read    time.Duration // what the reader gives
		want    time.Duration // normalized
		wantErr bool
	}{
		{"0", true, 0, 0, false},
		{" 0 ", true, 0, 0, false},
		{"1000", true, time.Second, time.Second, false},
		{"3600000", true, time.Hour, time.Hour, false},
		{"7200000", true, 2 * time.Hour, time.Hour, false},
		{"", false, 0, 5 * time.Second, false},
		{"-1", false, 0, 5 * time.Second, true},
		{"-250.5", false, 0, 5 * time.Second, true},
		{"2.5", false, 0, 5 * time.Second, true},
		{"abc", false, 0, 5 * time.Second, true},
		{"NaN", false, 0, 5 * time.Second, true},
		{"-Inf", false, 0, 5 * time.Second, true},
	}
	for _, tc := range cases {
		c, err := GateFromEnv(env(map[string]string{"PROVIDER_COOLDOWN_MIN_MS": tc.raw}))
		assert.Equal(t, tc.wantErr, err != nil, "%q: %v", tc.raw, err)
		if tc.wantErr {
			assert.ErrorIs(t, err, ErrInvalidConfig, "%q", tc.raw)
		}
		if assert.Equal(t, tc.set, c.MinRetry != nil, "%q", tc.raw) && tc.set {
			assert.Equal(t, tc.read, *c.MinRetry, "%q", tc.raw)
		}
		n := c.Normalize()
		assert.Equal(t, tc.want, *n.MinRetry, "%q normalized", tc.raw)
	}
	c, err := GateFromEnv(env(map[string]string{"PROVIDER_COOLDOWN_ENABLED": "on", "PROVIDER_COOLDOWN_MIN_MS": "0"}))
	require.NoError(t, err)
	g := NewGate(c)
	g.RecordFailureAt("openai", "c1", t0)
	_, blocked := g.ConnBlockedUntilAt("openai", "c1", t0)
	assert.False(t, blocked, "a zero minimum never cools a connection")
}
