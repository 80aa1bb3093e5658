package lease

import (
	"time"

	"github.com/routeguard/routeguard/internal/config"
)

// Defaults and ranges of [Config].
const (
	defaultTTL = 120 * time.Second
	minTTL     = time.Second
	maxTTL     = 30 * time.Minute

	defaultMaxOwners = 100_000
	minMaxOwners     = 16
	maxMaxOwners     = 10_000_000

	defaultRetention = 24 * time.Hour
	minRetention     = time.Minute
	maxRetention     = 30 * 24 * time.Hour
)

// Environment variables read by [FromEnv].
const (
	envTTL       = "LEASE_TTL_MS"
	envMaxOwners = "LEASE_MAX_OWNERS"
	envRetention = "LEASE_HISTORY_RETENTION_MS"
)

// Config configures a [Manager] and the in-memory store. The zero value
// gives the defaults; no setting of this package treats 0 as a real
// value.
type Config struct {
	// TTL is the lease lifetime from the last acquire, renew or move.
	// Default 120 s; range 1 s..30 min (other values are clamped); zero or
	// negative means the default.
	TTL time.Duration

	// MaxOwners caps the owners the in-memory store remembers (active
	// leases and the generation history of ended ones). Default 100 000;
	// range 16..10 000 000 (clamped); zero or negative means the default.
	// Ignored when Store is set.
	MaxOwners int

	// Retention is how long the in-memory store remembers an owner whose
	// last lease ended, so that its next lease continues its generations.
	// After that the owner is forgotten; its next lease starts above the
	// highest generation of every forgotten owner, so a generation is never
	// handed out twice to one owner. Default 24 h; range 1 min..30 days
	// (clamped); zero or negative means the default. Ignored when Store is
	// set.
	Retention time.Duration

	// Store holds the leases. Nil means a new in-memory store built from
	// MaxOwners and Retention ([NewMemoryStore]).
	Store Store

	// OnChange, if set, is called once for every change of lease state
	// made through the Manager: synchronously on the calling goroutine,
	// after the store's operation has returned (no lock of the package is
	// held), in the order of the changes that goroutine made. It must not
	// block; it may call back into the Manager. Expiry is reported by
	// [Manager.ReconcileAt]; a lease that another operation finds expired
	// first ends without an event.
	OnChange func(Event)
}

// Normalize returns a copy of c with every default filled in and every
// field clamped into its range. It does not modify c.
func (c Config) Normalize() Config {
	c.TTL = clampTTL(c.TTL)
	c.MaxOwners = config.Int(c.MaxOwners, defaultMaxOwners, minMaxOwners, maxMaxOwners)
	c.Retention = config.Dur(c.Retention, defaultRetention, minRetention, maxRetention)
	return c
}

// clampTTL returns d clamped to [minTTL, maxTTL], or defaultTTL when d is
// zero or negative.
func clampTTL(d time.Duration) time.Duration {
	return config.Dur(d, defaultTTL, minTTL, maxTTL)
}

// FromEnv reads the package's environment variables through lookup
// (os.LookupEnv in production) and returns a Config with only those fields
// set; merge it with your own if you wish, and pass it through New, which
// normalises it. The contract names no variables for leases; these are
// routeguard's own:
//
//	LEASE_TTL_MS                TTL, whole milliseconds
//	LEASE_MAX_OWNERS            MaxOwners, a whole number
//	LEASE_HISTORY_RETENTION_MS  Retention, whole milliseconds
//
// Missing or blank variables are left at zero (the default). A value that
// does not parse leaves its field at zero and is reported in the joined
// error as an *[Error] with CodeInvalidConfig (matching [ErrInvalidConfig])
// whose Field names the variable.
func FromEnv(lookup func(string) (string, bool)) (Config, error) {
	var c Config
	env := config.Env{Lookup: lookup, Refuse: settingError}
	env.Millis(envTTL, &c.TTL)
	env.Int(envMaxOwners, &c.MaxOwners)
	env.Millis(envRetention, &c.Retention)
	return c, env.Err()
}
