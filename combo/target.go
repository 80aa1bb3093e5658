package combo

import (
	"strings"
	"time"
)

// Target is one way to serve a request: a model on a connection (one API key
// or account) of a provider, with the metadata strategies read.
type Target struct {
	Provider   string
	Connection string // empty: any connection of the provider
	Model      string

	Weight   float64 // weighted and quota-share draws; ≤ 0 counts as 1
	Priority int     // lower is preferred where strategies break ties

	// AuthClass is the connection's credential class: "oauth", "apikey" or
	// "local". It selects breaker and cooldown profiles.
	AuthClass string

	// Price is the input price per million tokens; PriceKnown says whether
	// Price is meaningful (an unknown price sorts last in cost order).
	Price      float64
	PriceKnown bool

	ContextWindow int // tokens; 0 when unknown
	Tags          []string

	// MaxConcurrent caps the connection's in-flight requests; 0 = no cap.
	MaxConcurrent int
}

// String returns provider/model, or provider/connection/model when the
// target names a connection.
func (t *Target) String() string {
	if t.Connection == "" {
		return t.Provider + "/" + t.Model
	}
	return t.Provider + "/" + t.Connection + "/" + t.Model
}

// Combo is a named, ordered list of targets and the strategy that orders them
// for each request.
type Combo struct {
	Name     string
	Strategy string // a registered strategy name; "" means "priority"
	Targets  []Target
	Settings Settings
}

// Settings are the per-combo knobs. The zero value means the defaults listed
// on each field; [Settings.Normalize] clamps out-of-range values.
type Settings struct {
	// MaxAttempts is the shared attempt budget of one request, retries and
	// fallbacks together. Default 30, clamped to 1..200.
	MaxAttempts int
	// TargetTimeout bounds one attempt. Default 120 s; it is raised to the
	// cooldown-wait budget plus 10 s when waiting is enabled and the combo does
	// not set it.
	TargetTimeout time.Duration
	// StickyLimit keeps a drawn target for that many requests in weighted and
	// round-robin orders; ≤ 1 rotates every request.
	StickyLimit int
	// ConcurrencyPerModel is round-robin's per-target concurrency when the
	// connection sets no MaxConcurrent. Default 3, clamped to 1..32.
	ConcurrencyPerModel int
	// QueueTimeout bounds the wait for a per-target slot. Default 30 s.
	QueueTimeout time.Duration
	// QueueDepth is how many requests may wait for a per-target slot.
	// Default 20, at most 100.
	QueueDepth int
	// CooldownWait waits out a short transient lockout instead of failing.
	CooldownWait CooldownWait
}

// Defaults of [Settings].
const (
	DefaultMaxAttempts         = 30
	DefaultTargetTimeout       = 120 * time.Second
	DefaultConcurrencyPerModel = 3
	DefaultQueueTimeout        = 30 * time.Second
	DefaultQueueDepth          = 20
)

// Normalize returns s with defaults filled in and values clamped to their
// ranges.
func (s Settings) Normalize() Settings {
	if s.MaxAttempts <= 0 {
		s.MaxAttempts = DefaultMaxAttempts
	}
	s.MaxAttempts = min(s.MaxAttempts, 200)
	s.CooldownWait = s.CooldownWait.Normalize()
	if s.TargetTimeout <= 0 {
		s.TargetTimeout = DefaultTargetTimeout
		if s.CooldownWait.Enabled() {
			s.TargetTimeout = max(s.TargetTimeout, s.CooldownWait.Budget+10*time.Second)
		}
	}
	if s.StickyLimit < 0 {
		s.StickyLimit = 0
	}
	if s.ConcurrencyPerModel <= 0 {
		s.ConcurrencyPerModel = DefaultConcurrencyPerModel
	}
	s.ConcurrencyPerModel = min(s.ConcurrencyPerModel, 32)
	if s.QueueTimeout <= 0 {
		s.QueueTimeout = DefaultQueueTimeout
	}
	if s.QueueDepth <= 0 {
		s.QueueDepth = DefaultQueueDepth
	}
	s.QueueDepth = min(s.QueueDepth, 100)
	return s
}

// CooldownWait configures the cooldown-aware retry: when every target is
// held back by a short transient model lockout, wait it out and dispatch
// again instead of answering 429.
//
// The zero value means enabled with MaxWait 90 s, MaxAttempts 5 and Budget
// 300 s. Set Disabled to turn it off.
type CooldownWait struct {
	Disabled    bool
	MaxWait     time.Duration // longest single wait; clamped to 0..300 s
	MaxAttempts int           // waits per request; clamped to 0..10
	Budget      time.Duration // total waiting per request; clamped to MaxWait..300 s
}

// Normalize returns c with defaults filled in and values clamped.
func (c CooldownWait) Normalize() CooldownWait {
	if c.MaxWait <= 0 {
		c.MaxWait = 90 * time.Second
	}
	c.MaxWait = min(c.MaxWait, 300*time.Second)
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 5
	}
	c.MaxAttempts = min(c.MaxAttempts, 10)
	if c.Budget <= 0 {
		c.Budget = 300 * time.Second
	}
	c.Budget = min(max(c.Budget, c.MaxWait), 300*time.Second)
	return c
}

// Enabled reports whether waiting may happen.
func (c CooldownWait) Enabled() bool { return !c.Disabled && c.MaxWait > 0 && c.MaxAttempts > 0 }

// waitReasons are the lockout reasons worth waiting out; anything else
// (quota exhausted, auth, not found, unknown) is not.
func waitableReason(reason string) bool {
	switch strings.ToLower(reason) {
	case "rate_limit", "rate_limited", "rate_limit_exceeded", "transient", "overloaded", "server_error":
		return true
	}
	return false
}
