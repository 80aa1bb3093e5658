package queue

import (
	"errors"
	"time"

	"github.com/routeguard/routeguard/internal/config"
)

// Defaults and ranges of [Config].
const (
	defaultMaxQueueWait     = 15 * time.Second
	defaultExecutionTimeout = 600 * time.Second
	defaultMaxKeys          = 10_000
	defaultIdleTTL          = 10 * time.Minute

	maxRPM            = 1_000_000
	maxSpacing        = time.Hour
	maxConcurrency    = 10_000
	maxQueueDepth     = 100_000
	minQueueWait      = time.Millisecond
	maxQueueWait      = 30 * time.Second
	minExecution      = time.Millisecond
	maxExecution      = 24 * time.Hour
	maxKeysCap        = 1 << 28
	minIdleTTL        = time.Second
	maxIdleTTL        = 24 * time.Hour
	maxHint           = time.Hour
	overLimitSpacing  = 200 * time.Millisecond
	defaultRefillTime = time.Minute
)

// Environment variables read by [FromEnv].
const (
	envMaxQueueWait     = "RATE_LIMIT_MAX_WAIT_MS"
	envExecutionTimeout = "RATE_LIMIT_EXECUTION_MAX_WAIT_MS"
	envMaxQueueDepth    = "RATE_LIMIT_MAX_QUEUE_DEPTH"
)

// Config configures a [Queue]. The zero value is valid and means the
// defaults: no rate or concurrency limit, an unbounded queue, a 15 s wait
// budget, a 600 s execution budget, idle keys kept 10 min and at most
// 10 000 of them.
//
// The first six fields are the limits of every key. [Config.Overrides] may
// give a key limits of its own.
type Config struct {
	// RequestsPerMinute limits how many requests start per minute on a
	// key, as a token bucket holding up to a minute's worth. Default 0:
	// unlimited (a negative value too). Range 0..1 000 000.
	RequestsPerMinute int
	// MinSpacing is the minimum time between two starts on a key.
	// Default 0: none (a negative value too). Range 0..1 h.
	MinSpacing time.Duration
	// MaxConcurrency is the number of requests that may run at once on a
	// key. Default 0: unlimited (a negative value too). Range 0..10 000.
	MaxConcurrency int
	// MaxQueueDepth is the number of requests that may wait on a key; one
	// more is refused at once with RATE_LIMIT_QUEUE_FULL ([ErrQueueFull]).
	// Default 0: unbounded (a negative value too). Range 0..100 000.
	MaxQueueDepth int
	// MaxQueueWait bounds the wait for a slot (RATE_LIMIT_QUEUE_TIMEOUT,
	// [ErrQueueTimeout]). Default 15 s, used for 0 or a negative value.
	// Range 1 ms..30 s.
	MaxQueueWait time.Duration
	// ExecutionTimeout bounds a request once it has started
	// (RATE_LIMIT_EXECUTION_TIMEOUT, [ErrExecutionTimeout]); see
	// [Queue.Do] and [Queue.ExecutionContext]. Default 600 s, used for 0
	// or a negative value. Range 1 ms..24 h.
	ExecutionTimeout time.Duration

	// Overrides, when set, returns a key's own limits: the fields above
	// that are > 0 in the Config it returns replace the queue's, and the
	// zero ones fall through to them; its other fields are ignored. It is
	// called without the queue's lock held, on every acquisition and
	// check, so it should be fast, and must not allocate if the checks are
	// to stay allocation-free.
	Overrides func(key string) Config
	// MaxKeys caps the number of keys kept, which is never exceeded. A new
	// key at the cap first makes the sweep drop idle keys (those idle for
	// IdleTTL, then the least recently used one). Keys with requests
	// running, waiting or blocked are never dropped: when every kept key is
	// such a key, the new key is refused with RATE_LIMIT_QUEUE_FULL
	// ([ErrQueueFull], HTTP 429, with [Error.Keys] set) by Acquire and
	// AcquireMany (which fails open on it like on a full queue), TryAcquireAt
	// reports false, BlockAt and LearnAt change nothing, CheckAt and
	// StatusAt answer Refuse, and OnChange hears an EventQueueFull carrying
	// the refusal. Default 10 000, used for 0 or a negative value. Range
	// 1..2²⁸.
	MaxKeys int
	// IdleTTL is how long a key with nothing running, waiting or blocked
	// keeps its state (learned limits, spacing) before it may be dropped,
	// counted from its last use (a key released counts as used when the
	// next sweep sees it). Idle keys are swept when a new key is taken in
	// at the cap or IdleTTL/2 after the last sweep; a sweep costs only the
	// keys it drops.
	// Default 10 min, used for 0 or a negative value. Range 1 s..24 h.
	IdleTTL time.Duration
	// OnChange, when set, is called with every change that matters: a
	// refusal, a timed-out wait, a fail-open, limits learned or reset by
	// an upstream answer, a block, an unblock, a reset and the removal of
	// an idle key (see [Event]). It is called synchronously in the
	// goroutine that made the change, after the queue's lock is released,
	// with the events of one call in the order of its changes. It must not
	// block; it may call back into the Queue.
	OnChange func(Event)
}

// Normalize returns a copy of c with every default filled in and every
// field clamped into the range documented beside it. c is not modified.
func (c Config) Normalize() Config {
	c.setLimits(c.limits().normalize())
	c.MaxKeys = config.Int(c.MaxKeys, defaultMaxKeys, 1, maxKeysCap)
	c.IdleTTL = config.Dur(c.IdleTTL, defaultIdleTTL, minIdleTTL, maxIdleTTL)
	return c
}

// limits are the per-key fields of a Config, the form the queue works on.
type limits struct {
	RequestsPerMinute int
	MinSpacing        time.Duration
	MaxConcurrency    int
	MaxQueueDepth     int
	MaxQueueWait      time.Duration
	ExecutionTimeout  time.Duration
}

func (c Config) limits() limits {
	return limits{
		RequestsPerMinute: c.RequestsPerMinute, MinSpacing: c.MinSpacing,
		MaxConcurrency: c.MaxConcurrency, MaxQueueDepth: c.MaxQueueDepth,
		MaxQueueWait: c.MaxQueueWait, ExecutionTimeout: c.ExecutionTimeout,
	}
}

func (c *Config) setLimits(l limits) {
	c.RequestsPerMinute, c.MinSpacing = l.RequestsPerMinute, l.MinSpacing
	c.MaxConcurrency, c.MaxQueueDepth = l.MaxConcurrency, l.MaxQueueDepth
	c.MaxQueueWait, c.ExecutionTimeout = l.MaxQueueWait, l.ExecutionTimeout
}

// normalize returns s with defaults filled in and every field clamped.
func (s limits) normalize() limits {
	s.RequestsPerMinute = config.Int(s.RequestsPerMinute, 0, 1, maxRPM)
	s.MinSpacing = config.Dur(s.MinSpacing, 0, 1, maxSpacing)
	s.MaxConcurrency = config.Int(s.MaxConcurrency, 0, 1, maxConcurrency)
	s.MaxQueueDepth = config.Int(s.MaxQueueDepth, 0, 1, maxQueueDepth)
	s.MaxQueueWait = config.Dur(s.MaxQueueWait, defaultMaxQueueWait, minQueueWait, maxQueueWait)
	s.ExecutionTimeout = config.Dur(s.ExecutionTimeout, defaultExecutionTimeout, minExecution, maxExecution)
	return s
}

// merge returns s with every field of o that is > 0 taking precedence.
func (s limits) merge(o limits) limits {
	if o.RequestsPerMinute > 0 {
		s.RequestsPerMinute = o.RequestsPerMinute
	}
	if o.MinSpacing > 0 {
		s.MinSpacing = o.MinSpacing
	}
	if o.MaxConcurrency > 0 {
		s.MaxConcurrency = o.MaxConcurrency
	}
	if o.MaxQueueDepth > 0 {
		s.MaxQueueDepth = o.MaxQueueDepth
	}
	if o.MaxQueueWait > 0 {
		s.MaxQueueWait = o.MaxQueueWait
	}
	if o.ExecutionTimeout > 0 {
		s.ExecutionTimeout = o.ExecutionTimeout
	}
	return s
}

// errZeroBudget is the reason a budget of 0 ms is refused.
var errZeroBudget = errors.New("must be at least 1 ms")

// FromEnv returns a Config with the fields set by the environment, read
// through lookup (os.LookupEnv in production); variables that are unset or
// blank leave their field unset (its default), and a nil lookup reads
// nothing. The Config is not normalized: [New] does that, clamping values
// that are merely out of range. It reads
//
//	RATE_LIMIT_MAX_WAIT_MS            → MaxQueueWait (whole ms, ≥ 1)
//	RATE_LIMIT_EXECUTION_MAX_WAIT_MS  → ExecutionTimeout (whole ms, ≥ 1)
//	RATE_LIMIT_MAX_QUEUE_DEPTH        → MaxQueueDepth (whole number, ≥ 0)
//
// A value that is not a whole number, is negative, or is a zero budget
// leaves its field unset and is reported as an [*Error] with
// [CodeInvalidConfig] and the variable's name in Field (matching
// [ErrInvalidConfig]); several are joined with errors.Join. The environment
// sets only the defaults: to let stored settings win, merge them over the
// result.
func FromEnv(lookup func(string) (string, bool)) (Config, error) {
	var c Config
	if lookup == nil {
		return c, nil
	}
	env := config.Env{Lookup: lookup, Refuse: invalidConfig}
	c.MaxQueueWait = budgetFromEnv(&env, envMaxQueueWait)
	c.ExecutionTimeout = budgetFromEnv(&env, envExecutionTimeout)
	env.Int(envMaxQueueDepth, &c.MaxQueueDepth)
	return c, env.Err()
}

// budgetFromEnv reads a budget in whole milliseconds; 0 is refused.
func budgetFromEnv(env *config.Env, name string) time.Duration {
	var d *time.Duration
	env.MillisOpt(name, &d)
	if d == nil {
		return 0
	}
	if *d == 0 {
		v, _ := env.Raw(name)
		env.Refused(name, v, errZeroBudget)
	}
	return *d
}
