package gw

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxClientRetryAfter is the longest Retry-After the gateway tells a
// client, in seconds (one day).
const MaxClientRetryAfter = 86_400

// ClientRetryAfter turns a retry hint into the Retry-After value the
// gateway sends a client: a whole number of seconds in
// 1..MaxClientRetryAfter. ok is false when v is no usable hint; the
// header is then left out rather than passed on.
//
// A whole number of seconds (digits only) is clamped into the range: 0
// becomes 1, and a number too large for any integer type becomes one day.
// A decimal number of seconds (digits, a dot, digits) is rounded up and
// clamped the same way. An HTTP date becomes the seconds from now until
// it, rounded up and clamped (a date in the past gives 1). Anything else —
// a sign, an exponent, NaN, an infinity, an empty value, text — is
// refused.
func ClientRetryAfter(v string, now time.Time) (seconds int64, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if allDigits(v) {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n > MaxClientRetryAfter { // err: more digits than an int holds
			return MaxClientRetryAfter, true
		}
		return max(int64(n), 1), true
	}
	if whole, frac, ok := strings.Cut(v, "."); ok && allDigits(whole+frac) && whole != "" {
		f, err := strconv.ParseFloat(v, 64) // digits and one dot: at worst +Inf
		if err != nil && !isRangeError(err) {
			return 0, false
		}
		if f >= MaxClientRetryAfter {
			return MaxClientRetryAfter, true
		}
		return max(int64(math.Ceil(f)), 1), true
	}
	if t, err := http.ParseTime(v); err == nil {
		d := t.Sub(now)
		if d >= MaxClientRetryAfter*time.Second {
			return MaxClientRetryAfter, true
		}
		return max(int64((d+time.Second-1)/time.Second), 1), true
	}
	return 0, false
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func isRangeError(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// retryHintHeaders are the response headers that tell a client how long
// to wait, in seconds; each passes through ClientRetryAfter.
var retryHintHeaders = []string{"Retry-After", "X-Omniroute-Retry-After-Seconds"}

// sanitizeRetryHeaders rewrites every retry hint in h with
// ClientRetryAfter, dropping the unusable ones. Several values of one
// header become the first usable one.
func sanitizeRetryHeaders(h http.Header, now time.Time) {
	for _, k := range retryHintHeaders {
		vs, ok := h[k]
		if !ok {
			continue
		}
		delete(h, k)
		for _, v := range vs {
			if s, ok := ClientRetryAfter(v, now); ok {
				h[k] = []string{strconv.FormatInt(s, 10)}
				break
			}
		}
	}
}
