package sqlitestate

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/routeguard/routeguard/lease"
)

// Leases returns the lease store on the file, for lease.Config.Store:
//
//	m := lease.New(lease.Config{Store: st.Leases()})
//
// Every write (Acquire, Transition, Renew, Release, Invalidate, Reconcile)
// is one BEGIN IMMEDIATE transaction, committed before it returns, so a
// lease that was granted survives any crash after the call returned, and a
// crash before the commit leaves no trace of the operation. The schema
// enforces the two uniqueness rules itself (partial unique indexes: one
// ACTIVE row per owner, one per connection), as the last guard across
// processes sharing the file. Only owner digests are stored. Each owner's
// highest generation is kept in the file, and when the retention sweep
// forgets an owner its generation raises the file's generation floor, so a
// generation is never handed out twice, across restarts included.
//
// Fence, Owned and List are single queries on separate query-only
// connections; they run concurrently with each other and with a write.
// Occupant, which a router's eligibility check asks for every candidate
// connection of every request, reads an in-memory mirror of the file's
// active leases that each write updates after its commit (and Open loads),
// so it runs no SQL. The mirror sees the leases this process wrote: one
// process serves from a file (its efficiency state is per process too);
// another that opens the same file is kept from granting a second lease
// by the schema, not by this process's Occupant.
func (s *State) Leases() lease.Store { return s.leases }

// leaseCols is the column list every lease query returns.
const leaseCols = `id, owner_hash, api_key_id, provider, connection_id, generation, state, acquired_at, renewed_at, expires_at, ended_at, end_reason`

// storeNow is the store's clock at ?1: the later of ?1 and the latest now a
// write has recorded.
const storeNow = `max(?1, (SELECT value FROM meta WHERE name = 'clock'))`

var leaseSQL = struct {
	observe, expireTouched, activeByOwner, activeByConn, maxGen, insert, genTouch,
	renew, end, newest, reconcile, renewInPlace string
	fence, owned, active, list string
}{
	observe:       `UPDATE meta SET value = max(value, ?1) WHERE name = 'clock' RETURNING value`,
	expireTouched: `UPDATE leases SET state = 'EXPIRED', ended_at = expires_at, end_reason = 'TTL_EXPIRED' WHERE state = 'ACTIVE' AND expires_at <= ?1 AND (owner_hash = ?2 OR connection_id = ?3)`,
	activeByOwner: `SELECT ` + leaseCols + ` FROM leases WHERE owner_hash = ?1 AND state = 'ACTIVE'`,
	activeByConn:  `SELECT ` + leaseCols + ` FROM leases WHERE connection_id = ?1 AND state = 'ACTIVE'`,
	maxGen: `SELECT coalesce((SELECT max_generation FROM lease_generations WHERE owner_hash = ?1),
	                (SELECT value FROM meta WHERE name = 'generation_floor')),
	       coalesce((SELECT max(generation) FROM leases WHERE owner_hash = ?1), 0)`,
	insert: `INSERT INTO leases (owner_hash, api_key_id, provider, connection_id, generation, state, acquired_at, renewed_at, expires_at)
	         VALUES (?1, ?2, ?3, ?4, ?5, 'ACTIVE', ?6, ?6, ?7) RETURNING ` + leaseCols,
	genTouch: `INSERT INTO lease_generations (owner_hash, max_generation, touched_at) VALUES (?1, ?2, ?3)
	           ON CONFLICT (owner_hash) DO UPDATE SET max_generation = max(max_generation, excluded.max_generation), touched_at = excluded.touched_at`,
	renewInPlace: `UPDATE leases SET provider = ?2, renewed_at = ?3, expires_at = ?4 WHERE id = ?1 RETURNING ` + leaseCols,
	renew: `UPDATE leases SET renewed_at = ?5, expires_at = ?6
	        WHERE owner_hash = ?1 AND api_key_id = ?2 AND generation = ?3 AND state = 'ACTIVE' AND expires_at > ?4 RETURNING ` + leaseCols,
	end:       `UPDATE leases SET state = ?2, ended_at = ?3, end_reason = ?4 WHERE id = ?1 RETURNING ` + leaseCols,
	newest:    `SELECT ` + leaseCols + ` FROM leases WHERE owner_hash = ?1 AND generation = ?2 ORDER BY id DESC LIMIT 1`,
	reconcile: `UPDATE leases SET state = 'EXPIRED', ended_at = expires_at, end_reason = 'TTL_EXPIRED' WHERE state = 'ACTIVE' AND expires_at <= ?1 RETURNING ` + leaseCols,

	fence:  `SELECT generation, api_key_id, connection_id FROM leases WHERE owner_hash = ?2 AND state = 'ACTIVE' AND expires_at > ` + storeNow,
	owned:  `SELECT ` + leaseCols + ` FROM leases WHERE owner_hash = ?2 AND state = 'ACTIVE' AND expires_at > ` + storeNow,
	active: `SELECT ` + leaseCols + ` FROM leases WHERE state = 'ACTIVE'`,
	list:   `SELECT ` + leaseCols + ` FROM leases WHERE state = 'ACTIVE' AND expires_at > ` + storeNow + ` ORDER BY connection_id`,
}

// TTL bounds of lease.Config.TTL, applied again here as the memory store
// does.
const (
	defaultLeaseTTL = 120 * time.Second
	minLeaseTTL     = time.Second
	maxLeaseTTL     = 30 * time.Minute
)

type leaseStore struct {
	s      *State
	closed atomic.Bool

	// beforeCommit, when set (tests only), runs after an operation's
	// writes and before its COMMIT; an error aborts the transaction.
	beforeCommit func(op string) error

	w struct {
		observe, expireTouched, activeByOwner, activeByConn, maxGen, insert, genTouch,
		renew, end, newest, reconcile, renewInPlace *sql.Stmt
	}
	r struct{ fence, owned, list *sql.Stmt }

	// occ mirrors the file's active leases by connection, for Occupant:
	// the router asks it for every candidate connection of every request,
	// so it reads memory. It is changed only under s.wmu, after a commit.
	occ occupancy
}

var _ lease.Store = (*leaseStore)(nil)

func (ls *leaseStore) prepare() error {
	ctx := context.Background()
	prep := func(db *sql.DB, dst **sql.Stmt, q string) error {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", q, err)
		}
		*dst = st
		return nil
	}
	w, r, q := &ls.w, &ls.r, &leaseSQL
	wdb, rdb := ls.s.wdb, ls.s.rdb
	for _, p := range []struct {
		db  *sql.DB
		dst **sql.Stmt
		q   string
	}{
		{wdb, &w.observe, q.observe}, {wdb, &w.expireTouched, q.expireTouched},
		{wdb, &w.activeByOwner, q.activeByOwner}, {wdb, &w.activeByConn, q.activeByConn},
		{wdb, &w.maxGen, q.maxGen}, {wdb, &w.insert, q.insert}, {wdb, &w.genTouch, q.genTouch},
		{wdb, &w.renew, q.renew}, {wdb, &w.end, q.end}, {wdb, &w.newest, q.newest},
		{wdb, &w.reconcile, q.reconcile}, {wdb, &w.renewInPlace, q.renewInPlace},
		{rdb, &r.fence, q.fence}, {rdb, &r.owned, q.owned}, {rdb, &r.list, q.list},
	} {
		if err := prep(p.db, p.dst, p.q); err != nil {
			return err
		}
	}
	return nil
}

func (ls *leaseStore) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{
		ls.w.observe, ls.w.expireTouched, ls.w.activeByOwner, ls.w.activeByConn, ls.w.maxGen, ls.w.insert,
		ls.w.genTouch, ls.w.renew, ls.w.end, ls.w.newest, ls.w.reconcile, ls.w.renewInPlace,
		ls.r.fence, ls.r.owned, ls.r.list,
	} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

// ltx is one lease write transaction.
type ltx struct {
	ctx context.Context
	tx  *sql.Tx
	ls  *leaseStore
	now int64 // the store's now (Unix ns)
	// after runs once the transaction has committed, still under s.wmu:
	// the changes of the occupancy mirror.
	after []func()
}

func (t *ltx) stmt(st *sql.Stmt) *sql.Stmt { return t.tx.StmtContext(t.ctx, st) }

// write runs fn in one BEGIN IMMEDIATE transaction at the store's now. fn
// returns a refusal (a lease sentinel or *lease.Error, committed like a
// success: the store's clock and the lazy expiry it made stand) or a
// failure (rolled back).
func (ls *leaseStore) write(ctx context.Context, op string, now time.Time, fn func(t *ltx) (refusal error, err error)) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	s := ls.s
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if ls.closed.Load() {
		return ErrClosed
	}
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlitestate: lease %s: begin: %w", op, err)
	}
	committed := false
	defer func() {
		if !committed {
			tx.Rollback()
		}
	}()
	t := &ltx{ctx: ctx, tx: tx, ls: ls}
	if err := t.stmt(ls.w.observe).QueryRowContext(ctx, ns(now)).Scan(&t.now); err != nil {
		return fmt.Errorf("sqlitestate: lease %s: %w", op, err)
	}
	refusal, err := fn(t)
	if err != nil {
		return fmt.Errorf("sqlitestate: lease %s: %w", op, err)
	}
	if ls.beforeCommit != nil {
		if err := ls.beforeCommit(op); err != nil {
			return fmt.Errorf("sqlitestate: lease %s: %w", op, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitestate: lease %s: commit: %w", op, err)
	}
	committed = true
	ls.occ.observe(t.now)
	for _, fn := range t.after {
		fn()
	}
	return refusal
}

// scanLease reads one row of leaseCols.
func scanLease(sc interface{ Scan(...any) error }) (id int64, l lease.Lease, err error) {
	var (
		owner, state, reason           string
		gen                            int64
		acquired, renewed, exp, endedA int64
	)
	err = sc.Scan(&id, &owner, &l.APIKeyID, &l.Provider, &l.Connection, &gen, &state, &acquired, &renewed, &exp, &endedA, &reason)
	if err != nil {
		return 0, lease.Lease{}, err
	}
	if n, derr := hex.Decode(l.Owner[:], []byte(owner)); derr != nil || n != len(l.Owner) {
		return 0, lease.Lease{}, fmt.Errorf("lease row %d: malformed owner hash", id)
	}
	l.Generation = uint64(gen)
	l.State = lease.State(state)
	l.AcquiredAt, l.RenewedAt, l.ExpiresAt, l.EndedAt = tm(acquired), tm(renewed), tm(exp), tm(endedA)
	l.EndReason = lease.Reason(reason)
	return id, l, nil
}

// one runs a query expected to return at most one lease row.
func (t *ltx) one(st *sql.Stmt, args ...any) (int64, lease.Lease, bool, error) {
	id, l, err := scanLease(t.stmt(st).QueryRowContext(t.ctx, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return 0, lease.Lease{}, false, nil
	}
	if err != nil {
		return 0, lease.Lease{}, false, err
	}
	return id, l, true, nil
}

// expireTouched ends the expired active leases of owner and connection.
func (t *ltx) expireTouched(owner lease.OwnerHash, connection string) error {
	_, err := t.stmt(t.ls.w.expireTouched).ExecContext(t.ctx, t.now, owner.String(), connection)
	return err
}

// touch records owner's generation gen at the store's now.
func (t *ltx) touch(owner lease.OwnerHash, gen uint64) error {
	_, err := t.stmt(t.ls.w.genTouch).ExecContext(t.ctx, owner.String(), int64(gen), t.now)
	return err
}

// endLease ends the lease row id with state and reason at the store's now.
func (t *ltx) endLease(id int64, state lease.State, reason lease.Reason) (lease.Lease, error) {
	_, l, ok, err := t.one(t.ls.w.end, id, string(state), t.now, string(reason))
	if err == nil && !ok {
		err = fmt.Errorf("lease row %d vanished", id)
	}
	if err == nil {
		err = t.touch(l.Owner, l.Generation)
	}
	return l, err
}

// capacity is the refusal for a connection held by another owner.
func capacity(occ lease.Lease) error {
	return &lease.Error{Code: lease.CodeCapacityUnavailable, Status: http.StatusTooManyRequests, Until: occ.ExpiresAt}
}

var errGenExhausted = &lease.Error{Code: lease.CodeServiceUnavailable, Status: http.StatusServiceUnavailable, Detail: "lease generation exhausted"}

// isUnique reports a UNIQUE constraint violation.
func isUnique(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && (se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
}

// conflict maps a unique violation of an insert (another process got in
// first despite the checks) to the contract's refusal.
func (t *ltx) conflict(owner lease.OwnerHash, connection string) (error, error) {
	if _, _, ok, err := t.one(t.ls.w.activeByOwner, owner.String()); err != nil || ok {
		return lease.ErrOwnerAlreadyActive, err
	}
	_, occ, _, err := t.one(t.ls.w.activeByConn, connection)
	return capacity(occ), err
}

func clampTTL(d time.Duration) time.Duration {
	if d <= 0 {
		return defaultLeaseTTL
	}
	return min(max(d, minLeaseTTL), maxLeaseTTL)
}

// Acquire implements lease.Store.
func (ls *leaseStore) Acquire(ctx context.Context, h lease.Holder, provider, connection string, ttl time.Duration, now time.Time) (out lease.Lease, renewed bool, err error) {
	ttl = clampTTL(ttl)
	err = ls.write(ctx, "acquire", now, func(t *ltx) (error, error) {
		owner := h.Owner.String()
		if err := t.expireTouched(h.Owner, connection); err != nil {
			return nil, err
		}
		id, a, ok, err := t.one(ls.w.activeByOwner, owner)
		if err != nil {
			return nil, err
		}
		exp := t.now + int64(ttl)
		if ok {
			if a.APIKeyID != h.APIKeyID || a.Connection != connection {
				return lease.ErrOwnerAlreadyActive, nil
			}
			_, out, _, err = t.one(ls.w.renewInPlace, id, provider, t.now, exp)
			renewed = true
			t.occupy(&out)
			return nil, err
		}
		if _, occ, ok, err := t.one(ls.w.activeByConn, connection); err != nil || ok {
			return capacity(occ), err
		}
		var known sql.NullInt64
		var hist int64
		if err := t.stmt(ls.w.maxGen).QueryRowContext(t.ctx, owner).Scan(&known, &hist); err != nil {
			return nil, err
		}
		top := max(known.Int64, hist)
		if top < 0 || uint64(top) >= lease.MaxGeneration {
			return errGenExhausted, nil
		}
		gen := top + 1
		_, out, _, err = t.one(ls.w.insert, owner, h.APIKeyID, provider, connection, gen, t.now, exp)
		if isUnique(err) {
			return t.conflict(h.Owner, connection)
		}
		if err != nil {
			return nil, err
		}
		t.occupy(&out)
		return nil, t.touch(h.Owner, uint64(gen))
	})
	if err != nil {
		return lease.Lease{}, false, err
	}
	return out, renewed, nil
}

// held returns h's owner's active lease when it matches h.
func (t *ltx) held(h lease.Holder) (int64, lease.Lease, bool, error) {
	if err := t.expireTouched(h.Owner, ""); err != nil {
		return 0, lease.Lease{}, false, err
	}
	id, a, ok, err := t.one(t.ls.w.activeByOwner, h.Owner.String())
	if err != nil || !ok {
		return 0, lease.Lease{}, false, err
	}
	if a.Owner != h.Owner || a.APIKeyID != h.APIKeyID || a.Generation != h.Generation {
		return 0, a, false, nil
	}
	return id, a, true, nil
}

// Transition implements lease.Store.
func (ls *leaseStore) Transition(ctx context.Context, h lease.Holder, provider, connection string, reason lease.Reason, ttl time.Duration, now time.Time) (moved, previous lease.Lease, err error) {
	ttl = clampTTL(ttl)
	err = ls.write(ctx, "transition", now, func(t *ltx) (error, error) {
		id, a, ok, err := t.held(h)
		if err != nil || !ok {
			return lease.ErrFenceStale, err
		}
		if a.Connection == connection {
			moved = a
			return nil, nil
		}
		if err := t.expireTouched(lease.OwnerHash{}, connection); err != nil {
			return nil, err
		}
		if _, occ, ok, err := t.one(ls.w.activeByConn, connection); err != nil || ok {
			return capacity(occ), err
		}
		if previous, err = t.endLease(id, lease.StateInvalidated, reason); err != nil {
			return nil, err
		}
		_, moved, _, err = t.one(ls.w.insert, a.Owner.String(), a.APIKeyID, provider, connection, int64(a.Generation), t.now, t.now+int64(ttl))
		if isUnique(err) {
			return t.conflict(h.Owner, connection)
		}
		t.vacate(&previous)
		t.occupy(&moved)
		return nil, err
	})
	if err != nil {
		return lease.Lease{}, lease.Lease{}, err
	}
	return moved, previous, nil
}

// Renew implements lease.Store.
func (ls *leaseStore) Renew(ctx context.Context, h lease.Holder, ttl time.Duration, now time.Time) (out lease.Lease, err error) {
	ttl = clampTTL(ttl)
	err = ls.write(ctx, "renew", now, func(t *ltx) (error, error) {
		if err := t.expireTouched(h.Owner, ""); err != nil {
			return nil, err
		}
		_, l, ok, err := t.one(ls.w.renew, h.Owner.String(), h.APIKeyID, int64(h.Generation), t.now, t.now, t.now+int64(ttl))
		if err != nil || !ok {
			return lease.ErrFenceStale, err
		}
		out = l
		t.occupy(&out)
		return nil, nil
	})
	if err != nil {
		return lease.Lease{}, err
	}
	return out, nil
}

// Release implements lease.Store.
func (ls *leaseStore) Release(ctx context.Context, h lease.Holder, reason lease.Reason, now time.Time) (out lease.Lease, again bool, err error) {
	err = ls.write(ctx, "release", now, func(t *ltx) (error, error) {
		id, a, ok, err := t.held(h)
		if err != nil {
			return nil, err
		}
		if ok {
			out, err = t.endLease(id, lease.StateReleased, reason)
			t.vacate(&out)
			return nil, err
		}
		if a.State == lease.StateActive && a.Generation == h.Generation {
			return lease.ErrFenceStale, nil // active under another key
		}
		_, l, found, err := t.one(ls.w.newest, h.Owner.String(), int64(h.Generation))
		if err != nil {
			return nil, err
		}
		if found && l.State == lease.StateReleased && l.APIKeyID == h.APIKeyID && l.Owner == h.Owner {
			out, again = l, true
			return nil, nil
		}
		return lease.ErrFenceStale, nil
	})
	if err != nil {
		return lease.Lease{}, false, err
	}
	return out, again, nil
}

// Invalidate implements lease.Store.
func (ls *leaseStore) Invalidate(ctx context.Context, h lease.Holder, reason lease.Reason, now time.Time) (out lease.Lease, err error) {
	err = ls.write(ctx, "invalidate", now, func(t *ltx) (error, error) {
		if err := t.expireTouched(h.Owner, ""); err != nil {
			return nil, err
		}
		id, a, ok, err := t.one(ls.w.activeByOwner, h.Owner.String())
		if err != nil || !ok || a.Generation != h.Generation || a.Owner != h.Owner {
			return lease.ErrFenceStale, err
		}
		out, err = t.endLease(id, lease.StateInvalidated, reason)
		t.vacate(&out)
		return nil, err
	})
	if err != nil {
		return lease.Lease{}, err
	}
	return out, nil
}

// Reconcile implements lease.Store.
func (ls *leaseStore) Reconcile(ctx context.Context, now time.Time) (out []lease.Lease, err error) {
	err = ls.write(ctx, "reconcile", now, func(t *ltx) (error, error) {
		rows, err := t.stmt(ls.w.reconcile).QueryContext(t.ctx, t.now)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			_, l, err := scanLease(rows)
			if err != nil {
				return nil, err
			}
			out = append(out, l)
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		rows.Close()
		for i := range out {
			if err := t.touch(out[i].Owner, out[i].Generation); err != nil {
				return nil, err
			}
			t.vacate(&out[i])
		}
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// read checks a read can run.
func (ls *leaseStore) read(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if ls.closed.Load() {
		return ErrClosed
	}
	return nil
}

// errAuthMismatch is the lease package's refusal for the right owner and
// generation presented through another API key, built once.
var errAuthMismatch = &lease.Error{Code: lease.CodeFenceStale, Status: http.StatusConflict, Detail: "lease held under another api key"}

// Fence implements lease.Store. It runs one indexed query; its refusals are
// the sentinels themselves (and errAuthMismatch).
func (ls *leaseStore) Fence(ctx context.Context, h lease.Holder, connection string, now time.Time) error {
	if err := ls.read(ctx); err != nil {
		return err
	}
	var (
		gen       int64
		key, conn string
	)
	err := ls.r.fence.QueryRowContext(ctx, ns(now), h.Owner.String()).Scan(&gen, &key, &conn)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return lease.ErrRequired
	case err != nil:
		return fmt.Errorf("sqlitestate: lease fence: %w", err)
	case uint64(gen) != h.Generation:
		return lease.ErrFenceStale
	case key != h.APIKeyID:
		return errAuthMismatch
	case conn != connection:
		return lease.ErrConnectionMismatch
	}
	return nil
}

// readOne runs a read query expected to return at most one lease row.
func (ls *leaseStore) readOne(ctx context.Context, op string, st *sql.Stmt, now time.Time, key string) (lease.Lease, bool, error) {
	if err := ls.read(ctx); err != nil {
		return lease.Lease{}, false, err
	}
	_, l, err := scanLease(st.QueryRowContext(ctx, ns(now), key))
	if errors.Is(err, sql.ErrNoRows) {
		return lease.Lease{}, false, nil
	}
	if err != nil {
		return lease.Lease{}, false, fmt.Errorf("sqlitestate: lease %s: %w", op, err)
	}
	return l, true, nil
}

// Owned implements lease.Store.
func (ls *leaseStore) Owned(ctx context.Context, owner lease.OwnerHash, now time.Time) (lease.Lease, bool, error) {
	return ls.readOne(ctx, "owned", ls.r.owned, now, owner.String())
}

// Occupant implements lease.Store. It reads the in-memory mirror of the
// file's active leases, no SQL: the process that opened the file is the
// only writer of its leases.
func (ls *leaseStore) Occupant(ctx context.Context, connection string, now time.Time) (lease.Lease, bool, error) {
	if err := ls.read(ctx); err != nil {
		return lease.Lease{}, false, err
	}
	o := &ls.occ
	if o.n.Load() == 0 {
		return lease.Lease{}, false, nil
	}
	at := max(ns(now), o.clock.Load())
	o.mu.RLock()
	c := o.byConn[connection]
	if c == nil || c.expires <= at {
		o.mu.RUnlock()
		return lease.Lease{}, false, nil
	}
	l := c.l
	o.mu.RUnlock()
	return l, true, nil
}

// List implements lease.Store.
func (ls *leaseStore) List(ctx context.Context, now time.Time) ([]lease.Lease, error) {
	if err := ls.read(ctx); err != nil {
		return nil, err
	}
	rows, err := ls.r.list.QueryContext(ctx, ns(now))
	if err != nil {
		return nil, fmt.Errorf("sqlitestate: lease list: %w", err)
	}
	defer rows.Close()
	var out []lease.Lease
	for rows.Next() {
		_, l, err := scanLease(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlitestate: lease list: %w", err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestate: lease list: %w", err)
	}
	return out, nil
}

// ns encodes t as Unix nanoseconds, 0 for the zero time.
func ns(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// tm decodes ns.
func tm(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
