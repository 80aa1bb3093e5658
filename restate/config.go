package restate

import (
	"fmt"
	"strings"
	"time"

	"github.com/routeguard/routeguard/internal/config"
)

// Defaults and ranges of Config.
const (
	defaultMaxRateLimitHint   = time.Hour
	defaultMaxQuotaHint       = 30 * 24 * time.Hour
	defaultMaxScan            = 64 << 10
	defaultEmergencyProvider  = "nvidia"
	defaultEmergencyModel     = "openai/gpt-oss-120b"
	defaultEmergencyMaxTokens = 4096

	minRateLimitHint   = time.Second
	maxRateLimitHint   = 24 * time.Hour
	minQuotaHint       = time.Hour
	maxQuotaHint       = 366 * 24 * time.Hour
	minScan            = 1 << 10
	maxScan            = 16 << 20
	maxEmergencyTokens = 1 << 20
)

// envEmergencyFallback is the environment variable read by [FromEnv].
const envEmergencyFallback = "OMNIROUTE_EMERGENCY_FALLBACK"

// Config configures a [Classifier]. The zero value means the defaults; no
// setting has 0 as a real value, so a zero or negative field means its
// default.
//
// The credential class of a connection is given per answer
// ([Response.Auth]), not here. An unknown class ([routeguard.Unknown]) gets
// the cautious reading: the quota signals of a 429 are always honoured, as
// for an OAuth connection, since such a 429 may be a quota that lasts.
type Config struct {
	// MaxRateLimitHint caps rate-limit hints (Retry-After, x-ratelimit-*,
	// anthropic-ratelimit-*, RetryInfo, body retry_after, "retry in N s").
	// Default 1 h; range [1 s, 24 h]; 0 or negative means the default.
	MaxRateLimitHint time.Duration
	// MaxQuotaHint caps quota-reset hints (daily, weekly, "resets in N
	// days", absolute reset times). Default 30 days; range [1 h, 366 days];
	// 0 or negative means the default.
	MaxQuotaHint time.Duration
	// MaxScan is how many bytes of a body (and of a message) are searched.
	// Default 64 KiB; range [1 KiB, 16 MiB]; 0 or negative means the
	// default.
	MaxScan int
	// EmergencyDisabled turns the emergency fallback off. Default false
	// (enabled).
	EmergencyDisabled bool
	// EmergencyProvider and EmergencyModel name the emergency target.
	// Defaults "nvidia" and "openai/gpt-oss-120b"; blank means the
	// default.
	EmergencyProvider string
	EmergencyModel    string
	// EmergencyMaxTokens bounds the emergency answer's output tokens.
	// Default 4096; range [1, 1048576]; 0 or negative means the default.
	EmergencyMaxTokens int
}

// Normalize returns a copy of c with zero or negative values replaced by
// the defaults and the others clamped to their ranges. It never changes c.
func (c Config) Normalize() Config {
	c.MaxRateLimitHint = config.Dur(c.MaxRateLimitHint, defaultMaxRateLimitHint, minRateLimitHint, maxRateLimitHint)
	c.MaxQuotaHint = config.Dur(c.MaxQuotaHint, defaultMaxQuotaHint, minQuotaHint, maxQuotaHint)
	c.MaxScan = config.Int(c.MaxScan, defaultMaxScan, minScan, maxScan)
	c.EmergencyMaxTokens = config.Int(c.EmergencyMaxTokens, defaultEmergencyMaxTokens, 1, maxEmergencyTokens)
	if strings.TrimSpace(c.EmergencyProvider) == "" {
		c.EmergencyProvider = defaultEmergencyProvider
	}
	if strings.TrimSpace(c.EmergencyModel) == "" {
		c.EmergencyModel = defaultEmergencyModel
	}
	return c
}

// FromEnv reads the environment through lookup (os.LookupEnv in
// production) and returns a Config with only the variables that are set
// filled in; merge it with your own or pass it to [New] as it is. It reads
// one variable:
//
//   - OMNIROUTE_EMERGENCY_FALLBACK, a switch: 0, false, no or off disables
//     the emergency fallback (EmergencyDisabled); 1, true, yes or on leaves
//     it enabled (trimmed, any case). A blank value is ignored.
//
// A value outside that vocabulary leaves its field unset and is reported in
// the returned error: an [*Error] with code [CodeInvalidConfig] whose Field
// names the variable, matching [ErrInvalidConfig]. A nil lookup reads
// nothing.
func FromEnv(lookup func(string) (string, bool)) (Config, error) {
	var c Config
	if lookup == nil {
		return c, nil
	}
	env := config.Env{Lookup: lookup, Refuse: func(name, value string, reason error) error {
		return &Error{Code: CodeInvalidConfig, Status: 400, Field: name,
			Problem: fmt.Sprintf("value %q: %v", value, reason)}
	}}
	on := true
	env.Switch(envEmergencyFallback, &on)
	c.EmergencyDisabled = !on
	return c, env.Err()
}
