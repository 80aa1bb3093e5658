package breaker

import (
	"time"

	"github.com/routeguard/routeguard"
	"github.com/routeguard/routeguard/internal/config"
)

// envClasses names each class in environment variable names.
var envClasses = [...]struct {
	class routeguard.Class
	name  string
}{{routeguard.OAuth, "OAUTH"}, {routeguard.APIKey, "API_KEY"}, {routeguard.Local, "LOCAL"}}

// newEnv returns the reader of lookup, whose refusals are [*Error]s with
// code [CodeInvalidConfig] naming the variable.
func newEnv(lookup func(string) (string, bool)) *config.Env {
	return &config.Env{Lookup: lookup, Refuse: func(name, value string, reason error) error {
		return configError(name, value, reason.Error())
	}}
}

// FromEnv reads breaker settings from environment variables through lookup
// (pass [os.LookupEnv] for the process environment). For each class CLASS
// in OAUTH, API_KEY and LOCAL it reads
//
//	OMNIROUTE_CIRCUIT_BREAKER_<CLASS>_THRESHOLD                → OpenAt
//	OMNIROUTE_CIRCUIT_BREAKER_<CLASS>_RESET_MS                 → Reset
//	OMNIROUTE_PROVIDER_BREAKER_<CLASS>_DEGRADATION_THRESHOLD   → DegradedAt
//	OMNIROUTE_PROVIDER_BREAKER_<CLASS>_MAX_BACKOFF_MULTIPLIER  → MaxMultiplier
//	OMNIROUTE_PROVIDER_BREAKER_<CLASS>_BACKOFF_ESCALATION_COUNT → EscalationCount
//
// into the class's profile of the returned Config; nothing else is set. An
// unset or blank variable leaves its field zero (the default). Otherwise a
// count must be a whole number ≥ 0 and a _MS value a whole number of
// milliseconds ≥ 0 (trimmed); zero stands for the field's smallest allowed
// value (a count of 1, a reset of 1 s). A bad value leaves its field zero
// and is reported in the returned error: every bad variable, joined, each
// an [*Error] with code [CodeInvalidConfig] whose Field is the variable.
// The result is not normalized; merge it into your own Config if you wish.
// A nil lookup reads nothing.
func FromEnv(lookup func(string) (string, bool)) (Config, error) {
	var c Config
	if lookup == nil {
		return c, nil
	}
	e := newEnv(lookup)
	for _, ec := range envClasses {
		p := c.profile(ec.class)
		cb := "OMNIROUTE_CIRCUIT_BREAKER_" + ec.name + "_"
		pb := "OMNIROUTE_PROVIDER_BREAKER_" + ec.name + "_"
		envCount(e, cb+"THRESHOLD", &p.OpenAt)
		envMillis(e, cb+"RESET_MS", &p.Reset, minReset)
		envCount(e, pb+"DEGRADATION_THRESHOLD", &p.DegradedAt)
		envCount(e, pb+"MAX_BACKOFF_MULTIPLIER", &p.MaxMultiplier)
		envCount(e, pb+"BACKOFF_ESCALATION_COUNT", &p.EscalationCount)
	}
	return c, e.Err()
}

// GateFromEnv reads window-gate settings through lookup:
//
//	PROVIDER_COOLDOWN_ENABLED                           → Enabled
//	PROVIDER_COOLDOWN_MIN_MS                            → MinRetry
//	PROVIDER_COOLDOWN_MAX_MS                            → MaxRetry
//	OMNIROUTE_PROVIDER_BREAKER_<CLASS>_FAILURE_THRESHOLD → Threshold
//	OMNIROUTE_PROVIDER_BREAKER_<CLASS>_FAILURE_WINDOW_MS → Window
//	OMNIROUTE_PROVIDER_BREAKER_<CLASS>_COOLDOWN_MS       → Cooldown
//
// with CLASS in OAUTH, API_KEY and LOCAL, and the number rules of
// [FromEnv], except for PROVIDER_COOLDOWN_MIN_MS: 0 is kept as 0 (no
// connection cooldown), so that variable sets MinRetry to a pointer to its
// value. PROVIDER_COOLDOWN_ENABLED is a switch: 1, true, yes or on turn the
// gate on and 0, false, no or off leave it off (trimmed, any case); any
// other value leaves it off and is reported. The result is not normalized
// (Normalize clamps MinRetry to [0, 1 h]). A nil lookup reads nothing.
func GateFromEnv(lookup func(string) (string, bool)) (GateConfig, error) {
	var c GateConfig
	if lookup == nil {
		return c, nil
	}
	e := newEnv(lookup)
	e.Switch("PROVIDER_COOLDOWN_ENABLED", &c.Enabled)
	e.MillisOpt("PROVIDER_COOLDOWN_MIN_MS", &c.MinRetry)
	envMillis(e, "PROVIDER_COOLDOWN_MAX_MS", &c.MaxRetry, minMaxRetry)
	for _, ec := range envClasses {
		w := c.windowOf(ec.class)
		pb := "OMNIROUTE_PROVIDER_BREAKER_" + ec.name + "_"
		envCount(e, pb+"FAILURE_THRESHOLD", &w.Threshold)
		envMillis(e, pb+"FAILURE_WINDOW_MS", &w.Window, time.Second)
		envMillis(e, pb+"COOLDOWN_MS", &w.Cooldown, time.Second)
	}
	return c, e.Err()
}

func (c *Config) profile(cl routeguard.Class) *Profile {
	switch cl {
	case routeguard.OAuth:
		return &c.OAuth
	case routeguard.Local:
		return &c.Local
	}
	return &c.APIKey
}

func (c *GateConfig) windowOf(cl routeguard.Class) *WindowProfile {
	switch cl {
	case routeguard.OAuth:
		return &c.OAuth
	case routeguard.Local:
		return &c.Local
	}
	return &c.APIKey
}

// envCount reads a count; 0 stands for the smallest count, 1.
func envCount(e *config.Env, name string, dst *int) {
	n := -1
	e.Int(name, &n)
	if n >= 0 {
		*dst = max(n, 1)
	}
}

// envMillis reads a duration in milliseconds, raised to floor.
func envMillis(e *config.Env, name string, dst *time.Duration, floor time.Duration) {
	d := time.Duration(-1)
	e.Millis(name, &d)
	if d >= 0 {
		*dst = max(d, floor)
	}
}
