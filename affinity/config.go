package affinity

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/routeguard/routeguard/internal/config"
)

// maxTTL is the longest pin lifetime: 24 hours (86 400 000 ms).
const maxTTL = 24 * time.Hour

// Bounds of the in-memory state.
const (
	defaultMaxPins        = 100_000
	defaultMaxConnections = 10_000
	maxBound              = 1 << 28
)

// Config configures [New]. The zero Config is usable: affinity is disabled
// (no lifetime is set) and pins live in an in-memory store of 100 000 pins.
//
// A Config is read concurrently by [Pins]; do not modify its ProviderTTL map
// after handing it over.
type Config struct {
	// TTL is the global pin lifetime, used when neither the request nor the
	// provider sets one. Default 0: affinity is disabled. Range 0..24 h;
	// negative means 0, longer means 24 h.
	TTL time.Duration

	// ProviderTTL holds per-provider lifetimes, keyed by provider name. A
	// provider present with 0 has affinity disabled even when TTL is
	// positive; a provider absent uses TTL. Values above 24 h are held at
	// 24 h; negative values are dropped (the provider then uses TTL).
	// Default nil: every provider uses TTL.
	ProviderTTL map[string]time.Duration

	// Store keeps the pins. Default nil: New creates a [MemoryStore]
	// holding MaxPins pins.
	Store Store

	// MaxPins is the capacity of the default store. Default (0 or
	// negative) 100 000; range 1..2²⁸, and the store rounds it up as
	// [NewMemoryStore] says. Ignored when Store is set.
	MaxPins int

	// MaxConnections bounds how many connections' last use is remembered
	// for the least-recently-used choice of new pins. Default (0 or
	// negative) 10 000; range 1..2²⁸, rounded up to a multiple of 16.
	// When the bound is reached, the connection used longest ago is
	// forgotten (and so counts as never used).
	MaxConnections int

	// OnChange, if set, is called with every pin that is made, moved or
	// removed by [Pins] (see [Event]). It is called synchronously, after
	// the change and outside any lock of this package, in the order of
	// the changes; it must not block and may call back into Pins. Default
	// nil: changes are not reported.
	OnChange func(Event)

	// OnError, if set, is called with each error returned by Store. The
	// operation goes on as if there were no pin. Default nil: store errors
	// are dropped.
	OnError func(error)
}

// Normalize returns a copy of c with every value clamped into its range and
// every default filled in (see the field docs); Store stays nil when it is
// nil, as New creates the store. It never modifies c or its map.
func (c Config) Normalize() Config {
	c.TTL = clampTTL(c.TTL)
	if c.ProviderTTL != nil {
		m := make(map[string]time.Duration, len(c.ProviderTTL))
		for p, d := range c.ProviderTTL {
			if d < 0 {
				continue
			}
			m[p] = clampTTL(d)
		}
		c.ProviderTTL = m
	}
	c.MaxPins = config.Int(c.MaxPins, defaultMaxPins, 1, maxBound)
	c.MaxConnections = config.Int(c.MaxConnections, defaultMaxConnections, 1, maxBound)
	return c
}

func clampTTL(d time.Duration) time.Duration {
	switch {
	case d < 0:
		return 0
	case d > maxTTL:
		return maxTTL
	}
	return d
}

// TTLFor resolves the pin lifetime for one request to provider. A positive
// requested lifetime wins (held at 24 h); otherwise the provider's entry in
// ProviderTTL, when present (0 disables); otherwise TTL. A result of 0 means
// affinity is disabled for this request. Values are clamped as by
// Normalize. TTLFor allocates nothing.
func (c Config) TTLFor(provider string, requested time.Duration) time.Duration {
	if requested > 0 {
		return clampTTL(requested)
	}
	if d, ok := c.ProviderTTL[provider]; ok && d >= 0 {
		return clampTTL(d)
	}
	return clampTTL(c.TTL)
}

// CodeInvalidConfig is the code of an [Error] for a setting that cannot be
// used.
const CodeInvalidConfig = "invalid_config"

// ErrInvalidConfig is matched (with errors.Is) by every [Error] with code
// [CodeInvalidConfig].
var ErrInvalidConfig = errors.New("affinity: invalid config")

// Error is a refusal or failure of this package, with the contract's code
// and HTTP status. Match it with errors.As; its Unwrap gives the sentinel of
// its code ([ErrInvalidConfig]), for errors.Is.
type Error struct {
	Code   string // CodeInvalidConfig
	Status int    // 400 for CodeInvalidConfig
	Field  string // the environment variable or Config field at fault
	Value  string // the offending value (or pair, for a per-provider list)
	Reason string // what is wrong with it

	err error
}

// Error returns "affinity: <code>: <field>="<value>": <reason>".
func (e *Error) Error() string {
	return fmt.Sprintf("affinity: %s: %s=%q: %s", e.Code, e.Field, e.Value, e.Reason)
}

// Unwrap returns the sentinel of e.Code.
func (e *Error) Unwrap() error { return e.err }

func invalid(field, value string, reason error) error {
	return &Error{Code: CodeInvalidConfig, Status: http.StatusBadRequest, Field: field, Value: value, Reason: reason.Error(), err: ErrInvalidConfig}
}

// The environment variables FromEnv reads.
const (
	envTTL         = "SESSION_AFFINITY_TTL_MS"
	envLegacyTTL   = "CODEX_SESSION_AFFINITY_TTL_MS"
	envProviderTTL = "PROVIDER_SESSION_AFFINITY_TTL_MS"
)

var (
	errRange = errors.New("more than 86400000 ms")
	errPair  = errors.New("want provider=milliseconds")
)

// FromEnv reads the pin lifetimes from the environment through lookup
// (typically os.LookupEnv) and returns a Config with only the variables that
// are set filled in; the caller merges it with its own if it wishes:
//
//	SESSION_AFFINITY_TTL_MS           Config.TTL
//	CODEX_SESSION_AFFINITY_TTL_MS     Config.TTL, read only when the first is unset
//	PROVIDER_SESSION_AFFINITY_TTL_MS  Config.ProviderTTL, as comma-separated
//	                                  provider=milliseconds pairs, for example
//	                                  "claude=3600000,codex=0"
//
// Lifetimes are whole numbers of milliseconds in 0..86 400 000. Missing and
// blank variables are left unset. A bad value leaves its setting unset (a
// bad provider pair is skipped) and is reported in the returned error, which
// joins one [*Error] with code [CodeInvalidConfig] per bad value; Field
// names the variable. A nil lookup reads nothing.
func FromEnv(lookup func(string) (string, bool)) (Config, error) {
	var c Config
	if lookup == nil {
		return c, nil
	}
	e := config.Env{Lookup: lookup, Refuse: invalid}
	name := envTTL
	v, ok := e.Raw(envTTL)
	if !ok {
		name = envLegacyTTL
		v, ok = e.Raw(envLegacyTTL)
	}
	if ok {
		if d, err := parseTTL(v); err != nil {
			e.Refused(name, v, err)
		} else {
			c.TTL = d
		}
	}
	if v, ok := e.Raw(envProviderTTL); ok {
		m := make(map[string]time.Duration)
		for pair := range strings.SplitSeq(v, ",") {
			pair = strings.TrimSpace(pair)
			if pair == "" {
				continue
			}
			p, ms, found := strings.Cut(pair, "=")
			p = strings.TrimSpace(p)
			if !found || p == "" {
				e.Refused(envProviderTTL, pair, errPair)
				continue
			}
			d, err := parseTTL(ms)
			if err != nil {
				e.Refused(envProviderTTL, pair, err)
				continue
			}
			m[p] = d
		}
		if len(m) > 0 {
			c.ProviderTTL = m
		}
	}
	return c, e.Err()
}

// parseTTL parses a whole number of milliseconds in 0..86 400 000.
func parseTTL(v string) (time.Duration, error) {
	d, err := config.ParseMillis(v)
	if err != nil {
		return 0, err
	}
	if d > maxTTL {
		return 0, errRange
	}
	return d, nil
}
