package breaker

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// envClasses names each class in environment variable names.
var envClasses = [...]struct {
	class Class
	name  string
}{{OAuth, "OAUTH"}, {APIKey, "API_KEY"}, {Local, "LOCAL"}}

// FromEnv reads breaker settings from environment variables through lookup
// (pass [os.LookupEnv] for the process environment). For each class CLASS
// in OAUTH, API_KEY and LOCAL it reads
//
//	OMNIROUTE_CIRCUIT_BREAKER_<CLASS>_THRESHOLD              → OpenAt
//	OMNIROUTE_CIRCUIT_BREAKER_<CLASS>_RESET_MS               → Reset
//	OMNIROUTE_PROVIDER_BREAKER_<CLASS>_DEGRADATION_THRESHOLD → DegradedAt
//	OMNIROUTE_PROVIDER_BREAKER_<CLASS>_MAX_BACKOFF_MULTIPLIER → MaxMultiplier
//	OMNIROUTE_PROVIDER_BREAKER_<CLASS>_BACKOFF_ESCALATION_COUNT → EscalationCount
//
// An unset or blank variable keeps the default (a zero field). Otherwise the
// value must be a finite number ≥ 0: fractions of counts round up, and zero
// stands for the field's smallest allowed value. A bad value keeps the
// default and is reported in the returned error (every bad variable, joined;
// each a [*SettingsError]). The result is not normalized.
func FromEnv(lookup func(string) (string, bool)) (Settings, error) {
	var s Settings
	var errs []error
	for _, ec := range envClasses {
		p := s.profile(ec.class)
		cb := "OMNIROUTE_CIRCUIT_BREAKER_" + ec.name + "_"
		pb := "OMNIROUTE_PROVIDER_BREAKER_" + ec.name + "_"
		errs = envCount(lookup, cb+"THRESHOLD", &p.OpenAt, errs)
		errs = envMillis(lookup, cb+"RESET_MS", &p.Reset, minReset, errs)
		errs = envCount(lookup, pb+"DEGRADATION_THRESHOLD", &p.DegradedAt, errs)
		errs = envCount(lookup, pb+"MAX_BACKOFF_MULTIPLIER", &p.MaxMultiplier, errs)
		errs = envCount(lookup, pb+"BACKOFF_ESCALATION_COUNT", &p.EscalationCount, errs)
	}
	return s, errors.Join(errs...)
}

func (s *Settings) profile(c Class) *Profile {
	switch c {
	case OAuth:
		return &s.OAuth
	case Local:
		return &s.Local
	}
	return &s.APIKey
}

func (s *GateSettings) window(c Class) *WindowProfile {
	switch c {
	case OAuth:
		return &s.OAuth
	case Local:
		return &s.Local
	}
	return &s.APIKey
}

// GateFromEnv reads window-gate settings through lookup:
//
//	PROVIDER_COOLDOWN_ENABLED  → Enabled: "true", "1" or "on" (trimmed, any case); anything else is off
//	PROVIDER_COOLDOWN_MIN_MS   → MinRetryCooldown
//	PROVIDER_COOLDOWN_MAX_MS   → MaxRetryCooldown
//	OMNIROUTE_PROVIDER_BREAKER_<CLASS>_FAILURE_THRESHOLD → Threshold
//	OMNIROUTE_PROVIDER_BREAKER_<CLASS>_FAILURE_WINDOW_MS → Window
//	OMNIROUTE_PROVIDER_BREAKER_<CLASS>_COOLDOWN_MS       → Cooldown
//
// with CLASS in OAUTH, API_KEY and LOCAL, and the number rules of [FromEnv].
// The result is not normalized.
func GateFromEnv(lookup func(string) (string, bool)) (GateSettings, error) {
	var s GateSettings
	var errs []error
	if v, ok := lookup("PROVIDER_COOLDOWN_ENABLED"); ok {
		s.Enabled = ParseSwitch(v)
	}
	errs = envMillis(lookup, "PROVIDER_COOLDOWN_MIN_MS", &s.MinRetryCooldown, minMinRetry, errs)
	errs = envMillis(lookup, "PROVIDER_COOLDOWN_MAX_MS", &s.MaxRetryCooldown, minMinRetry, errs)
	for _, ec := range envClasses {
		w := s.window(ec.class)
		pb := "OMNIROUTE_PROVIDER_BREAKER_" + ec.name + "_"
		errs = envCount(lookup, pb+"FAILURE_THRESHOLD", &w.Threshold, errs)
		errs = envMillis(lookup, pb+"FAILURE_WINDOW_MS", &w.Window, time.Second, errs)
		errs = envMillis(lookup, pb+"COOLDOWN_MS", &w.Cooldown, time.Second, errs)
	}
	return s, errors.Join(errs...)
}

// ParseSwitch reports whether v, trimmed and lower-cased, is "true", "1" or
// "on".
func ParseSwitch(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "on":
		return true
	}
	return false
}

// ParseNumber parses an environment value: blank is unset (ok false, nil
// error); otherwise a finite decimal number ≥ 0, or an error.
func ParseNumber(v string) (n float64, ok bool, err error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false, nil
	}
	f, perr := strconv.ParseFloat(v, 64)
	switch {
	case perr != nil:
		return 0, false, errors.New("not a number")
	case math.IsNaN(f) || math.IsInf(f, 0):
		return 0, false, errors.New("not finite")
	case f < 0:
		return 0, false, errors.New("negative")
	}
	return f, true, nil
}

func envCount(lookup func(string) (string, bool), name string, dst *int, errs []error) []error {
	raw, ok := lookup(name)
	if !ok {
		return errs
	}
	f, ok, err := ParseNumber(raw)
	if err != nil {
		return append(errs, &SettingsError{Name: name, Value: raw, Reason: err.Error()})
	}
	if ok {
		*dst = int(min(math.Max(math.Ceil(f), 1), 1e9))
	}
	return errs
}

func envMillis(lookup func(string) (string, bool), name string, dst *time.Duration, floor time.Duration, errs []error) []error {
	raw, ok := lookup(name)
	if !ok {
		return errs
	}
	f, ok, err := ParseNumber(raw)
	if err != nil {
		return append(errs, &SettingsError{Name: name, Value: raw, Reason: err.Error()})
	}
	if ok {
		ns := math.Min(f*float64(time.Millisecond), float64(100*365*24*time.Hour))
		*dst = max(time.Duration(ns), floor)
	}
	return errs
}
