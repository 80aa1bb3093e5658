package lease

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"
)

// Manager runs the lease lifecycle over a [Store]: it validates input,
// applies the TTL, chooses a connection among candidates, turns store
// results into errors and reports changes to [Config.OnChange].
//
// A Manager is safe for concurrent use. Create one with [New]; the zero
// value is not usable.
type Manager struct {
	store    Store
	held     heldChecker // store's copy-free HeldAt, when it has one
	ttl      time.Duration
	onChange func(Event)
}

// New returns a Manager for c (normalised). A nil c.Store means a new
// [MemoryStore].
func New(c Config) *Manager {
	c = c.Normalize()
	if c.Store == nil {
		c.Store = NewMemoryStore(c)
	}
	m := &Manager{store: c.Store, ttl: c.TTL, onChange: c.OnChange}
	m.held, _ = c.Store.(heldChecker)
	return m
}

// heldChecker is the in-memory store's shortcut for HeldAt: it answers
// without copying a whole Lease.
type heldChecker interface {
	heldUntil(connection string, now time.Time) (time.Time, bool)
}

// Store returns the store behind m.
func (m *Manager) Store() Store { return m.store }

// TTL returns the lease lifetime m applies when a [Claim] names none.
func (m *Manager) TTL() time.Duration { return m.ttl }

// Claim asks for a lease on one of several candidate connections.
type Claim struct {
	Owner    OwnerHash
	APIKeyID string
	Provider string
	// Candidates are the connections the caller may lease, in order of
	// preference, already narrowed to those that are eligible (health,
	// cooldown, quota, model rules) and allowed for the API key.
	Candidates []string
	// TTL is the lease lifetime; zero means the Manager's TTL. It is
	// clamped with ClampTTL.
	TTL time.Duration
}

func (m *Manager) ttlFor(d time.Duration) time.Duration {
	if d <= 0 {
		return m.ttl
	}
	return ClampTTL(d)
}

func (m *Manager) emit(e Event) {
	if m.onChange != nil {
		m.onChange(e)
	}
}

// Acquire is shorthand for AcquireAt(ctx, c, time.Now()).
func (m *Manager) Acquire(ctx context.Context, c Claim) (Lease, Result, error) {
	return m.AcquireAt(ctx, c, time.Now())
}

// AcquireAt gives c.Owner a lease on one of c.Candidates at now and
// returns it with how it was obtained:
//
//   - The owner's active lease under the same API key on a candidate is
//     kept and its TTL restarted (REUSED).
//   - The owner's active lease under the same API key on a connection that
//     is no longer a candidate moves to the first free candidate with the
//     same generation (TRANSITIONED, reason CONNECTION_INELIGIBLE).
//   - Otherwise the first candidate not held by another owner is leased
//     with a new generation (ACQUIRED).
//
// Errors: [ErrContextRequired] for a zero owner, [ErrNoEligibleConnection]
// without candidates, [ErrOwnerAlreadyActive] when the owner is active
// under another API key (its lease is unchanged), a *[CapacityError] when
// every candidate is held by another owner, [ErrFenceStale] when the
// owner's lease changed concurrently, and store failures.
func (m *Manager) AcquireAt(ctx context.Context, c Claim, now time.Time) (Lease, Result, error) {
	if c.Owner.IsZero() {
		return Lease{}, "", ErrContextRequired
	}
	if len(c.Candidates) == 0 {
		return Lease{}, "", ErrNoEligibleConnection
	}
	ttl := m.ttlFor(c.TTL)
	cur, ok, err := m.store.Owned(ctx, c.Owner, now)
	if err != nil {
		return Lease{}, "", err
	}
	if ok {
		if cur.APIKeyID != c.APIKeyID {
			return Lease{}, "", ErrOwnerAlreadyActive
		}
		if !slices.Contains(c.Candidates, cur.Connection) {
			h := Holder{Owner: c.Owner, APIKeyID: c.APIKeyID, Generation: cur.Generation}
			l, err := m.move(ctx, h, c.Provider, c.Candidates, ttl, now)
			if err != nil {
				return Lease{}, "", err
			}
			return l, ResultTransitioned, nil
		}
		return m.acquireOne(ctx, c, cur.Connection, ttl, now)
	}
	var earliest time.Time
	for _, conn := range c.Candidates {
		l, res, busy, err := m.tryAcquire(ctx, c, conn, ttl, now)
		if err != nil || busy.IsZero() {
			return l, res, err
		}
		earliest = earlier(earliest, busy)
	}
	return Lease{}, "", newCapacityError(earliest, now, len(c.Candidates), 0)
}

// acquireOne acquires (renews) conn, the owner's current connection.
func (m *Manager) acquireOne(ctx context.Context, c Claim, conn string, ttl time.Duration, now time.Time) (Lease, Result, error) {
	l, res, busy, err := m.tryAcquire(ctx, c, conn, ttl, now)
	if err == nil && !busy.IsZero() {
		return Lease{}, "", newCapacityError(busy, now, len(c.Candidates), 0)
	}
	return l, res, err
}

// tryAcquire asks the store for conn. It returns the lease, or the time the
// connection's current holder expires when it is busy, or an error.
func (m *Manager) tryAcquire(ctx context.Context, c Claim, conn string, ttl time.Duration, now time.Time) (Lease, Result, time.Time, error) {
	out, err := m.store.Acquire(ctx, Request{Owner: c.Owner, APIKeyID: c.APIKeyID, Provider: c.Provider, Connection: conn, TTL: ttl}, now)
	if err != nil {
		return Lease{}, "", time.Time{}, err
	}
	switch out.Result {
	case ResultAcquired, ResultReused:
		m.emit(Event{Result: out.Result, Lease: out.Lease})
		return out.Lease, out.Result, time.Time{}, nil
	case ResultOwnerAlreadyActive:
		return Lease{}, "", time.Time{}, ErrOwnerAlreadyActive
	case ResultConnectionBusy:
		return Lease{}, "", out.BusyUntil, nil
	}
	return Lease{}, "", time.Time{}, ErrServiceUnavailable
}

// move transitions h's lease to the first free candidate. It returns a
// *CapacityError when every candidate is held by another owner.
func (m *Manager) move(ctx context.Context, h Holder, provider string, candidates []string, ttl time.Duration, now time.Time) (Lease, error) {
	var earliest time.Time
	for _, conn := range candidates {
		out, err := m.store.Transition(ctx, h, provider, conn, ReasonConnectionIneligible, ttl, now)
		if err != nil {
			return Lease{}, err
		}
		switch out.Result {
		case ResultTransitioned:
			m.emit(Event{Result: out.Result, Lease: out.Lease, Previous: out.Previous})
			return out.Lease, nil
		case ResultReused:
			return out.Lease, nil
		case ResultConnectionBusy:
			earliest = earlier(earliest, out.BusyUntil)
		case ResultStale:
			return Lease{}, ErrFenceStale
		default:
			return Lease{}, ErrServiceUnavailable
		}
	}
	return Lease{}, newCapacityError(earliest, now, len(candidates), 0)
}

func earlier(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// Fence is shorthand for FenceAt(ctx, h, connection, time.Now()).
func (m *Manager) Fence(ctx context.Context, h Holder, connection string) error {
	return m.FenceAt(ctx, h, connection, time.Now())
}

// FenceAt checks, before a request is dispatched on connection, that h
// presents the owner's active lease at now. It returns nil when it does,
// and otherwise one of the sentinels [ErrRequired] (no active lease, or it
// expired), [ErrFenceStale] (another generation),
// [ErrAuthorizationMismatch] (another API key; matches ErrFenceStale) or
// [ErrConnectionMismatch] (another connection), or a store failure. With
// the in-memory store it does not allocate. Pass an empty connection to
// check only owner, generation and API key.
func (m *Manager) FenceAt(ctx context.Context, h Holder, connection string, now time.Time) error {
	if h.Owner.IsZero() {
		return ErrContextRequired
	}
	r, err := m.store.Fence(ctx, h, connection, now)
	if err != nil {
		return err
	}
	if connection == "" && r == ResultConnectionMismatch {
		return nil
	}
	return fenceError(r)
}

// FenceRequest is shorthand for FenceRequestAt(ctx, h, apiKeyID,
// connection, time.Now()).
func (m *Manager) FenceRequest(ctx context.Context, h http.Header, apiKeyID, connection string) (Holder, error) {
	return m.FenceRequestAt(ctx, h, apiKeyID, connection, time.Now())
}

// FenceRequestAt reads the lease headers of a request made with API key
// apiKeyID ([ParseHeader]) and fences them ([Manager.FenceAt]) for
// connection at now. It returns the holder the headers present, and the
// first error of either step. With the in-memory store it does not
// allocate.
func (m *Manager) FenceRequestAt(ctx context.Context, h http.Header, apiKeyID, connection string, now time.Time) (Holder, error) {
	owner, gen, err := ParseHeader(h)
	if err != nil {
		return Holder{}, err
	}
	hd := Holder{Owner: owner, APIKeyID: apiKeyID, Generation: gen}
	return hd, m.FenceAt(ctx, hd, connection, now)
}

// Held is shorthand for HeldAt(ctx, connection, time.Now()).
func (m *Manager) Held(ctx context.Context, connection string) (time.Time, bool, error) {
	return m.HeldAt(ctx, connection, time.Now())
}

// HeldAt reports whether connection is held by a live lease at now, and
// until when. Traffic that carries no lease must skip a held connection
// (and only a held one: a connection that a managed key may lease but no
// one holds stays open to ordinary routing). With the in-memory store it
// does not allocate.
func (m *Manager) HeldAt(ctx context.Context, connection string, now time.Time) (until time.Time, held bool, err error) {
	if m.held != nil {
		if err := ctx.Err(); err != nil {
			return time.Time{}, false, err
		}
		until, held = m.held.heldUntil(connection, now)
		return until, held, nil
	}
	l, ok, err := m.store.Occupant(ctx, connection, now)
	if err != nil || !ok {
		return time.Time{}, false, err
	}
	return l.ExpiresAt, true, nil
}

func fenceError(r Result) error {
	switch r {
	case ResultValid:
		return nil
	case ResultRequired:
		return ErrRequired
	case ResultStale:
		return ErrFenceStale
	case ResultAuthorizationMismatch:
		return ErrAuthorizationMismatch
	case ResultConnectionMismatch:
		return ErrConnectionMismatch
	}
	return ErrServiceUnavailable
}

// Select is shorthand for SelectAt(ctx, h, provider, candidates, time.Now()).
func (m *Manager) Select(ctx context.Context, h Holder, provider string, candidates []string) (Lease, error) {
	return m.SelectAt(ctx, h, provider, candidates, time.Now())
}

// SelectAt picks the connection for a request that carries lease h, among
// candidates (the connections eligible for this request, allowed for the
// API key). When the leased connection is a candidate the lease is
// returned unchanged. Otherwise the lease moves to the first free
// candidate with the same generation (TRANSITIONED, reason
// CONNECTION_INELIGIBLE). When every candidate is held by another owner
// the lease is invalidated (CONNECTION_INELIGIBLE) and a *[CapacityError]
// is returned.
//
// Errors: the fence errors of [Manager.FenceAt] (without
// ErrConnectionMismatch), [ErrNoEligibleConnection] when candidates is
// empty (the lease is kept; the caller answers with its ordinary routing
// error, which is not lease contention), and store failures.
func (m *Manager) SelectAt(ctx context.Context, h Holder, provider string, candidates []string, now time.Time) (Lease, error) {
	if h.Owner.IsZero() {
		return Lease{}, ErrContextRequired
	}
	cur, ok, err := m.store.Owned(ctx, h.Owner, now)
	if err != nil {
		return Lease{}, err
	}
	if !ok {
		return Lease{}, ErrRequired
	}
	if err := fenceError(fence(&cur, h, cur.Connection)); err != nil {
		return Lease{}, err
	}
	if slices.Contains(candidates, cur.Connection) {
		return cur, nil
	}
	if len(candidates) == 0 {
		return Lease{}, ErrNoEligibleConnection
	}
	l, err := m.move(ctx, h, provider, candidates, m.ttl, now)
	var ce *CapacityError
	if errors.As(err, &ce) {
		if _, ierr := m.InvalidateAt(ctx, h, ReasonConnectionIneligible, now); ierr != nil && !errors.Is(ierr, ErrFenceStale) {
			return Lease{}, ierr
		}
		return Lease{}, ce
	}
	return l, err
}

// Renew is shorthand for RenewAt(ctx, h, time.Now()).
func (m *Manager) Renew(ctx context.Context, h Holder) (Lease, error) {
	return m.RenewAt(ctx, h, time.Now())
}

// RenewAt restarts the TTL of h's active lease at now. A lease that has
// expired cannot be renewed. Any mismatch gives [ErrFenceStale].
func (m *Manager) RenewAt(ctx context.Context, h Holder, now time.Time) (Lease, error) {
	out, err := m.store.Renew(ctx, h, m.ttl, now)
	if err != nil {
		return Lease{}, err
	}
	if out.Result != ResultRenewed {
		return Lease{}, ErrFenceStale
	}
	m.emit(Event{Result: out.Result, Lease: out.Lease})
	return out.Lease, nil
}

// Release is shorthand for ReleaseAt(ctx, h, reason, time.Now()).
func (m *Manager) Release(ctx context.Context, h Holder, reason Reason) (Lease, error) {
	return m.ReleaseAt(ctx, h, reason, time.Now())
}

// ReleaseAt ends h's active lease at now. reason is ReasonOwnerExit (also
// used when reason is empty) or ReasonClientCancelled; anything else gives
// [ErrActionInvalid]. Releasing an already released lease again succeeds
// with the released lease; any other mismatch gives [ErrFenceStale].
func (m *Manager) ReleaseAt(ctx context.Context, h Holder, reason Reason, now time.Time) (Lease, error) {
	switch reason {
	case "":
		reason = ReasonOwnerExit
	case ReasonOwnerExit, ReasonClientCancelled:
	default:
		return Lease{}, ErrActionInvalid
	}
	out, err := m.store.Release(ctx, h, reason, now)
	if err != nil {
		return Lease{}, err
	}
	if out.Result != ResultReleased {
		return Lease{}, ErrFenceStale
	}
	// A repeated release reports no second event.
	if !out.Repeated {
		m.emit(Event{Result: out.Result, Lease: out.Lease})
	}
	return out.Lease, nil
}

// Invalidate is shorthand for InvalidateAt(ctx, h, reason, time.Now()).
func (m *Manager) Invalidate(ctx context.Context, h Holder, reason Reason) (Lease, error) {
	return m.InvalidateAt(ctx, h, reason, time.Now())
}

// InvalidateAt ends the owner's active lease of exactly h.Generation (under
// any API key) at now, for reason (any valid reason but TTL_EXPIRED, else
// [ErrActionInvalid]). A different or inactive generation gives
// [ErrFenceStale].
func (m *Manager) InvalidateAt(ctx context.Context, h Holder, reason Reason, now time.Time) (Lease, error) {
	if !reason.Valid() || reason == ReasonTTLExpired {
		return Lease{}, ErrActionInvalid
	}
	out, err := m.store.Invalidate(ctx, h, reason, now)
	if err != nil {
		return Lease{}, err
	}
	if out.Result != ResultInvalidated {
		return Lease{}, ErrFenceStale
	}
	m.emit(Event{Result: out.Result, Lease: out.Lease})
	return out.Lease, nil
}

// Transition is shorthand for TransitionAt(ctx, h, provider, connection,
// reason, time.Now()).
func (m *Manager) Transition(ctx context.Context, h Holder, provider, connection string, reason Reason) (Lease, Result, error) {
	return m.TransitionAt(ctx, h, provider, connection, reason, time.Now())
}

// TransitionAt moves h's active lease to connection at now, keeping its
// generation; the old lease ends INVALIDATED with reason (any valid reason
// but TTL_EXPIRED, else [ErrActionInvalid]). The result is TRANSITIONED,
// or REUSED when connection is already the leased one. A mismatch gives
// [ErrFenceStale]; a connection held by another owner a *[CapacityError]
// with one eligible and no free connection.
func (m *Manager) TransitionAt(ctx context.Context, h Holder, provider, connection string, reason Reason, now time.Time) (Lease, Result, error) {
	if !reason.Valid() || reason == ReasonTTLExpired {
		return Lease{}, "", ErrActionInvalid
	}
	out, err := m.store.Transition(ctx, h, provider, connection, reason, m.ttl, now)
	if err != nil {
		return Lease{}, "", err
	}
	switch out.Result {
	case ResultTransitioned:
		m.emit(Event{Result: out.Result, Lease: out.Lease, Previous: out.Previous})
		return out.Lease, out.Result, nil
	case ResultReused:
		return out.Lease, out.Result, nil
	case ResultConnectionBusy:
		return Lease{}, "", newCapacityError(out.BusyUntil, now, 1, 0)
	}
	return Lease{}, "", ErrFenceStale
}

// Status is shorthand for StatusAt(ctx, h, time.Now()).
func (m *Manager) Status(ctx context.Context, h Holder) (Lease, error) {
	return m.StatusAt(ctx, h, time.Now())
}

// StatusAt returns h's active lease at now. When the owner has no active
// lease, or it has another generation or API key, it returns
// [ErrFenceStale].
func (m *Manager) StatusAt(ctx context.Context, h Holder, now time.Time) (Lease, error) {
	l, ok, err := m.store.Owned(ctx, h.Owner, now)
	if err != nil {
		return Lease{}, err
	}
	if !ok || !h.Matches(l) {
		return Lease{}, ErrFenceStale
	}
	return l, nil
}

// Reconcile is shorthand for ReconcileAt(ctx, time.Now()).
func (m *Manager) Reconcile(ctx context.Context) (int, error) {
	return m.ReconcileAt(ctx, time.Now())
}

// ReconcileAt ends every lease that has expired at now, reports each as an
// EXPIRED event and returns how many there were. Expiry also happens
// lazily without it; call it to learn of expiries promptly.
func (m *Manager) ReconcileAt(ctx context.Context, now time.Time) (int, error) {
	expired, err := m.store.Reconcile(ctx, now)
	if err != nil {
		return 0, err
	}
	for _, l := range expired {
		m.emit(Event{Result: ResultExpired, Lease: l})
	}
	return len(expired), nil
}

// Snapshot is shorthand for SnapshotAt(ctx, time.Now()).
func (m *Manager) Snapshot(ctx context.Context) ([]Lease, error) {
	return m.SnapshotAt(ctx, time.Now())
}

// SnapshotAt lists the active leases at now, ordered by connection, for
// health and admin views. The leases carry owner digests, never tokens.
func (m *Manager) SnapshotAt(ctx context.Context, now time.Time) ([]Lease, error) {
	return m.store.List(ctx, now)
}

// ScopeExclusive is the API key scope that makes a key managed.
const ScopeExclusive = "lease:exclusive"

// ValidateKeyPolicy checks an API key's configuration when it is created
// or changed: a key whose scopes include [ScopeExclusive] must have at
// least one allowed connection, else [ErrKeyPolicyInvalid].
func ValidateKeyPolicy(scopes, allowedConnections []string) error {
	if slices.Contains(scopes, ScopeExclusive) && len(allowedConnections) == 0 {
		return ErrKeyPolicyInvalid
	}
	return nil
}
