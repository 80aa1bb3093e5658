package lockout

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Defaults and ranges of [Settings]. Normalize clamps every field into its
// range.
const (
	DefaultBaseCooldown    = 120 * time.Second
	MinBaseCooldown        = 5 * time.Second
	MaxBaseCooldown        = 10 * time.Minute
	DefaultMaxCooldown     = 30 * time.Minute
	MinMaxCooldown         = 5 * time.Second
	MaxMaxCooldown         = time.Hour
	DefaultMaxBackoffSteps = 10
	MaxMaxBackoffSteps     = 20
	// DefaultResetAfter is the escalation reset used when neither
	// Settings.EscalationWindow nor Failure.ResetAfter gives one.
	DefaultResetAfter     = 30 * time.Minute
	MaxEscalationWindow   = 24 * time.Hour
	DefaultMaxEntries     = 100_000
	MinMaxEntries         = 16
	MaxMaxEntries         = 10_000_000
	minErrorCode          = 100
	maxErrorCode          = 599
	defaultSweepInterval  = 15 * time.Second
	quotaDayGuard         = 24 * time.Hour
	evictLowWaterFraction = 8 // evict down to cap − cap/8
)

// DefaultErrorCodes returns the statuses that count as model-level failures
// when Settings.ErrorCodes is empty: 403, 404, 429, 502, 503 and 504.
func DefaultErrorCodes() []int { return []int{403, 404, 429, 502, 503, 504} }

// Settings are the tunable numbers of a [Lockout]. The zero value means the
// defaults listed next to each field; [Settings.Normalize] fills them in and
// clamps every field into its documented range.
type Settings struct {
	// Enabled switches model lockout on. Default false: while it is false
	// nothing is recorded or locked and every model reads as unlocked.
	Enabled bool

	// ErrorCodes lists the upstream statuses that may lock a model; a status
	// not in the list never does. Entries outside [100, 599] are dropped and
	// an empty list means DefaultErrorCodes.
	ErrorCodes []int

	// BaseCooldown is the lock length of a first failure. Zero means 120 s;
	// other values are clamped to [5 s, 10 min].
	BaseCooldown time.Duration

	// MaxCooldown caps every computed lock length. Zero means 30 min; other
	// values are clamped to [5 s, 1 h] and raised to at least BaseCooldown.
	MaxCooldown time.Duration

	// MaxBackoffSteps caps the exponent of the escalation
	// BaseCooldown·2^(count−1). Zero means 10; values above 20 become 20. A
	// negative value means no escalation steps at all, which Normalize
	// records as FixedCooldown (zero steps and a fixed cooldown give the same
	// lock length).
	MaxBackoffSteps int

	// FixedCooldown turns the exponential escalation off, so every failure
	// locks for BaseCooldown. Default false (escalation on).
	FixedCooldown bool

	// EscalationWindow decides whether a failure follows the previous one:
	// it does when it arrives within EscalationWindow plus the previous
	// cooldown after the previous failure, and then the failure count rises;
	// otherwise the count starts again at 1. Zero means each failure's
	// Failure.ResetAfter (the breaker profile's reset time), or 30 min when
	// that is zero too. Other values are clamped to [0, 24 h].
	EscalationWindow time.Duration

	// MaxEntries bounds the number of tracked keys (locks and failure
	// records). Zero means 100 000; other values are clamped to
	// [16, 10 000 000]. When the bound is passed, expired entries are pruned
	// and then the entries closest to expiry are evicted.
	MaxEntries int
}

// Normalize returns s with defaults filled in and every field clamped to its
// range. It is idempotent.
func (s Settings) Normalize() Settings {
	n := s
	n.ErrorCodes = normalizeCodes(s.ErrorCodes)

	switch {
	case n.BaseCooldown == 0:
		n.BaseCooldown = DefaultBaseCooldown
	default:
		n.BaseCooldown = clampDur(n.BaseCooldown, MinBaseCooldown, MaxBaseCooldown)
	}
	switch {
	case n.MaxCooldown == 0:
		n.MaxCooldown = DefaultMaxCooldown
	default:
		n.MaxCooldown = clampDur(n.MaxCooldown, MinMaxCooldown, MaxMaxCooldown)
	}
	n.MaxCooldown = max(n.MaxCooldown, n.BaseCooldown)

	switch {
	case n.MaxBackoffSteps == 0:
		n.MaxBackoffSteps = DefaultMaxBackoffSteps
	case n.MaxBackoffSteps < 0:
		n.MaxBackoffSteps = DefaultMaxBackoffSteps
		n.FixedCooldown = true
	case n.MaxBackoffSteps > MaxMaxBackoffSteps:
		n.MaxBackoffSteps = MaxMaxBackoffSteps
	}

	n.EscalationWindow = clampDur(n.EscalationWindow, 0, MaxEscalationWindow)

	switch {
	case n.MaxEntries == 0:
		n.MaxEntries = DefaultMaxEntries
	default:
		n.MaxEntries = min(max(n.MaxEntries, MinMaxEntries), MaxMaxEntries)
	}
	return n
}

func clampDur(d, lo, hi time.Duration) time.Duration { return min(max(d, lo), hi) }

func normalizeCodes(in []int) []int {
	out := make([]int, 0, len(in))
	for _, c := range in {
		if c < minErrorCode || c > maxErrorCode {
			continue
		}
		dup := false
		for _, o := range out {
			if o == c {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return DefaultErrorCodes()
	}
	return out
}

// Environment variable names read by [FromEnv].
const (
	EnvEnabled          = "MODEL_LOCKOUT_ENABLED"
	EnvErrorCodes       = "MODEL_LOCKOUT_ERROR_CODES"
	EnvBaseCooldownMs   = "MODEL_LOCKOUT_BASE_COOLDOWN_MS"
	EnvMaxCooldownMs    = "MODEL_LOCKOUT_MAX_COOLDOWN_MS"
	EnvMaxBackoffSteps  = "MODEL_LOCKOUT_MAX_BACKOFF_STEPS"
	EnvExponential      = "MODEL_LOCKOUT_USE_EXPONENTIAL_BACKOFF"
	EnvEscalationWindow = "MODEL_LOCKOUT_ESCALATION_WINDOW_MS"
	EnvEvictionCap      = "MODEL_LOCKOUT_EVICTION_CAP"
)

// ErrInvalidSetting is matched (with errors.Is) by every [*SettingError].
var ErrInvalidSetting = errors.New("lockout: invalid setting")

// SettingError reports a setting value that [FromEnv] could not use. The
// setting keeps its default (or, for a list, its valid entries).
type SettingError struct {
	Name   string // environment variable name
	Value  string // the offending value
	Reason string // what was wrong with it
}

// Error implements error.
func (e *SettingError) Error() string {
	return fmt.Sprintf("lockout: %s=%q: %s", e.Name, e.Value, e.Reason)
}

// Is reports whether target is [ErrInvalidSetting].
func (e *SettingError) Is(target error) bool { return target == ErrInvalidSetting }

// FromEnv reads Settings from environment variables through lookup (pass
// os.LookupEnv in production, a map lookup in tests). Unset variables keep
// their defaults. Values are read the way the settings store reads them:
//
//   - MODEL_LOCKOUT_ENABLED and MODEL_LOCKOUT_USE_EXPONENTIAL_BACKOFF: "true"
//     or "false", or a number (non-zero means true).
//   - MODEL_LOCKOUT_ERROR_CODES: numbers separated by commas or spaces;
//     entries that are not whole numbers in [100, 599] are dropped.
//   - MODEL_LOCKOUT_BASE_COOLDOWN_MS, MODEL_LOCKOUT_MAX_COOLDOWN_MS,
//     MODEL_LOCKOUT_ESCALATION_WINDOW_MS: milliseconds, truncated; an empty
//     value counts as 0 ms and is clamped up to the minimum.
//   - MODEL_LOCKOUT_MAX_BACKOFF_STEPS, MODEL_LOCKOUT_EVICTION_CAP: numbers,
//     truncated.
//
// A value that cannot be read keeps the default and is reported; the error
// joins one [*SettingError] per bad value. The result is normalized.
func FromEnv(lookup func(string) (string, bool)) (Settings, error) {
	var s Settings
	var errs []error
	bad := func(name, v, reason string) {
		errs = append(errs, &SettingError{Name: name, Value: v, Reason: reason})
	}

	if v, ok := lookup(EnvEnabled); ok {
		if b, ok := parseBool(v); ok {
			s.Enabled = b
		} else {
			bad(EnvEnabled, v, "not a boolean")
		}
	}
	if v, ok := lookup(EnvExponential); ok {
		if b, ok := parseBool(v); ok {
			s.FixedCooldown = !b
		} else {
			bad(EnvExponential, v, "not a boolean")
		}
	}
	if v, ok := lookup(EnvErrorCodes); ok {
		fields := strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
		for _, f := range fields {
			x, err := parseNumber(f)
			if err != nil || x != math.Trunc(x) || x < minErrorCode || x > maxErrorCode {
				bad(EnvErrorCodes, f, "not a status code in [100, 599]")
				continue
			}
			s.ErrorCodes = append(s.ErrorCodes, int(x))
		}
		if len(s.ErrorCodes) == 0 && len(fields) > 0 {
			bad(EnvErrorCodes, v, "no valid status code; using the default list")
		}
	}
	durMs := func(name string, dst *time.Duration, lo time.Duration) {
		v, ok := lookup(name)
		if !ok {
			return
		}
		x, err := parseNumber(v)
		if err != nil {
			bad(name, v, err.Error())
			return
		}
		ms := math.Trunc(x)
		// Beyond an hour every duration setting is clamped anyway; bounding
		// first keeps the conversion from overflowing.
		ms = math.Min(math.Max(ms, -1), float64(48*time.Hour/time.Millisecond))
		d := time.Duration(ms) * time.Millisecond
		if d <= 0 {
			// Zero in the struct means "default"; an explicit 0 ms (or an
			// empty value) asks for the minimum instead.
			d = lo
		}
		*dst = d
	}
	durMs(EnvBaseCooldownMs, &s.BaseCooldown, MinBaseCooldown)
	durMs(EnvMaxCooldownMs, &s.MaxCooldown, MinMaxCooldown)
	if v, ok := lookup(EnvEscalationWindow); ok {
		x, err := parseNumber(v)
		switch {
		case err != nil:
			bad(EnvEscalationWindow, v, err.Error())
		default:
			ms := math.Min(math.Max(math.Trunc(x), 0), float64(MaxEscalationWindow/time.Millisecond))
			s.EscalationWindow = time.Duration(ms) * time.Millisecond
		}
	}
	intVal := func(name string, dst *int, zero, lo, hi int) {
		v, ok := lookup(name)
		if !ok {
			return
		}
		x, err := parseNumber(v)
		if err != nil {
			bad(name, v, err.Error())
			return
		}
		n := int(math.Min(math.Max(math.Trunc(x), float64(lo)), float64(hi)))
		if n == 0 {
			n = zero
		}
		*dst = n
	}
	// Zero steps means no escalation; the struct spells that -1.
	intVal(EnvMaxBackoffSteps, &s.MaxBackoffSteps, -1, -1, MaxMaxBackoffSteps)
	intVal(EnvEvictionCap, &s.MaxEntries, MinMaxEntries, MinMaxEntries, MaxMaxEntries)

	return s.Normalize(), errors.Join(errs...)
}

// parseNumber reads a number the way a JavaScript Number() conversion does
// for the inputs settings see: surrounding space is ignored and an empty
// string is 0. NaN and infinities are refused.
func parseNumber(v string) (float64, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, nil
	}
	x, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, errors.New("not a finite number")
	}
	return x, nil
}

func parseBool(v string) (bool, bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(x) {
		return false, false
	}
	return x != 0, true
}
