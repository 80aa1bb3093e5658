package watchdog

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSettingsZeroIsDefault(t *testing.T) {
	got := Settings{}.Normalize()
	assert.Equal(t, Settings{Enabled: false, Warmup: 30 * time.Second, Window: 30 * time.Second,
		MinBytesPerSecond: 1, MinBytes: 1}, got)
	assert.Equal(t, 30*time.Second, Settings{}.EffectiveWarmup())
}

func TestSettingsNormalize(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name string
		in   Settings
		want Settings
	}{
		// Scenario 7: {true, −1, 10, 0, 0} → {true, 0, 1000, 1, 1}.
		{"spec resolve", Settings{Enabled: true, Warmup: -1 * ms, Window: 10 * ms},
			Settings{Enabled: true, Warmup: NoWarmup, Window: time.Second, MinBytesPerSecond: 1, MinBytes: 1}},
		{"negative rates", Settings{Window: 5 * time.Second, MinBytesPerSecond: -3, MinBytes: -9},
			Settings{Warmup: DefaultWarmup, Window: 5 * time.Second, MinBytesPerSecond: 1, MinBytes: 1}},
		{"upper clamps", Settings{Warmup: time.Hour, Window: time.Hour, MinBytesPerSecond: 50, MinBytes: 7},
			Settings{Warmup: 10 * time.Minute, Window: 10 * time.Minute, MinBytesPerSecond: 50, MinBytes: 7}},
		{"in range kept", Settings{Warmup: 1500 * ms, Window: 2 * time.Second, MinBytesPerSecond: 2, MinBytes: 3},
			Settings{Warmup: 1500 * ms, Window: 2 * time.Second, MinBytesPerSecond: 2, MinBytes: 3}},
		{"negative window", Settings{Window: -time.Second},
			Settings{Warmup: DefaultWarmup, Window: time.Second, MinBytesPerSecond: 1, MinBytes: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in.Normalize()
			assert.Equal(t, tc.want, got)
			assert.Equal(t, got, got.Normalize(), "idempotent")
		})
	}
	assert.Equal(t, time.Duration(0), Settings{Warmup: -time.Second}.EffectiveWarmup())
}

// Scenario 7, second half: the operator update schema.
func TestSettingsValidate(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		in Settings
		ok bool
	}{
		{Settings{Warmup: 600001 * ms, Window: time.Second}, false},
		{Settings{Warmup: time.Second, Window: 999 * ms}, false},
		{Settings{Warmup: 600000 * ms, Window: 600000 * ms}, true},
		{Settings{Warmup: NoWarmup, Window: time.Second, MinBytesPerSecond: 1, MinBytes: 1}, true},
		{Settings{Window: 600001 * ms}, false},
		{Settings{Warmup: -2}, false},
		{Settings{MinBytesPerSecond: -1}, false},
		{Settings{MinBytes: -1}, false},
		{Settings{}, true},
	}
	for i, tc := range cases {
		err := tc.in.Validate()
		if tc.ok {
			assert.NoError(t, err, "case %d", i)
			continue
		}
		require.Error(t, err, "case %d", i)
		assert.ErrorIs(t, err, ErrInvalidSettings)
		var se *SettingsError
		assert.True(t, errors.As(err, &se))
	}
}

func TestConfigNormalize(t *testing.T) {
	c := Config{IdleTimeout: -time.Second, AttemptDeadline: -1, MaxEventBytes: 10}.Normalize()
	assert.Equal(t, time.Duration(0), c.IdleTimeout)
	assert.Equal(t, time.Duration(0), c.AttemptDeadline)
	assert.Equal(t, MinMaxEventBytes, c.MaxEventBytes)
	assert.Equal(t, DefaultMaxEventBytes, Config{}.Normalize().MaxEventBytes)
	assert.Equal(t, MaxMaxEventBytes, Config{MaxEventBytes: 1 << 30}.Normalize().MaxEventBytes)
	assert.Equal(t, c, c.Normalize())
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func TestFromEnv(t *testing.T) {
	c, err := FromEnv(env(map[string]string{
		"STREAM_THROUGHPUT_WATCHDOG_ENABLED":              "true",
		"STREAM_THROUGHPUT_WATCHDOG_WARMUP_MS":            "0",
		"STREAM_THROUGHPUT_WATCHDOG_WINDOW_MS":            "2000",
		"STREAM_THROUGHPUT_WATCHDOG_MIN_BYTES_PER_SECOND": "5",
		"STREAM_THROUGHPUT_WATCHDOG_MIN_BYTES":            "20",
		"STREAM_THROUGHPUT_WATCHDOG_MAX_EVENT_BYTES":      "4096",
		"STREAM_IDLE_TIMEOUT_MS":                          "125000",
		"REQUEST_TIMEOUT_MS":                              "600000",
		"UPSTREAM_ATTEMPT_TIMEOUT_MS":                     "300000",
	}))
	require.NoError(t, err)
	assert.Equal(t, Config{
		Throughput:      Settings{Enabled: true, Warmup: NoWarmup, Window: 2 * time.Second, MinBytesPerSecond: 5, MinBytes: 20},
		IdleTimeout:     125 * time.Second,
		AttemptDeadline: 300 * time.Second,
		MaxEventBytes:   4096,
	}, c)
}

func TestFromEnvDefaultsAndFallback(t *testing.T) {
	c, err := FromEnv(env(nil))
	require.NoError(t, err)
	assert.Equal(t, Config{}.Normalize(), c)
	assert.False(t, c.Throughput.Enabled)

	c, err = FromEnv(env(map[string]string{"REQUEST_TIMEOUT_MS": "600000"}))
	require.NoError(t, err)
	assert.Equal(t, 600*time.Second, c.IdleTimeout)

	c, err = FromEnv(nil)
	require.NoError(t, err)
	assert.Equal(t, Config{}.Normalize(), c)
}

func TestFromEnvBadValuesKeepDefaults(t *testing.T) {
	c, err := FromEnv(env(map[string]string{
		"STREAM_THROUGHPUT_WATCHDOG_ENABLED":   "yes please",
		"STREAM_THROUGHPUT_WATCHDOG_WARMUP_MS": "600001",
		"STREAM_THROUGHPUT_WATCHDOG_WINDOW_MS": "999",
		"STREAM_THROUGHPUT_WATCHDOG_MIN_BYTES": "0",
		"STREAM_IDLE_TIMEOUT_MS":               "-5",
		"UPSTREAM_ATTEMPT_TIMEOUT_MS":          "soon",
	}))
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrInvalidSettings)
	var se *SettingsError
	require.True(t, errors.As(err, &se))
	assert.Len(t, se.Errs, 6)
	assert.Equal(t, Config{}.Normalize(), c)
}
