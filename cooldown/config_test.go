package cooldown

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard"
)

func TestNormalizeDefaults(t *testing.T) {
	c := Config{}.Normalize()
	assert.Equal(t, Profile{Base: new(5 * time.Second), Steps: new(8), Max: 30 * time.Minute, Hints: new(false)}, c.OAuth)
	assert.Equal(t, Profile{Base: new(3 * time.Second), Steps: new(5), Max: 30 * time.Minute, Hints: new(true)}, c.APIKey)
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
		OAuth:                 Profile{Base: new(48 * time.Hour), Steps: new(99), Max: 100 * time.Hour, Hints: new(true)},
		APIKey:                Profile{Base: new(-time.Nanosecond), Steps: new(-1), Max: -1, Hints: new(false)},
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
	c = c.Normalize()
	assert.Equal(t, Profile{Base: new(24 * time.Hour), Steps: new(32), Max: 24 * time.Hour, Hints: new(true)}, c.OAuth)
	assert.Equal(t, Profile{Base: new(time.Duration(0)), Steps: new(0), Max: 30 * time.Minute, Hints: new(false)}, c.APIKey)
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
	assert.Equal(t, c, c.Normalize())
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
		{name: "blank", vars: map[string]string{envEgress: "  "}},
		{name: "off", vars: map[string]string{envEgress: "off"}, disabled: true},
		{name: "none", vars: map[string]string{envEgress: "NONE"}, disabled: true},
		{name: "false", vars: map[string]string{envEgress: "False"}, disabled: true},
		{name: "zero", vars: map[string]string{envEgress: " 0 "}, disabled: true},
		{name: "list", vars: map[string]string{envEgress: "OpenCode-Zen, foo"}, providers: []string{"opencode-zen", "foo"}},
		{name: "empty items", vars: map[string]string{envEgress: ",a,,b,"}, providers: []string{"a", "b"}},
		{name: "only commas", vars: map[string]string{envEgress: " , ,"}, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := FromEnv(env(tt.vars))
			if tt.err {
				require.Error(t, err)
				assert.True(t, errors.Is(err, ErrInvalidConfig))
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.providers, c.EgressProviders)
			assert.Equal(t, tt.disabled, c.DisableEgressLock)
		})
	}
}

func TestEgressEnvOffNeverLocks(t *testing.T) {
	c, err := FromEnv(env(map[string]string{envEgress: "off"}))
	require.NoError(t, err)
	tr := New(c)
	assert.False(t, tr.inEgressFamily("opencode-go"))

	c, err = FromEnv(env(map[string]string{envEgress: "OpenCode-Zen, foo"}))
	require.NoError(t, err)
	tr = New(c)
	assert.True(t, tr.inEgressFamily("opencode-zen"))
	assert.True(t, tr.inEgressFamily("FOO"))
	assert.False(t, tr.inEgressFamily("opencode-go"))
}

func FuzzNormalize(f *testing.F) {
	f.Add(int64(0), 0, int64(0), int64(0), int64(0), 0, int64(0), 0, int64(0), int64(0), 0, uint8(0))
	f.Add(int64(-1), -5, int64(1<<62), int64(-1), int64(1), 1000, int64(-9), 99, int64(1<<62), int64(-3), -7, uint8(200))
	f.Add(int64(1), 1, int64(1), int64(1), int64(1), 1, int64(1), 1, int64(1), int64(1), 1, uint8(1))
	f.Fuzz(func(t *testing.T, base int64, steps int, maxd, hint, rr int64, banAt int, mem int64, recheckMax int, window, egressCD int64, maxEntries int, hints uint8) {
		c := Config{
			OAuth:                 Profile{Base: new(time.Duration(base)), Steps: new(steps), Max: time.Duration(maxd), Hints: fuzzHints(hints)},
			APIKey:                Profile{Max: time.Duration(base), Hints: fuzzHints(hints >> 1)},
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
		if hints&1 == 0 { // otherwise nil: the class defaults
			c.APIKey.Base, c.APIKey.Steps = new(time.Duration(maxd)), new(-steps)
		}
		in := c
		c = c.Normalize()
		// The receiver is a copy, but its pointers are shared: they must
		// still point to the values given.
		if *in.OAuth.Base != time.Duration(base) || *in.OAuth.Steps != steps || in.OAuth.Base == c.OAuth.Base || in.OAuth.Steps == c.OAuth.Steps {
			t.Fatalf("Normalize changed or shared its receiver's pointers")
		}
		for _, p := range []Profile{c.OAuth, c.APIKey} {
			if p.Base == nil || p.Steps == nil || p.Hints == nil || *p.Base < 0 || *p.Base > 24*time.Hour || *p.Steps < 0 || *p.Steps > 32 ||
				p.Max < time.Millisecond || p.Max > 24*time.Hour {
				t.Fatalf("profile out of range: %+v", p)
			}
			for l := -1; l <= *p.Steps+2; l++ {
				if d := backoff(p, l); d < 0 || d > p.Max || (d == 0) != (*p.Base == 0) {
					t.Fatalf("backoff(%+v, %d) = %v", p, l, d)
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
		d := c.Normalize()
		if !reflect.DeepEqual(d.OAuth, c.OAuth) || !reflect.DeepEqual(d.APIKey, c.APIKey) || d.MaxHint != c.MaxHint || d.MaxEntries != c.MaxEntries {
			t.Fatalf("Normalize not idempotent")
		}
	})
}

// fuzzHints maps a fuzzed byte to a Hints setting: nil, on or off.
func fuzzHints(b uint8) *bool {
	switch b % 3 {
	case 1:
		return new(true)
	case 2:
		return new(false)
	}
	return nil
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
		c, err := FromEnv(env(map[string]string{envEgress: s}))
		if err == nil && !disabled && providers == nil && c.EgressProviders != nil {
			t.Fatalf("default expected")
		}
	})
}

func lowerTrim(s string) string {
	return strings.ToLower(strings.TrimSpace(s))
}

// Normalize returns a clamped copy and never touches its receiver: neither
// its fields nor the values its pointers and slices refer to, and the copy
// shares none of them.
func TestNormalizeReturnsCopyAndKeepsReceiver(t *testing.T) {
	base, steps, hints := 48*time.Hour, -1, false
	providers := []string{" OpenCode-Zen ", "FOO", "foo"}
	c := Config{APIKey: Profile{Base: &base, Steps: &steps, Hints: &hints}, EgressProviders: providers, MaxEntries: 1}
	n := c.Normalize()

	assert.Equal(t, 48*time.Hour, base)
	assert.Equal(t, -1, steps)
	assert.Equal(t, []string{" OpenCode-Zen ", "FOO", "foo"}, providers)
	assert.Equal(t, Config{APIKey: Profile{Base: &base, Steps: &steps, Hints: &hints}, EgressProviders: providers, MaxEntries: 1}, c)
	assert.Same(t, &base, c.APIKey.Base)

	assert.Equal(t, 24*time.Hour, *n.APIKey.Base)
	assert.Equal(t, 0, *n.APIKey.Steps)
	assert.False(t, *n.APIKey.Hints)
	assert.Equal(t, []string{"opencode-zen", "foo"}, n.EgressProviders)
	assert.Equal(t, 16, n.MaxEntries)
	*n.APIKey.Base, *n.APIKey.Steps, *n.APIKey.Hints = time.Second, 3, true
	n.EgressProviders[0] = "changed"
	assert.Equal(t, 48*time.Hour, base, "the copy shares no pointer")
	assert.Equal(t, -1, steps)
	assert.False(t, hints)
	assert.Equal(t, " OpenCode-Zen ", providers[0], "the copy shares no slice")
}

// A refused environment value is an *Error with CodeInvalidConfig, status
// 400 and the variable in Field, matching ErrInvalidConfig; the default is
// kept.
func TestFromEnvRefusalIsInvalidConfigError(t *testing.T) {
	c, err := FromEnv(env(map[string]string{envEgress: " , ,"}))
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrInvalidConfig))
	var ce *Error
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, &Error{Code: CodeInvalidConfig, Status: 400, Field: "OMNIROUTE_EGRESS_IP_LOCK_PROVIDERS", Value: ", ,",
		Reason: "names no provider", err: ErrInvalidConfig}, ce)
	assert.Equal(t, `cooldown: invalid_config: OMNIROUTE_EGRESS_IP_LOCK_PROVIDERS=", ,": names no provider`, ce.Error())
	assert.Equal(t, Config{}, c, "the default family is kept")
}

// Hints is a pointer: nil is the class default (APIKey on, OAuth off), and
// a set value overrides it in either direction.
func TestHintsNilMeansClassDefault(t *testing.T) {
	hinted := Failure{Status: 429, Reason: "rate_limit_exceeded", RetryAfter: 17 * time.Second, Backoff: true}
	for _, tt := range []struct {
		name   string
		p      Profile
		class  routeguard.Class
		want   time.Duration
		hinted bool
	}{
		{"apikey default", Profile{}, routeguard.APIKey, 17 * time.Second, true},
		{"apikey off", Profile{Hints: new(false)}, routeguard.APIKey, 3 * time.Second, false},
		{"oauth default", Profile{}, routeguard.OAuth, 5 * time.Second, false},
		{"oauth on", Profile{Hints: new(true)}, routeguard.OAuth, 17 * time.Second, true},
	} {
		tr := New(Config{APIKey: tt.p, OAuth: tt.p})
		tr.RegisterAt("k", Options{Class: tt.class}, t0)
		r := tr.FailAt("k", hinted, t0)
		assert.Equal(t, tt.want, r.Cooldown, tt.name)
		assert.Equal(t, tt.hinted, r.Hinted, tt.name)
	}
}

// The credential class is routeguard.Class: OAuth takes the OAuth profile,
// every other class (Unknown and Local included) the APIKey profile.
func TestUnknownAndLocalClassUseAPIKeyProfile(t *testing.T) {
	tr := New(Config{APIKey: Profile{Base: new(2 * time.Second)}, OAuth: Profile{Base: new(7 * time.Second)}})
	for class, want := range map[routeguard.Class]time.Duration{
		routeguard.Unknown: 2 * time.Second, routeguard.APIKey: 2 * time.Second,
		routeguard.Local: 2 * time.Second, routeguard.OAuth: 7 * time.Second,
	} {
		conn := "k-" + class.String()
		tr.RegisterAt(conn, Options{Class: class}, t0)
		assert.Equal(t, want, tr.FailAt(conn, rateLimit, t0).Cooldown, "class %q", class)
		assert.Equal(t, class, tr.SnapshotAt(t0)[0].Class)
		tr.ForgetAt(conn, t0)
	}
}
