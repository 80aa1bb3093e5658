// Package lease gives a managed client session exclusive, fenced ownership
// of one connection (one credential of one provider).
//
// A session proves who it is with an opaque owner token ("vlo_" followed by
// 43 base64url characters, see [NewOwner]). Only the SHA-256 of the token,
// an [OwnerHash], is ever stored or compared. While a lease is active no
// other owner can hold its connection and its owner can hold no other
// connection. Every acquisition of a new lease raises the owner's
// generation by one, and the generation survives a failover to another
// connection ([Manager.TransitionAt]); a request that presents an older
// generation is refused before anything is sent upstream
// ([Manager.FenceAt]).
//
// # Using a Manager
//
// [New] with a zero [Config] gives a Manager backed by an in-memory
// [MemoryStore] with the default lease TTL of 120 s. The lifecycle is
// [Manager.AcquireAt], [Manager.RenewAt] (only before expiry),
// [Manager.ReleaseAt] (idempotent) and [Manager.StatusAt]. A router calls
// [Manager.FenceRequestAt] (or [ParseHeader] and [Manager.FenceAt]) on
// every request that carries lease headers, [Manager.SelectAt] to learn (or
// move) the leased connection, [Manager.HeldAt] to keep requests without a
// lease off leased connections, and [StripHeaders] before the request goes
// upstream or into a log.
// [NewHandler] serves the lifecycle over HTTP (POST /api/v1/session-leases).
//
// Every time-dependent method takes an explicit now; the form without the
// At suffix is shorthand for passing time.Now(). Expired leases are noticed
// lazily, on the next operation that touches them, or in bulk by
// [Manager.ReconcileAt]; nothing runs in the background. A now earlier than
// one the store has already seen is treated as that later time.
//
// # Errors
//
// Refusals are *[Error] values carrying the stable code and HTTP status of
// the wire protocol (for example LEASE_FENCE_STALE, 409). Capacity
// contention is a *[CapacityError], which matches [ErrCapacityUnavailable]
// and carries the Retry-After value. [WriteError] renders either as the
// JSON error envelope.
//
// # Stores
//
// State sits behind the [Store] interface so that several processes can
// share it. Package leasetest holds the conformance suite a Store must pass.
package lease
