package cooldown

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Class is the authentication class of a connection. It selects the
// [Profile] used to compute cooldowns. The zero value is [APIKey].
type Class uint8

const (
	// APIKey is a connection authenticated by a static API key.
	APIKey Class = iota
	// OAuth is a connection authenticated by an OAuth account.
	OAuth
)

// String returns "apikey" or "oauth".
func (c Class) String() string {
	if c == OAuth {
		return "oauth"
	}
	return "apikey"
}

// HintPolicy says whether a profile lets upstream retry hints decide the
// length of a cooldown.
type HintPolicy uint8

const (
	// HintsDefault uses the class default: on for [APIKey], off for [OAuth].
	HintsDefault HintPolicy = iota
	// HintsOn honours upstream retry hints.
	HintsOn
	// HintsOff ignores upstream retry hints.
	HintsOff
)

// Profile shapes the cooldowns of one authentication class. The zero value
// means the class defaults.
type Profile struct {
	// Base is the first backoff cooldown (level 0). Default 5 s for OAuth,
	// 3 s for APIKey; ≤ 0 means the default; at most 24 h.
	Base time.Duration
	// Steps is the highest backoff level. Default 8 for OAuth, 5 for
	// APIKey; ≤ 0 means the default; at most 32.
	Steps int
	// Max caps every backoff cooldown. Default 30 min; ≤ 0 means the
	// default; at most 24 h. Upstream hints are bounded by
	// [Config.MaxHint] instead.
	Max time.Duration
	// Hints says whether upstream retry hints decide the cooldown length.
	// Default on for APIKey, off for OAuth.
	Hints HintPolicy
}

func (p Profile) normalize(c Class) Profile {
	base, steps := 3*time.Second, 5
	hints := HintsOn
	if c == OAuth {
		base, steps, hints = 5*time.Second, 8, HintsOff
	}
	p.Base = clampDur(p.Base, base, time.Millisecond, 24*time.Hour)
	p.Steps = clampInt(p.Steps, steps, 1, 32)
	p.Max = clampDur(p.Max, 30*time.Minute, time.Millisecond, 24*time.Hour)
	if p.Hints != HintsOn && p.Hints != HintsOff {
		p.Hints = hints
	}
	return p
}

// Default values of [Config].
const (
	DefaultMaxHint               = 30 * 24 * time.Hour
	DefaultRequestRejected       = 5 * time.Minute
	DefaultRequestRejectedRepeat = 15 * time.Minute
	DefaultRequestRejectedBanAt  = 3
	DefaultRequestRejectedMemory = 24 * time.Hour
	DefaultRecheckBase           = 5 * time.Minute
	DefaultRecheckMax            = 3
	DefaultEgressWindow          = 24 * time.Hour
	DefaultEgressCooldown        = 2 * time.Minute
	DefaultMaxEntries            = 1 << 20
)

// DefaultEgressProviders returns the providers that share an egress-IP
// quota unless configured otherwise: opencode-go and opencode-cli.
func DefaultEgressProviders() []string { return []string{"opencode-go", "opencode-cli"} }

// EgressEnv is the environment variable read by [FromEnv] for the egress-IP
// provider family.
const EgressEnv = "OMNIROUTE_EGRESS_IP_LOCK_PROVIDERS"

// Config configures a [Tracker]. The zero value means every default; call
// [Config.Normalize] to see the effective values (New does it for you).
type Config struct {
	// OAuth and APIKey are the profiles of the two authentication classes.
	OAuth, APIKey Profile

	// MaxHint bounds every upstream retry hint and every fixed cooldown of
	// a [Failure]. Default 30 days; ≤ 0 means the default; within
	// [1 s, 365 days]. Classifiers usually apply tighter caps per hint kind.
	MaxHint time.Duration

	// RequestRejected is the cooldown after the first refusal of a
	// request-rejected streak. Default 5 min; ≤ 0 means the default; at
	// most 24 h.
	RequestRejected time.Duration
	// RequestRejectedRepeat is the cooldown after every later refusal
	// before the ban. Default 15 min; ≤ 0 means the default; at most 24 h.
	RequestRejectedRepeat time.Duration
	// RequestRejectedBanAt is the streak length that bans the connection.
	// Default 3; ≤ 0 means the default; within [2, 100].
	RequestRejectedBanAt int
	// RequestRejectedMemory is how long a refusal counts towards the
	// streak. Default 24 h; ≤ 0 means the default; within [1 min, 30 days].
	RequestRejectedMemory time.Duration

	// RecheckBase is the delay before the first re-check of an expired
	// connection; re-check n waits RecheckBase·2ⁿ. Default 5 min; ≤ 0 means
	// the default; at most 24 h.
	RecheckBase time.Duration
	// RecheckMax is the number of re-checks after which an expired
	// connection is never re-checked again. Default 3; ≤ 0 means the
	// default; at most 16.
	RecheckMax int

	// EgressProviders are the providers whose connections share a quota
	// per egress IP. Nil means [DefaultEgressProviders]. Names are
	// compared case-insensitively.
	EgressProviders []string
	// DisableEgressLock turns the egress-IP family lockout off.
	DisableEgressLock bool
	// EgressWindow is how long a recorded egress IP counts. Default 24 h;
	// ≤ 0 means the default; within [1 min, 7 days].
	EgressWindow time.Duration
	// EgressCooldown is the family cooldown when the failure itself
	// yields none. Default 2 min; ≤ 0 means the default; at most 24 h.
	EgressCooldown time.Duration

	// MaxEntries caps the connections the in-memory store created by New
	// keeps. Default 1<<20; ≤ 0 means the default; within [16, 1<<28].
	// It is ignored when Store is set.
	MaxEntries int

	// Store holds the state. Nil means a new [MemoryStore].
	Store Store

	// OnChange, if set, is called after every change of a connection's
	// status, outside any lock, in the goroutine that caused it.
	OnChange func(Event)
}

// Normalize replaces zero and negative values by their defaults and clamps
// every field into the range documented beside it.
func (c *Config) Normalize() {
	c.OAuth = c.OAuth.normalize(OAuth)
	c.APIKey = c.APIKey.normalize(APIKey)
	c.MaxHint = clampDur(c.MaxHint, DefaultMaxHint, time.Second, 365*24*time.Hour)
	c.RequestRejected = clampDur(c.RequestRejected, DefaultRequestRejected, 0, 24*time.Hour)
	c.RequestRejectedRepeat = clampDur(c.RequestRejectedRepeat, DefaultRequestRejectedRepeat, 0, 24*time.Hour)
	c.RequestRejectedBanAt = clampInt(c.RequestRejectedBanAt, DefaultRequestRejectedBanAt, 2, 100)
	c.RequestRejectedMemory = clampDur(c.RequestRejectedMemory, DefaultRequestRejectedMemory, time.Minute, 30*24*time.Hour)
	c.RecheckBase = clampDur(c.RecheckBase, DefaultRecheckBase, 0, 24*time.Hour)
	c.RecheckMax = clampInt(c.RecheckMax, DefaultRecheckMax, 1, 16)
	if c.EgressProviders == nil {
		c.EgressProviders = DefaultEgressProviders()
	} else {
		c.EgressProviders = cleanProviders(c.EgressProviders)
	}
	c.EgressWindow = clampDur(c.EgressWindow, DefaultEgressWindow, time.Minute, 7*24*time.Hour)
	c.EgressCooldown = clampDur(c.EgressCooldown, DefaultEgressCooldown, 0, 24*time.Hour)
	c.MaxEntries = clampInt(c.MaxEntries, DefaultMaxEntries, 16, 1<<28)
}

// ErrBadEnv reports an environment value that [FromEnv] could not use; the
// default was kept.
var ErrBadEnv = errors.New("cooldown: bad environment value")

// FromEnv returns a Config whose fields are read from the environment through
// lookup (os.LookupEnv in production). It reads [EgressEnv]: unset or blank
// keeps the default family; "none", "off", "false" or "0" (any case) turns
// the lockout off; otherwise a comma-separated list, trimmed and lower-cased,
// replaces the family. A value that names no provider keeps the default and
// is reported as an error matching [ErrBadEnv]. Other fields stay zero.
func FromEnv(lookup func(string) (string, bool)) (Config, error) {
	var c Config
	v, ok := lookup(EgressEnv)
	if !ok {
		return c, nil
	}
	providers, disabled, err := parseEgressProviders(v)
	if err != nil {
		return c, fmt.Errorf("%w: %s=%q: %v", ErrBadEnv, EgressEnv, v, err)
	}
	c.EgressProviders, c.DisableEgressLock = providers, disabled
	return c, nil
}

// parseEgressProviders parses the value of EgressEnv. A nil list with
// disabled false means the default family.
func parseEgressProviders(v string) (providers []string, disabled bool, err error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, false, nil
	}
	switch strings.ToLower(v) {
	case "none", "off", "false", "0":
		return nil, true, nil
	}
	providers = cleanProviders(strings.Split(v, ","))
	if len(providers) == 0 {
		return nil, false, errors.New("no provider named")
	}
	return providers, false, nil
}

// cleanProviders trims, lower-cases and deduplicates names, dropping empty
// ones. It always returns a non-nil slice.
func cleanProviders(in []string) []string {
	out := make([]string, 0, len(in))
	for _, p := range in {
		p = strings.ToLower(strings.TrimSpace(p))
		if p == "" || containsFold(out, p) {
			continue
		}
		out = append(out, p)
	}
	return out
}

func containsFold(list []string, s string) bool {
	for _, p := range list {
		if strings.EqualFold(p, s) {
			return true
		}
	}
	return false
}

func clampDur(v, def, lo, hi time.Duration) time.Duration {
	if v <= 0 {
		v = def
	}
	return min(max(v, lo), hi)
}

func clampInt(v, def, lo, hi int) int {
	if v <= 0 {
		v = def
	}
	return min(max(v, lo), hi)
}
