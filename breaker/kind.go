package breaker

import (
	"strconv"
	"strings"
	"time"
)

// Kind classifies a counted failure more finely than [Outcome] does. A
// caller that can tell why a request failed passes the kind in a [Report];
// with [Profile.Hints] on, the kind of the failure that opened a breaker
// chooses the base of its open time, and [KindPolicy.OpenAt] can open a
// breaker early on failures of one kind. It encodes as its String form
// (JSON, records).
type Kind uint8

// The failure kinds. The zero value is KindNone: no kind given.
const (
	// KindNone is a failure without a kind.
	KindNone Kind = iota
	// KindTransient is a passing upstream fault (a 5xx, a reset connection).
	KindTransient
	// KindRateLimit is a short-term rate limit (requests or tokens per
	// minute).
	KindRateLimit
	// KindQuotaExhausted is a quota that lasts hours or days (a daily,
	// weekly or plan limit).
	KindQuotaExhausted
)

// numKinds is the number of failure kinds, KindNone included; it sizes
// [Profile.Kinds].
const numKinds = 4

var kindNames = [numKinds]string{"none", "transient", "rate_limit", "quota_exhausted"}

// hintCooldowns is the built-in table of per-kind base open times, used
// with [Profile.Hints] for kinds whose [KindPolicy.Cooldown] is zero. A zero
// entry means the kind has no hint and the profile's Reset applies.
var hintCooldowns = [numKinds]time.Duration{
	KindRateLimit:      time.Minute,
	KindQuotaExhausted: time.Hour,
}

// String returns "none", "transient", "rate_limit" or "quota_exhausted".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// parseKind maps a kind name to its Kind. It accepts the String forms in
// any case, with "-" or "_" between words, and "" or "null" for KindNone.
// Anything else is KindNone with an [*Error] of code [CodeInvalidRecord].
func parseKind(s string) (Kind, error) {
	n := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "-", "_")
	switch n {
	case "", "null":
		return KindNone, nil
	}
	for i, name := range kindNames {
		if n == name {
			return Kind(i), nil
		}
	}
	return KindNone, nameError(s, "unknown failure kind")
}

// MarshalText encodes the kind as its String form. A kind the package does
// not know is an [*Error] with code [CodeInvalidRecord].
func (k Kind) MarshalText() ([]byte, error) {
	if int(k) >= numKinds {
		return nil, nameError(k.String(), "unknown failure kind")
	}
	return []byte(k.String()), nil
}

// UnmarshalText decodes a kind: the String forms in any case, with "-" or
// "_" between words, and "" or "null" for KindNone. Anything else is an
// [*Error] with code [CodeInvalidRecord] (matching [ErrInvalidRecord]).
func (k *Kind) UnmarshalText(b []byte) error {
	v, err := parseKind(string(b))
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// KindPolicy is what a [Profile] does with failures of one [Kind].
type KindPolicy struct {
	// Cooldown replaces Profile.Reset as the base of the open time when
	// the last counted failure had this kind; escalation doubles it and
	// MaxMultiplier caps it as it does Reset. It applies only while
	// Profile.Hints is on. Zero or negative: the built-in hint (rate_limit
	// 60 s, quota_exhausted 1 h, none for the other kinds, which keep
	// Reset). Range [Reset, 24 h]: an open period is never shorter than
	// Reset.
	Cooldown time.Duration
	// OpenAt, when positive, opens a closed breaker at once when this many
	// failures of this kind have been counted since it last closed, even
	// below Profile.OpenAt; such an opening is not a failed probe and does
	// not escalate. Zero or negative: never. Range [1, 1000].
	OpenAt int
}
