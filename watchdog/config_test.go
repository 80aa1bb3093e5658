package watchdog

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigZeroIsDefault(t *testing.T) {
	assert.Equal(t, Config{Throughput: false, Warmup: new(30 * time.Second), Window: 30 * time.Second,
		MinBytesPerSecond: 1, MinBytes: 1, ReadinessTimeout: new(120 * time.Second), MaxEventBytes: 1 << 20},
		Config{}.Normalize())
}

func TestConfigNormalize(t *testing.T) {
	ms := time.Millisecond
	def := func(c Config) Config { // the guards' defaults
		c.ReadinessTimeout, c.MaxEventBytes = new(120*time.Second), 1<<20
		return c
	}
	cases := []struct {
		name string
		in   Config
		want Config
	}{
		// Scenario 7: {true, −1, 10, 0, 0} → {true, 0, 1000, 1, 1}.
		{"spec resolve", Config{Throughput: true, Warmup: new(-1 * ms), Window: 10 * ms},
			def(Config{Throughput: true, Warmup: new(time.Duration(0)), Window: time.Second, MinBytesPerSecond: 1, MinBytes: 1})},
		{"zero warm-up is none", Config{Warmup: new(time.Duration(0))},
			def(Config{Warmup: new(time.Duration(0)), Window: 30 * time.Second, MinBytesPerSecond: 1, MinBytes: 1})},
		{"negative rates", Config{Window: 5 * time.Second, MinBytesPerSecond: -3, MinBytes: -9},
			def(Config{Warmup: new(30 * time.Second), Window: 5 * time.Second, MinBytesPerSecond: 1, MinBytes: 1})},
		{"upper clamps", Config{Warmup: new(time.Hour), Window: time.Hour, MinBytesPerSecond: 50, MinBytes: 7},
			def(Config{Warmup: new(10 * time.Minute), Window: 10 * time.Minute, MinBytesPerSecond: 50, MinBytes: 7})},
		{"in range kept", Config{Warmup: new(1500 * ms), Window: 2 * time.Second, MinBytesPerSecond: 2, MinBytes: 3},
			def(Config{Warmup: new(1500 * ms), Window: 2 * time.Second, MinBytesPerSecond: 2, MinBytes: 3})},
		{"negative window", Config{Window: -time.Second},
			def(Config{Warmup: new(30 * time.Second), Window: time.Second, MinBytesPerSecond: 1, MinBytes: 1})},
		{"guards", Config{IdleTimeout: -time.Second, AttemptDeadline: -1, MaxEventBytes: 10},
			Config{Warmup: new(30 * time.Second), Window: 30 * time.Second, MinBytesPerSecond: 1, MinBytes: 1,
				ReadinessTimeout: new(120 * time.Second), MaxEventBytes: 1 << 10}},
		{"event bound clamped", Config{MaxEventBytes: 1 << 30, HoldHeartbeats: true},
			Config{Warmup: new(30 * time.Second), Window: 30 * time.Second, MinBytesPerSecond: 1, MinBytes: 1,
				ReadinessTimeout: new(120 * time.Second), MaxEventBytes: 64 << 20, HoldHeartbeats: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var warm time.Duration
			if tc.in.Warmup != nil {
				warm = *tc.in.Warmup
			}
			got := tc.in.Normalize()
			assert.Equal(t, tc.want, got)
			assert.Equal(t, got, got.Normalize(), "idempotent")
			if tc.in.Warmup != nil {
				assert.NotSame(t, tc.in.Warmup, got.Warmup, "no pointer is shared with the receiver")
				assert.Equal(t, warm, *tc.in.Warmup, "the receiver is not modified")
			}
		})
	}
}

// Scenario 7, second half: the operator update schema.
func TestConfigValidate(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		in     Config
		fields []string // the refused fields
	}{
		{Config{Warmup: new(600001 * ms), Window: time.Second}, []string{"Warmup"}},
		{Config{Warmup: new(time.Second), Window: 999 * ms}, []string{"Window"}},
		{Config{Warmup: new(600000 * ms), Window: 600000 * ms}, nil},
		{Config{Warmup: new(time.Duration(0)), Window: time.Second, MinBytesPerSecond: 1, MinBytes: 1}, nil},
		{Config{Window: 600001 * ms}, []string{"Window"}},
		{Config{Warmup: new(time.Duration(-1))}, []string{"Warmup"}},
		{Config{MinBytesPerSecond: -1}, []string{"MinBytesPerSecond"}},
		{Config{MinBytes: -1}, []string{"MinBytes"}},
		{Config{Warmup: new(time.Hour), MinBytes: -1}, []string{"Warmup", "MinBytes"}},
		{Config{}, nil},
	}
	for i, tc := range cases {
		err := tc.in.Validate()
		if tc.fields == nil {
			assert.NoError(t, err, "case %d", i)
			continue
		}
		require.ErrorIs(t, err, ErrInvalidConfig, "case %d", i)
		errs := err.(interface{ Unwrap() []error }).Unwrap()
		require.Len(t, errs, len(tc.fields), "case %d", i)
		for j, e := range errs {
			var we *Error
			require.ErrorAs(t, e, &we)
			assert.Equal(t, CodeInvalidConfig, we.Code)
			assert.Equal(t, http.StatusBadRequest, we.Status)
			assert.Equal(t, tc.fields[j], we.Field, "case %d", i)
		}
	}
	assert.EqualError(t, Config{Window: 999 * ms}.Validate(), `watchdog: invalid_config: Window="999ms": outside 1s..10m0s`)
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// FromEnv fills only the fields whose variables are set.
func TestFromEnvFillsOnlySetVariables(t *testing.T) {
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
		Throughput: true, Warmup: new(time.Duration(0)), Window: 2 * time.Second, MinBytesPerSecond: 5, MinBytes: 20,
		IdleTimeout:     125 * time.Second,
		AttemptDeadline: 300 * time.Second,
		MaxEventBytes:   4096,
	}, c)

	// The one switch vocabulary.
	for v, want := range map[string]bool{"1": true, "yes": true, " ON ": true, "0": false, "no": false, "Off": false} {
		c, err := FromEnv(env(map[string]string{"STREAM_THROUGHPUT_WATCHDOG_ENABLED": v}))
		require.NoError(t, err, v)
		assert.Equal(t, want, c.Throughput, v)
	}
}

func TestFromEnvDefaultsAndFallback(t *testing.T) {
	c, err := FromEnv(env(nil))
	require.NoError(t, err)
	assert.Equal(t, Config{}, c)

	c, err = FromEnv(env(map[string]string{"REQUEST_TIMEOUT_MS": "600000"}))
	require.NoError(t, err)
	assert.Equal(t, Config{IdleTimeout: 600 * time.Second}, c)

	c, err = FromEnv(env(map[string]string{"STREAM_IDLE_TIMEOUT_MS": "0", "REQUEST_TIMEOUT_MS": "600000"}))
	require.NoError(t, err)
	assert.Equal(t, Config{}, c, "an explicit 0 turns the idle timeout off, whatever REQUEST_TIMEOUT_MS says")

	c, err = FromEnv(nil)
	require.NoError(t, err)
	assert.Equal(t, Config{}, c)
}

func TestFromEnvBadValuesAreRefused(t *testing.T) {
	vars := map[string]string{
		"STREAM_THROUGHPUT_WATCHDOG_ENABLED":   "yes please",
		"STREAM_THROUGHPUT_WATCHDOG_WARMUP_MS": "600001",
		"STREAM_THROUGHPUT_WATCHDOG_WINDOW_MS": "999",
		"STREAM_THROUGHPUT_WATCHDOG_MIN_BYTES": "0",
		"STREAM_IDLE_TIMEOUT_MS":               "-5",
		"UPSTREAM_ATTEMPT_TIMEOUT_MS":          "soon",
	}
	c, err := FromEnv(env(vars))
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrInvalidConfig)
	errs := err.(interface{ Unwrap() []error }).Unwrap()
	require.Len(t, errs, 6)
	var fields []string
	for _, e := range errs {
		var we *Error
		require.True(t, errors.As(e, &we))
		assert.Equal(t, CodeInvalidConfig, we.Code)
		assert.Equal(t, http.StatusBadRequest, we.Status)
		assert.Equal(t, vars[we.Field], we.Value)
		fields = append(fields, we.Field)
	}
	assert.ElementsMatch(t, []string{"STREAM_THROUGHPUT_WATCHDOG_ENABLED", "STREAM_THROUGHPUT_WATCHDOG_WARMUP_MS",
		"STREAM_THROUGHPUT_WATCHDOG_WINDOW_MS", "STREAM_THROUGHPUT_WATCHDOG_MIN_BYTES", "STREAM_IDLE_TIMEOUT_MS",
		"UPSTREAM_ATTEMPT_TIMEOUT_MS"}, fields)
	assert.Equal(t, Config{}, c, "a refused value leaves its field unset")
	assert.EqualError(t, errs[1], `watchdog: invalid_config: STREAM_THROUGHPUT_WATCHDOG_WARMUP_MS="600001": outside 0..600000 ms`)
}

// Every abort is an *Error whose Unwrap gives exactly its code's sentinel.
func TestErrorUnwrapsToItsSentinel(t *testing.T) {
	sentinels := []error{ErrThroughputTooLow, ErrIdleTimeout, ErrAttemptDeadline, ErrReadinessTimeout, ErrInvalidConfig}
	for i, e := range []*Error{
		newError(CodeThroughputTooLow, time.Second, time.Second),
		newError(CodeIdleTimeout, time.Second, time.Second),
		newError(CodeAttemptDeadline, time.Second, time.Second),
		newError(CodeReadinessTimeout, time.Second, time.Second),
		invalidConfig("X", "y", errors.New("bad")).(*Error),
	} {
		for j, s := range sentinels {
			assert.Equal(t, i == j, errors.Is(e, s), "%s is %v", e.Code, s)
		}
		assert.Same(t, sentinels[i], e.Unwrap())
	}
	assert.NotErrorIs(t, &Error{Code: CodeIdleTimeout}, ErrIdleTimeout, "a hand-made Error carries no sentinel")
}
