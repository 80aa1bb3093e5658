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

// Reason says why a lease ended. The contract's reasons are
// AUTHORIZATION_CHANGED, CLIENT_CANCELLED, CONNECTION_INELIGIBLE,
// HEALTH_OR_COOLDOWN, MANAGED_KEY_REVOKED, MODEL_INELIGIBLE, OWNER_EXIT,
// QUOTA_UNAVAILABLE and TTL_EXPIRED. The two that [Manager.ReleaseAt]
// takes have constants; the others are written as values, for example
// lease.Reason("MANAGED_KEY_REVOKED").
//
// [Manager.ReleaseAt] accepts ReasonOwnerExit (the default) and
// ReasonClientCancelled; [Manager.InvalidateAt] accepts any of them except
// TTL_EXPIRED, which only expiry sets (always with State EXPIRED). A lease
// that [Manager.SelectAt] or [Manager.AcquireAt] moves to another
// connection, or that SelectAt gives up for lack of a free candidate, ends
// with CONNECTION_INELIGIBLE.
type Reason string

// The release reasons.
const (
	ReasonOwnerExit       Reason = "OWNER_EXIT"
	ReasonClientCancelled Reason = "CLIENT_CANCELLED"

	reasonConnectionIneligible Reason = "CONNECTION_INELIGIBLE"
	reasonTTLExpired           Reason = "TTL_EXPIRED"
)

// validReason reports whether r is one of the contract's end reasons.
func validReason(r Reason) bool {
	switch r {
	case "AUTHORIZATION_CHANGED", ReasonClientCancelled, reasonConnectionIneligible,
		"HEALTH_OR_COOLDOWN", "MANAGED_KEY_REVOKED", "MODEL_INELIGIBLE",
		ReasonOwnerExit, "QUOTA_UNAVAILABLE", reasonTTLExpired:
		return true
	}
	return false
}

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

// activeAt reports whether l is active and unexpired at now.
func (l *Lease) activeAt(now time.Time) bool {
	return l.State == StateActive && now.Before(l.ExpiresAt)
}

// Holder identifies a caller presenting a lease: the owner, the API key it
// comes through and the generation it believes current.
type Holder struct {
	Owner      OwnerHash
	APIKeyID   string
	Generation uint64
}

// matches reports whether l belongs to h: same owner (compared in constant
// time), API key and generation.
func (h *Holder) matches(l *Lease) bool {
	return l.Generation == h.Generation && l.APIKeyID == h.APIKeyID && equalHash(l.Owner, h.Owner)
}

// Event reports one change of lease state to [Config.OnChange]. It carries
// the lease after the change (its key fields Owner, APIKeyID, Provider,
// Connection and Generation, and its State, ExpiresAt, EndedAt and
// EndReason), which is enough to persist the change without reading back:
//
//   - a new lease: From is empty and State is ACTIVE;
//   - a lease renewed (or acquired again by its owner): From and State are
//     ACTIVE;
//   - a lease moved to another connection with its generation: Previous is
//     the lease left behind (INVALIDATED, reason CONNECTION_INELIGIBLE),
//     From and State are ACTIVE;
//   - a lease that ended (released, invalidated or expired): Removed is
//     set, From is ACTIVE and State says how it ended.
type Event struct {
	Lease
	// At is the caller's now of the change (for an expiry, the now of
	// the ReconcileAt that noticed it).
	At time.Time
	// From is the state before the change: empty for a new lease, else
	// ACTIVE.
	From State
	// Removed is set when the lease ended and no longer holds its
	// connection.
	Removed bool
	// Previous is, for a move to another connection, the lease that was
	// left behind; zero otherwise.
	Previous Lease
}
