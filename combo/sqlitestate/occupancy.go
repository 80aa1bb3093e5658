package sqlitestate

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/routeguard/routeguard/lease"
)

// occupancy mirrors the active leases of the file by connection. Open
// loads it; each lease write changes it after its commit, under the
// State's write lock, so it always equals the file's active rows as this
// process wrote them. A lease in it counts as long as it has not expired
// at the later of the reader's now and the store's clock, as in the
// file's queries (leaseStore.Occupant reads it).
type occupancy struct {
	mu     sync.RWMutex
	byConn map[string]*occupant
	clock  atomic.Int64 // the store's clock (Unix ns): the latest now a write recorded
	n      atomic.Int64 // len(byConn), for a check without the lock
}

// occupant is one active lease and its expiry (Unix ns), read first so
// that a check copies the lease only when it holds.
type occupant struct {
	expires int64
	l       lease.Lease
}

// observe records the store's clock after a commit.
func (o *occupancy) observe(now int64) {
	if now > o.clock.Load() {
		o.clock.Store(now)
	}
}

func (o *occupancy) put(l lease.Lease) {
	o.mu.Lock()
	if o.byConn == nil {
		o.byConn = map[string]*occupant{}
	}
	o.byConn[l.Connection] = &occupant{expires: ns(l.ExpiresAt), l: l}
	o.n.Store(int64(len(o.byConn)))
	o.mu.Unlock()
}

// drop forgets l's connection if l is the lease it holds there.
func (o *occupancy) drop(l lease.Lease) {
	o.mu.Lock()
	if c := o.byConn[l.Connection]; c != nil && c.l.Owner == l.Owner && c.l.Generation == l.Generation {
		delete(o.byConn, l.Connection)
		o.n.Store(int64(len(o.byConn)))
	}
	o.mu.Unlock()
}

// occupy and vacate change the mirror once t has committed: *l is then
// the active lease of its connection, or has ended.
func (t *ltx) occupy(l *lease.Lease) {
	t.after = append(t.after, func() { t.ls.occ.put(*l) })
}

func (t *ltx) vacate(l *lease.Lease) {
	t.after = append(t.after, func() { t.ls.occ.drop(*l) })
}

// loadOccupancy fills the mirror from the file.
func (ls *leaseStore) loadOccupancy() error {
	ctx := context.Background()
	var clock int64
	if err := ls.s.wdb.QueryRowContext(ctx, `SELECT value FROM meta WHERE name = 'clock'`).Scan(&clock); err != nil {
		return err
	}
	ls.occ.observe(clock)
	rows, err := ls.s.wdb.QueryContext(ctx, leaseSQL.active)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		_, l, err := scanLease(rows)
		if err != nil {
			return err
		}
		ls.occ.put(l)
	}
	return rows.Err()
}

// HeldUntil is Occupant for lease.Manager.HeldAt: the expiry of
// connection's active lease, without copying the lease. (lease.Manager
// uses such a method of its own in-memory store; with the method's name
// exported there, it uses this one too.)
func (ls *leaseStore) HeldUntil(connection string, now time.Time) (time.Time, bool) {
	o := &ls.occ
	if o.n.Load() == 0 || ls.closed.Load() {
		return time.Time{}, false
	}
	at := max(ns(now), o.clock.Load())
	o.mu.RLock()
	c := o.byConn[connection]
	if c == nil || c.expires <= at {
		o.mu.RUnlock()
		return time.Time{}, false
	}
	u := c.l.ExpiresAt
	o.mu.RUnlock()
	return u, true
}
