package restate

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Defaults and ranges of Settings.
const (
	DefaultMaxRateLimitHint   = time.Hour
	DefaultMaxQuotaHint       = 30 * 24 * time.Hour
	DefaultMaxScan            = 64 << 10
	DefaultEmergencyProvider  = "nvidia"
	DefaultEmergencyModel     = "openai/gpt-oss-120b"
	DefaultEmergencyMaxTokens = 4096

	minRateLimitHint   = time.Second
	maxRateLimitHint   = 24 * time.Hour
	minQuotaHint       = time.Hour
	maxQuotaHint       = 366 * 24 * time.Hour
	minScan            = 1 << 10
	maxScan            = 16 << 20
	maxEmergencyTokens = 1 << 20
)

// EnvEmergencyFallback is the environment variable read by [FromEnv].
const EnvEmergencyFallback = "OMNIROUTE_EMERGENCY_FALLBACK"

// Settings configures a [Classifier]. The zero value means the defaults.
type Settings struct {
	// MaxRateLimitHint caps rate-limit hints (Retry-After, x-ratelimit-*,
	// anthropic-ratelimit-*, RetryInfo, body retry_after, "retry in N s").
	// Default 1 h; Normalize clamps to [1 s, 24 h].
	MaxRateLimitHint time.Duration
	// MaxQuotaHint caps quota-reset hints (daily, weekly, "resets in N
	// days", absolute reset times). Default 30 days; Normalize clamps to
	// [1 h, 366 days].
	MaxQuotaHint time.Duration
	// MaxScan is how many bytes of a body (and of a message) are searched.
	// Default 64 KiB; Normalize clamps to [1 KiB, 16 MiB].
	MaxScan int
	// EmergencyDisabled turns the emergency fallback off. Default false
	// (enabled); [FromEnv] sets it from OMNIROUTE_EMERGENCY_FALLBACK.
	EmergencyDisabled bool
	// EmergencyProvider and EmergencyModel name the emergency target.
	// Defaults "nvidia" and "openai/gpt-oss-120b".
	EmergencyProvider string
	EmergencyModel    string
	// EmergencyMaxTokens bounds the emergency answer's output tokens.
	// Default 4096; Normalize clamps to [1, 1048576].
	EmergencyMaxTokens int
}

// Normalize returns s with zero or negative values replaced by the defaults
// and the others clamped to their ranges.
func (s Settings) Normalize() Settings {
	s.MaxRateLimitHint = clampDur(s.MaxRateLimitHint, DefaultMaxRateLimitHint, minRateLimitHint, maxRateLimitHint)
	s.MaxQuotaHint = clampDur(s.MaxQuotaHint, DefaultMaxQuotaHint, minQuotaHint, maxQuotaHint)
	s.MaxScan = clampInt(s.MaxScan, DefaultMaxScan, minScan, maxScan)
	s.EmergencyMaxTokens = clampInt(s.EmergencyMaxTokens, DefaultEmergencyMaxTokens, 1, maxEmergencyTokens)
	if strings.TrimSpace(s.EmergencyProvider) == "" {
		s.EmergencyProvider = DefaultEmergencyProvider
	}
	if strings.TrimSpace(s.EmergencyModel) == "" {
		s.EmergencyModel = DefaultEmergencyModel
	}
	return s
}

func clampDur(v, def, lo, hi time.Duration) time.Duration {
	switch {
	case v <= 0:
		return def
	case v < lo:
		return lo
	case v > hi:
		return hi
	}
	return v
}

func clampInt(v, def, lo, hi int) int {
	switch {
	case v <= 0:
		return def
	case v < lo:
		return lo
	case v > hi:
		return hi
	}
	return v
}

// FromEnv returns the default Settings with the environment overrides read
// through lookup (os.LookupEnv in production). OMNIROUTE_EMERGENCY_FALLBACK
// set to false/0/off/no disables the emergency fallback and true/1/on/yes
// enables it (any case). A bad value keeps the default and is reported in
// the returned error, which matches [ErrInvalidSetting].
func FromEnv(lookup func(string) (string, bool)) (Settings, error) {
	var s Settings
	if lookup == nil {
		return s.Normalize(), nil
	}
	var errs []error
	if v, ok := lookup(EnvEmergencyFallback); ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "false", "0", "off", "no":
			s.EmergencyDisabled = true
		case "true", "1", "on", "yes", "":
		default:
			errs = append(errs, &SettingError{Name: EnvEmergencyFallback, Value: v, Problem: "want true or false"})
		}
	}
	return s.Normalize(), errors.Join(errs...)
}

// ErrInvalidSetting matches every [SettingError].
var ErrInvalidSetting = errors.New("restate: invalid setting")

// SettingError reports an environment value that could not be used.
type SettingError struct {
	Name    string
	Value   string
	Problem string
}

func (e *SettingError) Error() string {
	return fmt.Sprintf("restate: %s=%q: %s", e.Name, e.Value, e.Problem)
}

// Is reports whether target is [ErrInvalidSetting].
func (e *SettingError) Is(target error) bool { return target == ErrInvalidSetting }

// ErrInvalidRule matches every [RuleError].
var ErrInvalidRule = errors.New("restate: invalid rule")

// RuleError reports a rule that a table or operator rule set refused.
type RuleError struct {
	Provider string // lower-cased provider key, "" for a global table
	Index    int    // position of the rule in its list
	ID       string // the rule's id, when it has one
	Problem  string
}

func (e *RuleError) Error() string {
	name := e.ID
	if name == "" {
		name = fmt.Sprintf("#%d", e.Index)
	}
	if e.Provider != "" {
		return fmt.Sprintf("restate: rule %s of provider %q: %s", name, e.Provider, e.Problem)
	}
	return fmt.Sprintf("restate: rule %s: %s", name, e.Problem)
}

// Is reports whether target is [ErrInvalidRule].
func (e *RuleError) Is(target error) bool { return target == ErrInvalidRule }

// Code returns the stable error code "invalid_rule".
func (e *RuleError) Code() string { return "invalid_rule" }

// HTTPStatus returns 400: the rule set is bad input.
func (e *RuleError) HTTPStatus() int { return 400 }
