package lease

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// Error is a refusal with a stable code and HTTP status. The package's
// sentinels (ErrFenceStale, ErrRequired, …) are *Error values; compare
// with errors.Is. A few sentinels refine another one and match it too:
// [ErrAuthorizationMismatch] is a kind of [ErrFenceStale], and
// [ErrGenerationExhausted] and [ErrStoreFull] are kinds of
// [ErrServiceUnavailable].
type Error struct {
	// Code is the stable machine-readable code, such as "LEASE_FENCE_STALE".
	Code string
	// Status is the HTTP status that answers the refusal.
	Status int
	// Message is the human-readable message of the JSON error envelope.
	Message string

	text   string // lowercase description for Error
	parent *Error // a broader sentinel this one also matches
}

// Error returns "lease: " followed by a lowercase description.
func (e *Error) Error() string { return "lease: " + e.text }

// Is reports whether target is the broader sentinel e refines.
func (e *Error) Is(target error) bool {
	for p := e.parent; p != nil; p = p.parent {
		if target == error(p) {
			return true
		}
	}
	return false
}

func newError(status int, code, text, message string) *Error {
	return &Error{Code: code, Status: status, Message: message, text: text}
}

func refine(parent *Error, text, message string) *Error {
	return &Error{Code: parent.Code, Status: parent.Status, Message: message, text: text, parent: parent}
}

// Sentinel errors. The code and status of each are those of the wire
// protocol; codes marked "routeguard" are this package's additions.
var (
	// ErrAuthenticationRequired: no API key was presented (401).
	ErrAuthenticationRequired = newError(http.StatusUnauthorized, "LEASE_AUTHENTICATION_REQUIRED", "authentication required", "Authentication is required")
	// ErrAPIKeyInvalid: the API key is unknown or disabled (401).
	ErrAPIKeyInvalid = newError(http.StatusUnauthorized, "LEASE_API_KEY_INVALID", "invalid api key", "Invalid API key")
	// ErrContentTypeRequired: the body is not application/json (415).
	ErrContentTypeRequired = newError(http.StatusUnsupportedMediaType, "LEASE_CONTENT_TYPE_REQUIRED", "content type application/json required", "Content-Type must be application/json")
	// ErrActionInvalid: the body is not one of the lifecycle actions (400).
	ErrActionInvalid = newError(http.StatusBadRequest, "LEASE_ACTION_INVALID", "invalid action", "Invalid session lease action")
	// ErrBodyTooLarge: the body exceeds the handler's limit (413, routeguard).
	ErrBodyTooLarge = newError(http.StatusRequestEntityTooLarge, "LEASE_BODY_TOO_LARGE", "request body too large", "Request body is too large")
	// ErrMethodNotAllowed: the route answers only POST and OPTIONS (405, routeguard).
	ErrMethodNotAllowed = newError(http.StatusMethodNotAllowed, "LEASE_METHOD_NOT_ALLOWED", "method not allowed", "Method not allowed")
	// ErrServiceUnavailable: the lease service failed unexpectedly (503).
	ErrServiceUnavailable = newError(http.StatusServiceUnavailable, "LEASE_SERVICE_UNAVAILABLE", "service unavailable", "Session lease service is temporarily unavailable")
	// ErrProviderRetired: the model's provider is retired (410). The message
	// never names the provider.
	ErrProviderRetired = newError(http.StatusGone, "PROVIDER_RETIRED", "provider retired", "Provider is retired and unavailable.")
	// ErrScopeRequired: the API key lacks the lease:exclusive scope (403).
	ErrScopeRequired = newError(http.StatusForbidden, "LEASE_SCOPE_REQUIRED", "lease:exclusive scope required", "API key is not enabled for exclusive session leases")
	// ErrKeyConfigurationInvalid: a stored managed key has an empty
	// connection allowlist (403).
	ErrKeyConfigurationInvalid = newError(http.StatusForbidden, "LEASE_KEY_CONFIGURATION_INVALID", "managed key has no allowed connections", "Managed API key has no allowed connections")
	// ErrKeyPolicyInvalid: creating a managed key without allowed
	// connections (400). See [ValidateKeyPolicy].
	ErrKeyPolicyInvalid = newError(http.StatusBadRequest, "LEASE_KEY_POLICY_INVALID", "managed key requires allowed connections", "An API key with the lease:exclusive scope requires a non-empty connection allowlist")
	// ErrContextRequired: the owner header is missing (400).
	ErrContextRequired = newError(http.StatusBadRequest, "LEASE_CONTEXT_REQUIRED", "lease owner required", "Lease owner header is required")
	// ErrContextInvalid: the owner or generation is malformed or missing
	// (400).
	ErrContextInvalid = newError(http.StatusBadRequest, "LEASE_CONTEXT_INVALID", "invalid lease context", "Lease owner or generation is invalid")
	// ErrModelInvalid: the model names no provider (400).
	ErrModelInvalid = newError(http.StatusBadRequest, "LEASE_MODEL_INVALID", "model has no provider", "Model does not resolve to a provider")
	// ErrRequired: the owner holds no active lease (409).
	ErrRequired = newError(http.StatusConflict, "LEASE_REQUIRED", "no active lease", "An active session lease is required")
	// ErrFenceStale: the presented generation is not the active one, or the
	// lease is inactive (409).
	ErrFenceStale = newError(http.StatusConflict, "LEASE_FENCE_STALE", "stale lease generation", "Session lease generation is stale")
	// ErrAuthorizationMismatch: the right owner and generation came through
	// another API key. It matches ErrFenceStale and has its code.
	ErrAuthorizationMismatch = refine(ErrFenceStale, "lease held under another api key", "Session lease generation is stale")
	// ErrConnectionMismatch: the request names a connection other than the
	// leased one (409).
	ErrConnectionMismatch = newError(http.StatusConflict, "LEASE_CONNECTION_MISMATCH", "connection is not the leased one", "Requested connection does not match the session lease")
	// ErrOwnerAlreadyActive: the owner already holds a lease under another
	// API key or connection (409, routeguard code). The existing lease is
	// unchanged.
	ErrOwnerAlreadyActive = newError(http.StatusConflict, "LEASE_OWNER_ALREADY_ACTIVE", "owner already holds a lease", "Lease owner already holds an active session lease")
	// ErrNoEligibleConnection: no allowed connection is eligible (409).
	ErrNoEligibleConnection = newError(http.StatusConflict, "LEASE_NO_ELIGIBLE_CONNECTION", "no eligible connection", "No eligible connection for an exclusive session lease")
	// ErrEligibilityUnavailable: every allowed connection is rate limited or
	// expired (429, no Retry-After).
	ErrEligibilityUnavailable = newError(http.StatusTooManyRequests, "LEASE_ELIGIBILITY_UNAVAILABLE", "no connection currently eligible", "No connection is currently eligible for an exclusive session lease")
	// ErrUnsupportedRoute: the route fans out to several connections, which
	// a lease cannot fence (409).
	ErrUnsupportedRoute = newError(http.StatusConflict, "LEASE_UNSUPPORTED_ROUTE", "route not supported with a lease", "This route is not supported with an exclusive session lease")
	// ErrCapacityUnavailable: every eligible connection is held by another
	// owner (429). The seed guide spells it lease-capacity-unavailable. The
	// error actually returned is a *CapacityError, which matches this value.
	ErrCapacityUnavailable = newError(http.StatusTooManyRequests, "LEASE_CAPACITY_UNAVAILABLE", "capacity unavailable", "Exclusive managed session capacity is temporarily unavailable")
	// ErrGenerationExhausted: the owner's generation reached MaxGeneration.
	// It matches ErrServiceUnavailable.
	ErrGenerationExhausted = refine(ErrServiceUnavailable, "lease generation exhausted", "Session lease service is temporarily unavailable")
	// ErrStoreFull: the in-memory store holds MaxOwners active leases and
	// cannot take another owner. It matches ErrServiceUnavailable.
	ErrStoreFull = refine(ErrServiceUnavailable, "lease store full", "Session lease service is temporarily unavailable")
)

// MaxRetryAfter bounds the Retry-After of a [CapacityError].
const MaxRetryAfter = time.Hour

// CapacityError reports that every eligible connection is held by another
// owner. It matches [ErrCapacityUnavailable] with errors.Is.
type CapacityError struct {
	// EarliestExpiry is the earliest expiry among the occupants' leases,
	// zero when unknown.
	EarliestExpiry time.Time
	// RetryAfter is ceil(EarliestExpiry − now) in whole seconds, clamped to
	// [1 s, MaxRetryAfter]; 1 s when the expiry is unknown.
	RetryAfter time.Duration
	// Eligible is the number of eligible candidates considered.
	Eligible int
	// Free is the number of those not held by another owner (0).
	Free int
}

// Error returns a lowercase description with the retry delay.
func (e *CapacityError) Error() string {
	return "lease: capacity unavailable, retry after " + e.RetryAfter.String()
}

// Is reports whether target is ErrCapacityUnavailable.
func (e *CapacityError) Is(target error) bool { return target == error(ErrCapacityUnavailable) }

// RetryAfterSeconds returns the Retry-After value in whole seconds.
func (e *CapacityError) RetryAfterSeconds() int { return int(e.RetryAfter / time.Second) }

// RetryAfter computes the Retry-After delay for an occupant expiring at
// expiry: ceil(expiry − now) in whole seconds, clamped to
// [1 s, MaxRetryAfter]. A zero expiry gives 1 s.
func RetryAfter(expiry, now time.Time) time.Duration {
	if expiry.IsZero() {
		return time.Second
	}
	d := expiry.Sub(now)
	secs := int64(d / time.Second)
	if d%time.Second > 0 {
		secs++
	}
	secs = min(max(secs, 1), int64(MaxRetryAfter/time.Second))
	return time.Duration(secs) * time.Second
}

func newCapacityError(expiry, now time.Time, eligible, free int) *CapacityError {
	return &CapacityError{
		EarliestExpiry: expiry,
		RetryAfter:     RetryAfter(expiry, now),
		Eligible:       max(0, eligible),
		Free:           max(0, free),
	}
}

type errorBody struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    string `json:"code"`
}

type errorEnvelope struct {
	Error errorBody `json:"error"`
}

type capacityEnvelope struct {
	State         string    `json:"state"`
	Error         errorBody `json:"error"`
	Reason        string    `json:"reason"`
	RetryAfter    int       `json:"retryAfter"`
	EligibleCount int       `json:"eligibleCount"`
	FreeCount     int       `json:"freeCount"`
}

// ErrorType is the "type" of every lease error envelope.
const ErrorType = "lease_error"

// WriteError answers err as JSON. A *CapacityError becomes the 429
// capacity body with a Retry-After header; an *Error becomes
// {"error":{"message","type":"lease_error","code"}} with its status; any
// other error becomes ErrServiceUnavailable, so internal details never
// reach the client.
func WriteError(w http.ResponseWriter, err error) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	var ce *CapacityError
	if errors.As(err, &ce) {
		secs := ce.RetryAfterSeconds()
		h.Set("Retry-After", strconv.Itoa(secs))
		w.WriteHeader(ErrCapacityUnavailable.Status)
		_ = json.NewEncoder(w).Encode(capacityEnvelope{
			State: "WAITING_FOR_CAPACITY",
			Error: errorBody{
				Message: ErrCapacityUnavailable.Message,
				Type:    ErrorType,
				Code:    ErrCapacityUnavailable.Code,
			},
			Reason:        "NO_FREE_ELIGIBLE_CONNECTION",
			RetryAfter:    secs,
			EligibleCount: ce.Eligible,
			FreeCount:     ce.Free,
		})
		return
	}
	var le *Error
	if !errors.As(err, &le) {
		le = ErrServiceUnavailable
	}
	w.WriteHeader(le.Status)
	_ = json.NewEncoder(w).Encode(errorEnvelope{Error: errorBody{Message: le.Message, Type: ErrorType, Code: le.Code}})
}
