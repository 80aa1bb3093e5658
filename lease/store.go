package lease

import (
	"context"
	"time"
)

// Store holds leases. Every method is one atomic, linearizable step, and
// every implementation keeps two invariants under any concurrency, across
// every process that shares it: at most one active lease per owner and at
// most one active lease per connection.
//
// Before acting, every method treats a lease whose ExpiresAt is not after
// now as ended (state EXPIRED, reason TTL_EXPIRED). A now earlier than a
// time the store has already seen is treated as that later time.
// Generations of one owner rise by one with every new lease and never
// fall, not even after the store forgets the owner; a move to another
// connection keeps the generation.
//
// Refusals are the package's sentinels (ErrFenceStale, ErrRequired, …),
// returned as they are or as an *[Error] of their code; any other error is
// a failure of the store itself. The ttl a store receives from the Manager
// is already clamped into the range of [Config.TTL].
//
// Package leasetest checks all of this.
type Store interface {
	// Acquire gives connection (of provider) to h.Owner under h.APIKeyID
	// for ttl; h.Generation is ignored. If the owner's active lease has
	// the same API key and connection it is renewed in place (same
	// generation, provider updated) and returned with renewed set. If the owner is active
	// anywhere else: ErrOwnerAlreadyActive. If another owner holds the
	// connection: an *Error with CodeCapacityUnavailable whose Until is
	// the occupant's expiry. Otherwise a new lease is made with
	// generation one above the owner's highest; when that would pass
	// MaxGeneration: an *Error with CodeServiceUnavailable.
	Acquire(ctx context.Context, h Holder, provider, connection string, ttl time.Duration, now time.Time) (l Lease, renewed bool, err error)

	// Transition moves h's active lease to connection of provider,
	// keeping its generation, with a fresh ttl. The active lease must
	// match h (owner, API key, generation), else ErrFenceStale. When
	// connection is already the leased one, the lease is returned
	// unchanged and previous is zero. A connection held by another owner
	// gives the capacity refusal of Acquire. Otherwise the old lease ends
	// INVALIDATED with reason and is returned as previous.
	Transition(ctx context.Context, h Holder, provider, connection string, reason Reason, ttl time.Duration, now time.Time) (moved, previous Lease, err error)

	// Renew extends h's active lease to now+ttl, or answers ErrFenceStale
	// when no unexpired active lease matches h.
	Renew(ctx context.Context, h Holder, ttl time.Duration, now time.Time) (Lease, error)

	// Release ends h's active lease with reason (RELEASED). It is
	// idempotent: when the newest lease of h's owner and generation is
	// already RELEASED under h's API key it returns that lease with
	// again set. Otherwise ErrFenceStale.
	Release(ctx context.Context, h Holder, reason Reason, now time.Time) (l Lease, again bool, err error)

	// Invalidate ends the owner's active lease of exactly h.Generation
	// (any API key) with reason (INVALIDATED), or answers ErrFenceStale.
	Invalidate(ctx context.Context, h Holder, reason Reason, now time.Time) (Lease, error)

	// Fence checks h against the owner's active lease and connection:
	// ErrRequired when there is none, ErrFenceStale on another
	// generation, on another API key an *Error with CodeFenceStale and
	// Detail "lease held under another api key" (the authorization
	// mismatch), ErrConnectionMismatch on another connection, else nil. It
	// changes nothing and should not allocate (return the sentinels
	// themselves, and build the mismatch *Error once).
	Fence(ctx context.Context, h Holder, connection string, now time.Time) error

	// Owned returns owner's active, unexpired lease.
	Owned(ctx context.Context, owner OwnerHash, now time.Time) (Lease, bool, error)

	// Occupant returns the active, unexpired lease on connection. It
	// changes nothing and should not allocate. A store that can answer
	// from memory may also have HeldUntil(connection, now) (time.Time,
	// bool), the expiry of that lease; Manager.HeldAt, which the router
	// asks for every candidate connection, then uses it instead.
	Occupant(ctx context.Context, connection string, now time.Time) (Lease, bool, error)

	// Reconcile ends every active lease that has expired at now and
	// returns them.
	Reconcile(ctx context.Context, now time.Time) ([]Lease, error)

	// List returns the active, unexpired leases at now, ordered by
	// connection.
	List(ctx context.Context, now time.Time) ([]Lease, error)
}
