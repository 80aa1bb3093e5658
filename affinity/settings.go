package affinity

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxTTL is the longest pin lifetime: 24 hours (86 400 000 ms). Longer
// settings and per-request values are clamped to it.
const MaxTTL = 24 * time.Hour

// Environment variables read by [SettingsFromEnv]. Values are integer
// milliseconds in 0..86 400 000.
const (
	// EnvTTL is the global pin lifetime; 0 disables affinity.
	EnvTTL = "SESSION_AFFINITY_TTL_MS"
	// EnvLegacyTTL is the older name of the global lifetime, read only when
	// EnvTTL is unset.
	EnvLegacyTTL = "CODEX_SESSION_AFFINITY_TTL_MS"
	// EnvProviderTTL lists per-provider lifetimes as comma-separated
	// provider=milliseconds pairs, for example "claude=3600000,codex=0".
	EnvProviderTTL = "PROVIDER_SESSION_AFFINITY_TTL_MS"
)

// Settings decide how long a pin lives. The zero value disables affinity
// (no global lifetime, no per-provider lifetimes).
//
// A Settings value is read concurrently by [Pins]; do not modify its
// ProviderTTL map after handing it over.
type Settings struct {
	// TTL is the global pin lifetime used when neither the request nor the
	// provider sets one. 0 (the default) disables affinity. Normalize clamps
	// it to 0..MaxTTL (negative becomes 0).
	TTL time.Duration

	// ProviderTTL holds per-provider lifetimes. A provider present with 0
	// has affinity disabled even when TTL is positive; a provider absent
	// uses TTL. Normalize clamps values above MaxTTL to MaxTTL and drops
	// negative values (the provider then uses TTL).
	ProviderTTL map[string]time.Duration
}

// Normalize returns a copy of s with every value clamped to its range (see
// the field docs). It never modifies s or its map.
func (s Settings) Normalize() Settings {
	s.TTL = clampTTL(s.TTL)
	if s.ProviderTTL != nil {
		m := make(map[string]time.Duration, len(s.ProviderTTL))
		for p, d := range s.ProviderTTL {
			if d < 0 {
				continue
			}
			m[p] = clampTTL(d)
		}
		s.ProviderTTL = m
	}
	return s
}

func clampTTL(d time.Duration) time.Duration {
	switch {
	case d < 0:
		return 0
	case d > MaxTTL:
		return MaxTTL
	}
	return d
}

// TTLFor resolves the pin lifetime for one request to provider. A positive
// requested lifetime wins (clamped to MaxTTL); otherwise the provider's
// entry in ProviderTTL, when present (0 disables); otherwise TTL. A result
// of 0 means affinity is disabled for this request. Values are clamped as
// by Normalize. TTLFor allocates nothing.
func (s Settings) TTLFor(provider string, requested time.Duration) time.Duration {
	if requested > 0 {
		return clampTTL(requested)
	}
	if d, ok := s.ProviderTTL[provider]; ok && d >= 0 {
		return clampTTL(d)
	}
	return clampTTL(s.TTL)
}

// ErrInvalidSetting is matched (with errors.Is) by every [SettingError].
var ErrInvalidSetting = errors.New("affinity: invalid setting")

// A SettingError reports an environment value that could not be used. The
// setting it names keeps its default.
type SettingError struct {
	Name  string // environment variable
	Value string // offending value (or pair, for EnvProviderTTL)
	Err   error  // what is wrong with it
}

// Error returns "affinity: NAME="value": cause".
func (e *SettingError) Error() string {
	return fmt.Sprintf("affinity: %s=%q: %v", e.Name, e.Value, e.Err)
}

// Is reports whether target is ErrInvalidSetting.
func (e *SettingError) Is(target error) bool { return target == ErrInvalidSetting }

// Unwrap returns the underlying cause.
func (e *SettingError) Unwrap() error { return e.Err }

var (
	errNotInteger = errors.New("not an integer number of milliseconds")
	errRange      = errors.New("out of range 0..86400000")
	errPair       = errors.New("want provider=milliseconds")
)

// SettingsFromEnv reads [EnvTTL] (or, when it is unset, [EnvLegacyTTL]) and
// [EnvProviderTTL] through lookup (typically os.LookupEnv) and returns the
// normalised settings. A bad value leaves its setting at the default (the
// global TTL at 0, a bad provider pair skipped) and is reported in the
// returned error, which joins one [*SettingError] per bad value. Values must
// be integers of milliseconds in 0..86 400 000; fractions, signs other than
// a leading "+", and out-of-range values are refused.
func SettingsFromEnv(lookup func(string) (string, bool)) (Settings, error) {
	var s Settings
	var errs []error
	name := EnvTTL
	v, ok := lookup(EnvTTL)
	if !ok {
		name = EnvLegacyTTL
		v, ok = lookup(EnvLegacyTTL)
	}
	if ok {
		if d, err := parseMillis(v); err != nil {
			errs = append(errs, &SettingError{Name: name, Value: v, Err: err})
		} else {
			s.TTL = d
		}
	}
	if v, ok := lookup(EnvProviderTTL); ok {
		m := make(map[string]time.Duration)
		for pair := range strings.SplitSeq(v, ",") {
			pair = strings.TrimSpace(pair)
			if pair == "" {
				continue
			}
			p, ms, found := strings.Cut(pair, "=")
			p = strings.TrimSpace(p)
			if !found || p == "" {
				errs = append(errs, &SettingError{Name: EnvProviderTTL, Value: pair, Err: errPair})
				continue
			}
			d, err := parseMillis(ms)
			if err != nil {
				errs = append(errs, &SettingError{Name: EnvProviderTTL, Value: pair, Err: err})
				continue
			}
			m[p] = d
		}
		if len(m) > 0 {
			s.ProviderTTL = m
		}
	}
	return s.Normalize(), errors.Join(errs...)
}

// parseMillis parses an integer number of milliseconds in 0..86 400 000.
func parseMillis(v string) (time.Duration, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, errNotInteger
	}
	if n < 0 || n > MaxTTL.Milliseconds() {
		return 0, errRange
	}
	return time.Duration(n) * time.Millisecond, nil
}
