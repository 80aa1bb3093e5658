package watchdog

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Defaults and bounds of [Settings] and [Config].
const (
	// DefaultWarmup is the warm-up used when Settings.Warmup is zero.
	DefaultWarmup = 30 * time.Second
	// DefaultWindow is the sliding window used when Settings.Window is zero.
	DefaultWindow = 30 * time.Second
	// DefaultMinBytesPerSecond is the minimum useful rate used when
	// Settings.MinBytesPerSecond is zero.
	DefaultMinBytesPerSecond = 1
	// DefaultMinBytes is the measurable minimum used when Settings.MinBytes
	// is zero.
	DefaultMinBytes = 1
	// DefaultMaxEventBytes is the event size limit used when
	// Config.MaxEventBytes is zero.
	DefaultMaxEventBytes = 1 << 20

	// MaxWarmup is the largest warm-up Normalize keeps.
	MaxWarmup = 10 * time.Minute
	// MinWindow is the smallest window Normalize keeps.
	MinWindow = time.Second
	// MaxWindow is the largest window Normalize keeps.
	MaxWindow = 10 * time.Minute
	// MinMaxEventBytes is the smallest event size limit Normalize keeps.
	MinMaxEventBytes = 1 << 10
	// MaxMaxEventBytes is the largest event size limit Normalize keeps.
	MaxMaxEventBytes = 64 << 20
)

// NoWarmup, set as Settings.Warmup, turns the warm-up off: the first verdict
// may come one window after the first chunk. Normalize turns every negative
// warm-up into NoWarmup.
const NoWarmup time.Duration = -1

// Environment variable names read by [FromEnv].
const (
	EnvEnabled           = "STREAM_THROUGHPUT_WATCHDOG_ENABLED"
	EnvWarmupMs          = "STREAM_THROUGHPUT_WATCHDOG_WARMUP_MS"
	EnvWindowMs          = "STREAM_THROUGHPUT_WATCHDOG_WINDOW_MS"
	EnvMinBytesPerSecond = "STREAM_THROUGHPUT_WATCHDOG_MIN_BYTES_PER_SECOND"
	EnvMinBytes          = "STREAM_THROUGHPUT_WATCHDOG_MIN_BYTES"
	EnvMaxEventBytes     = "STREAM_THROUGHPUT_WATCHDOG_MAX_EVENT_BYTES"
	EnvIdleTimeoutMs     = "STREAM_IDLE_TIMEOUT_MS"
	EnvRequestTimeoutMs  = "REQUEST_TIMEOUT_MS"
	EnvAttemptTimeoutMs  = "UPSTREAM_ATTEMPT_TIMEOUT_MS"
)

// Settings configures the throughput rule. The zero value is the default:
// disabled, 30 s warm-up, 30 s window, 1 useful byte per second, 1 byte
// measurable minimum.
//
// Once enabled, an attempt is judged only after Warmup plus one full Window
// have passed since its first chunk, only while no tool call or reasoning
// phase is in progress, and only on the arrival of a chunk. It is aborted
// when the useful bytes of the last Window, divided by the window in
// seconds, fall below MinBytesPerSecond, unless the window holds some useful
// bytes but fewer than MinBytes (too little to measure).
type Settings struct {
	// Enabled turns the throughput rule on. Default false.
	Enabled bool
	// Warmup is the grace period after the first chunk before the window
	// starts to count. Zero means DefaultWarmup (30 s); NoWarmup (or any
	// negative value) means none. Normalize caps it at MaxWarmup (10 min).
	Warmup time.Duration
	// Window is the length of the sliding window. Zero means DefaultWindow
	// (30 s). Normalize clamps it to [MinWindow, MaxWindow] (1 s to 10 min).
	Window time.Duration
	// MinBytesPerSecond is the lowest acceptable useful rate. Values below 1
	// (zero included) mean DefaultMinBytesPerSecond (1).
	MinBytesPerSecond int64
	// MinBytes is the smallest non-zero amount of useful bytes in the window
	// that is measurable. Values below 1 (zero included) mean
	// DefaultMinBytes (1).
	MinBytes int64
}

// Normalize returns s with defaults filled in and every field clamped to its
// range (see the field docs). It is idempotent.
func (s Settings) Normalize() Settings {
	switch {
	case s.Warmup < 0:
		s.Warmup = NoWarmup
	case s.Warmup == 0:
		s.Warmup = DefaultWarmup
	case s.Warmup > MaxWarmup:
		s.Warmup = MaxWarmup
	}
	switch {
	case s.Window == 0:
		s.Window = DefaultWindow
	case s.Window < MinWindow:
		s.Window = MinWindow
	case s.Window > MaxWindow:
		s.Window = MaxWindow
	}
	if s.MinBytesPerSecond < 1 {
		s.MinBytesPerSecond = DefaultMinBytesPerSecond
	}
	if s.MinBytes < 1 {
		s.MinBytes = DefaultMinBytes
	}
	return s
}

// EffectiveWarmup returns the warm-up that applies after normalisation: zero
// for NoWarmup.
func (s Settings) EffectiveWarmup() time.Duration {
	w := s.Normalize().Warmup
	if w < 0 {
		return 0
	}
	return w
}

// Validate reports whether s is acceptable as an update from an operator, as
// opposed to Normalize, which repairs any value. It rejects a warm-up outside
// 0..10 min (NoWarmup is accepted), a window outside 1 s..10 min and negative
// rate fields; zero fields mean their defaults and are accepted. The error
// matches [ErrInvalidSettings].
func (s Settings) Validate() error {
	var errs []error
	if s.Warmup < NoWarmup || s.Warmup > MaxWarmup {
		errs = append(errs, fmt.Errorf("warmup %v outside 0..%v", s.Warmup, MaxWarmup))
	}
	if s.Window != 0 && (s.Window < MinWindow || s.Window > MaxWindow) {
		errs = append(errs, fmt.Errorf("window %v outside %v..%v", s.Window, MinWindow, MaxWindow))
	}
	if s.MinBytesPerSecond < 0 {
		errs = append(errs, fmt.Errorf("min bytes per second %d below 1", s.MinBytesPerSecond))
	}
	if s.MinBytes < 0 {
		errs = append(errs, fmt.Errorf("min bytes %d below 1", s.MinBytes))
	}
	if len(errs) == 0 {
		return nil
	}
	return &SettingsError{Errs: errs}
}

// Config configures one streaming attempt: the throughput rule plus two
// time guards that are off unless set, and the parser's memory bound. The
// zero value only bounds events at 1 MiB and otherwise never aborts.
type Config struct {
	// Throughput is the throughput rule (off by default).
	Throughput Settings
	// IdleTimeout aborts the attempt when no chunk at all (heartbeats
	// included) arrives for this long. Zero or negative: off.
	IdleTimeout time.Duration
	// AttemptDeadline aborts the attempt this long after it started,
	// whatever it produces. Zero or negative: off.
	AttemptDeadline time.Duration
	// MaxEventBytes bounds the raw size of one SSE event; a longer event is
	// skipped (counted as zero useful bytes) without growing the buffer.
	// Zero means DefaultMaxEventBytes (1 MiB). Normalize clamps it to
	// [MinMaxEventBytes, MaxMaxEventBytes] (1 KiB to 64 MiB).
	MaxEventBytes int
	// HoldHeartbeats makes a [Body] keep back the bytes that precede the
	// first event carrying data other than a ping (comments, pings, blank
	// lines), so that an attempt that never gets past heartbeats can be
	// aborted before anything reaches the reader. The held bytes are
	// bounded by MaxEventBytes; beyond that they are released. Default off.
	HoldHeartbeats bool
}

// Normalize returns c with every field normalised: Throughput through
// [Settings.Normalize], negative guards turned into zero (off) and
// MaxEventBytes defaulted and clamped. It is idempotent.
func (c Config) Normalize() Config {
	c.Throughput = c.Throughput.Normalize()
	c.IdleTimeout = max(c.IdleTimeout, 0)
	c.AttemptDeadline = max(c.AttemptDeadline, 0)
	switch {
	case c.MaxEventBytes == 0:
		c.MaxEventBytes = DefaultMaxEventBytes
	case c.MaxEventBytes < MinMaxEventBytes:
		c.MaxEventBytes = MinMaxEventBytes
	case c.MaxEventBytes > MaxMaxEventBytes:
		c.MaxEventBytes = MaxMaxEventBytes
	}
	return c
}

// ErrInvalidSettings is matched by every error of [Settings.Validate] and
// [FromEnv].
var ErrInvalidSettings = errors.New("watchdog: invalid settings")

// SettingsError lists the problems found in settings or in the environment.
type SettingsError struct {
	Errs []error
}

// Error joins the problems in one line.
func (e *SettingsError) Error() string {
	var b strings.Builder
	b.WriteString("watchdog: invalid settings: ")
	for i, err := range e.Errs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

// Is matches [ErrInvalidSettings].
func (e *SettingsError) Is(target error) bool { return target == ErrInvalidSettings }

// Unwrap returns the individual problems.
func (e *SettingsError) Unwrap() []error { return e.Errs }

// FromEnv builds a Config from environment variables read through lookup
// (for example [os.LookupEnv]); unset variables keep the defaults. It reads:
//
//   - STREAM_THROUGHPUT_WATCHDOG_ENABLED: true/false (also 1/0).
//   - STREAM_THROUGHPUT_WATCHDOG_WARMUP_MS: 0..600000; 0 means no warm-up.
//   - STREAM_THROUGHPUT_WATCHDOG_WINDOW_MS: 1000..600000.
//   - STREAM_THROUGHPUT_WATCHDOG_MIN_BYTES_PER_SECOND: ≥ 1.
//   - STREAM_THROUGHPUT_WATCHDOG_MIN_BYTES: ≥ 1.
//   - STREAM_THROUGHPUT_WATCHDOG_MAX_EVENT_BYTES: 1024..67108864.
//   - STREAM_IDLE_TIMEOUT_MS: idle timeout, 0 = off; when unset,
//     REQUEST_TIMEOUT_MS is used if set.
//   - UPSTREAM_ATTEMPT_TIMEOUT_MS: hard attempt deadline, 0 = off.
//
// A value that does not parse or is out of range keeps its default and is
// reported in the returned error (a [*SettingsError] matching
// [ErrInvalidSettings]); the Config is usable either way and is normalised.
func FromEnv(lookup func(string) (string, bool)) (Config, error) {
	var c Config
	var errs []error
	get := func(name string) (string, bool) {
		if lookup == nil {
			return "", false
		}
		v, ok := lookup(name)
		v = strings.TrimSpace(v)
		return v, ok && v != ""
	}
	ms := func(name string, lo, hi int64) (time.Duration, bool) {
		v, ok := get(name)
		if !ok {
			return 0, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > hi {
			errs = append(errs, fmt.Errorf("%s=%q: want an integer in %d..%d", name, v, lo, hi))
			return 0, false
		}
		return time.Duration(n) * time.Millisecond, true
	}
	num := func(name string, lo, hi int64) (int64, bool) {
		v, ok := get(name)
		if !ok {
			return 0, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > hi {
			errs = append(errs, fmt.Errorf("%s=%q: want an integer in %d..%d", name, v, lo, hi))
			return 0, false
		}
		return n, true
	}
	const maxMs = int64(1<<63-1) / int64(time.Millisecond)

	if v, ok := get(EnvEnabled); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want true or false", EnvEnabled, v))
		} else {
			c.Throughput.Enabled = b
		}
	}
	if d, ok := ms(EnvWarmupMs, 0, MaxWarmup.Milliseconds()); ok {
		if d == 0 {
			d = NoWarmup
		}
		c.Throughput.Warmup = d
	}
	if d, ok := ms(EnvWindowMs, MinWindow.Milliseconds(), MaxWindow.Milliseconds()); ok {
		c.Throughput.Window = d
	}
	if n, ok := num(EnvMinBytesPerSecond, 1, 1<<62); ok {
		c.Throughput.MinBytesPerSecond = n
	}
	if n, ok := num(EnvMinBytes, 1, 1<<62); ok {
		c.Throughput.MinBytes = n
	}
	if n, ok := num(EnvMaxEventBytes, MinMaxEventBytes, MaxMaxEventBytes); ok {
		c.MaxEventBytes = int(n)
	}
	if _, set := get(EnvIdleTimeoutMs); set {
		if d, ok := ms(EnvIdleTimeoutMs, 0, maxMs); ok {
			c.IdleTimeout = d
		}
	} else if d, ok := ms(EnvRequestTimeoutMs, 0, maxMs); ok {
		c.IdleTimeout = d
	}
	if d, ok := ms(EnvAttemptTimeoutMs, 0, maxMs); ok {
		c.AttemptDeadline = d
	}
	c = c.Normalize()
	if len(errs) > 0 {
		return c, &SettingsError{Errs: errs}
	}
	return c, nil
}
