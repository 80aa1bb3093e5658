package queue_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/routeguard/routeguard/queue"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Scenario 4c-4 (with D10's 15 s wait budget).
func TestDefaults(t *testing.T) {
	assert.Equal(t, queue.Config{
		MaxQueueWait:     15 * time.Second,
		ExecutionTimeout: 600 * time.Second,
		MaxKeys:          10_000,
		IdleTTL:          10 * time.Minute,
	}, queue.Config{}.Normalize())
}

func TestNormalizeClamps(t *testing.T) {
	defaults := queue.Config{}.Normalize()
	with := func(c queue.Config) queue.Config {
		c.MaxKeys, c.IdleTTL = defaults.MaxKeys, defaults.IdleTTL
		return c
	}
	for _, tc := range []struct {
		name string
		in   queue.Config
		want queue.Config
	}{
		{"negative counts are unlimited", queue.Config{RequestsPerMinute: -1, MaxConcurrency: -3, MaxQueueDepth: -5, MinSpacing: -time.Second},
			with(queue.Config{MaxQueueWait: 15 * time.Second, ExecutionTimeout: 600 * time.Second})},
		{"upper bounds", queue.Config{RequestsPerMinute: 2_000_000, MinSpacing: 2 * time.Hour, MaxConcurrency: 20_000, MaxQueueDepth: 200_000, MaxQueueWait: time.Minute, ExecutionTimeout: 48 * time.Hour,
			MaxKeys: 1 << 40, IdleTTL: 48 * time.Hour},
			queue.Config{RequestsPerMinute: 1_000_000, MinSpacing: time.Hour, MaxConcurrency: 10_000, MaxQueueDepth: 100_000, MaxQueueWait: 30 * time.Second, ExecutionTimeout: 24 * time.Hour,
				MaxKeys: 1 << 28, IdleTTL: 24 * time.Hour}},
		{"lower bounds", queue.Config{MaxQueueWait: time.Microsecond, ExecutionTimeout: time.Nanosecond, MaxKeys: 1, IdleTTL: time.Millisecond},
			queue.Config{MaxQueueWait: time.Millisecond, ExecutionTimeout: time.Millisecond, MaxKeys: 1, IdleTTL: time.Second}},
		{"non-positive values take the default", queue.Config{MaxQueueWait: -5, ExecutionTimeout: 0, MaxKeys: -1, IdleTTL: -time.Second},
			with(queue.Config{MaxQueueWait: 15 * time.Second, ExecutionTimeout: 600 * time.Second})},
		{"in range is kept", queue.Config{RequestsPerMinute: 60, MinSpacing: time.Second, MaxConcurrency: 3, MaxQueueDepth: 20, MaxQueueWait: 5 * time.Second, ExecutionTimeout: time.Minute, MaxKeys: 50, IdleTTL: time.Minute},
			queue.Config{RequestsPerMinute: 60, MinSpacing: time.Second, MaxConcurrency: 3, MaxQueueDepth: 20, MaxQueueWait: 5 * time.Second, ExecutionTimeout: time.Minute, MaxKeys: 50, IdleTTL: time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			got := tc.in.Normalize()
			assert.Equal(t, tc.want, got)
			assert.Equal(t, got, got.Normalize(), "idempotent")
			assert.Equal(t, in, tc.in, "the receiver is not modified")
		})
	}
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// FromEnv fills only the fields whose variables are set, with the one
// vocabulary of whole milliseconds and whole numbers; New clamps.
func TestFromEnvFillsOnlySetVariables(t *testing.T) {
	for _, tc := range []struct {
		name       string
		env        map[string]string
		want       queue.Config
		normalized queue.Config
		wantErr    []string // the refused variables
	}{
		{"none", nil, queue.Config{}, queue.Config{}.Normalize(), nil},
		{"all", map[string]string{"RATE_LIMIT_MAX_WAIT_MS": "20000", "RATE_LIMIT_EXECUTION_MAX_WAIT_MS": " 900000 ", "RATE_LIMIT_MAX_QUEUE_DEPTH": "50"},
			queue.Config{MaxQueueWait: 20 * time.Second, ExecutionTimeout: 900 * time.Second, MaxQueueDepth: 50},
			queue.Config{MaxQueueWait: 20 * time.Second, ExecutionTimeout: 900 * time.Second, MaxQueueDepth: 50, MaxKeys: 10_000, IdleTTL: 10 * time.Minute}, nil},
		{"out of range is clamped by Normalize", map[string]string{"RATE_LIMIT_MAX_WAIT_MS": "60000", "RATE_LIMIT_MAX_QUEUE_DEPTH": "99999999999999999999999"},
			queue.Config{MaxQueueWait: time.Minute, MaxQueueDepth: 1_000_000_000},
			queue.Config{MaxQueueWait: 30 * time.Second, ExecutionTimeout: 600 * time.Second, MaxQueueDepth: 100_000, MaxKeys: 10_000, IdleTTL: 10 * time.Minute}, nil},
		// Scenario 4c-5: a bad value leaves its field unset; one budget
		// never moves the other.
		{"bad values are refused", map[string]string{"RATE_LIMIT_MAX_WAIT_MS": "abc", "RATE_LIMIT_EXECUTION_MAX_WAIT_MS": "-5", "RATE_LIMIT_MAX_QUEUE_DEPTH": "-1"},
			queue.Config{}, queue.Config{}.Normalize(),
			[]string{"RATE_LIMIT_MAX_WAIT_MS", "RATE_LIMIT_EXECUTION_MAX_WAIT_MS", "RATE_LIMIT_MAX_QUEUE_DEPTH"}},
		{"a zero wait is refused, a zero depth is not", map[string]string{"RATE_LIMIT_MAX_WAIT_MS": "0", "RATE_LIMIT_MAX_QUEUE_DEPTH": "0"},
			queue.Config{}, queue.Config{}.Normalize(), []string{"RATE_LIMIT_MAX_WAIT_MS"}},
		{"fractions are refused", map[string]string{"RATE_LIMIT_EXECUTION_MAX_WAIT_MS": "1.5"},
			queue.Config{}, queue.Config{}.Normalize(), []string{"RATE_LIMIT_EXECUTION_MAX_WAIT_MS"}},
		{"one budget only", map[string]string{"RATE_LIMIT_MAX_WAIT_MS": "1000"},
			queue.Config{MaxQueueWait: time.Second},
			queue.Config{MaxQueueWait: time.Second, ExecutionTimeout: 600 * time.Second, MaxKeys: 10_000, IdleTTL: 10 * time.Minute}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := queue.FromEnv(env(tc.env))
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.normalized, got.Normalize())
			if tc.wantErr == nil {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, queue.ErrInvalidConfig)
			errs := err.(interface{ Unwrap() []error }).Unwrap()
			require.Len(t, errs, len(tc.wantErr))
			for i, e := range errs {
				var qe *queue.Error
				require.ErrorAs(t, e, &qe)
				assert.Equal(t, queue.CodeInvalidConfig, qe.Code)
				assert.Equal(t, http.StatusBadRequest, qe.Status)
				assert.Equal(t, tc.wantErr[i], qe.Field)
				assert.Equal(t, tc.env[qe.Field], qe.Value)
			}
		})
	}
	_, err := queue.FromEnv(env(map[string]string{"RATE_LIMIT_MAX_WAIT_MS": "soon", "RATE_LIMIT_MAX_QUEUE_DEPTH": "-1"}))
	errs := err.(interface{ Unwrap() []error }).Unwrap()
	require.Len(t, errs, 2)
	assert.EqualError(t, errs[0], `queue: invalid_config: RATE_LIMIT_MAX_WAIT_MS="soon": not a number`)
	assert.EqualError(t, errs[1], `queue: invalid_config: RATE_LIMIT_MAX_QUEUE_DEPTH="-1": negative`)
	_, err = queue.FromEnv(env(map[string]string{"RATE_LIMIT_MAX_WAIT_MS": "0"}))
	assert.EqualError(t, err, `queue: invalid_config: RATE_LIMIT_MAX_WAIT_MS="0": must be at least 1 ms`)

	got, err := queue.FromEnv(nil)
	assert.NoError(t, err)
	assert.Equal(t, queue.Config{}, got)
}

// Scenario 4c-6: the env sets only the default; a per-key value wins.
func TestEnvDefaultLosesToOverride(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defaults, err := queue.FromEnv(env(map[string]string{"RATE_LIMIT_MAX_WAIT_MS": "20000"}))
		require.NoError(t, err)
		defaults.MaxConcurrency = 1
		defaults.Overrides = func(key string) queue.Config {
			if key == "persisted" {
				return queue.Config{MaxQueueWait: 12 * time.Second}
			}
			return queue.Config{}
		}
		q := queue.New(defaults)
		for key, want := range map[string]time.Duration{"persisted": 12 * time.Second, "plain": 20 * time.Second} {
			hold := mustAcquire(t, q, key)
			r := <-goAcquire(context.Background(), q, key)
			require.ErrorIs(t, r.err, queue.ErrQueueTimeout)
			assert.Equal(t, want, r.at, key)
			hold()
		}
	})
}

// The sentinels are plain immutable values; an *Error unwraps to the
// sentinels of its code, whatever its other fields hold.
func TestSentinelsAreImmutableErrors(t *testing.T) {
	for _, tc := range []struct {
		err error
		msg string
	}{
		{queue.ErrQueueFull, "queue: queue full"},
		{queue.ErrQueueTimeout, "queue: no slot within the wait budget"},
		{queue.ErrSemaphoreQueueFull, "queue: semaphore queue full"},
		{queue.ErrSemaphoreTimeout, "queue: semaphore timeout"},
		{queue.ErrExecutionTimeout, "queue: execution exceeded its budget"},
		{queue.ErrReset, "queue: key was reset"},
		{queue.ErrInvalidConfig, "queue: invalid config"},
	} {
		assert.EqualError(t, tc.err, tc.msg)
		var qe *queue.Error
		assert.False(t, errors.As(tc.err, &qe), "%v is not an *Error", tc.err)
	}
	// A hand-made *Error has no sentinel: matching goes by what the queue
	// built, never by comparing fields.
	e := &queue.Error{Code: queue.CodeQueueFull, Status: 429, Key: "openai:k1", Depth: 2}
	assert.NotErrorIs(t, e, queue.ErrQueueFull)
	assert.EqualError(t, e, "queue: queue full (2 waiting) for openai:k1")
	assert.EqualError(t, &queue.Error{Code: "OTHER", Key: "k"}, "queue: OTHER for k")
	assert.EqualError(t, &queue.Error{Code: queue.CodeReset}, "queue: key was reset")
	assert.Equal(t, "limits_learned", queue.EventLimitsLearned.String())
	assert.Equal(t, "removed", queue.EventRemoved.String())
	assert.Equal(t, "event(99)", queue.EventKind(99).String())
}
