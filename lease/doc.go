// Package lease gives a managed client session exclusive, fenced ownership
// of one connection (one credential of one provider).
//
// The calls a user starts from:
//
//	m := lease.New(lease.Config{})                                   // in-memory store, 120 s TTL
//	owner, err := lease.ParseOwner(token)                            // the client's "vlo_…" token → its digest
//	l, err := m.AcquireAt(ctx, holder, provider, candidates, now)    // lease one free candidate
//	err = m.FenceAt(ctx, holder, connection, now)                    // before every dispatch
//
// A router also calls [ParseHeader] to read the lease headers of a
// request, [Manager.SelectAt] to learn (or move) the leased connection,
// [Manager.HeldAt] to keep requests without a lease off leased connections,
// and [StripHeaders] before the request goes upstream or into a log. The
// lifecycle over HTTP (POST /api/v1/session-leases) is served by package
// github.com/routeguard/routeguard/combo/admin.
//
// # The model
//
// A session proves who it is with an opaque owner token that the client
// makes once per session: "vlo_" followed by 43 base64url characters, for
// example the unpadded base64url encoding of 32 bytes from crypto/rand.
// Only the SHA-256 of the token, an [OwnerHash], is ever stored or
// compared. While a lease is active no other owner can hold its connection
// and its owner can hold no other connection. Every new lease raises the
// owner's generation by one, and the generation survives a move to another
// connection ([Manager.SelectAt], [Manager.AcquireAt]); a request that
// presents an older generation is refused before anything is sent upstream
// ([Manager.FenceAt]). The
// lifecycle is [Manager.AcquireAt] (acquiring again renews),
// [Manager.RenewAt] (only before expiry), [Manager.ReleaseAt] (idempotent),
// [Manager.InvalidateAt] and [Manager.StatusAt].
//
// # The zero value
//
// A zero [Config] gives a Manager over an in-memory store with a lease TTL
// of 120 s, remembering up to 100 000 owners for 24 h after their last
// lease. The zero Manager is not usable; call [New].
//
// # Errors
//
// Every refusal is an *[Error] with the contract's code and HTTP status
// (for example LEASE_FENCE_STALE, 409); match its kind with errors.Is and
// the sentinels ([ErrFenceStale], [ErrRequired], …) or read it with
// errors.As. Capacity contention ([ErrCapacityUnavailable]) carries the
// occupants' earliest expiry and the Retry-After delay; a fence refusal for
// the right owner and generation presented through another API key is a
// LEASE_FENCE_STALE whose Detail says so ([Error.Detail]).
//
// # Time, concurrency and cost
//
// Every time-dependent method takes an explicit now. Expired leases are
// noticed lazily, on the next operation that touches them, or in bulk by
// [Manager.ReconcileAt]; nothing runs in the background. A now earlier than
// one the store has already seen is treated as that later time, so a clock
// that jumps backwards never shortens or revives a lease.
//
// A Manager is safe for concurrent use and every store operation is
// linearizable. With the in-memory store, [ParseHeader], [Manager.FenceAt]
// (refusals included) and [Manager.HeldAt] allocate nothing; acquire and
// release take one lock each and allocate nothing either.
//
// # Stores
//
// State sits behind the [Store] interface so that several processes can
// share it; [NewMemoryStore] is the default. Package leasetest holds the
// conformance suite a Store must pass.
package lease
