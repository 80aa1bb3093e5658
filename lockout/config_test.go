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
	assert.Equal(t, lockout.Config{
		ErrorCodes:      []int{403, 404, 429, 502, 503, 504},
		BaseCooldown:    120 * time.Second,
		MaxCooldown:     30 * time.Minute,
		MaxBackoffSteps: new(10),
		MaxEntries:      100_000,
	}, lockout.Config{}.Normalize())
	// New(Config{}) works and is disabled.
	l := lockout.New(lockout.Config{})
	assert.Equal(t, lockout.Config{}.Normalize(), l.Config())
	assert.False(t, l.RecordFailureAt(lockout.Failure{Provider: "p", Connection: "c", Model: "m", Status: 429}, t0).Locked)
}

func TestNormalizeClamps(t *testing.T) {
	tests := []struct {
		name string
		in   lockout.Config
		want func(*lockout.Config)
	}{
		{"low base", lockout.Config{BaseCooldown: time.Second}, func(s *lockout.Config) { s.BaseCooldown = 5 * time.Second }},
		{"negative base", lockout.Config{BaseCooldown: -time.Second}, func(s *lockout.Config) { s.BaseCooldown = 5 * time.Second }},
		{"high base raises max", lockout.Config{BaseCooldown: time.Hour}, func(s *lockout.Config) {
			s.BaseCooldown, s.MaxCooldown = 10*time.Minute, 30*time.Minute
		}},
		{"max below base", lockout.Config{BaseCooldown: 200 * time.Second, MaxCooldown: 100 * time.Second}, func(s *lockout.Config) {
			s.BaseCooldown, s.MaxCooldown = 200*time.Second, 200*time.Second
		}},
		{"high max", lockout.Config{MaxCooldown: 2 * time.Hour}, func(s *lockout.Config) { s.MaxCooldown = time.Hour }},
		{"low max", lockout.Config{BaseCooldown: 5 * time.Second, MaxCooldown: time.Second}, func(s *lockout.Config) {
			s.BaseCooldown, s.MaxCooldown = 5*time.Second, 5*time.Second
		}},
		{"negative max", lockout.Config{MaxCooldown: -time.Second}, func(s *lockout.Config) { s.MaxCooldown = 120 * time.Second }},
		{"steps 50", lockout.Config{MaxBackoffSteps: new(50)}, func(s *lockout.Config) { s.MaxBackoffSteps = new(20) }},
		{"steps 0", lockout.Config{MaxBackoffSteps: new(0)}, func(s *lockout.Config) { s.MaxBackoffSteps = new(0) }},
		{"negative steps", lockout.Config{MaxBackoffSteps: new(-4)}, func(s *lockout.Config) { s.MaxBackoffSteps = new(0) }},
		{"codes", lockout.Config{ErrorCodes: []int{99, 429, 700, 429, 599, 100}}, func(s *lockout.Config) { s.ErrorCodes = []int{429, 599, 100} }},
		{"codes all bad", lockout.Config{ErrorCodes: []int{0, 600}}, func(*lockout.Config) {}},
		{"window", lockout.Config{EscalationWindow: 48 * time.Hour}, func(s *lockout.Config) { s.EscalationWindow = 24 * time.Hour }},
		{"negative window", lockout.Config{EscalationWindow: -time.Second}, func(*lockout.Config) {}},
		{"cap low", lockout.Config{MaxEntries: 3}, func(s *lockout.Config) { s.MaxEntries = 16 }},
		{"cap negative", lockout.Config{MaxEntries: -3}, func(s *lockout.Config) { s.MaxEntries = 16 }},
		{"cap high", lockout.Config{MaxEntries: 1 << 40}, func(s *lockout.Config) { s.MaxEntries = 10_000_000 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := lockout.Config{}.Normalize()
			tt.want(&want)
			got := tt.in.Normalize()
			assert.Equal(t, want, got)
			assert.Equal(t, got, got.Normalize(), "idempotent")
		})
	}
}

// Normalize returns a copy and never changes its receiver, not even
// through the ErrorCodes slice or the MaxBackoffSteps pointer.
func TestNormalizeNeverMutatesReceiver(t *testing.T) {
	steps := 50
	in := lockout.Config{ErrorCodes: []int{99, 429}, MaxBackoffSteps: &steps, BaseCooldown: time.Second}
	out := in.Normalize()
	assert.Equal(t, []int{99, 429}, in.ErrorCodes)
	assert.Equal(t, 50, steps)
	assert.Equal(t, time.Second, in.BaseCooldown)
	require.NotSame(t, in.MaxBackoffSteps, out.MaxBackoffSteps)
	out.ErrorCodes[0] = 111
	*out.MaxBackoffSteps = 3
	assert.Equal(t, []int{99, 429}, in.ErrorCodes)
	assert.Equal(t, 50, steps)

	// Config returns a copy too.
	l := lockout.New(in)
	c := l.Config()
	c.ErrorCodes[0] = 111
	*c.MaxBackoffSteps = 3
	assert.Equal(t, []int{429}, l.Config().ErrorCodes)
	assert.Equal(t, 20, *l.Config().MaxBackoffSteps)
}

// MaxBackoffSteps is a pointer: nil is the default of 10 steps, an explicit
// 0 is no escalation at all.
func TestMaxBackoffStepsZeroMeansNoEscalation(t *testing.T) {
	for _, tt := range []struct {
		name  string
		steps *int
		want  []time.Duration
	}{
		{"nil is 10 steps", nil, []time.Duration{5, 10, 20, 40}},
		{"0 is none", new(0), []time.Duration{5, 5, 5, 5}},
		{"2", new(2), []time.Duration{5, 10, 20, 20}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := lockout.New(lockout.Config{Enabled: true, BaseCooldown: 5 * time.Second, MaxBackoffSteps: tt.steps})
			for i, w := range tt.want {
				res := l.RecordFailureAt(lockout.Failure{Provider: "p", Connection: "c", Model: "m", Status: 502}, t0.Add(time.Duration(i)*time.Second))
				assert.Equalf(t, w*time.Second, res.Cooldown, "failure %d", i+1)
			}
		})
	}
}

// Scenario 10: settings outside tests are clamped.
func TestScenarioSettingsFromEnv(t *testing.T) {
	t.Run("clamps and filters", func(t *testing.T) {
		c, err := lockout.FromEnv(env(map[string]string{
			"MODEL_LOCKOUT_BASE_COOLDOWN_MS":  "1000",
			"MODEL_LOCKOUT_MAX_COOLDOWN_MS":   "10000",
			"MODEL_LOCKOUT_MAX_BACKOFF_STEPS": "50",
			"MODEL_LOCKOUT_ERROR_CODES":       "99, 429, 700",
		}))
		s := c.Normalize()
		assert.Equal(t, 5*time.Second, s.BaseCooldown)
		assert.Equal(t, 10*time.Second, s.MaxCooldown)
		assert.Equal(t, 20, *s.MaxBackoffSteps)
		assert.Equal(t, []int{429}, s.ErrorCodes)
		require.ErrorIs(t, err, lockout.ErrInvalidConfig, "dropped codes are reported")
		var e *lockout.Error
		require.True(t, errors.As(err, &e))
		assert.Equal(t, lockout.CodeInvalidConfig, e.Code)
		assert.Equal(t, "invalid_config", e.Code)
		assert.Equal(t, 400, e.Status)
		assert.Equal(t, "MODEL_LOCKOUT_ERROR_CODES", e.Field)
		assert.Equal(t, "99", e.Value)
		assert.NotErrorIs(t, err, lockout.ErrLocked)
		assert.Equal(t, `lockout: invalid_config: MODEL_LOCKOUT_ERROR_CODES="99": not a status code in [100, 599]`, e.Error())
	})
	t.Run("max raised to base", func(t *testing.T) {
		c, err := lockout.FromEnv(env(map[string]string{"MODEL_LOCKOUT_BASE_COOLDOWN_MS": "200000", "MODEL_LOCKOUT_MAX_COOLDOWN_MS": "100000"}))
		require.NoError(t, err)
		s := c.Normalize()
		assert.Equal(t, 200*time.Second, s.BaseCooldown)
		assert.Equal(t, 200*time.Second, s.MaxCooldown)
	})
	t.Run("0 ms base clamps up", func(t *testing.T) {
		c, err := lockout.FromEnv(env(map[string]string{"MODEL_LOCKOUT_BASE_COOLDOWN_MS": "0"}))
		require.NoError(t, err)
		assert.Equal(t, 5*time.Second, c.Normalize().BaseCooldown)
	})
	t.Run("blank base is unset", func(t *testing.T) {
		c, err := lockout.FromEnv(env(map[string]string{"MODEL_LOCKOUT_BASE_COOLDOWN_MS": " "}))
		require.NoError(t, err)
		assert.Equal(t, lockout.Config{}, c)
	})
}

func TestFromEnv(t *testing.T) {
	c, err := lockout.FromEnv(env(nil))
	require.NoError(t, err)
	assert.Equal(t, lockout.Config{}, c, "only set variables are filled in")

	c, err = lockout.FromEnv(env(map[string]string{
		"MODEL_LOCKOUT_ENABLED":                 "1",
		"MODEL_LOCKOUT_USE_EXPONENTIAL_BACKOFF": "off",
		"MODEL_LOCKOUT_BASE_COOLDOWN_MS":        "7500",
		"MODEL_LOCKOUT_MAX_COOLDOWN_MS":         " 60000 ",
		"MODEL_LOCKOUT_MAX_BACKOFF_STEPS":       "3",
		"MODEL_LOCKOUT_ESCALATION_WINDOW_MS":    "45000",
		"MODEL_LOCKOUT_EVICTION_CAP":            "5000",
		"MODEL_LOCKOUT_ERROR_CODES":             "400, 401,429",
	}))
	require.NoError(t, err)
	assert.Equal(t, lockout.Config{
		Enabled:          true,
		ErrorCodes:       []int{400, 401, 429},
		BaseCooldown:     7500 * time.Millisecond,
		MaxCooldown:      time.Minute,
		MaxBackoffSteps:  new(3),
		FixedCooldown:    true,
		EscalationWindow: 45 * time.Second,
		MaxEntries:       5000,
	}, c)

	c, err = lockout.FromEnv(env(map[string]string{"MODEL_LOCKOUT_MAX_BACKOFF_STEPS": "0", "MODEL_LOCKOUT_ENABLED": "TRUE"}))
	require.NoError(t, err)
	assert.True(t, c.Enabled)
	assert.Equal(t, new(0), c.MaxBackoffSteps, "0 steps means no escalation")

	bad := map[string]string{
		"MODEL_LOCKOUT_ENABLED":                 "maybe",
		"MODEL_LOCKOUT_USE_EXPONENTIAL_BACKOFF": "2",
		"MODEL_LOCKOUT_BASE_COOLDOWN_MS":        "abc",
		"MODEL_LOCKOUT_MAX_COOLDOWN_MS":         "NaN",
		"MODEL_LOCKOUT_MAX_BACKOFF_STEPS":       "Inf",
		"MODEL_LOCKOUT_ESCALATION_WINDOW_MS":    "7500.9",
		"MODEL_LOCKOUT_EVICTION_CAP":            "-5",
		"MODEL_LOCKOUT_ERROR_CODES":             "429.5,abc",
	}
	c, err = lockout.FromEnv(env(bad))
	assert.Equal(t, lockout.Config{}, c, "bad values leave their fields unset")
	require.ErrorIs(t, err, lockout.ErrInvalidConfig)
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var le *lockout.Error
		require.True(t, errors.As(e, &le))
		assert.Equal(t, lockout.CodeInvalidConfig, le.Code)
		fields = append(fields, le.Field)
	}
	assert.ElementsMatch(t, []string{
		"MODEL_LOCKOUT_ENABLED", "MODEL_LOCKOUT_USE_EXPONENTIAL_BACKOFF",
		"MODEL_LOCKOUT_ERROR_CODES", "MODEL_LOCKOUT_ERROR_CODES", "MODEL_LOCKOUT_ERROR_CODES",
		"MODEL_LOCKOUT_BASE_COOLDOWN_MS", "MODEL_LOCKOUT_MAX_COOLDOWN_MS",
		"MODEL_LOCKOUT_ESCALATION_WINDOW_MS", "MODEL_LOCKOUT_MAX_BACKOFF_STEPS", "MODEL_LOCKOUT_EVICTION_CAP",
	}, fields, "one error per bad value, plus the empty code list")
}

// Switches read the one vocabulary of the library: 1/true/yes/on and
// 0/false/no/off, any case; anything else is refused.
func TestFromEnvSwitchVocabulary(t *testing.T) {
	for v, want := range map[string]bool{"1": true, "true": true, "Yes": true, "ON": true, "0": false, "false": false, "no": false, "Off": false} {
		c, err := lockout.FromEnv(env(map[string]string{"MODEL_LOCKOUT_ENABLED": v, "MODEL_LOCKOUT_USE_EXPONENTIAL_BACKOFF": v}))
		require.NoError(t, err, v)
		assert.Equal(t, want, c.Enabled, v)
		assert.Equal(t, !want, c.FixedCooldown, v)
	}
	for _, v := range []string{"2", "enabled", "y"} {
		_, err := lockout.FromEnv(env(map[string]string{"MODEL_LOCKOUT_ENABLED": v}))
		require.ErrorIs(t, err, lockout.ErrInvalidConfig, v)
	}
}
