package lease

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Defaults and ranges of [Config].
const (
	DefaultTTL = 120 * time.Second
	MinTTL     = time.Second
	MaxTTL     = 30 * time.Minute

	DefaultMaxOwners = 100_000
	MinMaxOwners     = 16
	MaxMaxOwners     = 10_000_000

	DefaultRetention = 24 * time.Hour
	MinRetention     = time.Minute
	MaxRetention     = 30 * 24 * time.Hour
)

// Environment variables read by [FromEnv]. The behaviour contract names
// none for leases; these are routeguard's own.
const (
	EnvTTL       = "LEASE_TTL_MS"
	EnvMaxOwners = "LEASE_MAX_OWNERS"
	EnvRetention = "LEASE_HISTORY_RETENTION_MS"
)

// Config configures a [Manager]. The zero value gives the defaults.
type Config struct {
	// TTL is the lease lifetime from the last acquire or renew. Zero means
	// DefaultTTL (120 s); other values are clamped to [MinTTL, MaxTTL]
	// (1 s..30 min).
	TTL time.Duration

	// MaxOwners caps the owners the in-memory store remembers (active
	// leases and the generation history of ended ones). Zero means
	// DefaultMaxOwners (100 000); other values are clamped to
	// [MinMaxOwners, MaxMaxOwners]. Ignored when Store is set.
	MaxOwners int

	// Retention is how long the in-memory store remembers an owner whose
	// last lease ended, so that its next lease continues its generations.
	// After that the owner is forgotten; its next lease starts above the
	// highest generation of every forgotten owner, so a generation is never
	// handed out twice to one owner.
	// Zero means DefaultRetention (24 h); other values are clamped to
	// [MinRetention, MaxRetention] (1 min..30 days). Ignored when Store is
	// set.
	Retention time.Duration

	// Store holds the leases. Nil means a new MemoryStore built from
	// MaxOwners and Retention.
	Store Store

	// OnChange, if set, is called after every change of lease state made
	// through the Manager, outside any lock, on the calling goroutine.
	// Expiry is reported by Manager.ReconcileAt; a lease that another
	// operation finds expired first ends without an event.
	OnChange func(Event)
}

// ClampTTL returns d clamped to [MinTTL, MaxTTL], or DefaultTTL when d is
// zero or negative.
func ClampTTL(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultTTL
	}
	return min(max(d, MinTTL), MaxTTL)
}

// Normalize returns c with defaults filled in and every field clamped to
// its documented range.
func (c Config) Normalize() Config {
	c.TTL = ClampTTL(c.TTL)
	if c.MaxOwners <= 0 {
		c.MaxOwners = DefaultMaxOwners
	}
	c.MaxOwners = min(max(c.MaxOwners, MinMaxOwners), MaxMaxOwners)
	if c.Retention <= 0 {
		c.Retention = DefaultRetention
	}
	c.Retention = min(max(c.Retention, MinRetention), MaxRetention)
	return c
}

// FromEnv returns base with the fields overridden by the environment
// variables EnvTTL, EnvMaxOwners and EnvRetention, read through lookup
// (os.LookupEnv in production). Durations are integers in milliseconds.
// A value that does not parse keeps base's field and is reported in the
// joined error as a [*SettingError] (matching [ErrInvalidSetting]); the
// result is not normalised.
func FromEnv(base Config, lookup func(string) (string, bool)) (Config, error) {
	var errs []error
	if v, ok := lookup(EnvTTL); ok {
		if n, err := parsePositive(v); err != nil {
			errs = append(errs, &SettingError{Name: EnvTTL, Value: v, Err: err})
		} else {
			base.TTL = time.Duration(n) * time.Millisecond
		}
	}
	if v, ok := lookup(EnvMaxOwners); ok {
		if n, err := parsePositive(v); err != nil {
			errs = append(errs, &SettingError{Name: EnvMaxOwners, Value: v, Err: err})
		} else {
			base.MaxOwners = int(min(n, MaxMaxOwners))
		}
	}
	if v, ok := lookup(EnvRetention); ok {
		if n, err := parsePositive(v); err != nil {
			errs = append(errs, &SettingError{Name: EnvRetention, Value: v, Err: err})
		} else {
			base.Retention = time.Duration(n) * time.Millisecond
		}
	}
	return base, errors.Join(errs...)
}

// parsePositive parses a positive decimal integer no larger than the
// milliseconds in MaxRetention, so that conversion to a duration cannot
// overflow.
func parsePositive(v string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not an integer: %q", v)
	}
	if n <= 0 {
		return 0, fmt.Errorf("not positive: %d", n)
	}
	return min(n, int64(MaxRetention/time.Millisecond)), nil
}

// ErrInvalidSetting is matched (with errors.Is) by every [*SettingError].
var ErrInvalidSetting = errors.New("lease: invalid setting")

// SettingError reports an environment value that [FromEnv] could not use;
// the setting keeps its previous value.
type SettingError struct {
	// Name is the environment variable, Value its raw value.
	Name, Value string
	// Err says what is wrong with the value.
	Err error
}

// Error names the variable and what is wrong with its value.
func (e *SettingError) Error() string { return "lease: " + e.Name + ": " + e.Err.Error() }

// Unwrap returns what is wrong with the value.
func (e *SettingError) Unwrap() error { return e.Err }

// Is reports whether target is [ErrInvalidSetting].
func (e *SettingError) Is(target error) bool { return target == ErrInvalidSetting }
