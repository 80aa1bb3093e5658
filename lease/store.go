package lease

import (
	"context"
	"time"
)

// Request asks a [Store] to acquire one connection for one owner.
type Request struct {
	Owner      OwnerHash
	APIKeyID   string
	Provider   string
	Connection string
	// TTL is the lifetime of the lease; stores clamp it with ClampTTL.
	TTL time.Duration
}

// Outcome is the answer of a mutating [Store] operation.
type Outcome struct {
	Result Result
	// Lease is the lease the operation produced or found (zero for STALE
	// and CONNECTION_BUSY).
	Lease Lease
	// Previous is, for TRANSITIONED, the lease that was invalidated.
	Previous Lease
	// BusyUntil is, for CONNECTION_BUSY, the occupant's expiry.
	BusyUntil time.Time
	// Repeated is set when Release found the lease already released.
	Repeated bool
}

// Store holds leases. Every method is one atomic, linearizable step, and
// every implementation keeps two invariants under any concurrency, across
// every process that shares it: at most one active lease per owner and at
// most one active lease per connection.
//
// Before acting, every method treats a lease whose ExpiresAt is not after
// now as ended (state EXPIRED, reason TTL_EXPIRED). A now earlier than a
// time the store has already seen is treated as that later time.
// Generations of one owner rise by one with every new lease (acquire) and
// never fall while the store remembers the owner; a transition keeps the
// generation. Refusals are reported as an Outcome or Result; the error is
// reserved for failures of the store itself and for
// [ErrGenerationExhausted].
//
// Package leasetest checks all of this.
type Store interface {
	// Acquire gives r.Connection to r.Owner. If the owner's active lease
	// has the same API key and connection it is renewed (REUSED, same
	// generation, provider updated). If the owner is active anywhere else:
	// OWNER_ALREADY_ACTIVE. If another owner holds the connection:
	// CONNECTION_BUSY with the occupant's expiry. Otherwise a new lease is
	// made with generation one above the owner's highest (ACQUIRED).
	Acquire(ctx context.Context, r Request, now time.Time) (Outcome, error)

	// Transition moves h's active lease to connection of provider, keeping
	// its generation, with a fresh ttl. The active lease must match h
	// (owner, API key, generation), else STALE. The same connection gives
	// REUSED without change; a connection held by another owner gives
	// CONNECTION_BUSY. Otherwise the old lease ends INVALIDATED with reason
	// and the new one is TRANSITIONED.
	Transition(ctx context.Context, h Holder, provider, connection string, reason Reason, ttl time.Duration, now time.Time) (Outcome, error)

	// Renew extends h's active lease to now+ttl (RENEWED), or answers
	// STALE when no unexpired active lease matches h.
	Renew(ctx context.Context, h Holder, ttl time.Duration, now time.Time) (Outcome, error)

	// Release ends h's active lease with reason (RELEASED). It is
	// idempotent: when the newest lease of h's owner and generation is
	// already RELEASED under h's API key it answers RELEASED again with
	// that lease and Repeated set. Otherwise STALE.
	Release(ctx context.Context, h Holder, reason Reason, now time.Time) (Outcome, error)

	// Invalidate ends the owner's active lease of exactly h.Generation
	// (any API key) with reason (INVALIDATED), or answers STALE.
	Invalidate(ctx context.Context, h Holder, reason Reason, now time.Time) (Outcome, error)

	// Fence checks h against the owner's active lease and connection:
	// REQUIRED when there is none, STALE on another generation,
	// AUTHORIZATION_MISMATCH on another API key, CONNECTION_MISMATCH on
	// another connection, else VALID. It changes nothing and should not
	// allocate.
	Fence(ctx context.Context, h Holder, connection string, now time.Time) (Result, error)

	// Owned returns owner's active, unexpired lease.
	Owned(ctx context.Context, owner OwnerHash, now time.Time) (Lease, bool, error)

	// Occupant returns the active, unexpired lease on connection. It
	// changes nothing and should not allocate.
	Occupant(ctx context.Context, connection string, now time.Time) (Lease, bool, error)

	// Reconcile ends every active lease that has expired at now and
	// returns them.
	Reconcile(ctx context.Context, now time.Time) ([]Lease, error)

	// List returns the active, unexpired leases at now, ordered by
	// connection.
	List(ctx context.Context, now time.Time) ([]Lease, error)
}
