package watchdog

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/routeguard/routeguard/internal/config"
)

// Defaults and ranges of [Config].
const (
	defaultWarmup            = 30 * time.Second
	defaultWindow            = 30 * time.Second
	defaultMinBytesPerSecond = 1
	defaultMinBytes          = 1
	defaultMaxEventBytes     = 1 << 20
	defaultReadinessTimeout  = 120 * time.Second

	maxWarmup           = 10 * time.Minute
	minWindow           = time.Second
	maxWindow           = 10 * time.Minute
	minMaxEventBytes    = 1 << 10
	maxMaxEventBytes    = 64 << 20
	maxReadinessTimeout = time.Hour
)

// Environment variables read by [FromEnv].
const (
	envEnabled            = "STREAM_THROUGHPUT_WATCHDOG_ENABLED"
	envWarmupMs           = "STREAM_THROUGHPUT_WATCHDOG_WARMUP_MS"
	envWindowMs           = "STREAM_THROUGHPUT_WATCHDOG_WINDOW_MS"
	envMinBytesPerSecond  = "STREAM_THROUGHPUT_WATCHDOG_MIN_BYTES_PER_SECOND"
	envMinBytes           = "STREAM_THROUGHPUT_WATCHDOG_MIN_BYTES"
	envMaxEventBytes      = "STREAM_THROUGHPUT_WATCHDOG_MAX_EVENT_BYTES"
	envIdleTimeoutMs      = "STREAM_IDLE_TIMEOUT_MS"
	envRequestTimeoutMs   = "REQUEST_TIMEOUT_MS"
	envAttemptTimeoutMs   = "UPSTREAM_ATTEMPT_TIMEOUT_MS"
	envReadinessTimeoutMs = "STREAM_READINESS_TIMEOUT_MS"
)

// Config configures one streaming attempt: the throughput rule, three time
// guards and the parser's memory bound. The zero value means the defaults:
// only the readiness timeout (120 s) is on, and events are bounded at
// 1 MiB; the throughput rule, the idle timeout and the attempt deadline are
// off unless set.
//
// The throughput rule (Throughput, Warmup, Window, MinBytesPerSecond,
// MinBytes) judges an attempt only after Warmup plus one full Window have
// passed since its first chunk, only while no tool call or reasoning phase
// is in progress, and only on the arrival of a chunk. It aborts the attempt
// when the useful bytes of the last Window, divided by the window in
// seconds, fall below MinBytesPerSecond, unless the window holds some useful
// bytes but fewer than MinBytes (too little to measure).
type Config struct {
	// Throughput turns the throughput rule on (STREAM_THROUGHPUT_TOO_LOW).
	// Default false.
	Throughput bool
	// Warmup is the grace period after the first chunk before the window
	// starts to count. nil means the default, 30 s; a set value is used,
	// clamped to 0..10 min, and 0 (or a negative value) means no warm-up:
	// the first verdict may come one window after the first chunk. Write
	// Warmup: new(time.Duration(0)) to turn it off.
	Warmup *time.Duration
	// Window is the length of the sliding window. 0 means the default,
	// 30 s; other values are clamped to 1 s..10 min (a negative value
	// becomes 1 s).
	Window time.Duration
	// MinBytesPerSecond is the lowest acceptable useful rate. Default 1,
	// used for any value below 1 (0 included); no upper bound.
	MinBytesPerSecond int64
	// MinBytes is the smallest non-zero amount of useful bytes in the
	// window that is measurable. Default 1, used for any value below 1
	// (0 included); no upper bound.
	MinBytes int64

	// IdleTimeout aborts the attempt (STREAM_IDLE_TIMEOUT) when no chunk
	// at all (heartbeats included) arrives for this long. Default 0: off,
	// as is a negative value. No upper bound.
	IdleTimeout time.Duration
	// AttemptDeadline aborts the attempt (STREAM_ATTEMPT_DEADLINE) this
	// long after it started, whatever it produces. Default 0: off, as is a
	// negative value. No upper bound.
	AttemptDeadline time.Duration
	// ReadinessTimeout aborts the attempt with STREAM_READINESS_TIMEOUT
	// (HTTP 504) when it has produced no event other than a heartbeat
	// this long after it started (Body: the WrapAt time; Observer: StartAt,
	// else the first chunk). Heartbeats are comment lines (":…"), blank
	// lines and events whose name or JSON "type" is "ping" or
	// "heartbeat"; any other complete event with non-blank data ends the
	// wait, metadata such as a role-only first delta or a usage event
	// included. Bytes that never complete an event (no blank line after
	// them, however many) do not count, nor does an event longer than
	// MaxEventBytes.
	//
	// nil means the default, 120 s. A set value is used, clamped to
	// 0..1 h, and 0 (or a negative value) turns the guard off. Set it per
	// target, e.g. ReadinessTimeout: new(115 * time.Second).
	ReadinessTimeout *time.Duration
	// MaxEventBytes bounds the raw size of one SSE event; a longer event is
	// skipped (counted as zero useful bytes) without growing the buffer.
	// 0 means the default, 1 MiB; other values are clamped to
	// 1 KiB..64 MiB (a negative value becomes 1 KiB).
	MaxEventBytes int
	// HoldHeartbeats makes a [Body] keep back the bytes that precede the
	// first event carrying data other than a ping (comments, pings, blank
	// lines), so that an attempt that never gets past heartbeats can be
	// aborted before anything reaches the reader. The held bytes are
	// bounded by MaxEventBytes; beyond that they are released. Default off.
	HoldHeartbeats bool
}

// settings are a Config's effective values, the form an Observer works on:
// every default filled in, every value in range.
type settings struct {
	throughput        bool
	warmup, window    time.Duration // warmup 0: none
	minBytesPerSecond int64
	minBytes          int64
	idle, deadline    time.Duration // 0: off
	readiness         time.Duration // 0: off
	maxEventBytes     int
	hold              bool
}

func (c Config) settings() settings {
	s := settings{
		throughput:        c.Throughput,
		warmup:            config.DurOpt(c.Warmup, defaultWarmup, 0, maxWarmup),
		window:            defaultWindow,
		minBytesPerSecond: max(c.MinBytesPerSecond, defaultMinBytesPerSecond),
		minBytes:          max(c.MinBytes, defaultMinBytes),
		idle:              max(c.IdleTimeout, 0),
		deadline:          max(c.AttemptDeadline, 0),
		readiness:         config.DurOpt(c.ReadinessTimeout, defaultReadinessTimeout, 0, maxReadinessTimeout),
		maxEventBytes:     defaultMaxEventBytes,
		hold:              c.HoldHeartbeats,
	}
	if c.Window != 0 {
		s.window = min(max(c.Window, minWindow), maxWindow)
	}
	if c.MaxEventBytes != 0 {
		s.maxEventBytes = min(max(c.MaxEventBytes, minMaxEventBytes), maxMaxEventBytes)
	}
	return s
}

// config returns s as a normalized Config.
func (s settings) config() Config {
	return Config{
		Throughput: s.throughput, Warmup: new(s.warmup), Window: s.window,
		MinBytesPerSecond: s.minBytesPerSecond, MinBytes: s.minBytes,
		IdleTimeout: s.idle, AttemptDeadline: s.deadline, ReadinessTimeout: new(s.readiness),
		MaxEventBytes: s.maxEventBytes, HoldHeartbeats: s.hold,
	}
}

// Normalize returns a copy of c with every default filled in and every field
// clamped into the range documented beside it: Warmup and ReadinessTimeout
// are set, to pointers of the copy's own, and negative guards become 0
// (off). c is not modified. Normalize is idempotent.
func (c Config) Normalize() Config { return c.settings().config() }

// Validate reports whether c is acceptable as an update from an operator, as
// opposed to Normalize, which repairs any value. It rejects a set Warmup
// outside 0..10 min, a non-zero Window outside 1 s..10 min and negative rate
// fields; zero fields mean their defaults and are accepted. Each problem is
// an [*Error] with [CodeInvalidConfig] and the field's name in Field
// (matching [ErrInvalidConfig]); several are joined with errors.Join.
func (c Config) Validate() error {
	var errs []error
	refuse := func(field string, value any, reason string) {
		errs = append(errs, invalidConfig(field, fmt.Sprint(value), errors.New(reason)))
	}
	if p := c.Warmup; p != nil && (*p < 0 || *p > maxWarmup) {
		refuse("Warmup", *p, fmt.Sprintf("outside 0s..%v", maxWarmup))
	}
	if c.Window != 0 && (c.Window < minWindow || c.Window > maxWindow) {
		refuse("Window", c.Window, fmt.Sprintf("outside %v..%v", minWindow, maxWindow))
	}
	if c.MinBytesPerSecond < 0 {
		refuse("MinBytesPerSecond", c.MinBytesPerSecond, "below 1")
	}
	if c.MinBytes < 0 {
		refuse("MinBytes", c.MinBytes, "below 1")
	}
	return errors.Join(errs...)
}

// FromEnv returns a Config with the fields set by the environment, read
// through lookup (os.LookupEnv in production); variables that are unset or
// blank leave their field unset (its default), and a nil lookup reads
// nothing. The Config is not normalized: [NewObserver] and [WrapAt] do that.
// It reads
//
//	STREAM_THROUGHPUT_WATCHDOG_ENABLED               → Throughput (a switch: 1/true/yes/on, 0/false/no/off)
//	STREAM_THROUGHPUT_WATCHDOG_WARMUP_MS             → Warmup, 0..600000; 0 means no warm-up
//	STREAM_THROUGHPUT_WATCHDOG_WINDOW_MS             → Window, 1000..600000
//	STREAM_THROUGHPUT_WATCHDOG_MIN_BYTES_PER_SECOND  → MinBytesPerSecond, ≥ 1
//	STREAM_THROUGHPUT_WATCHDOG_MIN_BYTES             → MinBytes, ≥ 1
//	STREAM_THROUGHPUT_WATCHDOG_MAX_EVENT_BYTES       → MaxEventBytes, 1024..67108864
//	STREAM_IDLE_TIMEOUT_MS                           → IdleTimeout, 0 = off; when unset, REQUEST_TIMEOUT_MS
//	UPSTREAM_ATTEMPT_TIMEOUT_MS                      → AttemptDeadline, 0 = off
//	STREAM_READINESS_TIMEOUT_MS                      → ReadinessTimeout, 0..3600000; 0 = off
//
// Durations are whole milliseconds and counts whole numbers. A value that
// does not parse or is out of its range leaves its field unset and is
// reported as an [*Error] with [CodeInvalidConfig] and the variable's name
// in Field (matching [ErrInvalidConfig]); several are joined with
// errors.Join. The Config is usable either way.
func FromEnv(lookup func(string) (string, bool)) (Config, error) {
	var c Config
	if lookup == nil {
		return c, nil
	}
	env := config.Env{Lookup: lookup, Refuse: invalidConfig}
	env.Switch(envEnabled, &c.Throughput)
	if d, ok := millisIn(&env, envWarmupMs, 0, maxWarmup); ok {
		c.Warmup = new(d)
	}
	c.Window, _ = millisIn(&env, envWindowMs, minWindow, maxWindow)
	c.MinBytesPerSecond = int64(intIn(&env, envMinBytesPerSecond, 1, 1e9))
	c.MinBytes = int64(intIn(&env, envMinBytes, 1, 1e9))
	c.MaxEventBytes = intIn(&env, envMaxEventBytes, minMaxEventBytes, maxMaxEventBytes)
	const forever = 1<<63 - 1
	if _, set := env.Raw(envIdleTimeoutMs); set {
		c.IdleTimeout, _ = millisIn(&env, envIdleTimeoutMs, 0, forever)
	} else {
		c.IdleTimeout, _ = millisIn(&env, envRequestTimeoutMs, 0, forever)
	}
	c.AttemptDeadline, _ = millisIn(&env, envAttemptTimeoutMs, 0, forever)
	if d, ok := millisIn(&env, envReadinessTimeoutMs, 0, maxReadinessTimeout); ok {
		c.ReadinessTimeout = new(d)
	}
	return c, env.Err()
}

// millisIn reads a whole number of milliseconds in lo..hi, refusing any
// other value.
func millisIn(env *config.Env, name string, lo, hi time.Duration) (time.Duration, bool) {
	var d *time.Duration
	env.MillisOpt(name, &d)
	if d == nil {
		return 0, false
	}
	if *d < lo || *d > hi {
		v, _ := env.Raw(name)
		env.Refused(name, v, fmt.Errorf("outside %d..%d ms", lo.Milliseconds(), hi.Milliseconds()))
		return 0, false
	}
	return *d, true
}

// intIn reads a whole number in lo..hi, refusing any other value; 0 when
// unset or refused.
func intIn(env *config.Env, name string, lo, hi int) int {
	var n *int
	env.IntOpt(name, &n)
	if n == nil {
		return 0
	}
	if *n < lo || *n > hi {
		v, _ := env.Raw(name)
		env.Refused(name, v, errors.New("outside "+strconv.Itoa(lo)+".."+strconv.Itoa(hi)))
		return 0
	}
	return *n
}
