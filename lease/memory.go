package lease

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// historyLen is how many ended leases the memory store keeps per owner,
// newest last, for idempotent release.
const historyLen = 4

// sweepEvery is the least time between two full sweeps of a MemoryStore.
const sweepEvery = time.Minute

// MemoryStore is the in-memory [Store]. One mutex makes every operation
// linearizable; Fence and the read methods share a read lock.
//
// It remembers at most MaxOwners owners. An owner whose last lease ended
// more than Retention ago is forgotten on a later write (amortised, at
// most once a minute of store time, or when the cap is reached, when the
// least recently ended quarter is dropped). An owner with an active lease
// is never dropped; when every remembered owner is active, a new owner
// gets ErrStoreFull.
//
// Forgetting never lets a generation come back: the store keeps the
// highest generation of every owner it has forgotten, and an owner it does
// not remember starts above it. Until the first owner is forgotten, a new
// owner starts at generation 1.
//
// The zero value is not usable; call [NewMemoryStore].
type MemoryStore struct {
	maxOwners int
	retention time.Duration

	mu        sync.RWMutex
	owners    map[OwnerHash]*ownerRecord // every remembered owner
	conns     map[string]*ownerRecord    // connection → owner holding it
	nheld     atomic.Int64               // len(conns), for a lock-free "nothing held" answer
	last      time.Time                  // latest now observed by a write
	nextSweep time.Time
	genFloor  uint64 // highest generation of any forgotten owner
}

type ownerRecord struct {
	maxGen    uint64
	active    Lease // valid when hasActive
	hasActive bool
	ended     []Lease   // newest last, at most historyLen
	touched   time.Time // when the last lease ended or was made
}

// NewMemoryStore returns an empty store with the MaxOwners and Retention
// of c (normalised; other fields are ignored).
func NewMemoryStore(c Config) *MemoryStore {
	c = c.Normalize()
	return &MemoryStore{
		maxOwners: c.MaxOwners,
		retention: c.Retention,
		owners:    make(map[OwnerHash]*ownerRecord),
		conns:     make(map[string]*ownerRecord),
	}
}

var _ Store = (*MemoryStore)(nil)

// observe returns now, or the latest time already seen when now is
// earlier. It requires s.mu held for writing.
func (s *MemoryStore) observe(now time.Time) time.Time {
	if now.Before(s.last) {
		return s.last
	}
	s.last = now
	return now
}

// readNow is observe for readers: it does not record now. It requires
// s.mu held for reading.
func (s *MemoryStore) readNow(now time.Time) time.Time {
	if now.Before(s.last) {
		return s.last
	}
	return now
}

// expire ends rec's active lease if it has expired at now, and returns it.
// It requires s.mu held for writing.
func (s *MemoryStore) expire(rec *ownerRecord, now time.Time) (Lease, bool) {
	if rec == nil || !rec.hasActive || now.Before(rec.active.ExpiresAt) {
		return Lease{}, false
	}
	l := rec.active
	l.State = StateExpired
	l.EndedAt = l.ExpiresAt
	l.EndReason = ReasonTTLExpired
	s.end(rec, l)
	return l, true
}

// activate makes rec's active lease a fresh one on connection and marks the
// connection held. It requires s.mu held for writing.
func (s *MemoryStore) activate(rec *ownerRecord, owner OwnerHash, apiKeyID, provider, connection string, gen uint64, ttl time.Duration, now time.Time) {
	rec.active = Lease{
		Owner:      owner,
		APIKeyID:   apiKeyID,
		Provider:   provider,
		Connection: connection,
		Generation: gen,
		State:      StateActive,
		AcquiredAt: now,
		RenewedAt:  now,
		ExpiresAt:  now.Add(ttl),
	}
	rec.hasActive = true
	rec.touched = now
	s.conns[connection] = rec
	s.nheld.Store(int64(len(s.conns)))
}

// end records l as rec's ended lease and frees its connection.
func (s *MemoryStore) end(rec *ownerRecord, l Lease) {
	if s.conns[l.Connection] == rec {
		delete(s.conns, l.Connection)
		s.nheld.Store(int64(len(s.conns)))
	}
	rec.hasActive = false
	rec.active = Lease{}
	if len(rec.ended) == historyLen {
		copy(rec.ended, rec.ended[1:])
		rec.ended = rec.ended[:historyLen-1]
	}
	rec.ended = append(rec.ended, l)
	rec.touched = l.EndedAt
}

// live returns rec's active lease after expiring it at now.
func (s *MemoryStore) live(rec *ownerRecord, now time.Time) (*Lease, bool) {
	s.expire(rec, now)
	if rec == nil || !rec.hasActive {
		return nil, false
	}
	return &rec.active, true
}

// Acquire implements [Store].
func (s *MemoryStore) Acquire(ctx context.Context, r Request, now time.Time) (Outcome, error) {
	if err := ctx.Err(); err != nil {
		return Outcome{}, err
	}
	ttl := ClampTTL(r.TTL)
	s.mu.Lock()
	defer s.mu.Unlock()
	now = s.observe(now)
	rec := s.owners[r.Owner]
	if a, ok := s.live(rec, now); ok {
		if a.APIKeyID != r.APIKeyID || a.Connection != r.Connection {
			return Outcome{Result: ResultOwnerAlreadyActive}, nil
		}
		a.Provider = r.Provider
		a.RenewedAt = now
		a.ExpiresAt = now.Add(ttl)
		rec.touched = now
		return Outcome{Result: ResultReused, Lease: *a}, nil
	}
	if occ := s.conns[r.Connection]; occ != nil {
		if a, ok := s.live(occ, now); ok {
			return Outcome{Result: ResultConnectionBusy, BusyUntil: a.ExpiresAt}, nil
		}
	}
	if rec == nil {
		if !s.makeRoom(now) {
			return Outcome{}, ErrStoreFull
		}
		rec = &ownerRecord{maxGen: s.genFloor}
		s.owners[r.Owner] = rec
	}
	if rec.maxGen >= MaxGeneration {
		return Outcome{}, ErrGenerationExhausted
	}
	rec.maxGen++
	s.activate(rec, r.Owner, r.APIKeyID, r.Provider, r.Connection, rec.maxGen, ttl, now)
	s.maybeSweep(now)
	return Outcome{Result: ResultAcquired, Lease: rec.active}, nil
}

// held returns h's owner record and its active lease when that lease
// matches h. It requires s.mu held for writing.
func (s *MemoryStore) held(h Holder, now time.Time) (*ownerRecord, *Lease, bool) {
	rec := s.owners[h.Owner]
	a, ok := s.live(rec, now)
	if !ok || !h.Matches(*a) {
		return rec, nil, false
	}
	return rec, a, true
}

// Transition implements [Store].
func (s *MemoryStore) Transition(ctx context.Context, h Holder, provider, connection string, reason Reason, ttl time.Duration, now time.Time) (Outcome, error) {
	if err := ctx.Err(); err != nil {
		return Outcome{}, err
	}
	ttl = ClampTTL(ttl)
	s.mu.Lock()
	defer s.mu.Unlock()
	now = s.observe(now)
	rec, a, ok := s.held(h, now)
	if !ok {
		return Outcome{Result: ResultStale}, nil
	}
	if a.Connection == connection {
		return Outcome{Result: ResultReused, Lease: *a}, nil
	}
	if occ := s.conns[connection]; occ != nil {
		if o, ok := s.live(occ, now); ok {
			return Outcome{Result: ResultConnectionBusy, BusyUntil: o.ExpiresAt}, nil
		}
	}
	prev := *a
	prev.State = StateInvalidated
	prev.EndedAt = now
	prev.EndReason = reason
	s.end(rec, prev)
	s.activate(rec, prev.Owner, prev.APIKeyID, provider, connection, prev.Generation, ttl, now)
	return Outcome{Result: ResultTransitioned, Lease: rec.active, Previous: prev}, nil
}

// Renew implements [Store].
func (s *MemoryStore) Renew(ctx context.Context, h Holder, ttl time.Duration, now time.Time) (Outcome, error) {
	if err := ctx.Err(); err != nil {
		return Outcome{}, err
	}
	ttl = ClampTTL(ttl)
	s.mu.Lock()
	defer s.mu.Unlock()
	now = s.observe(now)
	rec, a, ok := s.held(h, now)
	if !ok {
		return Outcome{Result: ResultStale}, nil
	}
	a.RenewedAt = now
	a.ExpiresAt = now.Add(ttl)
	rec.touched = now
	return Outcome{Result: ResultRenewed, Lease: *a}, nil
}

// Release implements [Store].
func (s *MemoryStore) Release(ctx context.Context, h Holder, reason Reason, now time.Time) (Outcome, error) {
	if err := ctx.Err(); err != nil {
		return Outcome{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now = s.observe(now)
	rec, a, ok := s.held(h, now)
	if ok {
		l := *a
		l.State = StateReleased
		l.EndedAt = now
		l.EndReason = reason
		s.end(rec, l)
		return Outcome{Result: ResultReleased, Lease: l}, nil
	}
	if rec != nil && (!rec.hasActive || rec.active.Generation != h.Generation) {
		for i := len(rec.ended) - 1; i >= 0; i-- {
			l := rec.ended[i]
			if l.Generation != h.Generation {
				continue
			}
			if l.State == StateReleased && l.APIKeyID == h.APIKeyID && l.Owner.Equal(h.Owner) {
				return Outcome{Result: ResultReleased, Lease: l, Repeated: true}, nil
			}
			break
		}
	}
	return Outcome{Result: ResultStale}, nil
}

// Invalidate implements [Store].
func (s *MemoryStore) Invalidate(ctx context.Context, h Holder, reason Reason, now time.Time) (Outcome, error) {
	if err := ctx.Err(); err != nil {
		return Outcome{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now = s.observe(now)
	rec := s.owners[h.Owner]
	a, ok := s.live(rec, now)
	if !ok || a.Generation != h.Generation || !a.Owner.Equal(h.Owner) {
		return Outcome{Result: ResultStale}, nil
	}
	l := *a
	l.State = StateInvalidated
	l.EndedAt = now
	l.EndReason = reason
	s.end(rec, l)
	return Outcome{Result: ResultInvalidated, Lease: l}, nil
}

// Fence implements [Store]. It does not allocate.
func (s *MemoryStore) Fence(ctx context.Context, h Holder, connection string, now time.Time) (Result, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	now = s.readNow(now)
	rec := s.owners[h.Owner]
	if rec == nil || !rec.hasActive || !rec.active.ActiveAt(now) || !rec.active.Owner.Equal(h.Owner) {
		return ResultRequired, nil
	}
	return fence(&rec.active, h, connection), nil
}

// fence compares an active lease with what a request presents.
func fence(a *Lease, h Holder, connection string) Result {
	switch {
	case a.Generation != h.Generation:
		return ResultStale
	case a.APIKeyID != h.APIKeyID:
		return ResultAuthorizationMismatch
	case a.Connection != connection:
		return ResultConnectionMismatch
	}
	return ResultValid
}

// Owned implements [Store].
func (s *MemoryStore) Owned(ctx context.Context, owner OwnerHash, now time.Time) (Lease, bool, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	now = s.readNow(now)
	rec := s.owners[owner]
	if rec == nil || !rec.hasActive || !rec.active.ActiveAt(now) {
		return Lease{}, false, nil
	}
	return rec.active, true, nil
}

// Occupant implements [Store]. It does not allocate.
func (s *MemoryStore) Occupant(ctx context.Context, connection string, now time.Time) (Lease, bool, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, false, err
	}
	if s.nheld.Load() == 0 {
		return Lease{}, false, nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	now = s.readNow(now)
	rec := s.conns[connection]
	if rec == nil || !rec.hasActive || !rec.active.ActiveAt(now) {
		return Lease{}, false, nil
	}
	return rec.active, true, nil
}

// heldUntil is Occupant for HeldAt: the expiry of connection's live lease,
// if any, without copying the lease.
func (s *MemoryStore) heldUntil(connection string, now time.Time) (time.Time, bool) {
	if s.nheld.Load() == 0 {
		return time.Time{}, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	now = s.readNow(now)
	rec := s.conns[connection]
	if rec == nil || !rec.hasActive || !rec.active.ActiveAt(now) {
		return time.Time{}, false
	}
	return rec.active.ExpiresAt, true
}

// Reconcile implements [Store]. It also forgets owners past Retention.
func (s *MemoryStore) Reconcile(ctx context.Context, now time.Time) ([]Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now = s.observe(now)
	expired := s.expireAll(now)
	s.forget(now)
	return expired, nil
}

// List implements [Store].
func (s *MemoryStore) List(ctx context.Context, now time.Time) ([]Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	now = s.readNow(now)
	out := make([]Lease, 0, len(s.conns))
	for _, rec := range s.conns {
		if rec.hasActive && rec.active.ActiveAt(now) {
			out = append(out, rec.active)
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b Lease) int { return cmp.Compare(a.Connection, b.Connection) })
	return out, nil
}

// Len returns the number of owners the store remembers, active or not.
func (s *MemoryStore) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.owners)
}

// expireAll ends every expired active lease. It requires s.mu held for
// writing.
func (s *MemoryStore) expireAll(now time.Time) []Lease {
	var expired []Lease
	for _, rec := range s.conns {
		if l, ok := s.expire(rec, now); ok {
			expired = append(expired, l)
		}
	}
	return expired
}

// forget drops owners whose last lease ended more than s.retention ago.
func (s *MemoryStore) forget(now time.Time) {
	for k, rec := range s.owners {
		if !rec.hasActive && now.Sub(rec.touched) >= s.retention {
			s.drop(k, rec)
		}
	}
	s.nextSweep = now.Add(sweepEvery)
}

// maybeSweep runs expireAll and forget at most once per sweepEvery of
// store time.
func (s *MemoryStore) maybeSweep(now time.Time) {
	if now.Before(s.nextSweep) {
		return
	}
	s.expireAll(now)
	s.forget(now)
}

// makeRoom makes space for one more owner, and reports whether there is.
func (s *MemoryStore) makeRoom(now time.Time) bool {
	if len(s.owners) < s.maxOwners {
		return true
	}
	s.expireAll(now)
	s.forget(now)
	if len(s.owners) < s.maxOwners {
		return true
	}
	type idle struct {
		key OwnerHash
		rec *ownerRecord
	}
	var cands []idle
	for k, rec := range s.owners {
		if !rec.hasActive {
			cands = append(cands, idle{k, rec})
		}
	}
	if len(cands) == 0 {
		return false
	}
	slices.SortFunc(cands, func(a, b idle) int { return a.rec.touched.Compare(b.rec.touched) })
	n := max(1, s.maxOwners/4)
	for _, c := range cands[:min(n, len(cands))] {
		s.drop(c.key, c.rec)
	}
	return true
}

// drop forgets an owner without an active lease, raising the generation
// floor to its highest generation. It requires s.mu held for writing.
func (s *MemoryStore) drop(k OwnerHash, rec *ownerRecord) {
	s.genFloor = max(s.genFloor, rec.maxGen)
	delete(s.owners, k)
}
