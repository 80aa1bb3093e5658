package cooldown

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNormalizeDefaults(t *testing.T) {
	var c Config
	c.Normalize()
	assert.Equal(t, Profile{Base: 5 * time.Second, Steps: 8, Max: 30 * time.Minute, Hints: HintsOff}, c.OAuth)
	assert.Equal(t, Profile{Base: 3 * time.Second, Steps: 5, Max: 30 * time.Minute, Hints: HintsOn}, c.APIKey)
	assert.Equal(t, 30*24*time.Hour, c.MaxHint)
	assert.Equal(t, 5*time.Minute, c.RequestRejected)
	assert.Equal(t, 15*time.Minute, c.RequestRejectedRepeat)
	assert.Equal(t, 3, c.RequestRejectedBanAt)
	assert.Equal(t, 24*time.Hour, c.RequestRejectedMemory)
	assert.Equal(t, 5*time.Minute, c.RecheckBase)
	assert.Equal(t, 3, c.RecheckMax)
	assert.Equal(t, []string{"opencode-go", "opencode-cli"}, c.EgressProviders)
	assert.False(t, c.DisableEgressLock)
	assert.Equal(t, 24*time.Hour, c.EgressWindow)
	assert.Equal(t, 2*time.Minute, c.EgressCooldown)
	assert.Equal(t, 1<<20, c.MaxEntries)
}

func TestNormalizeClamps(t *testing.T) {
	c := Config{
		OAuth:                 Profile{Base: 48 * time.Hour, Steps: 99, Max: 100 * time.Hour, Hints: 7},
		APIKey:                Profile{Base: time.Nanosecond, Steps: -1, Max: -1, Hints: HintsOff},
		MaxHint:               time.Millisecond,
		RequestRejected:       -time.Second,
		RequestRejectedRepeat: 48 * time.Hour,
		RequestRejectedBanAt:  1000,
		RequestRejectedMemory: time.Second,
		RecheckBase:           48 * time.Hour,
		RecheckMax:            99,
		EgressProviders:       []string{" OpenCode-Zen ", "", "foo", "FOO"},
		EgressWindow:          30 * 24 * time.Hour,
		EgressCooldown:        48 * time.Hour,
		MaxEntries:            1,
	}
	c.Normalize()
	assert.Equal(t, Profile{Base: 24 * time.Hour, Steps: 32, Max: 24 * time.Hour, Hints: HintsOff}, c.OAuth)
	assert.Equal(t, Profile{Base: time.Millisecond, Steps: 5, Max: 30 * time.Minute, Hints: HintsOff}, c.APIKey)
	assert.Equal(t, time.Second, c.MaxHint)
	assert.Equal(t, 5*time.Minute, c.RequestRejected)
	assert.Equal(t, 24*time.Hour, c.RequestRejectedRepeat)
	assert.Equal(t, 100, c.RequestRejectedBanAt)
	assert.Equal(t, time.Minute, c.RequestRejectedMemory)
	assert.Equal(t, 24*time.Hour, c.RecheckBase)
	assert.Equal(t, 16, c.RecheckMax)
	assert.Equal(t, []string{"opencode-zen", "foo"}, c.EgressProviders)
	assert.Equal(t, 7*24*time.Hour, c.EgressWindow)
	assert.Equal(t, 24*time.Hour, c.EgressCooldown)
	assert.Equal(t, 16, c.MaxEntries)

	// Normalize is idempotent.
	d := c
	d.Normalize()
	assert.Equal(t, c, d)
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// M6.3 scenario 5 and the parsing rules of the egress variable.
func TestFromEnvEgress(t *testing.T) {
	tests := []struct {
		name      string
		vars      map[string]string
		providers []string
		disabled  bool
		err       bool
	}{
		{name: "unset", vars: nil},
		{name: "blank", vars: map[string]string{EgressEnv: "  "}},
		{name: "off", vars: map[string]string{EgressEnv: "off"}, disabled: true},
		{name: "none", vars: map[string]string{EgressEnv: "NONE"}, disabled: true},
		{name: "false", vars: map[string]string{EgressEnv: "False"}, disabled: true},
		{name: "zero", vars: map[string]string{EgressEnv: " 0 "}, disabled: true},
		{name: "list", vars: map[string]string{EgressEnv: "OpenCode-Zen, foo"}, providers: []string{"opencode-zen", "foo"}},
		{name: "empty items", vars: map[string]string{EgressEnv: ",a,,b,"}, providers: []string{"a", "b"}},
		{name: "only commas", vars: map[string]string{EgressEnv: " , ,"}, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := FromEnv(env(tt.vars))
			if tt.err {
				require.Error(t, err)
				assert.True(t, errors.Is(err, ErrBadEnv))
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.providers, c.EgressProviders)
			assert.Equal(t, tt.disabled, c.DisableEgressLock)
		})
	}
}

func TestEgressEnvOffNeverLocks(t *testing.T) {
	c, err := FromEnv(env(map[string]string{EgressEnv: "off"}))
	require.NoError(t, err)
	tr := New(c)
	assert.False(t, tr.InEgressFamily("opencode-go"))

	c, err = FromEnv(env(map[string]string{EgressEnv: "OpenCode-Zen, foo"}))
	require.NoError(t, err)
	tr = New(c)
	assert.True(t, tr.InEgressFamily("opencode-zen"))
	assert.True(t, tr.InEgressFamily("FOO"))
	assert.False(t, tr.InEgressFamily("opencode-go"))
}

func FuzzNormalize(f *testing.F) {
	f.Add(int64(0), 0, int64(0), int64(0), int64(0), 0, int64(0), 0, int64(0), int64(0), 0, uint8(0))
	f.Add(int64(-1), -5, int64(1<<62), int64(-1), int64(1), 1000, int64(-9), 99, int64(1<<62), int64(-3), -7, uint8(200))
	f.Add(int64(1), 1, int64(1), int64(1), int64(1), 1, int64(1), 1, int64(1), int64(1), 1, uint8(1))
	f.Fuzz(func(t *testing.T, base int64, steps int, maxd, hint, rr int64, banAt int, mem int64, recheckMax int, window, egressCD int64, maxEntries int, hints uint8) {
		c := Config{
			OAuth:                 Profile{Base: time.Duration(base), Steps: steps, Max: time.Duration(maxd), Hints: HintPolicy(hints)},
			APIKey:                Profile{Base: time.Duration(maxd), Steps: -steps, Max: time.Duration(base), Hints: HintPolicy(hints >> 1)},
			MaxHint:               time.Duration(hint),
			RequestRejected:       time.Duration(rr),
			RequestRejectedRepeat: time.Duration(-rr),
			RequestRejectedBanAt:  banAt,
			RequestRejectedMemory: time.Duration(mem),
			RecheckBase:           time.Duration(mem),
			RecheckMax:            recheckMax,
			EgressWindow:          time.Duration(window),
			EgressCooldown:        time.Duration(egressCD),
			MaxEntries:            maxEntries,
		}
		c.Normalize()
		for _, p := range []Profile{c.OAuth, c.APIKey} {
			if p.Base < time.Millisecond || p.Base > 24*time.Hour || p.Steps < 1 || p.Steps > 32 ||
				p.Max < time.Millisecond || p.Max > 24*time.Hour || (p.Hints != HintsOn && p.Hints != HintsOff) {
				t.Fatalf("profile out of range: %+v", p)
			}
			for l := -1; l <= p.Steps+2; l++ {
				if d := Backoff(p, l); d <= 0 || d > p.Max {
					t.Fatalf("Backoff(%+v, %d) = %v", p, l, d)
				}
			}
		}
		if c.MaxHint < time.Second || c.MaxHint > 365*24*time.Hour ||
			c.RequestRejected <= 0 || c.RequestRejected > 24*time.Hour ||
			c.RequestRejectedRepeat <= 0 || c.RequestRejectedRepeat > 24*time.Hour ||
			c.RequestRejectedBanAt < 2 || c.RequestRejectedBanAt > 100 ||
			c.RequestRejectedMemory < time.Minute || c.RecheckBase <= 0 || c.RecheckBase > 24*time.Hour ||
			c.RecheckMax < 1 || c.RecheckMax > 16 || c.EgressWindow < time.Minute || c.EgressWindow > 7*24*time.Hour ||
			c.EgressCooldown <= 0 || c.EgressCooldown > 24*time.Hour || c.MaxEntries < 16 || c.MaxEntries > 1<<28 {
			t.Fatalf("config out of range: %+v", c)
		}
		d := c
		d.Normalize()
		if d.OAuth != c.OAuth || d.APIKey != c.APIKey || d.MaxHint != c.MaxHint || d.MaxEntries != c.MaxEntries {
			t.Fatalf("Normalize not idempotent")
		}
	})
}

func FuzzParseEgressProviders(f *testing.F) {
	for _, s := range []string{"", " ", "off", "NONE", "0", "OpenCode-Zen, foo", ",,", "a,b,a", "é,\x00,\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		providers, disabled, err := parseEgressProviders(s)
		if err != nil {
			if providers != nil || disabled {
				t.Fatalf("error with a result: %v %v", providers, disabled)
			}
			return
		}
		if disabled && providers != nil {
			t.Fatalf("disabled with providers %v", providers)
		}
		for i, p := range providers {
			if p == "" || p != lowerTrim(p) {
				t.Fatalf("provider %q not clean", p)
			}
			for _, q := range providers[:i] {
				if q == p {
					t.Fatalf("duplicate %q", p)
				}
			}
		}
		c, err := FromEnv(env(map[string]string{EgressEnv: s}))
		if err == nil && !disabled && providers == nil && c.EgressProviders != nil {
			t.Fatalf("default expected")
		}
	})
}

func lowerTrim(s string) string {
	return strings.ToLower(strings.TrimSpace(s))
}
