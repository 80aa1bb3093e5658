package breaker

import (
	"context"
	"errors"
	"net"
	"strconv"
)

// State is the state of one breaker as a router sees it.
type State uint8

// The four breaker states. The zero value is Closed.
const (
	// Closed admits every request.
	Closed State = iota
	// Degraded is closed after the failure count reached the profile's
	// degraded level, until a success brings it back to the level or
	// below: it still admits every request.
	Degraded
	// Open refuses every request until its open time has passed.
	Open
	// HalfOpen admits one probe at a time; the probe's result closes or
	// reopens the breaker.
	HalfOpen
)

var stateNames = [...]string{"closed", "degraded", "open", "half-open"}

// String returns "closed", "degraded", "open" or "half-open".
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// wireNames are the states as JSON and stored records spell them.
var wireNames = [...]string{"CLOSED", "DEGRADED", "OPEN", "HALF_OPEN"}

// MarshalText encodes the state as CLOSED, DEGRADED, OPEN or HALF_OPEN, the
// spelling of health pages and stored records. [State.UnmarshalText] reads
// it back, and String's lower-case form too. A state the package does not
// know is an [*Error] with code [CodeInvalidRecord].
func (s State) MarshalText() ([]byte, error) {
	if int(s) < len(wireNames) {
		return []byte(wireNames[s]), nil
	}
	return nil, nameError(s.String(), "unknown state")
}

// admits reports whether a breaker in this state admits ordinary requests
// (Closed and Degraded). A HalfOpen breaker admits only its probe.
func (s State) admits() bool { return s == Closed || s == Degraded }

// Outcome is what one admitted request tells its breaker.
type Outcome uint8

// The three outcomes. The zero value is Ignored, so a forgotten
// classification never changes a breaker.
const (
	// Ignored changes nothing: the result says nothing about the provider's
	// health (a 429, a 401, a client abort, a local error).
	Ignored Outcome = iota
	// Success lowers the failure count, or closes a half-open breaker.
	Success
	// Failure raises the failure count, or reopens a half-open breaker.
	Failure
)

var outcomeNames = [...]string{"ignored", "success", "failure"}

// String returns "ignored", "success" or "failure".
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// isTripStatus reports whether an upstream HTTP status counts against a
// provider's breaker: 408, 500, 502, 503 and 504 do; every other status,
// 429 and 529 included, does not.
func isTripStatus(status int) bool {
	switch status {
	case 408, 500, 502, 503, 504:
		return true
	}
	return false
}

// Classify turns the result of one upstream call into an Outcome. body is
// the answer's body, or the part of it the caller has read; nil is fine.
//
// With a non-nil err: context cancellation and deadline errors are Ignored
// (the caller gave up, the provider is not to blame); a [net.Error] (refused
// or reset connection, DNS failure, dial or read timeout) is a Failure; any
// other error is a local error and Ignored. With a nil err: a trip status
// (408, 500, 502, 503 or 504) is a Failure, unless the body says
// "overloaded" (any case, "overloaded_error" too) or "proxy_unreachable":
// the first is a capacity signal rather than an outage, the second a fault
// of the local egress proxy, not of the provider. 200–399 is a Success, and
// everything else (4xx including 429, 529, other 5xx, 0) is Ignored.
func Classify(status int, body []byte, err error) Outcome {
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return Ignored
		}
		var ne net.Error
		if errors.As(err, &ne) {
			return Failure
		}
		return Ignored
	}
	switch {
	case isTripStatus(status):
		if containsFold(body, "overloaded") || containsFold(body, "proxy_unreachable") {
			return Ignored
		}
		return Failure
	case status >= 200 && status < 400:
		return Success
	}
	return Ignored
}

// containsFold reports whether b contains the lower-case ASCII word w in any
// case, without allocating.
func containsFold(b []byte, w string) bool {
	n := len(w)
	for i := 0; i+n <= len(b); i++ {
		match := true
		for j := 0; j < n; j++ {
			c := b[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != w[j] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}
