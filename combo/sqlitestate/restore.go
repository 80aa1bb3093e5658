package sqlitestate

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/lockout"
)

// load restores the cooldowns and pins that are still live at the clock's
// now into the in-memory stores. A row that cannot be decoded is an error:
// the file is not silently trusted in part.
func (s *State) load() error {
	ctx := context.Background()
	now := s.opt.Clock()
	cut := ns(now)

	rows, err := s.wdb.QueryContext(ctx, `SELECT connection_id, entry FROM cooldowns WHERE expires_at > ?1`, cut)
	if err != nil {
		return err
	}
	for rows.Next() {
		var conn, b string
		if err := rows.Scan(&conn, &b); err != nil {
			rows.Close()
			return err
		}
		e, err := decodeCooldown([]byte(b))
		if err != nil {
			rows.Close()
			return fmt.Errorf("cooldown row %q: %w", conn, err)
		}
		s.cooldowns.restore(conn, e)
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return err
	}
	rows.Close()

	rows, err = s.wdb.QueryContext(ctx, `SELECT provider, session, connection_id, created_at, last_used_at, expires_at FROM pins WHERE expires_at > ?1`, cut)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			k                         affinity.StoreKey
			sess                      []byte
			p                         affinity.Pin
			created, used, expiresAtN int64
		)
		if err := rows.Scan(&k.Provider, &sess, &p.Connection, &created, &used, &expiresAtN); err != nil {
			return err
		}
		if len(sess) != len(k.Session) || p.Connection == "" {
			return fmt.Errorf("pin row of provider %q: malformed", k.Provider)
		}
		copy(k.Session[:], sess)
		p.Created, p.LastUsed, p.Expires = tm(created), tm(used), tm(expiresAtN)
		if err := s.pins.inner.Save(k, p, now); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Sweep runs the retention sweep now (Run does it every
// Options.SweepInterval) and returns how many rows it deleted. It ends
// leases that expired more than Options.Retention before the store's clock,
// deletes leases that ended before that, forgets the generation counters of
// owners without an active lease untouched since then (raising the
// generation floor to their highest generation first, in the same
// transaction), and deletes the efficiency rows that have expired at
// Options.Clock.
func (s *State) Sweep(ctx context.Context) (int64, error) {
	now := s.opt.Clock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.leases.closed.Load() {
		return 0, ErrClosed
	}
	n, err := s.sweep(ctx, now)
	if err != nil {
		return 0, fmt.Errorf("sqlitestate: sweep: %w", err)
	}
	s.lastSweep = now
	s.stats.swept.Add(n)
	return n, nil
}

const noActive = `NOT EXISTS (SELECT 1 FROM leases l WHERE l.owner_hash = g.owner_hash AND l.state = 'ACTIVE')`

func (s *State) sweep(ctx context.Context, now time.Time) (int64, error) {
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var clock int64
	if err := tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE name = 'clock'`).Scan(&clock); err != nil {
		return 0, err
	}
	cut := clock - int64(s.opt.Retention)
	var total int64
	exec := func(q string, args ...any) error {
		r, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		if q[0] == 'D' {
			n, _ := r.RowsAffected()
			total += n
		}
		return nil
	}
	steps := []struct {
		q    string
		args []any
	}{
		{`UPDATE leases SET state = 'EXPIRED', ended_at = expires_at, end_reason = 'TTL_EXPIRED' WHERE state = 'ACTIVE' AND expires_at <= ?1`, []any{cut}},
		{`DELETE FROM leases WHERE state <> 'ACTIVE' AND ended_at <= ?1`, []any{cut}},
		{`UPDATE meta SET value = max(value, coalesce((SELECT max(max_generation) FROM lease_generations g WHERE touched_at <= ?1 AND ` + noActive + `), 0)) WHERE name = 'generation_floor'`, []any{cut}},
		{`DELETE FROM lease_generations AS g WHERE touched_at <= ?1 AND ` + noActive, []any{cut}},
	}
	for _, st := range steps {
		if err := exec(st.q, st.args...); err != nil {
			return 0, err
		}
	}
	at := ns(now)
	for _, t := range []string{"cooldowns", "pins", "breakers", "lockouts"} {
		if err := exec(`DELETE FROM `+t+` WHERE expires_at <= ?1`, at); err != nil {
			return 0, err
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return total, nil
}

// Layers names the layers whose state Restore puts back. Nil fields are
// skipped. Cooldowns and pins need no call: their stores are restored by
// Open.
type Layers struct {
	Breakers *breaker.Set
	Lockouts *lockout.Lockout
}

// Restore puts the breakers and lockouts kept in the file back into l at
// now, dropping what has expired by then. An open breaker resumes its open
// period where it stood (breaker.Set.RestoreAt measures it from the
// recorded start), a half-open or degraded one comes back as it was; a
// breaker whose open period ended before now starts closed. A model lock
// comes back with its end and reason (its failure count restarts at the
// next failure). Call it once after building the layers and before
// serving; the hooks may already be wired (the restored state is queued
// again, which writes the same rows).
func (s *State) Restore(l Layers, now time.Time) error {
	if s.leases.closed.Load() {
		return ErrClosed
	}
	ctx := context.Background()
	at := ns(now)
	if l.Breakers != nil {
		var recs []breaker.Record
		err := s.scanRecords(ctx, `SELECT provider, record FROM breakers WHERE expires_at > ?1 ORDER BY provider`, at, func(key string, b []byte) error {
			var r breaker.Record
			if err := json.Unmarshal(b, &r); err != nil {
				return fmt.Errorf("breaker row %q: %w", key, err)
			}
			recs = append(recs, r)
			return nil
		})
		if err == nil && len(recs) > 0 {
			err = l.Breakers.RestoreAt(recs, now)
		}
		if err != nil {
			return fmt.Errorf("sqlitestate: restore breakers from %s: %w", s.path, err)
		}
	}
	if l.Lockouts != nil {
		err := s.scanRecords(ctx, `SELECT lockout_key, record FROM lockouts WHERE expires_at > ?1`, at, func(key string, b []byte) error {
			var r lockoutRow
			if err := json.Unmarshal(b, &r); err != nil {
				return fmt.Errorf("lockout row %q: %w", key, err)
			}
			f := r.failure()
			if f.Cooldown = tm(r.Until).Sub(now); f.Cooldown > 0 {
				l.Lockouts.LockAt(f, now)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("sqlitestate: restore lockouts from %s: %w", s.path, err)
		}
	}
	return nil
}

// scanRecords runs q at at and calls fn with each (key, record) row.
func (s *State) scanRecords(ctx context.Context, q string, at int64, fn func(key string, b []byte) error) error {
	rows, err := s.rdb.QueryContext(ctx, q, at)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var key, rec string
		if err := rows.Scan(&key, &rec); err != nil {
			return err
		}
		if err := fn(key, []byte(rec)); err != nil {
			return err
		}
	}
	return rows.Err()
}
