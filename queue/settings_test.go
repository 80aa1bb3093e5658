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
	assert.Equal(t, queue.Settings{
		MaxQueueWait:     15 * time.Second,
		ExecutionTimeout: 600 * time.Second,
	}, queue.Settings{}.Normalize())
}

func TestNormalizeClamps(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   queue.Settings
		want queue.Settings
	}{
		{"negative counts are unlimited", queue.Settings{RequestsPerMinute: -1, MaxConcurrency: -3, MaxQueueDepth: -5, MinSpacing: -time.Second},
			queue.Settings{MaxQueueWait: 15 * time.Second, ExecutionTimeout: 600 * time.Second}},
		{"upper bounds", queue.Settings{RequestsPerMinute: 2_000_000, MinSpacing: 2 * time.Hour, MaxConcurrency: 20_000, MaxQueueDepth: 200_000, MaxQueueWait: time.Minute, ExecutionTimeout: 48 * time.Hour},
			queue.Settings{RequestsPerMinute: 1_000_000, MinSpacing: time.Hour, MaxConcurrency: 10_000, MaxQueueDepth: 100_000, MaxQueueWait: 30 * time.Second, ExecutionTimeout: 24 * time.Hour}},
		{"lower bounds of budgets", queue.Settings{MaxQueueWait: time.Microsecond, ExecutionTimeout: time.Nanosecond},
			queue.Settings{MaxQueueWait: time.Millisecond, ExecutionTimeout: time.Millisecond}},
		{"non-positive budgets take the default", queue.Settings{MaxQueueWait: -5, ExecutionTimeout: 0},
			queue.Settings{MaxQueueWait: 15 * time.Second, ExecutionTimeout: 600 * time.Second}},
		{"in range is kept", queue.Settings{RequestsPerMinute: 60, MinSpacing: time.Second, MaxConcurrency: 3, MaxQueueDepth: 20, MaxQueueWait: 5 * time.Second, ExecutionTimeout: time.Minute},
			queue.Settings{RequestsPerMinute: 60, MinSpacing: time.Second, MaxConcurrency: 3, MaxQueueDepth: 20, MaxQueueWait: 5 * time.Second, ExecutionTimeout: time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in.Normalize()
			assert.Equal(t, tc.want, got)
			assert.Equal(t, got, got.Normalize(), "idempotent")
		})
	}
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		base    queue.Settings
		env     map[string]string
		want    queue.Settings
		wantErr int
	}{
		{"none", queue.Settings{}, nil, queue.Settings{}.Normalize(), 0},
		{"all", queue.Settings{}, map[string]string{"RATE_LIMIT_MAX_WAIT_MS": "20000", "RATE_LIMIT_EXECUTION_MAX_WAIT_MS": " 900000 ", "RATE_LIMIT_MAX_QUEUE_DEPTH": "50"},
			queue.Settings{MaxQueueWait: 20 * time.Second, ExecutionTimeout: 900 * time.Second, MaxQueueDepth: 50}, 0},
		{"out of range is clamped", queue.Settings{}, map[string]string{"RATE_LIMIT_MAX_WAIT_MS": "60000", "RATE_LIMIT_MAX_QUEUE_DEPTH": "99999999999999999999999"},
			queue.Settings{MaxQueueWait: 30 * time.Second, ExecutionTimeout: 600 * time.Second, MaxQueueDepth: 100_000}, 0},
		// Scenario 4c-5: a bad value keeps the previous one; one budget
		// never moves the other.
		{"bad values keep base", queue.Settings{MaxQueueWait: 12 * time.Second, ExecutionTimeout: 700 * time.Second, MaxQueueDepth: 4},
			map[string]string{"RATE_LIMIT_MAX_WAIT_MS": "abc", "RATE_LIMIT_EXECUTION_MAX_WAIT_MS": "-5", "RATE_LIMIT_MAX_QUEUE_DEPTH": "-1"},
			queue.Settings{MaxQueueWait: 12 * time.Second, ExecutionTimeout: 700 * time.Second, MaxQueueDepth: 4}, 3},
		{"zero wait is refused", queue.Settings{}, map[string]string{"RATE_LIMIT_MAX_WAIT_MS": "0", "RATE_LIMIT_MAX_QUEUE_DEPTH": "0"},
			queue.Settings{}.Normalize(), 1},
		{"one budget only", queue.Settings{ExecutionTimeout: 700 * time.Second}, map[string]string{"RATE_LIMIT_MAX_WAIT_MS": "1000"},
			queue.Settings{MaxQueueWait: time.Second, ExecutionTimeout: 700 * time.Second}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := queue.FromEnv(tc.base, env(tc.env))
			assert.Equal(t, tc.want, got)
			if tc.wantErr == 0 {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Len(t, err.(interface{ Unwrap() []error }).Unwrap(), tc.wantErr)
		})
	}
	_, err := queue.FromEnv(queue.Settings{}, env(map[string]string{"RATE_LIMIT_MAX_WAIT_MS": "soon", "RATE_LIMIT_MAX_QUEUE_DEPTH": "-1"}))
	require.ErrorIs(t, err, queue.ErrInvalidSetting)
	errs := err.(interface{ Unwrap() []error }).Unwrap()
	require.Len(t, errs, 2)
	var se *queue.SettingError
	require.ErrorAs(t, errs[0], &se)
	assert.Equal(t, queue.SettingError{Name: "RATE_LIMIT_MAX_WAIT_MS", Value: "soon", Reason: "is not an integer"}, *se)
	assert.EqualError(t, errs[0], `queue: RATE_LIMIT_MAX_WAIT_MS="soon" is not an integer`)
	require.ErrorAs(t, errs[1], &se)
	assert.Equal(t, queue.SettingError{Name: "RATE_LIMIT_MAX_QUEUE_DEPTH", Value: "-1", Reason: "is below 0"}, *se)
	assert.EqualError(t, errs[1], `queue: RATE_LIMIT_MAX_QUEUE_DEPTH="-1" is below 0`)

	got, err := queue.FromEnv(queue.Settings{MaxConcurrency: 2}, nil)
	assert.NoError(t, err)
	assert.Equal(t, 2, got.MaxConcurrency)
}

// Scenario 4c-6: the env sets only the default; a per-key value wins.
func TestEnvDefaultLosesToOverride(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defaults, err := queue.FromEnv(queue.Settings{MaxConcurrency: 1}, env(map[string]string{"RATE_LIMIT_MAX_WAIT_MS": "20000"}))
		require.NoError(t, err)
		q := queue.New(queue.Config{
			Defaults: defaults,
			Overrides: func(key string) queue.Settings {
				if key == "persisted" {
					return queue.Settings{MaxQueueWait: 12 * time.Second}
				}
				return queue.Settings{}
			},
		})
		for key, want := range map[string]time.Duration{"persisted": 12 * time.Second, "plain": 20 * time.Second} {
			hold := mustAcquire(t, q, key)
			r := <-goAcquire(context.Background(), q, key)
			require.ErrorIs(t, r.err, queue.ErrQueueTimeout)
			assert.Equal(t, want, r.at, key)
			hold()
		}
	})
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		err    *queue.Error
		status int
		msg    string
	}{
		{queue.ErrQueueFull, http.StatusTooManyRequests, "queue: queue full for key"},
		{queue.ErrQueueTimeout, http.StatusTooManyRequests, "queue: no slot for key within the wait budget"},
		{queue.ErrExecutionTimeout, http.StatusGatewayTimeout, "queue: execution on key exceeded its budget"},
		{queue.ErrReset, http.StatusServiceUnavailable, "queue: key was reset"},
		{&queue.Error{Code: "OTHER", Key: "k"}, 0, "queue: OTHER for k"},
	} {
		assert.Equal(t, tc.status, tc.err.Status)
		assert.EqualError(t, tc.err, tc.msg)
	}
	e := &queue.Error{Code: queue.CodeQueueFull, Status: 429, Key: "openai:k1", Depth: 2}
	assert.ErrorIs(t, e, queue.ErrQueueFull)
	assert.NotErrorIs(t, e, queue.ErrQueueTimeout)
	assert.False(t, e.Timeout())
	inner := errors.New("eof")
	wrapped := &queue.Error{Code: queue.CodeExecutionTimeout, Err: inner}
	assert.ErrorIs(t, wrapped, inner)
	assert.True(t, wrapped.Timeout())
	assert.Equal(t, "limits_learned", queue.EventLimitsLearned.String())
	assert.Equal(t, "event(99)", queue.EventKind(99).String())
}
