package breaker

import (
	"time"

	"github.com/routeguard/routeguard"
	"github.com/routeguard/routeguard/internal/config"
)

// Profile configures the breaker of one provider. As a class profile
// ([Config.OAuth], [Config.APIKey], [Config.Local]) a zero field takes the
// class's built-in value (see [Config]); as a per-provider profile
// ([Config.Profiles]) it takes the generic default noted beside the field.
// Every field is then clamped into the range its doc gives; the per-kind
// and deduplication fields stay zero, which stands for their defaults.
type Profile struct {
	// DegradedAt is the degraded level: the failure that brings a closed
	// breaker's count to it (or above) makes the breaker Degraded, and the
	// success that brings the count back to it (or below) makes it Closed
	// again. Default: ceil(0.6·OpenAt); always clamped to [1, OpenAt−1]
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
	// Kinds is the per-kind policy, indexed by [Kind] (four entries,
	// KindNone to KindQuotaExhausted); the KindNone entry is ignored. The
	// zero value means the built-in hints and no per-kind thresholds.
	Kinds [numKinds]KindPolicy
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

// defaultProfile returns the built-in profile of a class (the table in
// [Config]); Unknown and any other value get the APIKey profile.
func defaultProfile(c routeguard.Class) Profile {
	switch c {
	case routeguard.OAuth:
		return Profile{DegradedAt: 5, OpenAt: 8, Reset: 60 * time.Second, MaxMultiplier: 8, EscalationCount: 2}
	case routeguard.Local:
		return Profile{DegradedAt: 1, OpenAt: 2, Reset: 15 * time.Second, MaxMultiplier: 16, EscalationCount: 3}
	}
	return Profile{DegradedAt: 7, OpenAt: 12, Reset: 30 * time.Second, MaxMultiplier: 4, EscalationCount: 3}
}

// normalize returns p with zero fields set to the generic defaults and
// every field clamped to the range its doc gives. Negative values clamp to
// the lower bound; a negative Window turns the window off.
func (p Profile) normalize() Profile {
	if p.OpenAt == 0 {
		p.OpenAt = defaultOpenAt
	}
	p.OpenAt = min(max(p.OpenAt, 1), maxOpenAt)
	if p.DegradedAt == 0 {
		p.DegradedAt = (p.OpenAt*6 + 9) / 10 // ceil(0.6·OpenAt)
	}
	p.DegradedAt = min(max(p.DegradedAt, 1), max(p.OpenAt-1, 1))
	if p.Reset == 0 {
		p.Reset = defaultReset
	}
	p.Reset = min(max(p.Reset, minReset), maxReset)
	if p.MaxMultiplier == 0 {
		p.MaxMultiplier = defaultMultiplier
	}
	p.MaxMultiplier = min(max(p.MaxMultiplier, 1), maxMultiplier)
	if p.EscalationCount == 0 {
		p.EscalationCount = defaultEscalation
	}
	p.EscalationCount = min(max(p.EscalationCount, 1), maxEscalation)
	p.Window = config.Dur(p.Window, 0, minWindow, maxWindow)
	p.Kinds[KindNone] = KindPolicy{}
	for k := range p.Kinds {
		kp := &p.Kinds[k]
		kp.Cooldown = config.Dur(kp.Cooldown, 0, p.Reset, maxKindCooldown)
		kp.OpenAt = config.Int(kp.OpenAt, 0, 1, maxOpenAt)
	}
	p.ConnDedup = config.Dur(p.ConnDedup, 0, minDedup, maxDedup)
	p.NetworkDedup = config.Dur(p.NetworkDedup, 0, minDedup, maxDedup)
	p.MaxConns = config.Int(p.MaxConns, 0, 1, maxMaxConns)
	return p
}

// kindBase returns the base open time after a failure of kind k: the
// kind's cooldown (or built-in hint) with Hints on, else Reset.
func (p Profile) kindBase(k Kind) time.Duration {
	if !p.Hints || int(k) >= numKinds {
		return p.Reset
	}
	c := p.Kinds[k].Cooldown
	if c <= 0 {
		c = hintCooldowns[k]
	}
	return config.Dur(c, p.Reset, p.Reset, max(p.Reset, maxKindCooldown))
}

func (p Profile) connDedup() time.Duration {
	return config.Dur(p.ConnDedup, defaultConnDedup, 0, maxDedup)
}

func (p Profile) networkDedup() time.Duration {
	return config.Dur(p.NetworkDedup, defaultNetDedup, 0, maxDedup)
}

func (p Profile) maxConns() int { return config.Int(p.MaxConns, defaultMaxConns, 1, maxMaxConns) }

// openDuration returns how long a breaker stays open after its cycles-th
// failed probe in a row (0 when it opened from closed): Reset while cycles ≤
// EscalationCount, then Reset·2^(cycles−EscalationCount), capped at
// Reset·MaxMultiplier. p should be normalized.
//
// It is openDurationFor(KindNone, cycles).
func (p Profile) openDuration(cycles int) time.Duration {
	return p.openDurationFor(KindNone, cycles)
}

// openDurationFor is openDuration for a breaker whose last
// counted failure had kind k: with Hints on and a cooldown for k (see
// [KindPolicy.Cooldown]), that cooldown replaces Reset as the base, with
// the same doubling and the cap base·MaxMultiplier. p should be normalized.
func (p Profile) openDurationFor(k Kind, cycles int) time.Duration {
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

// maxOpenDuration is the longest open time the profile allows: the longest
// base (Reset, or with Hints the longest per-kind cooldown) times
// MaxMultiplier. p should be normalized.
func (p Profile) maxOpenDuration() time.Duration {
	base := p.Reset
	for k := range numKinds {
		base = max(base, p.kindBase(Kind(k)))
	}
	return base * time.Duration(max(p.MaxMultiplier, 1))
}

// classProfile fills p's zero fields from class c's built-in profile, then
// normalizes. Local's zero DegradedAt is OpenAt−1, so that Degraded is
// reachable whatever OpenAt is.
func classProfile(p Profile, c routeguard.Class) Profile {
	d := defaultProfile(c)
	if p.OpenAt == 0 {
		p.OpenAt = d.OpenAt
	}
	if p.DegradedAt == 0 {
		if c == routeguard.Local {
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
	return p.normalize()
}
