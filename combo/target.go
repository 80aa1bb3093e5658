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

	// ReadinessTimeout overrides the router's stream-readiness timeout
	// (Config.Watchdog.ReadinessTimeout) for this target: a stream that
	// produces no event other than a heartbeat within it fails with 504
	// STREAM_READINESS_TIMEOUT and the request moves on to the next target.
	// nil keeps the router's setting; 0 turns the check off for this target.
	ReadinessTimeout *time.Duration
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
// on each field; [Settings.Normalize] clamps out-of-range values. A pointer
// field is one where 0 is a real value: nil means its default, a non-nil
// value is used as given (clamped into its range). Write, for example,
// MaxRetries: new(0) to turn the same-target retry off.
type Settings struct {
	// MaxAttempts is the shared attempt budget of one request, retries and
	// fallbacks together. Default 30, clamped to 1..200.
	MaxAttempts int
	// TargetTimeout bounds one attempt up to its commit: the whole of a
	// plain answer, body included, and a stream until its first useful
	// output. Default 120 s (for 0 or a negative value); an attempt never
	// runs past the request's deadline (see RequestTimeout), so a hung
	// upstream costs at most TargetTimeout per attempt and RequestTimeout
	// in all, whatever the cooldown-wait settings.
	TargetTimeout time.Duration
	// RequestTimeout bounds the whole request: every attempt, same-target
	// retry and cooldown wait, and the reading of the answer's body, a
	// committed stream included. Default 10 min (for 0 or a negative
	// value); clamped to 1 s..24 h. It cannot be turned off; raise it for
	// streams that run longer. It is measured on the router's clock
	// (Config.Now) and enforced by timers of the remaining length. When it
	// passes before an answer, the request ends with a 504 [*Error]
	// matching [ErrRequestTimeout]; when it passes during a committed
	// stream, the body's Read returns ErrRequestTimeout.
	RequestTimeout time.Duration
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
	// MaxRetries is how many times a target is sent the request again after
	// a transport failure before any response (connection refused or reset,
	// a TLS or response-header timeout), before the router moves on. An HTTP
	// status is never retried on the same target. nil means 1; 0 turns the
	// retry off; clamped to 0..5. Each retry counts against MaxAttempts.
	MaxRetries *int
	// RetryDelay is the pause before a same-target retry. nil means 2 s; 0
	// retries at once; clamped to 0..60 s. The pause ends early when the
	// caller gives up, and no retry starts when the caller's deadline would
	// pass during the pause.
	RetryDelay *time.Duration
	// CooldownWait waits out a short transient lockout instead of failing.
	CooldownWait CooldownWait
	// StreamRecovery is the opt-in recovery of streamed answers: early
	// recovery before commit and mid-stream continuation after it. The
	// zero value turns both off.
	StreamRecovery StreamRecovery
}

// Defaults of [Settings].
const (
	defaultMaxAttempts         = 30
	defaultTargetTimeout       = 120 * time.Second
	defaultRequestTimeout      = 10 * time.Minute
	defaultConcurrencyPerModel = 3
	defaultQueueTimeout        = 30 * time.Second
	defaultQueueDepth          = 20
	defaultMaxRetries          = 1
	defaultRetryDelay          = 2 * time.Second
)

// Ranges of the pointer settings.
const (
	maxRetriesLimit = 5
	maxRetryDelay   = 60 * time.Second
)

// Range of RequestTimeout.
const (
	minRequestTimeout = time.Second
	maxRequestTimeout = 24 * time.Hour
)

// Normalize returns s with defaults filled in and values clamped to their
// ranges. Pointer fields come back non-nil, pointing to fresh values; the
// caller's values are never modified.
func (s Settings) Normalize() Settings {
	n := s.norm()
	n.MaxRetries = new(n.maxRetries())
	n.RetryDelay = new(n.retryDelay())
	n.CooldownWait = n.CooldownWait.Normalize()
	n.StreamRecovery = n.StreamRecovery.Normalize()
	return n
}

// norm is Normalize without filling the pointer fields, so that it does not
// allocate; the router reads those through maxRetries, retryDelay and the
// CooldownWait accessors.
func (s Settings) norm() Settings {
	if s.MaxAttempts <= 0 {
		s.MaxAttempts = defaultMaxAttempts
	}
	s.MaxAttempts = min(s.MaxAttempts, 200)
	s.CooldownWait = s.CooldownWait.norm()
	if s.TargetTimeout <= 0 {
		s.TargetTimeout = defaultTargetTimeout
	}
	s.RequestTimeout = s.requestTimeout()
	if s.StickyLimit < 0 {
		s.StickyLimit = 0
	}
	if s.ConcurrencyPerModel <= 0 {
		s.ConcurrencyPerModel = defaultConcurrencyPerModel
	}
	s.ConcurrencyPerModel = min(s.ConcurrencyPerModel, 32)
	if s.QueueTimeout <= 0 {
		s.QueueTimeout = defaultQueueTimeout
	}
	if s.QueueDepth <= 0 {
		s.QueueDepth = defaultQueueDepth
	}
	s.QueueDepth = min(s.QueueDepth, 100)
	return s
}

// requestTimeout is the effective RequestTimeout.
func (s Settings) requestTimeout() time.Duration {
	if s.RequestTimeout <= 0 {
		return defaultRequestTimeout
	}
	return min(max(s.RequestTimeout, minRequestTimeout), maxRequestTimeout)
}

// maxRetries is the effective MaxRetries.
func (s Settings) maxRetries() int {
	if s.MaxRetries == nil {
		return defaultMaxRetries
	}
	return min(max(*s.MaxRetries, 0), maxRetriesLimit)
}

// retryDelay is the effective RetryDelay.
func (s Settings) retryDelay() time.Duration {
	if s.RetryDelay == nil {
		return defaultRetryDelay
	}
	return min(max(*s.RetryDelay, 0), maxRetryDelay)
}

// CooldownWait configures the cooldown-aware retry: when every target is
// held back by a short transient model lockout, wait it out and dispatch
// again instead of answering.
//
// The zero value means enabled with MaxWait 90 s, MaxAttempts 5 and Budget
// 300 s. Set Disabled, MaxWait: new(time.Duration(0)) or MaxAttempts: new(0)
// to turn it off.
type CooldownWait struct {
	Disabled bool
	// MaxWait is the longest single wait. nil means 90 s; 0 turns waiting
	// off; clamped to 0..300 s.
	MaxWait *time.Duration
	// MaxAttempts is how many waits one request may make. nil means 5; 0
	// turns waiting off; clamped to 0..10.
	MaxAttempts *int
	// Budget is the total waiting of one request. 0 means 300 s; clamped to
	// MaxWait..300 s.
	Budget time.Duration
}

// Defaults of [CooldownWait].
const (
	defaultCooldownMaxWait     = 90 * time.Second
	defaultCooldownMaxAttempts = 5
	defaultCooldownBudget      = 300 * time.Second
)

// Normalize returns c with defaults filled in and values clamped. Pointer
// fields come back non-nil, pointing to fresh values. Disabled is set when
// MaxWait or MaxAttempts is 0.
func (c CooldownWait) Normalize() CooldownWait {
	n := c.norm()
	n.MaxWait = new(n.maxWait())
	n.MaxAttempts = new(n.maxAttempts())
	return n
}

// norm is Normalize without filling the pointer fields; it does not
// allocate.
func (c CooldownWait) norm() CooldownWait {
	if c.maxWait() == 0 || c.maxAttempts() == 0 {
		c.Disabled = true
	}
	if c.Budget <= 0 {
		c.Budget = defaultCooldownBudget
	}
	c.Budget = min(max(c.Budget, c.maxWait()), 300*time.Second)
	return c
}

// maxWait is the effective MaxWait.
func (c CooldownWait) maxWait() time.Duration {
	if c.MaxWait == nil {
		return defaultCooldownMaxWait
	}
	return min(max(*c.MaxWait, 0), 300*time.Second)
}

// maxAttempts is the effective MaxAttempts.
func (c CooldownWait) maxAttempts() int {
	if c.MaxAttempts == nil {
		return defaultCooldownMaxAttempts
	}
	return min(max(*c.MaxAttempts, 0), 10)
}

// Enabled reports whether waiting may happen: not Disabled, and MaxWait and
// MaxAttempts above 0.
func (c CooldownWait) Enabled() bool {
	return !c.Disabled && c.maxWait() > 0 && c.maxAttempts() > 0
}

// waitReasons are the lockout reasons worth waiting out; anything else
// (quota exhausted, auth, not found, unknown) is not.
func waitableReason(reason string) bool {
	switch strings.ToLower(reason) {
	case "rate_limit", "rate_limited", "rate_limit_exceeded", "transient", "overloaded", "server_error":
		return true
	}
	return false
}
