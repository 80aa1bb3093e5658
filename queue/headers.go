package queue

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// rateHints is what an upstream answer says about a key's rate limit, as
// read by parseLimits.
type rateHints struct {
	// Limit is the number of requests allowed per window; 0 when unknown.
	Limit int
	// Remaining is the number of requests left in the window; -1 when
	// unknown.
	Remaining int
	// Reset is how long until the window refills, capped at 1 h; 0 when
	// unknown.
	Reset time.Duration
	// RetryAfter is the Retry-After hint, capped at 1 h; 0 when absent.
	RetryAfter time.Duration
	// OverLimit is set by "x-ratelimit-over-limit: yes".
	OverLimit bool
}

// Header names, in order of preference: the plain form, the OpenAI form
// (per request count) and the Anthropic form.
var (
	limitHeaders     = [...]string{"X-Ratelimit-Limit", "X-Ratelimit-Limit-Requests", "Anthropic-Ratelimit-Requests-Limit"}
	remainingHeaders = [...]string{"X-Ratelimit-Remaining", "X-Ratelimit-Remaining-Requests", "Anthropic-Ratelimit-Requests-Remaining"}
	resetHeaders     = [...]string{"X-Ratelimit-Reset", "X-Ratelimit-Reset-Requests", "Anthropic-Ratelimit-Requests-Reset"}
)

// limitCap keeps parsed counts far from integer overflow.
const limitCap = 1 << 40

// parseLimits reads the rate-limit headers of an upstream answer received at
// now. It understands x-ratelimit-limit / -remaining / -reset, their
// -requests forms, the anthropic-ratelimit-requests-* forms, Retry-After and
// x-ratelimit-over-limit. A count may be followed by a comma or semicolon
// and more text ("60, 60;w=60"). A reset value is read as: an integer ≥ 10¹²
// as epoch milliseconds, ≥ 10⁹ as epoch seconds, any other number as
// relative seconds, a Go duration ("6m0s", "20ms"), or an RFC 3339 time.
// Values that cannot be read are treated as absent; nothing panics.
func parseLimits(h http.Header, now time.Time) rateHints {
	l := rateHints{Remaining: -1}
	for _, name := range limitHeaders {
		if n, ok := parseCount(h.Get(name)); ok && n > 0 {
			l.Limit = n
			break
		}
	}
	for _, name := range remainingHeaders {
		if n, ok := parseCount(h.Get(name)); ok {
			l.Remaining = n
			break
		}
	}
	for _, name := range resetHeaders {
		if d, ok := parseReset(h.Get(name), now); ok {
			l.Reset = d
			break
		}
	}
	if d, ok := parseRetryAfter(h.Get("Retry-After"), now); ok {
		l.RetryAfter = d
	}
	switch strings.ToLower(strings.TrimSpace(h.Get("X-Ratelimit-Over-Limit"))) {
	case "yes", "true", "1":
		l.OverLimit = true
	}
	return l
}

// parseCount reads a non-negative integer, ignoring anything after a comma
// or semicolon, and caps it at limitCap.
func parseCount(v string) (int, bool) {
	if i := strings.IndexAny(v, ",;"); i >= 0 {
		v = v[:i]
	}
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil || math.IsNaN(f) || f < 0 {
			return 0, false
		}
		return int(min(f, limitCap)), true
	}
	return int(min(n, limitCap)), true
}

// parseReset reads a reset hint as a duration from now in [0, maxHint].
func parseReset(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		switch {
		case n >= 1e12:
			return until(time.UnixMilli(n), now), true
		case n >= 1e9:
			return until(time.Unix(n, 0), now), true
		case n < 0:
			return 0, false
		}
		return seconds(float64(n)), true
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if math.IsNaN(f) || f < 0 {
			return 0, false
		}
		return seconds(f), true
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return 0, false
		}
		return min(d, maxHint), true
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return until(t, now), true
	}
	return 0, false
}

// parseRetryAfter reads Retry-After as seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if math.IsNaN(f) || f < 0 {
			return 0, false
		}
		return seconds(f), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return until(t, now), true
	}
	return 0, false
}

func seconds(f float64) time.Duration {
	if f >= maxHint.Seconds() {
		return maxHint
	}
	return time.Duration(f * float64(time.Second))
}

func until(t, now time.Time) time.Duration {
	return min(max(t.Sub(now), 0), maxHint)
}
