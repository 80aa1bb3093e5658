package lease

import "time"

// State is the lifecycle state of a lease record.
type State string

// Lease states.
const (
	StateActive      State = "ACTIVE"
	StateReleased    State = "RELEASED"
	StateExpired     State = "EXPIRED"
	StateInvalidated State = "INVALIDATED"
)

// Reason says why a lease ended.
type Reason string

// End reasons. ReleaseAt accepts ReasonOwnerExit (the default) and
// ReasonClientCancelled; InvalidateAt and TransitionAt accept any of them
// except ReasonTTLExpired, which only expiry sets.
const (
	ReasonAuthorizationChanged Reason = "AUTHORIZATION_CHANGED"
	ReasonClientCancelled      Reason = "CLIENT_CANCELLED"
	ReasonConnectionIneligible Reason = "CONNECTION_INELIGIBLE"
	ReasonHealthOrCooldown     Reason = "HEALTH_OR_COOLDOWN"
	ReasonManagedKeyRevoked    Reason = "MANAGED_KEY_REVOKED"
	ReasonModelIneligible      Reason = "MODEL_INELIGIBLE"
	ReasonOwnerExit            Reason = "OWNER_EXIT"
	ReasonQuotaUnavailable     Reason = "QUOTA_UNAVAILABLE"
	ReasonTTLExpired           Reason = "TTL_EXPIRED"
)

// Valid reports whether r is one of the end reasons above.
func (r Reason) Valid() bool {
	switch r {
	case ReasonAuthorizationChanged, ReasonClientCancelled, ReasonConnectionIneligible,
		ReasonHealthOrCooldown, ReasonManagedKeyRevoked, ReasonModelIneligible,
		ReasonOwnerExit, ReasonQuotaUnavailable, ReasonTTLExpired:
		return true
	}
	return false
}

// Result is the outcome code of a store operation.
type Result string

// Results of store operations and fence checks.
const (
	// Acquire.
	ResultAcquired           Result = "ACQUIRED"
	ResultReused             Result = "REUSED"
	ResultOwnerAlreadyActive Result = "OWNER_ALREADY_ACTIVE"
	ResultConnectionBusy     Result = "CONNECTION_BUSY"
	// Transition, renew, release, invalidate.
	ResultTransitioned Result = "TRANSITIONED"
	ResultRenewed      Result = "RENEWED"
	ResultReleased     Result = "RELEASED"
	ResultInvalidated  Result = "INVALIDATED"
	ResultStale        Result = "STALE"
	// Fence.
	ResultRequired              Result = "REQUIRED"
	ResultAuthorizationMismatch Result = "AUTHORIZATION_MISMATCH"
	ResultConnectionMismatch    Result = "CONNECTION_MISMATCH"
	ResultValid                 Result = "VALID"
	// Reconcile (events only).
	ResultExpired Result = "EXPIRED"
)

// Lease is one lease record: one owner bound to one connection for one
// generation. It holds the owner's digest, never the token.
type Lease struct {
	Owner      OwnerHash
	APIKeyID   string
	Provider   string
	Connection string
	// Generation is the owner's fencing generation, 1 or more.
	Generation uint64
	State      State
	AcquiredAt time.Time
	RenewedAt  time.Time
	ExpiresAt  time.Time
	// EndedAt and EndReason are set once the lease is no longer active.
	// EndedAt of an expired lease is its ExpiresAt.
	EndedAt   time.Time
	EndReason Reason
}

// ActiveAt reports whether l is active and unexpired at now.
func (l Lease) ActiveAt(now time.Time) bool {
	return l.State == StateActive && now.Before(l.ExpiresAt)
}

// Holder identifies a caller presenting a lease: the owner, the API key it
// comes through and the generation it believes current.
type Holder struct {
	Owner      OwnerHash
	APIKeyID   string
	Generation uint64
}

// Matches reports whether l belongs to h: same owner (compared in constant
// time), API key and generation.
func (h Holder) Matches(l Lease) bool {
	return l.Generation == h.Generation && l.APIKeyID == h.APIKeyID && l.Owner.Equal(h.Owner)
}

// Event reports a change of lease state to [Config.OnChange].
type Event struct {
	// Result is what happened: ACQUIRED, REUSED, TRANSITIONED, RENEWED,
	// RELEASED, INVALIDATED or EXPIRED.
	Result Result
	// Lease is the lease after the change.
	Lease Lease
	// Previous is the lease that was left behind by a transition.
	Previous Lease
}
