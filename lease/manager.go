package lease

import (
	"context"
	"slices"
	"time"
)

// Manager runs the lease lifecycle over a [Store]: it validates input,
// applies the TTL, chooses a connection among candidates, turns store
// answers into *[Error] refusals and reports changes to [Config.OnChange].
//
// A Manager is safe for concurrent use. Create one with [New]; the zero
// value is not usable.
type Manager struct {
	store    Store
	held     heldChecker  // store's copy-free HeldAt, when it has one
	mem      *memoryStore // store, when it is the in-memory one, for HeldAt
	ttl      time.Duration
	onChange func(Event)
}

// New returns a Manager for c (normalised). A nil c.Store means a new
// in-memory store ([NewMemoryStore]).
func New(c Config) *Manager {
	c = c.Normalize()
	if c.Store == nil {
		c.Store = newMemoryStore(c)
	}
	m := &Manager{store: c.Store, ttl: c.TTL, onChange: c.OnChange}
	m.held, _ = c.Store.(heldChecker)
	m.mem, _ = c.Store.(*memoryStore)
	return m
}

// heldChecker is the optional shortcut for HeldAt: a Store that also has
// a method HeldUntil(connection string, now time.Time) (time.Time, bool),
// answering as Occupant would but with the lease's expiry only and from
// memory, lets HeldAt skip copying a whole Lease. The in-memory store has
// it; so may a persistent store that mirrors its active leases.
type heldChecker interface {
	HeldUntil(connection string, now time.Time) (time.Time, bool)
}

func (m *Manager) emit(e Event) {
	if m.onChange != nil {
		m.onChange(e)
	}
}

// changed reports a lease that is active after the change.
func (m *Manager) changed(l Lease, renewed bool, now time.Time) {
	e := Event{Lease: l, At: now}
	if renewed {
		e.From = StateActive
	}
	m.emit(e)
}

// ended reports a lease that ended.
func (m *Manager) ended(l Lease, now time.Time) {
	m.emit(Event{Lease: l, At: now, From: StateActive, Removed: true})
}

// AcquireAt gives h.Owner, presenting API key h.APIKeyID, a lease on one
// of candidates (connections of provider) at now. h.Generation is ignored:
// the store assigns generations. candidates are the connections the
// caller may lease, in order of preference, already narrowed to those
// that are eligible (health, cooldown, quota, model rules) and allowed for
// the API key.
//
//   - The owner's active lease under the same API key on a candidate is
//     kept and its TTL restarted (same generation).
//   - The owner's active lease under the same API key on a connection that
//     is no longer a candidate moves to the first free candidate with the
//     same generation (the old lease ends INVALIDATED, reason
//     CONNECTION_INELIGIBLE).
//   - Otherwise the first candidate not held by another owner is leased
//     with a new generation.
//
// Refusals: [ErrContextRequired] for a zero owner, [ErrNoEligibleConnection]
// without candidates, [ErrOwnerAlreadyActive] when the owner is active
// under another API key (its lease is unchanged), [ErrCapacityUnavailable]
// (with Until, RetryAfter, Eligible and Free) when every candidate is held
// by another owner, [ErrFenceStale] when the owner's lease changed
// concurrently, [ErrServiceUnavailable] when the store is full or the
// owner's generations are exhausted; and store failures.
func (m *Manager) AcquireAt(ctx context.Context, h Holder, provider string, candidates []string, now time.Time) (Lease, error) {
	if h.Owner.isZero() {
		return Lease{}, errContextRequired
	}
	if len(candidates) == 0 {
		return Lease{}, errNoEligible
	}
	cur, ok, err := m.store.Owned(ctx, h.Owner, now)
	if err != nil {
		return Lease{}, err
	}
	if ok {
		if cur.APIKeyID != h.APIKeyID {
			return Lease{}, errOwnerActive
		}
		if !slices.Contains(candidates, cur.Connection) {
			h.Generation = cur.Generation
			return m.move(ctx, h, provider, candidates, reasonConnectionIneligible, now)
		}
		l, until, busy, err := m.tryAcquire(ctx, h, provider, cur.Connection, now)
		if err == nil && busy {
			return Lease{}, capacityError(until, now, len(candidates), 0)
		}
		return l, err
	}
	var earliest time.Time
	for _, conn := range candidates {
		l, until, busy, err := m.tryAcquire(ctx, h, provider, conn, now)
		if err != nil || !busy {
			return l, err
		}
		earliest = earlier(earliest, until)
	}
	return Lease{}, capacityError(earliest, now, len(candidates), 0)
}

// tryAcquire asks the store for conn. It returns the lease, or when the
// connection is held by another owner busy and the time that holder
// expires, or an error.
func (m *Manager) tryAcquire(ctx context.Context, h Holder, provider, conn string, now time.Time) (l Lease, until time.Time, busy bool, err error) {
	l, renewed, err := m.store.Acquire(ctx, h, provider, conn, m.ttl, now)
	if err != nil {
		if until, ok := busyUntil(err); ok {
			return Lease{}, until, true, nil
		}
		return Lease{}, time.Time{}, false, refusal(err)
	}
	m.changed(l, renewed, now)
	return l, time.Time{}, false, nil
}

// move transitions h's lease to the first free candidate. It returns a
// capacity refusal when every candidate is held by another owner.
func (m *Manager) move(ctx context.Context, h Holder, provider string, candidates []string, reason Reason, now time.Time) (Lease, error) {
	var earliest time.Time
	for _, conn := range candidates {
		l, prev, err := m.store.Transition(ctx, h, provider, conn, reason, m.ttl, now)
		if err != nil {
			if until, ok := busyUntil(err); ok {
				earliest = earlier(earliest, until)
				continue
			}
			return Lease{}, refusal(err)
		}
		if prev.State != "" {
			m.emit(Event{Lease: l, At: now, From: StateActive, Previous: prev})
		}
		return l, nil
	}
	return Lease{}, capacityError(earliest, now, len(candidates), 0)
}

func earlier(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// FenceAt checks, before a request is dispatched on connection, that h
// presents the owner's active lease at now. It returns nil when it does,
// and otherwise an *[Error] matching [ErrRequired] (no active lease, or it
// expired), [ErrFenceStale] (another generation; or another API key, with
// Detail "lease held under another api key") or [ErrConnectionMismatch]
// (another connection); [ErrContextRequired] for a
// zero owner; or a store failure. Pass an empty connection to check only
// owner, generation and API key. With the in-memory store it does not
// allocate, refusals included.
func (m *Manager) FenceAt(ctx context.Context, h Holder, connection string, now time.Time) error {
	if h.Owner.isZero() {
		return errContextRequired
	}
	err := m.store.Fence(ctx, h, connection, now)
	if connection == "" && (err == ErrConnectionMismatch || isCode(err, CodeConnectionMismatch)) {
		return nil
	}
	return refusal(err)
}

func isCode(err error, code string) bool {
	e, ok := err.(*Error)
	return ok && e.Code == code
}

// HeldAt reports whether connection is held by a live lease at now, and
// until when. Traffic that carries no lease must skip a held connection
// (and only a held one: a connection that a managed key may lease but no
// one holds stays open to ordinary routing). With the in-memory store it
// does not allocate.
func (m *Manager) HeldAt(ctx context.Context, connection string, now time.Time) (until time.Time, held bool, err error) {
	// The in-memory store with no lease held anywhere (the common case):
	// one atomic load, in a body small enough to be inlined.
	if s := m.mem; s != nil && s.nheld.Load() == 0 {
		return time.Time{}, false, ctx.Err()
	}
	return m.heldAt(ctx, connection, now)
}

// heldAt is HeldAt past its shortcut.
func (m *Manager) heldAt(ctx context.Context, connection string, now time.Time) (until time.Time, held bool, err error) {
	if s := m.mem; s != nil {
		// The in-memory store, called directly.
		if err := ctx.Err(); err != nil {
			return time.Time{}, false, err
		}
		until, held = s.HeldUntil(connection, now)
		return until, held, nil
	}
	if m.held != nil {
		if err := ctx.Err(); err != nil {
			return time.Time{}, false, err
		}
		until, held = m.held.HeldUntil(connection, now)
		return until, held, nil
	}
	l, ok, err := m.store.Occupant(ctx, connection, now)
	if err != nil || !ok {
		return time.Time{}, false, err
	}
	return l.ExpiresAt, true, nil
}

// SelectAt picks the connection for a request that carries lease h, among
// candidates (the connections of provider eligible for this request,
// allowed for the API key). When the leased connection is a candidate the
// lease is returned unchanged, even when a strategy would prefer another.
// Otherwise the lease moves to the first free candidate with the same
// generation (the old lease ends INVALIDATED, reason
// CONNECTION_INELIGIBLE). When every candidate is held by another owner
// the lease is invalidated (CONNECTION_INELIGIBLE) and an
// [ErrCapacityUnavailable] refusal is returned.
//
// Refusals: those of [Manager.FenceAt] (without ErrConnectionMismatch),
// [ErrNoEligibleConnection] when candidates is empty (the lease is kept;
// the caller answers with its ordinary routing error, which is not lease
// contention), and store failures.
func (m *Manager) SelectAt(ctx context.Context, h Holder, provider string, candidates []string, now time.Time) (Lease, error) {
	if h.Owner.isZero() {
		return Lease{}, errContextRequired
	}
	cur, ok, err := m.store.Owned(ctx, h.Owner, now)
	if err != nil {
		return Lease{}, err
	}
	if !ok {
		return Lease{}, errRequired
	}
	if err := fence(&cur, &h, cur.Connection); err != nil {
		return Lease{}, refusal(err)
	}
	if slices.Contains(candidates, cur.Connection) {
		return cur, nil
	}
	if len(candidates) == 0 {
		return Lease{}, errNoEligible
	}
	l, err := m.move(ctx, h, provider, candidates, reasonConnectionIneligible, now)
	if isCode(err, CodeCapacityUnavailable) {
		if _, ierr := m.InvalidateAt(ctx, h, reasonConnectionIneligible, now); ierr != nil && !isCode(ierr, CodeFenceStale) {
			return Lease{}, ierr
		}
		return Lease{}, err
	}
	return l, err
}

// RenewAt restarts the TTL of h's active lease at now. A lease that has
// expired cannot be renewed. Any mismatch gives [ErrFenceStale].
func (m *Manager) RenewAt(ctx context.Context, h Holder, now time.Time) (Lease, error) {
	l, err := m.store.Renew(ctx, h, m.ttl, now)
	if err != nil {
		return Lease{}, refusal(err)
	}
	m.changed(l, true, now)
	return l, nil
}

// ReleaseAt ends h's active lease at now. reason is ReasonOwnerExit (also
// used when reason is empty) or ReasonClientCancelled; anything else gives
// [ErrInvalidConfig] with Field "reason". Releasing an already released
// lease again succeeds with the released lease and reports no second
// event; any other mismatch gives [ErrFenceStale].
func (m *Manager) ReleaseAt(ctx context.Context, h Holder, reason Reason, now time.Time) (Lease, error) {
	switch reason {
	case "":
		reason = ReasonOwnerExit
	case ReasonOwnerExit, ReasonClientCancelled:
	default:
		return Lease{}, errReleaseReason
	}
	l, again, err := m.store.Release(ctx, h, reason, now)
	if err != nil {
		return Lease{}, refusal(err)
	}
	if !again {
		m.ended(l, now)
	}
	return l, nil
}

// InvalidateAt ends the owner's active lease of exactly h.Generation (under
// any API key) at now, for reason (any end reason of the contract but
// TTL_EXPIRED, else [ErrInvalidConfig] with Field "reason"). A different
// or inactive generation gives [ErrFenceStale].
func (m *Manager) InvalidateAt(ctx context.Context, h Holder, reason Reason, now time.Time) (Lease, error) {
	if !validReason(reason) || reason == reasonTTLExpired {
		return Lease{}, errInvalidateReason
	}
	l, err := m.store.Invalidate(ctx, h, reason, now)
	if err != nil {
		return Lease{}, refusal(err)
	}
	m.ended(l, now)
	return l, nil
}

// StatusAt returns h's active lease at now. When the owner has no active
// lease, or it has another generation or API key, it returns
// [ErrFenceStale].
func (m *Manager) StatusAt(ctx context.Context, h Holder, now time.Time) (Lease, error) {
	l, ok, err := m.store.Owned(ctx, h.Owner, now)
	if err != nil {
		return Lease{}, err
	}
	if !ok || !h.matches(&l) {
		return Lease{}, errFenceStale
	}
	return l, nil
}

// ReconcileAt ends every lease that has expired at now, reports each with
// an event (State EXPIRED, Removed) and returns how many there were.
// Expiry also happens lazily without it; call it to learn of expiries
// promptly.
func (m *Manager) ReconcileAt(ctx context.Context, now time.Time) (int, error) {
	expired, err := m.store.Reconcile(ctx, now)
	if err != nil {
		return 0, err
	}
	for _, l := range expired {
		m.ended(l, now)
	}
	return len(expired), nil
}

// SnapshotAt lists the active leases at now, ordered by connection, for
// health and admin views. The leases carry owner digests, never tokens.
func (m *Manager) SnapshotAt(ctx context.Context, now time.Time) ([]Lease, error) {
	return m.store.List(ctx, now)
}
