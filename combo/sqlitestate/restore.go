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
	for _, t := range []string{"cooldowns", "pins", "breakers", "lockouts", "gate_entries"} {
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
	Gate     *breaker.Gate
}

// Restore puts the breakers, lockouts and gate entries kept in the file
// back into l at now, dropping what has expired by then, and hands the Set
// and the Gate to the writer, which from then on reads their failure
// counts every Options.FlushInterval (on its own goroutine, in memory) and
// queues those that changed without a transition.
//
// An open breaker resumes its open period where it stood
// (breaker.Set.RestoreAt measures it from the recorded start), a half-open
// or degraded one comes back as it was, a closed one with its failure
// count and per-kind counts (so a breaker one failure below its threshold
// opens on the next failure); a breaker whose open period ended before now
// starts closed. A model lock comes back with its end, reason and failure
// count, and a count whose lock has ended comes back while its escalation
// window lasts, so the next failure escalates from it
// (lockout.Lockout.RestoreAt). A gate entry comes back cooling until its
// recorded end, a connection entry with its failure count
// (breaker.Gate.RestoreAt). Call it once after building the layers and
// before serving; the hooks may already be wired (the restored state is
// queued again, which writes the same rows).
func (s *State) Restore(l Layers, now time.Time) error {
	if s.leases.closed.Load() {
		return ErrClosed
	}
	ctx := context.Background()
	at := ns(now)
	if l.Breakers != nil {
		recs, err := s.records(ctx, `SELECT provider, record FROM breakers WHERE expires_at > ?1 ORDER BY provider`, at, "breaker")
		if err == nil && len(recs) > 0 {
			err = l.Breakers.RestoreAt(recs, now)
		}
		if err != nil {
			return fmt.Errorf("sqlitestate: restore breakers from %s: %w", s.path, err)
		}
	}
	if l.Gate != nil {
		recs, err := s.records(ctx, `SELECT entry_key, record FROM gate_entries WHERE expires_at > ?1 ORDER BY entry_key`, at, "gate")
		if err == nil && len(recs) > 0 {
			err = l.Gate.RestoreAt(recs, now)
		}
		if err != nil {
			return fmt.Errorf("sqlitestate: restore gate from %s: %w", s.path, err)
		}
	}
	if l.Lockouts != nil {
		var recs []lockout.Record
		err := s.scanRecords(ctx, `SELECT lockout_key, record FROM lockouts WHERE expires_at > ?1`, at, func(key string, b []byte) error {
			var r lockoutRow
			if err := json.Unmarshal(b, &r); err != nil {
				return fmt.Errorf("lockout row %q: %w", key, err)
			}
			recs = append(recs, r.record())
			return nil
		})
		if err != nil {
			return fmt.Errorf("sqlitestate: restore lockouts from %s: %w", s.path, err)
		}
		l.Lockouts.RestoreAt(recs, now)
	}
	s.polled.attach(l.Breakers, l.Gate)
	return nil
}

// records reads the breaker.Record rows of q at at.
func (s *State) records(ctx context.Context, q string, at int64, what string) ([]breaker.Record, error) {
	var recs []breaker.Record
	err := s.scanRecords(ctx, q, at, func(key string, b []byte) error {
		var r breaker.Record
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s row %q: %w", what, key, err)
		}
		recs = append(recs, r)
		return nil
	})
	return recs, err
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
