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

// sweepEvery is the least time between two full sweeps of a memory store.
const sweepEvery = time.Minute

// memoryStore is the in-memory [Store] of [NewMemoryStore].
type memoryStore struct {
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

// NewMemoryStore returns an empty in-memory [Store] with the MaxOwners
// and Retention of c (normalised; other fields are ignored). [New] makes
// one when [Config.Store] is nil.
//
// One mutex makes every operation linearizable; Fence and the read methods
// share a read lock, and Fence and Occupant do not allocate.
//
// It remembers at most MaxOwners owners. An owner whose last lease ended
// more than Retention ago is forgotten on a later write (amortised, at most
// once a minute of store time, or when the cap is reached, when the least
// recently ended quarter is dropped). An owner with an active lease is
// never dropped; when every remembered owner is active, a new owner is
// refused with CodeServiceUnavailable ("lease store full").
//
// Forgetting never lets a generation come back: the store keeps the
// highest generation of every owner it has forgotten (the generation
// floor), and an owner it does not remember starts above it. Until the
// first owner is forgotten, a new owner starts at generation 1.
func NewMemoryStore(c Config) Store { return newMemoryStore(c) }

func newMemoryStore(c Config) *memoryStore {
	c = c.Normalize()
	return &memoryStore{
		maxOwners: c.MaxOwners,
		retention: c.Retention,
		owners:    make(map[OwnerHash]*ownerRecord),
		conns:     make(map[string]*ownerRecord),
	}
}

var _ Store = (*memoryStore)(nil)

// observe returns now, or the latest time already seen when now is
// earlier. It requires s.mu held for writing.
func (s *memoryStore) observe(now time.Time) time.Time {
	if now.Before(s.last) {
		return s.last
	}
	s.last = now
	return now
}

// readNow is observe for readers: it does not record now. It requires
// s.mu held for reading.
func (s *memoryStore) readNow(now time.Time) time.Time {
	if now.Before(s.last) {
		return s.last
	}
	return now
}

// expire ends rec's active lease if it has expired at now, and returns it.
// It requires s.mu held for writing.
func (s *memoryStore) expire(rec *ownerRecord, now time.Time) (Lease, bool) {
	if rec == nil || !rec.hasActive || now.Before(rec.active.ExpiresAt) {
		return Lease{}, false
	}
	l := rec.active
	l.State = StateExpired
	l.EndedAt = l.ExpiresAt
	l.EndReason = reasonTTLExpired
	s.end(rec, l)
	return l, true
}

// activate makes rec's active lease a fresh one on connection and marks the
// connection held. It requires s.mu held for writing.
func (s *memoryStore) activate(rec *ownerRecord, owner OwnerHash, apiKeyID, provider, connection string, gen uint64, ttl time.Duration, now time.Time) {
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
func (s *memoryStore) end(rec *ownerRecord, l Lease) {
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
func (s *memoryStore) live(rec *ownerRecord, now time.Time) (*Lease, bool) {
	s.expire(rec, now)
	if rec == nil || !rec.hasActive {
		return nil, false
	}
	return &rec.active, true
}

// Acquire implements [Store].
func (s *memoryStore) Acquire(ctx context.Context, h Holder, provider, connection string, ttl time.Duration, now time.Time) (Lease, bool, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, false, err
	}
	ttl = clampTTL(ttl)
	s.mu.Lock()
	defer s.mu.Unlock()
	now = s.observe(now)
	rec := s.owners[h.Owner]
	if a, ok := s.live(rec, now); ok {
		if a.APIKeyID != h.APIKeyID || a.Connection != connection {
			return Lease{}, false, ErrOwnerAlreadyActive
		}
		a.Provider = provider
		a.RenewedAt = now
		a.ExpiresAt = now.Add(ttl)
		rec.touched = now
		return *a, true, nil
	}
	if occ := s.conns[connection]; occ != nil {
		if a, ok := s.live(occ, now); ok {
			return Lease{}, false, &Error{Code: CodeCapacityUnavailable, Until: a.ExpiresAt}
		}
	}
	if rec == nil {
		if !s.makeRoom(now) {
			return Lease{}, false, errStoreFull
		}
		rec = &ownerRecord{maxGen: s.genFloor}
		s.owners[h.Owner] = rec
	}
	if rec.maxGen >= MaxGeneration {
		return Lease{}, false, errGenExhausted
	}
	rec.maxGen++
	s.activate(rec, h.Owner, h.APIKeyID, provider, connection, rec.maxGen, ttl, now)
	s.maybeSweep(now)
	return rec.active, false, nil
}

// held returns h's owner record and its active lease when that lease
// matches h. It requires s.mu held for writing.
func (s *memoryStore) held(h Holder, now time.Time) (*ownerRecord, *Lease, bool) {
	rec := s.owners[h.Owner]
	a, ok := s.live(rec, now)
	if !ok || !h.matches(a) {
		return rec, nil, false
	}
	return rec, a, true
}

// Transition implements [Store].
func (s *memoryStore) Transition(ctx context.Context, h Holder, provider, connection string, reason Reason, ttl time.Duration, now time.Time) (Lease, Lease, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, Lease{}, err
	}
	ttl = clampTTL(ttl)
	s.mu.Lock()
	defer s.mu.Unlock()
	now = s.observe(now)
	rec, a, ok := s.held(h, now)
	if !ok {
		return Lease{}, Lease{}, ErrFenceStale
	}
	if a.Connection == connection {
		return *a, Lease{}, nil
	}
	if occ := s.conns[connection]; occ != nil {
		if o, ok := s.live(occ, now); ok {
			return Lease{}, Lease{}, &Error{Code: CodeCapacityUnavailable, Until: o.ExpiresAt}
		}
	}
	prev := *a
	prev.State = StateInvalidated
	prev.EndedAt = now
	prev.EndReason = reason
	s.end(rec, prev)
	s.activate(rec, prev.Owner, prev.APIKeyID, provider, connection, prev.Generation, ttl, now)
	return rec.active, prev, nil
}

// Renew implements [Store].
func (s *memoryStore) Renew(ctx context.Context, h Holder, ttl time.Duration, now time.Time) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, err
	}
	ttl = clampTTL(ttl)
	s.mu.Lock()
	defer s.mu.Unlock()
	now = s.observe(now)
	rec, a, ok := s.held(h, now)
	if !ok {
		return Lease{}, ErrFenceStale
	}
	a.RenewedAt = now
	a.ExpiresAt = now.Add(ttl)
	rec.touched = now
	return *a, nil
}

// Release implements [Store].
func (s *memoryStore) Release(ctx context.Context, h Holder, reason Reason, now time.Time) (Lease, bool, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, false, err
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
		return l, false, nil
	}
	if rec != nil && (!rec.hasActive || rec.active.Generation != h.Generation) {
		for i := len(rec.ended) - 1; i >= 0; i-- {
			l := rec.ended[i]
			if l.Generation != h.Generation {
				continue
			}
			if l.State == StateReleased && l.APIKeyID == h.APIKeyID && equalHash(l.Owner, h.Owner) {
				return l, true, nil
			}
			break
		}
	}
	return Lease{}, false, ErrFenceStale
}

// Invalidate implements [Store].
func (s *memoryStore) Invalidate(ctx context.Context, h Holder, reason Reason, now time.Time) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now = s.observe(now)
	rec := s.owners[h.Owner]
	a, ok := s.live(rec, now)
	if !ok || a.Generation != h.Generation || !equalHash(a.Owner, h.Owner) {
		return Lease{}, ErrFenceStale
	}
	l := *a
	l.State = StateInvalidated
	l.EndedAt = now
	l.EndReason = reason
	s.end(rec, l)
	return l, nil
}

// Fence implements [Store]. It does not allocate.
func (s *memoryStore) Fence(ctx context.Context, h Holder, connection string, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	now = s.readNow(now)
	rec := s.owners[h.Owner]
	if rec == nil || !rec.hasActive || !rec.active.activeAt(now) || !equalHash(rec.active.Owner, h.Owner) {
		return ErrRequired
	}
	return fence(&rec.active, &h, connection)
}

// fence compares an active lease with what a request presents.
func fence(a *Lease, h *Holder, connection string) error {
	switch {
	case a.Generation != h.Generation:
		return ErrFenceStale
	case a.APIKeyID != h.APIKeyID:
		return errAuthMismatch
	case a.Connection != connection:
		return ErrConnectionMismatch
	}
	return nil
}

// Owned implements [Store].
func (s *memoryStore) Owned(ctx context.Context, owner OwnerHash, now time.Time) (Lease, bool, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	now = s.readNow(now)
	rec := s.owners[owner]
	if rec == nil || !rec.hasActive || !rec.active.activeAt(now) {
		return Lease{}, false, nil
	}
	return rec.active, true, nil
}

// Occupant implements [Store]. It does not allocate.
func (s *memoryStore) Occupant(ctx context.Context, connection string, now time.Time) (Lease, bool, error) {
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
	if rec == nil || !rec.hasActive || !rec.active.activeAt(now) {
		return Lease{}, false, nil
	}
	return rec.active, true, nil
}

// HeldUntil is Occupant for HeldAt: the expiry of connection's live lease,
// if any, without copying the lease.
func (s *memoryStore) HeldUntil(connection string, now time.Time) (time.Time, bool) {
	if s.nheld.Load() == 0 {
		return time.Time{}, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	now = s.readNow(now)
	rec := s.conns[connection]
	if rec == nil || !rec.hasActive || !rec.active.activeAt(now) {
		return time.Time{}, false
	}
	return rec.active.ExpiresAt, true
}

// Reconcile implements [Store]. It also forgets owners past Retention.
func (s *memoryStore) Reconcile(ctx context.Context, now time.Time) ([]Lease, error) {
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
func (s *memoryStore) List(ctx context.Context, now time.Time) ([]Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	now = s.readNow(now)
	out := make([]Lease, 0, len(s.conns))
	for _, rec := range s.conns {
		if rec.hasActive && rec.active.activeAt(now) {
			out = append(out, rec.active)
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b Lease) int { return cmp.Compare(a.Connection, b.Connection) })
	return out, nil
}

// size returns the number of owners the store remembers, active or not.
func (s *memoryStore) size() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.owners)
}

// expireAll ends every expired active lease. It requires s.mu held for
// writing.
func (s *memoryStore) expireAll(now time.Time) []Lease {
	var expired []Lease
	for _, rec := range s.conns {
		if l, ok := s.expire(rec, now); ok {
			expired = append(expired, l)
		}
	}
	return expired
}

// forget drops owners whose last lease ended more than s.retention ago.
func (s *memoryStore) forget(now time.Time) {
	for k, rec := range s.owners {
		if !rec.hasActive && now.Sub(rec.touched) >= s.retention {
			s.drop(k, rec)
		}
	}
	s.nextSweep = now.Add(sweepEvery)
}

// maybeSweep runs expireAll and forget at most once per sweepEvery of
// store time.
func (s *memoryStore) maybeSweep(now time.Time) {
	if now.Before(s.nextSweep) {
		return
	}
	s.expireAll(now)
	s.forget(now)
}

// makeRoom makes space for one more owner, and reports whether there is.
func (s *memoryStore) makeRoom(now time.Time) bool {
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
func (s *memoryStore) drop(k OwnerHash, rec *ownerRecord) {
	s.genFloor = max(s.genFloor, rec.maxGen)
	delete(s.owners, k)
}
