package lease

import (
	"errors"
	"net/http"
	"strconv"
	"time"
)

// Codes of the refusals the package returns. The values are the wire
// codes of the contract; LEASE_OWNER_ALREADY_ACTIVE is routeguard's
// addition and invalid_config the library-wide code for bad settings.
const (
	CodeContextRequired      = "LEASE_CONTEXT_REQUIRED"       // 400: the owner is missing
	CodeContextInvalid       = "LEASE_CONTEXT_INVALID"        // 400: the owner or generation is malformed or missing
	CodeRequired             = "LEASE_REQUIRED"               // 409: the owner holds no active lease
	CodeFenceStale           = "LEASE_FENCE_STALE"            // 409: another generation, another API key or an inactive lease
	CodeConnectionMismatch   = "LEASE_CONNECTION_MISMATCH"    // 409: not the leased connection
	CodeOwnerAlreadyActive   = "LEASE_OWNER_ALREADY_ACTIVE"   // 409: the owner holds a lease elsewhere
	CodeNoEligibleConnection = "LEASE_NO_ELIGIBLE_CONNECTION" // 409: no candidate connection
	CodeCapacityUnavailable  = "LEASE_CAPACITY_UNAVAILABLE"   // 429: every candidate is held by another owner
	CodeServiceUnavailable   = "LEASE_SERVICE_UNAVAILABLE"    // 503: generation exhausted, store full
	CodeInvalidConfig        = "invalid_config"               // 400: a bad setting or argument
)

// Sentinels, one per code; every *[Error] matches the one of its code
// with errors.Is.
var (
	ErrContextRequired      = errors.New("lease: lease owner required")
	ErrContextInvalid       = errors.New("lease: invalid lease context")
	ErrRequired             = errors.New("lease: no active lease")
	ErrFenceStale           = errors.New("lease: stale lease generation")
	ErrConnectionMismatch   = errors.New("lease: connection is not the leased one")
	ErrOwnerAlreadyActive   = errors.New("lease: owner already holds a lease")
	ErrNoEligibleConnection = errors.New("lease: no eligible connection")
	ErrCapacityUnavailable  = errors.New("lease: capacity unavailable")
	ErrServiceUnavailable   = errors.New("lease: service unavailable")
	ErrInvalidConfig        = errors.New("lease: invalid configuration")
)

// authMismatch is the Detail of the [CodeFenceStale] refusal for the right
// owner and generation presented through another API key.
const authMismatch = "lease held under another api key"

// Error is a refusal of this package, with the contract's code and HTTP
// status. Match the kind with errors.Is against the sentinels (Unwrap
// gives the code's sentinel) or read the fields with errors.As.
//
// A [Store] may build one itself: Code and the detail fields are enough,
// Unwrap derives the sentinel from Code.
type Error struct {
	// Code is one of the CodeX constants.
	Code string
	// Status is the HTTP status the contract gives the code.
	Status int

	// Until is, for CodeCapacityUnavailable, the earliest expiry among the
	// occupants' leases; zero when unknown.
	Until time.Time
	// RetryAfter is, for CodeCapacityUnavailable, Until − now rounded up to
	// whole seconds and clamped to [1 s, 1 h]; 1 s when Until is unknown.
	RetryAfter time.Duration
	// Eligible and Free are, for CodeCapacityUnavailable, the candidates
	// considered and how many of them were free (0).
	Eligible, Free int

	// Field is, for CodeInvalidConfig, the environment variable or
	// argument at fault.
	Field string
	// Detail is a lowercase description that replaces the code's own in
	// Error, for example "lease generation exhausted". A CodeFenceStale
	// refusal whose Detail is exactly "lease held under another api key"
	// says that the right owner and generation came through another API
	// key (the contract's authorization mismatch); every other stale
	// refusal has no Detail.
	Detail string
}

// Error returns "lease: <code>: <detail>".
func (e *Error) Error() string {
	text := e.Detail
	if text == "" {
		_, s := codeInfo(e.Code)
		if s == nil {
			text = "refused"
		} else {
			text = s.Error()[len("lease: "):]
		}
	}
	if e.Field != "" {
		text = e.Field + ": " + text
	}
	if e.Code == CodeCapacityUnavailable {
		text += ", retry after " + e.RetryAfter.String()
	}
	return "lease: " + e.Code + ": " + text
}

// Unwrap returns the sentinel of e's code, or nil for a code this package
// does not have.
func (e *Error) Unwrap() error {
	_, s := codeInfo(e.Code)
	return s
}

// codeInfo returns the HTTP status and sentinel of code.
func codeInfo(code string) (int, error) {
	switch code {
	case CodeContextRequired:
		return http.StatusBadRequest, ErrContextRequired
	case CodeContextInvalid:
		return http.StatusBadRequest, ErrContextInvalid
	case CodeRequired:
		return http.StatusConflict, ErrRequired
	case CodeFenceStale:
		return http.StatusConflict, ErrFenceStale
	case CodeConnectionMismatch:
		return http.StatusConflict, ErrConnectionMismatch
	case CodeOwnerAlreadyActive:
		return http.StatusConflict, ErrOwnerAlreadyActive
	case CodeNoEligibleConnection:
		return http.StatusConflict, ErrNoEligibleConnection
	case CodeCapacityUnavailable:
		return http.StatusTooManyRequests, ErrCapacityUnavailable
	case CodeServiceUnavailable:
		return http.StatusServiceUnavailable, ErrServiceUnavailable
	case CodeInvalidConfig:
		return http.StatusBadRequest, ErrInvalidConfig
	}
	return http.StatusServiceUnavailable, nil
}

func newError(code string) *Error {
	status, _ := codeInfo(code)
	return &Error{Code: code, Status: status}
}

// The refusals without detail are built once, so that the fence path does
// not allocate. They are never handed out for modification: callers read
// them through errors.As.
var (
	errContextRequired  = newError(CodeContextRequired)
	errContextInvalid   = newError(CodeContextInvalid)
	errRequired         = newError(CodeRequired)
	errFenceStale       = newError(CodeFenceStale)
	errAuthMismatch     = &Error{Code: CodeFenceStale, Status: http.StatusConflict, Detail: authMismatch}
	errConnMismatch     = newError(CodeConnectionMismatch)
	errOwnerActive      = newError(CodeOwnerAlreadyActive)
	errNoEligible       = newError(CodeNoEligibleConnection)
	errUnavailable      = newError(CodeServiceUnavailable)
	errStoreFull        = &Error{Code: CodeServiceUnavailable, Status: http.StatusServiceUnavailable, Detail: "lease store full"}
	errGenExhausted     = &Error{Code: CodeServiceUnavailable, Status: http.StatusServiceUnavailable, Detail: "lease generation exhausted"}
	errReleaseReason    = &Error{Code: CodeInvalidConfig, Status: http.StatusBadRequest, Field: "reason", Detail: "not OWNER_EXIT or CLIENT_CANCELLED"}
	errInvalidateReason = &Error{Code: CodeInvalidConfig, Status: http.StatusBadRequest, Field: "reason", Detail: "not an end reason of the contract, or TTL_EXPIRED"}
)

// refusal turns what a store returned into the Manager's answer: a bare
// sentinel becomes its *Error, an *Error gets its status when it has none,
// and any other error (a failure of the store) passes unchanged.
func refusal(err error) error {
	switch err {
	case nil:
		return nil
	case ErrRequired:
		return errRequired
	case ErrFenceStale:
		return errFenceStale
	case ErrConnectionMismatch:
		return errConnMismatch
	case ErrOwnerAlreadyActive:
		return errOwnerActive
	case ErrContextRequired:
		return errContextRequired
	case ErrContextInvalid:
		return errContextInvalid
	case ErrNoEligibleConnection:
		return errNoEligible
	case ErrServiceUnavailable:
		return errUnavailable
	}
	e, ok := err.(*Error) // the common case, without errors.As
	if !ok {
		if e = asError(err); e == nil {
			return err
		}
	}
	if e.Status == 0 {
		if *e == (Error{Code: CodeFenceStale, Detail: authMismatch}) {
			return errAuthMismatch
		}
		c := *e
		c.Status, _ = codeInfo(c.Code)
		return &c
	}
	return err
}

// asError returns the *Error in err's chain, or nil. It is apart from
// refusal so that refusal's common case does not allocate.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// maxRetryAfter bounds the RetryAfter of a capacity refusal.
const maxRetryAfter = time.Hour

// retryAfter computes the Retry-After delay for an occupant expiring at
// expiry: ceil(expiry − now) in whole seconds, clamped to
// [1 s, maxRetryAfter]. A zero expiry gives 1 s.
func retryAfter(expiry, now time.Time) time.Duration {
	if expiry.IsZero() {
		return time.Second
	}
	d := expiry.Sub(now)
	secs := int64(d / time.Second)
	if d%time.Second > 0 {
		secs++
	}
	secs = min(max(secs, 1), int64(maxRetryAfter/time.Second))
	return time.Duration(secs) * time.Second
}

func capacityError(until, now time.Time, eligible, free int) *Error {
	return &Error{
		Code:       CodeCapacityUnavailable,
		Status:     http.StatusTooManyRequests,
		Until:      until,
		RetryAfter: retryAfter(until, now),
		Eligible:   max(0, eligible),
		Free:       max(0, free),
	}
}

// busyUntil reports whether err is a store's capacity refusal for one
// connection, and the occupant's expiry.
func busyUntil(err error) (time.Time, bool) {
	var e *Error
	if errors.As(err, &e) && e.Code == CodeCapacityUnavailable {
		return e.Until, true
	}
	if errors.Is(err, ErrCapacityUnavailable) {
		return time.Time{}, true
	}
	return time.Time{}, false
}

// settingError reports a bad environment value.
func settingError(name, value string, reason error) error {
	return &Error{Code: CodeInvalidConfig, Status: http.StatusBadRequest, Field: name,
		Detail: reason.Error() + " (" + strconv.Quote(value) + ")"}
}
