package breaker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestFromEnv(t *testing.T) {
	s, err := FromEnv(env(map[string]string{
		"OMNIROUTE_CIRCUIT_BREAKER_OAUTH_THRESHOLD":                   "10",
		"OMNIROUTE_CIRCUIT_BREAKER_OAUTH_RESET_MS":                    " 90000 ",
		"OMNIROUTE_PROVIDER_BREAKER_OAUTH_DEGRADATION_THRESHOLD":      "6.2",
		"OMNIROUTE_PROVIDER_BREAKER_API_KEY_MAX_BACKOFF_MULTIPLIER":   "2",
		"OMNIROUTE_PROVIDER_BREAKER_API_KEY_BACKOFF_ESCALATION_COUNT": "0",
		"OMNIROUTE_CIRCUIT_BREAKER_LOCAL_THRESHOLD":                   "abc",
		"OMNIROUTE_CIRCUIT_BREAKER_LOCAL_RESET_MS":                    "-1",
		"OMNIROUTE_CIRCUIT_BREAKER_API_KEY_THRESHOLD":                 "",
		"OMNIROUTE_CIRCUIT_BREAKER_API_KEY_RESET_MS":                  "Inf",
	}))
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrInvalidSettings)
	for _, name := range []string{"LOCAL_THRESHOLD", "LOCAL_RESET_MS", "API_KEY_RESET_MS"} {
		assert.Contains(t, err.Error(), name)
	}
	assert.Equal(t, Profile{OpenAt: 10, Reset: 90 * time.Second, DegradedAt: 7}, s.OAuth)
	assert.Equal(t, Profile{MaxMultiplier: 2, EscalationCount: 1}, s.APIKey)
	assert.Equal(t, Profile{}, s.Local)
	n := s.Normalize()
	assert.Equal(t, Profile{DegradedAt: 7, OpenAt: 10, Reset: 90 * time.Second, MaxMultiplier: 8, EscalationCount: 2}, n.OAuth)
	assert.Equal(t, DefaultProfile(Local), n.Local)
}

func TestFromEnvEmpty(t *testing.T) {
	s, err := FromEnv(env(nil))
	assert.NoError(t, err)
	assert.Equal(t, Settings{}, s)
	g, err := GateFromEnv(env(nil))
	assert.NoError(t, err)
	assert.Equal(t, GateSettings{}, g)
}

// Spec M2.3 #2: the switch.
func TestScenarioGateSwitch(t *testing.T) {
	for v, want := range map[string]bool{" ON ": true, "1": true, "true": true, "TRUE": true, "yes": false, "enabled": false, "": false, "0": false} {
		g, err := GateFromEnv(env(map[string]string{"PROVIDER_COOLDOWN_ENABLED": v}))
		require.NoError(t, err)
		assert.Equal(t, want, g.Enabled, "%q", v)
	}
}

// Spec M2.3 #7: an env threshold of 3 trips at 3; "abc" and "-1" keep 10.
func TestScenarioGateEnvThreshold(t *testing.T) {
	cases := []struct {
		raw     string
		want    int
		wantErr bool
	}{{"3", 3, false}, {"abc", 10, true}, {"-1", 10, true}, {"0", 1, false}}
	for _, tc := range cases {
		s, err := GateFromEnv(env(map[string]string{
			"PROVIDER_COOLDOWN_ENABLED":                          "on",
			"OMNIROUTE_PROVIDER_BREAKER_OAUTH_FAILURE_THRESHOLD": tc.raw,
		}))
		assert.Equal(t, tc.wantErr, err != nil, "%q: %v", tc.raw, err)
		g := NewGate(GateConfig{Settings: s, ClassOf: classOf})
		n := 0
		for {
			n++
			g.RecordFailureAt("claude", "", t0)
			if _, b := g.BlockedUntilAt("claude", t0); b {
				break
			}
		}
		assert.Equal(t, tc.want, n, "%q", tc.raw)
	}
}

func TestGateFromEnvDurations(t *testing.T) {
	s, err := GateFromEnv(env(map[string]string{
		"PROVIDER_COOLDOWN_MIN_MS":                             "1000",
		"PROVIDER_COOLDOWN_MAX_MS":                             "60000",
		"OMNIROUTE_PROVIDER_BREAKER_API_KEY_FAILURE_WINDOW_MS": "120000",
		"OMNIROUTE_PROVIDER_BREAKER_LOCAL_COOLDOWN_MS":         "1e400",
	}))
	require.Error(t, err)
	assert.Equal(t, time.Second, s.MinRetryCooldown)
	assert.Equal(t, time.Minute, s.MaxRetryCooldown)
	assert.Equal(t, 2*time.Minute, s.APIKey.Window)
	assert.Zero(t, s.Local.Cooldown)
}
