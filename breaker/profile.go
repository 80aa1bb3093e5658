package breaker

import (
	"strconv"
	"time"
)

// Class is a provider's credential class; it chooses the breaker profile and
// the window-gate profile.
type Class uint8

// The credential classes. The zero value is APIKey.
const (
	// APIKey is a provider reached with API keys.
	APIKey Class = iota
	// OAuth is a provider reached with OAuth accounts.
	OAuth
	// Local is a provider running on the local machine or network.
	Local
)

var classNames = [...]string{"apikey", "oauth", "local"}

// String returns "apikey", "oauth" or "local".
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// ParseClass maps "apikey" (also "api_key", "api-key"), "oauth" and "local"
// to a Class; anything else is APIKey with ok false.
func ParseClass(s string) (c Class, ok bool) {
	switch s {
	case "apikey", "api_key", "api-key", "APIKEY", "API_KEY":
		return APIKey, true
	case "oauth", "OAUTH":
		return OAuth, true
	case "local", "LOCAL":
		return Local, true
	}
	return APIKey, false
}

// Profile configures one breaker. The zero value means the generic defaults
// noted beside each field; [Profile.Normalize] fills them in and clamps
// (the per-kind and deduplication fields stay zero, which stands for their
// defaults). [DefaultProfile] gives the built-in profile of each class.
type Profile struct {
	// DegradedAt is the failure count at which a closed breaker reports
	// Degraded. Default: ceil(0.6·OpenAt); always clamped to [1, OpenAt−1]
	// (1 when OpenAt is 1, where the breaker opens first).
	DegradedAt int
	// OpenAt is the failure count that opens the breaker. Default 5; range
	// [1, 1000].
	OpenAt int
	// Reset is the base open time, and also how long a half-open probe may
	// stay unreported before another is admitted. Default 30 s; range
	// [1 s, 24 h].
	Reset time.Duration
	// MaxMultiplier caps the escalated open time at Reset·MaxMultiplier.
	// Default 16; range [1, 1024].
	MaxMultiplier int
	// EscalationCount is the number of failed probes in a row that keep the
	// base open time; the next ones double it. Default 3; range [1, 100].
	EscalationCount int
	// Window, when positive, lets a counted failure expire Window after it
	// happened. Default 0: failures never expire. Range [1 s, 720 h].
	Window time.Duration
	// Hints turns on the per-kind open times of Kinds: the kind of the last
	// counted failure chooses the base open time (see
	// [KindPolicy.Cooldown]). Off by default: every open time grows from
	// Reset.
	Hints bool
	// Kinds is the per-kind policy, indexed by [Kind]; the KindNone entry is
	// ignored. The zero value means the built-in hints and no per-kind
	// thresholds.
	Kinds [NumKinds]KindPolicy
	// ConnDedup is how long after a counted failure of one connection (see
	// [Report.Conn]) further failures of that connection are not counted.
	// Default 5 s (zero or negative); range [1 ms, 1 h]. A report without a
	// connection is never deduplicated this way.
	ConnDedup time.Duration
	// NetworkDedup is how long after a counted network error (see
	// [Report.Network]) further network errors of the provider, on any
	// connection, are not counted. Default 10 s (zero or negative); range
	// [1 ms, 1 h].
	NetworkDedup time.Duration
	// MaxConns bounds the connections whose last counted failure is kept
	// for ConnDedup. When full, expired entries are dropped first, then the
	// oldest. Default 1024 (zero or negative); range [1, 100000].
	MaxConns int
}

// Profile ranges and generic defaults.
const (
	defaultOpenAt     = 5
	maxOpenAt         = 1000
	defaultReset      = 30 * time.Second
	minReset          = time.Second
	maxReset          = 24 * time.Hour
	defaultMultiplier = 16
	maxMultiplier     = 1024
	defaultEscalation = 3
	maxEscalation     = 100
	minWindow         = time.Second
	maxWindow         = 720 * time.Hour
	maxKindCooldown   = 24 * time.Hour
	defaultConnDedup  = 5 * time.Second
	defaultNetDedup   = 10 * time.Second
	minDedup          = time.Millisecond
	maxDedup          = time.Hour
	defaultMaxConns   = 1024
	maxMaxConns       = 100_000
)

// DefaultProfile returns the built-in profile of a class:
//
//	class   degraded  opens  reset  max multiplier  escalation
//	OAuth   5         8      60 s   8               2
//	APIKey  7         12     30 s   4               3
//	Local   1         2      15 s   16              3
//
// Local's degraded level is OpenAt−1, so that Degraded is reachable.
// An unknown class gets the APIKey profile.
func DefaultProfile(c Class) Profile {
	switch c {
	case OAuth:
		return Profile{DegradedAt: 5, OpenAt: 8, Reset: 60 * time.Second, MaxMultiplier: 8, EscalationCount: 2}
	case Local:
		return Profile{DegradedAt: 1, OpenAt: 2, Reset: 15 * time.Second, MaxMultiplier: 16, EscalationCount: 3}
	}
	return Profile{DegradedAt: 7, OpenAt: 12, Reset: 30 * time.Second, MaxMultiplier: 4, EscalationCount: 3}
}

// Normalize returns p with zero fields set to the generic defaults and every
// field clamped to the range its doc gives. Negative values clamp to the
// lower bound; a negative Window turns the window off.
func (p Profile) Normalize() Profile {
	if p.OpenAt == 0 {
		p.OpenAt = defaultOpenAt
	}
	p.OpenAt = clampInt(p.OpenAt, 1, maxOpenAt)
	if p.DegradedAt == 0 {
		p.DegradedAt = (p.OpenAt*6 + 9) / 10 // ceil(0.6·OpenAt)
	}
	p.DegradedAt = clampInt(p.DegradedAt, 1, max(p.OpenAt-1, 1))
	if p.Reset == 0 {
		p.Reset = defaultReset
	}
	p.Reset = clampDur(p.Reset, minReset, maxReset)
	if p.MaxMultiplier == 0 {
		p.MaxMultiplier = defaultMultiplier
	}
	p.MaxMultiplier = clampInt(p.MaxMultiplier, 1, maxMultiplier)
	if p.EscalationCount == 0 {
		p.EscalationCount = defaultEscalation
	}
	p.EscalationCount = clampInt(p.EscalationCount, 1, maxEscalation)
	if p.Window < 0 {
		p.Window = 0
	}
	if p.Window != 0 {
		p.Window = clampDur(p.Window, minWindow, maxWindow)
	}
	p.Kinds[KindNone] = KindPolicy{}
	for k := range p.Kinds {
		kp := &p.Kinds[k]
		if kp.Cooldown > 0 {
			kp.Cooldown = clampDur(kp.Cooldown, p.Reset, maxKindCooldown)
		} else {
			kp.Cooldown = 0
		}
		if kp.OpenAt > 0 {
			kp.OpenAt = clampInt(kp.OpenAt, 1, maxOpenAt)
		} else {
			kp.OpenAt = 0
		}
	}
	if p.ConnDedup > 0 {
		p.ConnDedup = clampDur(p.ConnDedup, minDedup, maxDedup)
	} else {
		p.ConnDedup = 0
	}
	if p.NetworkDedup > 0 {
		p.NetworkDedup = clampDur(p.NetworkDedup, minDedup, maxDedup)
	} else {
		p.NetworkDedup = 0
	}
	if p.MaxConns > 0 {
		p.MaxConns = clampInt(p.MaxConns, 1, maxMaxConns)
	} else {
		p.MaxConns = 0
	}
	return p
}

// kindBase returns the base open time after a failure of kind k: the
// kind's cooldown (or built-in hint) with Hints on, else Reset.
func (p Profile) kindBase(k Kind) time.Duration {
	if !p.Hints || int(k) >= NumKinds {
		return p.Reset
	}
	c := p.Kinds[k].Cooldown
	if c <= 0 {
		c = hintCooldowns[k]
	}
	if c <= 0 {
		return p.Reset
	}
	return clampDur(c, p.Reset, max(p.Reset, maxKindCooldown))
}

func (p Profile) connDedup() time.Duration {
	if p.ConnDedup <= 0 {
		return defaultConnDedup
	}
	return p.ConnDedup
}

func (p Profile) networkDedup() time.Duration {
	if p.NetworkDedup <= 0 {
		return defaultNetDedup
	}
	return p.NetworkDedup
}

func (p Profile) maxConns() int {
	if p.MaxConns <= 0 {
		return defaultMaxConns
	}
	return p.MaxConns
}

// OpenDuration returns how long a breaker stays open after its cycles-th
// failed probe in a row (0 when it opened from closed): Reset while cycles ≤
// EscalationCount, then Reset·2^(cycles−EscalationCount), capped at
// Reset·MaxMultiplier. p should be normalized.
//
// It is OpenDurationFor(KindNone, cycles).
func (p Profile) OpenDuration(cycles int) time.Duration {
	return p.OpenDurationFor(KindNone, cycles)
}

// OpenDurationFor is [Profile.OpenDuration] for a breaker whose last
// counted failure had kind k: with Hints on and a cooldown for k (see
// [KindPolicy.Cooldown]), that cooldown replaces Reset as the base, with
// the same doubling and the cap base·MaxMultiplier. p should be normalized.
func (p Profile) OpenDurationFor(k Kind, cycles int) time.Duration {
	base := p.kindBase(k)
	if cycles <= p.EscalationCount {
		return base
	}
	limit := base * time.Duration(max(p.MaxMultiplier, 1))
	d := base
	for i := p.EscalationCount; i < cycles && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// MaxOpenDuration is the longest open time the profile allows: the longest
// base (Reset, or with Hints the longest per-kind cooldown) times
// MaxMultiplier. p should be normalized.
func (p Profile) MaxOpenDuration() time.Duration {
	base := p.Reset
	for k := range NumKinds {
		base = max(base, p.kindBase(Kind(k)))
	}
	return base * time.Duration(max(p.MaxMultiplier, 1))
}

// Settings configures a [Set]. The zero value means the built-in profiles of
// [DefaultProfile] and the defaults below.
type Settings struct {
	// OAuth, APIKey and Local are the profiles of the three classes. A zero
	// field takes the value of the class's built-in profile (a zero Local
	// DegradedAt is OpenAt−1); then [Profile.Normalize] clamps.
	OAuth, APIKey, Local Profile
	// MaxBreakers bounds the number of breakers a Set keeps. Default 500;
	// range [1, 1000000].
	MaxBreakers int
	// IdleTTL is how long a closed breaker with no counted failures is kept
	// after its last failure before it may be dropped. Default 30 min; range
	// [1 min, 24 h].
	IdleTTL time.Duration
}

// Set ranges and defaults.
const (
	defaultMaxBreakers = 500
	maxMaxBreakers     = 1_000_000
	defaultIdleTTL     = 30 * time.Minute
	minIdleTTL         = time.Minute
	maxIdleTTL         = 24 * time.Hour
)

// Normalize returns s with defaults filled in and every field clamped.
func (s Settings) Normalize() Settings {
	s.OAuth = fillProfile(s.OAuth, OAuth)
	s.APIKey = fillProfile(s.APIKey, APIKey)
	s.Local = fillProfile(s.Local, Local)
	if s.MaxBreakers == 0 {
		s.MaxBreakers = defaultMaxBreakers
	}
	s.MaxBreakers = clampInt(s.MaxBreakers, 1, maxMaxBreakers)
	if s.IdleTTL == 0 {
		s.IdleTTL = defaultIdleTTL
	}
	s.IdleTTL = clampDur(s.IdleTTL, minIdleTTL, maxIdleTTL)
	return s
}

// Profile returns the normalized profile of class c.
func (s Settings) Profile(c Class) Profile {
	switch c {
	case OAuth:
		return fillProfile(s.OAuth, OAuth)
	case Local:
		return fillProfile(s.Local, Local)
	}
	return fillProfile(s.APIKey, APIKey)
}

// fillProfile sets p's zero fields from class c's built-in profile, then
// normalizes.
func fillProfile(p Profile, c Class) Profile {
	d := DefaultProfile(c)
	if p.OpenAt == 0 {
		p.OpenAt = d.OpenAt
	}
	if p.DegradedAt == 0 {
		if c == Local {
			p.DegradedAt = max(p.OpenAt-1, 1)
		} else {
			p.DegradedAt = d.DegradedAt
		}
	}
	if p.Reset == 0 {
		p.Reset = d.Reset
	}
	if p.MaxMultiplier == 0 {
		p.MaxMultiplier = d.MaxMultiplier
	}
	if p.EscalationCount == 0 {
		p.EscalationCount = d.EscalationCount
	}
	return p.Normalize()
}

func clampInt(v, lo, hi int) int {
	return min(max(v, lo), hi)
}

func clampDur(v, lo, hi time.Duration) time.Duration {
	return min(max(v, lo), hi)
}
