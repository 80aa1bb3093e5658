package cooldown

import (
	"errors"
	"strings"
	"time"

	"github.com/routeguard/routeguard"
	"github.com/routeguard/routeguard/internal/config"
)

// Profile shapes the cooldowns of one credential class. The zero value means
// the class defaults.
//
// Base, Steps and Hints are pointers because 0 (or off) is a real value for
// them: nil means the class default, and a non-nil value is used, clamped
// into its range. Write for example Profile{Base: new(time.Duration(0))} for
// a profile without backoff cooldowns.
type Profile struct {
	// Base is the first backoff cooldown (level 0) and the base cooldown.
	// Nil means the class default: 5 s for OAuth, 3 s for APIKey. A
	// non-nil value is clamped to [0, 24 h]. A base of 0 makes every
	// backoff and base cooldown 0: such a failure is recorded (its level
	// still rises) without cooling the connection, except on the egress-IP
	// family lockout, which then uses [Config.EgressCooldown]. Hints and
	// fixed cooldowns are not affected.
	Base *time.Duration
	// Steps is the highest backoff level. Nil means the class default: 8
	// for OAuth, 5 for APIKey. A non-nil value is clamped to [0, 32]; 0
	// means the backoff never escalates: every backoff cooldown is Base
	// and the level stays 0.
	Steps *int
	// Max caps every backoff cooldown. Default 30 min; ≤ 0 means the
	// default; within [1 ms, 24 h]. Upstream hints are bounded by
	// [Config.MaxHint] instead.
	Max time.Duration
	// Hints says whether upstream retry hints decide the cooldown length.
	// Nil means the class default: on for APIKey, off for OAuth.
	Hints *bool
}

// Class defaults and ranges of [Profile], as its field docs give them.
const (
	defaultOAuthBase   = 5 * time.Second
	defaultAPIKeyBase  = 3 * time.Second
	defaultOAuthSteps  = 8
	defaultAPIKeySteps = 5
	defaultProfileMax  = 30 * time.Minute
	maxProfileBase     = 24 * time.Hour
	maxProfileSteps    = 32
)

// shape is a normalized Profile as plain values, for the hot path.
type shape struct {
	base  time.Duration
	steps int
	max   time.Duration
	hints bool
}

// shapeOf returns p's values with the defaults of class c filled in and
// every value clamped. Every class but OAuth takes the APIKey defaults. It
// never allocates.
func shapeOf(p Profile, c routeguard.Class) shape {
	s := shape{base: defaultAPIKeyBase, steps: defaultAPIKeySteps, hints: true}
	if c == routeguard.OAuth {
		s = shape{base: defaultOAuthBase, steps: defaultOAuthSteps}
	}
	s.base = config.DurOpt(p.Base, s.base, 0, maxProfileBase)
	s.steps = config.IntOpt(p.Steps, s.steps, 0, maxProfileSteps)
	s.max = config.Dur(p.Max, defaultProfileMax, time.Millisecond, 24*time.Hour)
	if p.Hints != nil {
		s.hints = *p.Hints
	}
	return s
}

// normalize returns p with the defaults of class c filled in and every value
// clamped. Its pointers point to new values, never to the caller's.
func (p Profile) normalize(c routeguard.Class) Profile {
	s := shapeOf(p, c)
	return Profile{Base: new(s.base), Steps: new(s.steps), Max: s.max, Hints: new(s.hints)}
}

// Defaults of [Config], as its field docs give them.
const (
	defaultMaxHint               = 30 * 24 * time.Hour
	defaultRequestRejected       = 5 * time.Minute
	defaultRequestRejectedRepeat = 15 * time.Minute
	defaultRequestRejectedBanAt  = 3
	defaultRequestRejectedMemory = 24 * time.Hour
	defaultRecheckBase           = 5 * time.Minute
	defaultRecheckMax            = 3
	defaultEgressWindow          = 24 * time.Hour
	defaultEgressCooldown        = 2 * time.Minute
	defaultMaxEntries            = 1 << 20
	defaultMaxTerminal           = 100_000
)

// defaultEgressProviders returns the providers that share an egress-IP quota
// unless configured otherwise.
func defaultEgressProviders() []string { return []string{"opencode-go", "opencode-cli"} }

// envEgress is the environment variable [FromEnv] reads.
const envEgress = "OMNIROUTE_EGRESS_IP_LOCK_PROVIDERS"

// Config configures a [Tracker]. The zero value means every default; call
// [Config.Normalize] to see the effective values (New does it for you).
//
// A connection's credential class ([Options.Class]) picks its profile:
// [routeguard.OAuth] uses OAuth; every other class, [routeguard.Unknown] and
// [routeguard.Local] included, uses APIKey.
type Config struct {
	// OAuth and APIKey are the profiles of the two credential classes;
	// see [Profile] for their defaults.
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
	// per egress IP. Nil means opencode-go and opencode-cli; an empty,
	// non-nil list means none. Names are trimmed, lower-cased and compared
	// case-insensitively.
	EgressProviders []string
	// DisableEgressLock turns the egress-IP family lockout off.
	DisableEgressLock bool
	// EgressWindow is how long a recorded egress IP counts. Default 24 h;
	// ≤ 0 means the default; within [1 min, 7 days].
	EgressWindow time.Duration
	// EgressCooldown is the family cooldown when the failure itself
	// yields none. Default 2 min; ≤ 0 means the default; at most 24 h.
	EgressCooldown time.Duration

	// MaxEntries caps the connections not in a terminal state that the
	// in-memory store keeps. Default 1<<20; ≤ 0 means the default; within
	// [16, 1<<28]. A write that would exceed it drops, never the
	// connection written, first an entry that carries no information any
	// more (see the package doc), then the entry whose cooldown ended, or
	// ends, first: an available entry goes before a cooling one, and of
	// two cooling ones the one ending first. Each entry dropped is reported
	// to OnChange (Action [Dropped], Removed set). With another Store that
	// implements [Sweeper], it is kept by sweeps instead, which may let the
	// store run a few entries over it; other stores are not bounded.
	MaxEntries int
	// MaxTerminal caps the connections in a terminal state (Banned,
	// Expired, CreditsExhausted) that the in-memory store keeps, on top of
	// MaxEntries. Default 100 000; ≤ 0 means the default; within
	// [16, 1<<28]. A write that would exceed it drops the connection that
	// became terminal first (the oldest TerminalAt), never the connection
	// written, and reports it to OnChange as an [Event] with Action
	// [Dropped], From its terminal state and Removed set: the next request
	// through that connection finds it available and learns its state
	// again from the upstream. The event's Cause is "max_terminal". A
	// Store that implements [Sweeper] keeps it by sweeps, as it keeps
	// MaxEntries; other stores do not apply it.
	MaxTerminal int

	// Store holds the state. Nil means a new store from [NewMemoryStore].
	Store Store

	// OnChange, if set, is called with every change of a connection: each
	// change of its status, and the removal of its entry (see [Event]). It
	// is called synchronously in the goroutine that made the change, after
	// the store's lock is released, with the events of one call in the
	// order of its changes. It must not block; it may call back into the
	// Tracker.
	OnChange func(Event)
}

// Normalize returns a copy of c with unset values (zero, negative or nil, as
// each field says) replaced by their defaults and every field clamped into
// the range documented beside it. In the copy the profiles' pointers are
// non-nil and point to values of their own; c itself is never modified.
func (c Config) Normalize() Config {
	c.OAuth = c.OAuth.normalize(routeguard.OAuth)
	c.APIKey = c.APIKey.normalize(routeguard.APIKey)
	c.MaxHint = config.Dur(c.MaxHint, defaultMaxHint, time.Second, 365*24*time.Hour)
	c.RequestRejected = config.Dur(c.RequestRejected, defaultRequestRejected, 0, 24*time.Hour)
	c.RequestRejectedRepeat = config.Dur(c.RequestRejectedRepeat, defaultRequestRejectedRepeat, 0, 24*time.Hour)
	c.RequestRejectedBanAt = config.Int(c.RequestRejectedBanAt, defaultRequestRejectedBanAt, 2, 100)
	c.RequestRejectedMemory = config.Dur(c.RequestRejectedMemory, defaultRequestRejectedMemory, time.Minute, 30*24*time.Hour)
	c.RecheckBase = config.Dur(c.RecheckBase, defaultRecheckBase, 0, 24*time.Hour)
	c.RecheckMax = config.Int(c.RecheckMax, defaultRecheckMax, 1, 16)
	if c.EgressProviders == nil {
		c.EgressProviders = defaultEgressProviders()
	} else {
		c.EgressProviders = cleanProviders(c.EgressProviders)
	}
	c.EgressWindow = config.Dur(c.EgressWindow, defaultEgressWindow, time.Minute, 7*24*time.Hour)
	c.EgressCooldown = config.Dur(c.EgressCooldown, defaultEgressCooldown, 0, 24*time.Hour)
	c.MaxEntries = config.Int(c.MaxEntries, defaultMaxEntries, 16, 1<<28)
	c.MaxTerminal = config.Int(c.MaxTerminal, defaultMaxTerminal, 16, 1<<28)
	return c
}

// FromEnv returns a Config whose fields are read from the environment through
// lookup (os.LookupEnv in production); only the variables that are set fill
// fields, the others stay unset (their defaults), and a nil lookup reads
// nothing. It reads
//
//	OMNIROUTE_EGRESS_IP_LOCK_PROVIDERS → EgressProviders, DisableEgressLock
//
// Unset or blank keeps the default family; "none", "off", "false" or "0" (any
// case) turns the lockout off; otherwise a comma-separated list, trimmed and
// lower-cased, replaces the family. A value that names no provider keeps the
// default and is reported as an [*Error] with [CodeInvalidConfig] and the
// variable's name in Field, matching [ErrInvalidConfig].
func FromEnv(lookup func(string) (string, bool)) (Config, error) {
	var c Config
	if lookup == nil {
		return c, nil
	}
	env := config.Env{Lookup: lookup, Refuse: invalidConfig}
	if v, ok := env.Raw(envEgress); ok {
		providers, disabled, err := parseEgressProviders(v)
		if err != nil {
			env.Refused(envEgress, v, err)
		} else {
			c.EgressProviders, c.DisableEgressLock = providers, disabled
		}
	}
	return c, env.Err()
}

// errNoProvider is the reason an egress list is refused.
var errNoProvider = errors.New("names no provider")

// parseEgressProviders parses the value of the egress variable. A nil list
// with disabled false means the default family.
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
		return nil, false, errNoProvider
	}
	return providers, false, nil
}

// cleanProviders trims, lower-cases and deduplicates names, dropping empty
// ones, into a new slice. It always returns a non-nil slice.
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
