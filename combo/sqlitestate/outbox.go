package sqlitestate

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
)

// kind names the table of an outbox entry.
type kind uint8

const (
	kindCooldown kind = iota
	kindPin
	kindBreaker
	kindLockout
	kindGate
	numKinds
)

// okey is one row of one table: the unit the outbox coalesces on.
type okey struct {
	k   kind
	key string
}

// op is the latest change of one row: delete it, or write val (a value
// owned by the outbox; the table's encode turns it into columns).
type op struct {
	del bool
	val any
}

type statsCounters struct {
	queued, written, batches, dropped, errors, swept atomic.Int64
}

// outbox holds the changes not written yet, coalesced per row: a later
// change of a row replaces the earlier one. It is bounded in rows.
type outbox struct {
	mu      sync.Mutex
	pending map[okey]op
	limit   int
	high    int           // size at which the writer is woken early
	full    chan struct{} // capacity 1: "flush soon"
	stats   *statsCounters
}

func newOutbox(limit int, st *statsCounters) *outbox {
	return &outbox{
		pending: make(map[okey]op),
		limit:   limit,
		high:    max(1, min(limit/2, defaultMaxBatch)),
		full:    make(chan struct{}, 1),
		stats:   st,
	}
}

// put records the latest change of row k. It never blocks: when the outbox
// is full, a change of a row not already pending is dropped and counted.
func (o *outbox) put(k okey, v op) {
	o.mu.Lock()
	if _, ok := o.pending[k]; !ok && len(o.pending) >= o.limit {
		o.mu.Unlock()
		o.stats.dropped.Add(1)
		o.wake()
		return
	}
	o.pending[k] = v
	n := len(o.pending)
	o.mu.Unlock()
	o.stats.queued.Add(1)
	if n >= o.high {
		o.wake()
	}
}

func (o *outbox) wake() {
	select {
	case o.full <- struct{}{}:
	default:
	}
}

func (o *outbox) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.pending)
}

// take removes and returns everything pending.
func (o *outbox) take() map[okey]op {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.pending) == 0 {
		return nil
	}
	p := o.pending
	o.pending = make(map[okey]op, len(p))
	return p
}

// giveBack returns changes that could not be written, unless a newer
// change of the same row arrived meanwhile.
func (o *outbox) giveBack(p map[okey]op) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, v := range p {
		if _, newer := o.pending[k]; !newer {
			o.pending[k] = v
		}
	}
}

// table says how one kind of row is written.
type table struct {
	upsert, del string
	// encode returns the upsert's arguments for the row's value.
	encode func(key string, v any) ([]any, error)
	// delArgs returns the delete's arguments.
	delArgs func(key string) []any
}

var tables [numKinds]table

// Flush reads the counts of the breakers and gate handed to Restore, and
// writes everything pending in the outbox now, in transactions of at most
// Options.MaxBatch rows, and returns the first error (what could not
// be written stays pending). Run calls it on every interval; call it
// yourself before a planned stop if Run is not running.
func (s *State) Flush(ctx context.Context) error {
	s.poll(s.opt.Clock())
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.leases.closed.Load() {
		return ErrClosed
	}
	p := s.ob.take()
	if len(p) == 0 {
		return nil
	}
	keys := make([]okey, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	for len(keys) > 0 {
		n := min(len(keys), s.opt.MaxBatch)
		if err := s.writeBatch(ctx, keys[:n], p); err != nil {
			rest := make(map[okey]op, len(keys))
			for _, k := range keys {
				rest[k] = p[k]
			}
			s.ob.giveBack(rest)
			return fmt.Errorf("sqlitestate: flush: %w", err)
		}
		keys = keys[n:]
	}
	return nil
}

// writeBatch writes the rows keys of p in one transaction. It requires
// s.wmu.
func (s *State) writeBatch(ctx context.Context, keys []okey, p map[okey]op) error {
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var stmts [numKinds][2]*sql.Stmt
	stmt := func(k kind, del bool) (*sql.Stmt, error) {
		i := 0
		q := tables[k].upsert
		if del {
			i, q = 1, tables[k].del
		}
		if stmts[k][i] == nil {
			st, err := tx.PrepareContext(ctx, q)
			if err != nil {
				return nil, err
			}
			stmts[k][i] = st
		}
		return stmts[k][i], nil
	}
	for _, k := range keys {
		v := p[k]
		st, err := stmt(k.k, v.del)
		if err != nil {
			return err
		}
		var args []any
		if v.del {
			args = tables[k.k].delArgs(k.key)
		} else if args, err = tables[k.k].encode(k.key, v.val); err != nil {
			return err
		}
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.stats.batches.Add(1)
	s.stats.written.Add(int64(len(keys)))
	return nil
}
