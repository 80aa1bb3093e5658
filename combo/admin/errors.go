package admin

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/routeguard/routeguard/lease"
)

// Codes of the admin API's own error answers ({"error": message, "code":
// code}). The lease route answers with its own codes, listed with the
// sentinels below.
const (
	CodeUnauthorized     = "unauthorized"           // 401: no or unknown credentials
	CodeForbidden        = "forbidden"              // 403: a known caller without the right
	CodeMethodNotAllowed = "method_not_allowed"     // 405, with Allow
	CodeNotFound         = "not_found"              // 404: no such route, or leases not enabled
	CodeContentType      = "unsupported_media_type" // 415: a body that is not application/json
	CodeBodyTooLarge     = "body_too_large"         // 413
	CodeInvalidJSON      = "invalid_json"           // 400: bad JSON, a wrong field type, trailing data
	CodeUnknownField     = "unknown_field"          // 400
	CodeInvalidRequest   = "invalid_request"        // 400: a well-formed body asking for something invalid
	CodeUnavailable      = "unavailable"            // 503: an answer that could not be encoded
)

// Error is a refusal of the admin API, with its code, its HTTP status and
// the message of the answer. The management routes write it as
// {"error": Message, "code": Code}; the lease route as
// {"error":{"message","type":"lease_error","code"}}.
//
// An [Config.Authorize] function, a [LeaseAuthenticator] or a
// [LeaseResolver] may return one to answer with a status and code of its
// choice (for example a rate limit on admin calls, or an API key policy
// refusal); it is answered as it is.
type Error struct {
	Code    string // one of the CodeX constants, a lease route code, or the caller's own
	Status  int    // HTTP status of the answer
	Message string // the human-readable message of the answer
}

// Error returns "admin: <code>: <message>".
func (e *Error) Error() string { return "admin: " + e.Code + ": " + e.Message }

// Unwrap returns the sentinel of e.Code: [ErrUnauthorized] for
// CodeUnauthorized, [ErrForbidden] for CodeForbidden, the lease route's
// sentinel for a lease code (for example [ErrLeaseKeyPolicyInvalid] for
// LEASE_KEY_POLICY_INVALID); nil for any other code.
func (e *Error) Unwrap() error {
	switch e.Code {
	case CodeUnauthorized:
		return ErrUnauthorized
	case CodeForbidden:
		return ErrForbidden
	}
	for _, w := range leaseWire {
		if w.code == e.Code {
			return w.err
		}
	}
	return nil
}

// Refusals an [Config.Authorize] function returns; any other error (except
// an *[Error] with a 4xx status) is answered like ErrUnauthorized.
var (
	// ErrUnauthorized: the caller is not known (401, code unauthorized,
	// message "Unauthorized").
	ErrUnauthorized = errors.New("admin: unauthorized")
	// ErrForbidden: the caller is known but lacks the right (403, code
	// forbidden, message "Forbidden").
	ErrForbidden = errors.New("admin: forbidden")
)

// Refusals a [LeaseAuthenticator] or [LeaseResolver] returns; the lease
// route answers each with the contract's status and code.
var (
	// ErrLeaseAuthenticationRequired: no API key was presented (401
	// LEASE_AUTHENTICATION_REQUIRED).
	ErrLeaseAuthenticationRequired = errors.New("admin: lease authentication required")
	// ErrLeaseAPIKeyInvalid: the API key is unknown or disabled (401
	// LEASE_API_KEY_INVALID).
	ErrLeaseAPIKeyInvalid = errors.New("admin: invalid api key")
	// ErrLeaseModelInvalid: the model names no provider (400
	// LEASE_MODEL_INVALID).
	ErrLeaseModelInvalid = errors.New("admin: model has no provider")
	// ErrLeaseProviderRetired: the model's provider is retired (410
	// PROVIDER_RETIRED; the message never names the provider).
	ErrLeaseProviderRetired = errors.New("admin: provider retired")
	// ErrLeaseEligibilityUnavailable: every allowed connection is rate
	// limited or expired (429 LEASE_ELIGIBILITY_UNAVAILABLE, no
	// Retry-After).
	ErrLeaseEligibilityUnavailable = errors.New("admin: no connection currently eligible")
	// ErrLeaseKeyPolicyInvalid: a key with the lease:exclusive scope has no
	// allowed connection (400 LEASE_KEY_POLICY_INVALID); see
	// [ValidateLeaseKeyPolicy].
	ErrLeaseKeyPolicyInvalid = errors.New("admin: managed key requires allowed connections")
)

// The route's own refusals.
var (
	errContentType    = errors.New("admin: content type application/json required")
	errActionInvalid  = errors.New("admin: invalid lease action")
	errBodyTooLarge   = errors.New("admin: request body too large")
	errMethod         = errors.New("admin: method not allowed")
	errScopeRequired  = errors.New("admin: lease:exclusive scope required")
	errKeyConfigEmpty = errors.New("admin: managed key has no allowed connections")
)

// leaseErrorType is the "type" of every lease error envelope.
const leaseErrorType = "lease_error"

// wire is how a refusal is answered.
type wire struct {
	err     error
	status  int
	code    string
	message string
}

// leaseWire lists every refusal of the lease route. The lease codes keep
// the status their *lease.Error carries; the table gives the status of a
// bare lease sentinel and every message.
var leaseWire = []wire{
	{ErrLeaseAuthenticationRequired, http.StatusUnauthorized, "LEASE_AUTHENTICATION_REQUIRED", "Authentication is required"},
	{ErrLeaseAPIKeyInvalid, http.StatusUnauthorized, "LEASE_API_KEY_INVALID", "Invalid API key"},
	{errContentType, http.StatusUnsupportedMediaType, "LEASE_CONTENT_TYPE_REQUIRED", "Content-Type must be application/json"},
	{errActionInvalid, http.StatusBadRequest, "LEASE_ACTION_INVALID", "Invalid session lease action"},
	{errBodyTooLarge, http.StatusRequestEntityTooLarge, "LEASE_BODY_TOO_LARGE", "Request body is too large"},
	{errMethod, http.StatusMethodNotAllowed, "LEASE_METHOD_NOT_ALLOWED", "Method not allowed"},
	{ErrLeaseProviderRetired, http.StatusGone, "PROVIDER_RETIRED", "Provider is retired and unavailable."},
	{errScopeRequired, http.StatusForbidden, "LEASE_SCOPE_REQUIRED", "API key is not enabled for exclusive session leases"},
	{errKeyConfigEmpty, http.StatusForbidden, "LEASE_KEY_CONFIGURATION_INVALID", "Managed API key has no allowed connections"},
	{ErrLeaseKeyPolicyInvalid, http.StatusBadRequest, "LEASE_KEY_POLICY_INVALID", "An API key with the lease:exclusive scope requires a non-empty connection allowlist"},
	{ErrLeaseModelInvalid, http.StatusBadRequest, "LEASE_MODEL_INVALID", "Model does not resolve to a provider"},
	{ErrLeaseEligibilityUnavailable, http.StatusTooManyRequests, "LEASE_ELIGIBILITY_UNAVAILABLE", "No connection is currently eligible for an exclusive session lease"},

	{lease.ErrContextRequired, http.StatusBadRequest, lease.CodeContextRequired, "Lease owner header is required"},
	{lease.ErrContextInvalid, http.StatusBadRequest, lease.CodeContextInvalid, "Lease owner or generation is invalid"},
	{lease.ErrRequired, http.StatusConflict, lease.CodeRequired, "An active session lease is required"},
	{lease.ErrFenceStale, http.StatusConflict, lease.CodeFenceStale, "Session lease generation is stale"},
	{lease.ErrConnectionMismatch, http.StatusConflict, lease.CodeConnectionMismatch, "Requested connection does not match the session lease"},
	{lease.ErrOwnerAlreadyActive, http.StatusConflict, lease.CodeOwnerAlreadyActive, "Lease owner already holds an active session lease"},
	{lease.ErrNoEligibleConnection, http.StatusConflict, lease.CodeNoEligibleConnection, "No eligible connection for an exclusive session lease"},
	{lease.ErrCapacityUnavailable, http.StatusTooManyRequests, lease.CodeCapacityUnavailable, "Exclusive managed session capacity is temporarily unavailable"},
	{lease.ErrServiceUnavailable, http.StatusServiceUnavailable, lease.CodeServiceUnavailable, "Session lease service is temporarily unavailable"},
	{lease.ErrInvalidConfig, http.StatusBadRequest, lease.CodeInvalidConfig, "Invalid session lease setting"},
}

// serviceUnavailable answers every error the route does not know, so that
// internal details never reach the client.
var serviceUnavailable = leaseWireFor(lease.ErrServiceUnavailable)

func leaseWireFor(sentinel error) wire {
	for _, w := range leaseWire {
		if w.err == sentinel {
			return w
		}
	}
	panic("admin: no wire entry")
}

// knownLeaseError reports how err is answered, and false for an error the
// route does not know.
func knownLeaseError(err error) (wire, bool) {
	var ae *Error
	if errors.As(err, &ae) {
		return wire{err: err, status: ae.Status, code: ae.Code, message: ae.Message}, true
	}
	var le *lease.Error
	if errors.As(err, &le) {
		for _, w := range leaseWire {
			if w.code == le.Code {
				if le.Status != 0 {
					w.status = le.Status
				}
				return w, true
			}
		}
		return wire{}, false
	}
	for _, w := range leaseWire {
		if errors.Is(err, w.err) {
			return w, true
		}
	}
	return wire{}, false
}

// passThrough keeps the errors the route knows and hides the rest behind
// LEASE_SERVICE_UNAVAILABLE.
func passThrough(err error) error {
	if _, ok := knownLeaseError(err); ok {
		return err
	}
	return lease.ErrServiceUnavailable
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

// WriteLeaseError answers err in the lease wire format. A capacity refusal
// of package lease (code LEASE_CAPACITY_UNAVAILABLE) becomes the 429
// capacity body
//
//	{"state":"WAITING_FOR_CAPACITY","error":{…},"reason":"NO_FREE_ELIGIBLE_CONNECTION",
//	 "retryAfter":S,"eligibleCount":E,"freeCount":F}
//
// with the header Retry-After: S (the refusal's RetryAfter in whole
// seconds); any other refusal of package lease, of this package or of an
// *[Error] becomes {"error":{"message","type":"lease_error","code"}} with
// its status; any other error becomes 503 LEASE_SERVICE_UNAVAILABLE, so
// internal details never reach the client.
func WriteLeaseError(w http.ResponseWriter, err error) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	wr, ok := knownLeaseError(err)
	if !ok {
		wr = serviceUnavailable
	}
	var le *lease.Error
	if wr.code == lease.CodeCapacityUnavailable && errors.As(err, &le) {
		secs := int(le.RetryAfter / time.Second)
		h.Set("Retry-After", strconv.Itoa(secs))
		w.WriteHeader(wr.status)
		_ = json.NewEncoder(w).Encode(capacityEnvelope{
			State:         "WAITING_FOR_CAPACITY",
			Error:         errorBody{Message: wr.message, Type: leaseErrorType, Code: wr.code},
			Reason:        "NO_FREE_ELIGIBLE_CONNECTION",
			RetryAfter:    secs,
			EligibleCount: max(0, le.Eligible),
			FreeCount:     max(0, le.Free),
		})
		return
	}
	w.WriteHeader(wr.status)
	_ = json.NewEncoder(w).Encode(errorEnvelope{Error: errorBody{Message: wr.message, Type: leaseErrorType, Code: wr.code}})
}
