package queue

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// Defaults and ranges of [Settings] and [Config].
const (
	// DefaultMaxQueueWait is the default wait budget for a slot.
	DefaultMaxQueueWait = 15 * time.Second
	// DefaultExecutionTimeout is the default execution budget.
	DefaultExecutionTimeout = 600 * time.Second
	// DefaultMaxKeys is the default cap on the number of idle keys kept.
	DefaultMaxKeys = 10_000
	// DefaultIdleTTL is how long a key with nothing running, waiting or
	// blocked is kept by default.
	DefaultIdleTTL = 10 * time.Minute

	maxRPM            = 1_000_000
	maxSpacing        = time.Hour
	maxConcurrency    = 10_000
	maxQueueDepth     = 100_000
	minQueueWait      = time.Millisecond
	maxQueueWait      = 30 * time.Second
	minExecution      = time.Millisecond
	maxExecution      = 24 * time.Hour
	maxHint           = time.Hour
	overLimitSpacing  = 200 * time.Millisecond
	defaultRefillTime = time.Minute
)

// Environment variable names read by [FromEnv].
const (
	EnvMaxQueueWait     = "RATE_LIMIT_MAX_WAIT_MS"
	EnvExecutionTimeout = "RATE_LIMIT_EXECUTION_MAX_WAIT_MS"
	EnvMaxQueueDepth    = "RATE_LIMIT_MAX_QUEUE_DEPTH"
)

// Settings are the limits of one key. The zero value means the defaults: no
// rate or concurrency limit, an unbounded queue, a 15 s wait budget and a
// 600 s execution budget.
//
// Used as a per-key override (Config.Overrides), a field > 0 replaces the
// default and a zero field falls through to it.
type Settings struct {
	// RequestsPerMinute limits how many requests start per minute, as a
	// token bucket holding up to a minute's worth. 0 means unlimited;
	// Normalize clamps to 0..1 000 000.
	RequestsPerMinute int
	// MinSpacing is the minimum time between two starts. 0 means none;
	// Normalize clamps to 0..1 h.
	MinSpacing time.Duration
	// MaxConcurrency is the number of requests that may run at once.
	// 0 means unlimited; Normalize clamps to 0..10 000.
	MaxConcurrency int
	// MaxQueueDepth is the number of requests that may wait; one more is
	// refused at once with ErrQueueFull. 0 means unbounded; Normalize
	// clamps to 0..100 000.
	MaxQueueDepth int
	// MaxQueueWait bounds the wait for a slot (ErrQueueTimeout).
	// ≤ 0 means 15 s; Normalize clamps to 1 ms..30 s.
	MaxQueueWait time.Duration
	// ExecutionTimeout bounds a request once it has started
	// (ErrExecutionTimeout). ≤ 0 means 600 s; Normalize clamps to
	// 1 ms..24 h.
	ExecutionTimeout time.Duration
}

// Normalize returns s with defaults filled in and every field clamped to its
// documented range.
func (s Settings) Normalize() Settings {
	s.RequestsPerMinute = clamp(s.RequestsPerMinute, 0, maxRPM)
	s.MinSpacing = clamp(s.MinSpacing, 0, maxSpacing)
	s.MaxConcurrency = clamp(s.MaxConcurrency, 0, maxConcurrency)
	s.MaxQueueDepth = clamp(s.MaxQueueDepth, 0, maxQueueDepth)
	if s.MaxQueueWait <= 0 {
		s.MaxQueueWait = DefaultMaxQueueWait
	}
	s.MaxQueueWait = clamp(s.MaxQueueWait, minQueueWait, maxQueueWait)
	if s.ExecutionTimeout <= 0 {
		s.ExecutionTimeout = DefaultExecutionTimeout
	}
	s.ExecutionTimeout = clamp(s.ExecutionTimeout, minExecution, maxExecution)
	return s
}

// merge returns s with every field of o that is > 0 taking precedence.
func (s Settings) merge(o Settings) Settings {
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

// FromEnv returns base with the environment overrides read through lookup
// (for example os.LookupEnv): RATE_LIMIT_MAX_WAIT_MS and
// RATE_LIMIT_EXECUTION_MAX_WAIT_MS (milliseconds, > 0) and
// RATE_LIMIT_MAX_QUEUE_DEPTH (≥ 0). A value that is not a number, or is out
// of its domain, keeps base's value and is reported in the joined error as
// a [*SettingError] (matching [ErrInvalidSetting]); values that are merely
// out of range are clamped. The result is normalized.
func FromEnv(base Settings, lookup func(string) (string, bool)) (Settings, error) {
	var errs []error
	if lookup == nil {
		return base.Normalize(), nil
	}
	if ms, ok, err := envInt(lookup, EnvMaxQueueWait, 1); err != nil {
		errs = append(errs, err)
	} else if ok {
		base.MaxQueueWait = msDuration(ms)
	}
	if ms, ok, err := envInt(lookup, EnvExecutionTimeout, 1); err != nil {
		errs = append(errs, err)
	} else if ok {
		base.ExecutionTimeout = msDuration(ms)
	}
	if n, ok, err := envInt(lookup, EnvMaxQueueDepth, 0); err != nil {
		errs = append(errs, err)
	} else if ok {
		base.MaxQueueDepth = int(min(n, maxQueueDepth))
	}
	return base.Normalize(), errors.Join(errs...)
}

// ErrInvalidSetting is matched (with errors.Is) by every [*SettingError].
var ErrInvalidSetting = errors.New("queue: invalid setting")

// SettingError reports an environment value that [FromEnv] could not use;
// the setting keeps its previous value.
type SettingError struct {
	// Name is the environment variable, Value its raw value.
	Name, Value string
	// Reason says what is wrong, e.g. "is not an integer".
	Reason string
}

// Error names the variable, its quoted value and the reason.
func (e *SettingError) Error() string {
	return "queue: " + e.Name + "=" + strconv.Quote(e.Value) + " " + e.Reason
}

// Is reports whether target is [ErrInvalidSetting].
func (e *SettingError) Is(target error) bool { return target == ErrInvalidSetting }

func envInt(lookup func(string) (string, bool), name string, lo int64) (int64, bool, error) {
	v, ok := lookup(name)
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) && !strings.HasPrefix(strings.TrimSpace(v), "-") {
			return math.MaxInt64, true, nil // too large: clamped later
		}
		return 0, false, &SettingError{Name: name, Value: v, Reason: "is not an integer"}
	}
	if n < lo {
		return 0, false, &SettingError{Name: name, Value: v, Reason: "is below " + strconv.FormatInt(lo, 10)}
	}
	return n, true, nil
}

func msDuration(ms int64) time.Duration {
	const maxMS = math.MaxInt64 / int64(time.Millisecond)
	return time.Duration(min(ms, maxMS)) * time.Millisecond
}

func clamp[T int | time.Duration](v, lo, hi T) T {
	return min(max(v, lo), hi)
}

// Config configures a [Queue]. The zero value is valid.
type Config struct {
	// Defaults are the settings of every key; zero fields take the
	// package defaults (see Settings).
	Defaults Settings
	// Overrides, when set, returns a key's own settings: its fields > 0
	// replace Defaults, zero fields fall through. It is called without
	// the queue's lock held, on every acquisition and check, so it should
	// be fast and must not allocate if the checks are to stay
	// allocation-free.
	Overrides func(key string) Settings
	// MaxKeys caps the number of keys kept; when a new key would exceed
	// it, idle keys are dropped first. Keys with requests running,
	// waiting or blocked are never dropped, so they may exceed the cap.
	// ≤ 0 means 10 000.
	MaxKeys int
	// IdleTTL is how long a key with nothing running, waiting or blocked
	// keeps its state (learned limits, spacing) before it may be dropped.
	// ≤ 0 means 10 min.
	IdleTTL time.Duration
	// OnEvent, when set, is called after state changes that matter
	// (refusals, timeouts, fail-open, learning, blocks, resets), outside
	// the queue's lock.
	OnEvent func(Event)
}

// EventKind says what an [Event] reports.
type EventKind int

// Event kinds.
const (
	// EventQueueFull: a request was refused because the queue was full.
	EventQueueFull EventKind = iota + 1
	// EventQueueTimeout: a waiter ran out of its wait budget.
	EventQueueTimeout
	// EventFailOpen: AcquireMany proceeded without slots (Event.Err says why).
	EventFailOpen
	// EventLimitsLearned: upstream headers changed a key's limits.
	EventLimitsLearned
	// EventLimiterReset: a 429 gave the key a fresh limiter.
	EventLimiterReset
	// EventBlocked: a key was blocked until Event.Until.
	EventBlocked
	// EventUnblocked: a key's block was lifted by Unblock.
	EventUnblocked
	// EventReset: a key was reset and its waiters rejected.
	EventReset
)

var eventNames = [...]string{"", "queue_full", "queue_timeout", "fail_open", "limits_learned", "limiter_reset", "blocked", "unblocked", "reset"}

// String returns the event kind in snake case, e.g. "queue_full".
func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "event(" + strconv.Itoa(int(k)) + ")"
}

// Event is a state change reported to Config.OnEvent.
type Event struct {
	Kind EventKind
	// Key is the key concerned; for several keys they are joined by commas.
	Key string
	// At is when it happened.
	At time.Time
	// Until is the end of a block (EventBlocked).
	Until time.Time
	// Err is the refusal or timeout, when there is one.
	Err error
}
