// Package slotstore defines the store of per-connection concurrency slots
// that several processes share, so that a connection's cap
// (Target.MaxConcurrent in package combo) holds across every gateway
// replica, and its in-process reference implementation.
//
// The calls a user starts from:
//
//	s := slotstore.NewMemory(15 * time.Second)             // or redisstate's State.Slots()
//	ok, held, retryAt, err := s.TryAcquire(ctx, conn, 1, holder, now)
//	lost, err := s.Renew(ctx, []slotstore.Slot{{Conn: conn, Holder: holder}}, now)
//	err = s.Release(ctx, conn, holder, now)
//
// Waiting (FIFO, depth, timeouts) stays with the caller, locally; package
// queue/queuetest holds the conformance suite a Store must pass.
package slotstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Store holds per-connection concurrency slots shared by every process
// that uses it: at most limit holders per connection at any time. A slot
// lives for the store's TTL from its last acquire or renewal; an expired
// slot is reclaimed by the next acquire on its connection.
type Store interface {
	// TryAcquire takes a slot of conn for holder when fewer than limit
	// live holders have one, and reports whether it did, how many live
	// holders conn has after the call, and, when refused, when the
	// earliest of them expires. It is idempotent: a holder that already
	// has a slot keeps it (renewed). A limit ≤ 0 is refused with an error
	// matching ErrInvalidLimit.
	TryAcquire(ctx context.Context, conn string, limit int, holder string, now time.Time) (ok bool, held int, retryAt time.Time, err error)

	// Release frees holder's slot of conn; releasing a slot that is not
	// held is harmless.
	Release(ctx context.Context, conn, holder string, now time.Time) error

	// Renew extends every slot of held for another TTL, and returns the
	// ones that were no longer held (expired and reclaimed, or released).
	// A lost slot's request should be cancelled.
	Renew(ctx context.Context, held []Slot, now time.Time) (lost []Slot, err error)
}

// Slot is one holder's slot of one connection.
type Slot struct {
	Conn, Holder string
}

// ErrInvalidLimit reports a slot limit ≤ 0.
var ErrInvalidLimit = errors.New("slotstore: slot limit must be positive")

// NewMemory returns the Store of one process, with slots that live ttl
// (default 15 s when ttl ≤ 0). It is safe for concurrent use.
func NewMemory(ttl time.Duration) Store {
	if ttl <= 0 {
		ttl = 15 * time.Second
	}
	return &memory{ttl: ttl, conns: map[string]map[string]time.Time{}}
}

type memory struct {
	ttl   time.Duration
	mu    sync.Mutex
	conns map[string]map[string]time.Time // conn → holder → expiry
}

// purge drops conn's holders expired at now; it requires m.mu.
func (m *memory) purge(conn string, now time.Time) map[string]time.Time {
	hs := m.conns[conn]
	for h, exp := range hs {
		if !exp.After(now) {
			delete(hs, h)
		}
	}
	if hs != nil && len(hs) == 0 {
		delete(m.conns, conn)
		return nil
	}
	return hs
}

func (m *memory) TryAcquire(ctx context.Context, conn string, limit int, holder string, now time.Time) (bool, int, time.Time, error) {
	if err := ctx.Err(); err != nil {
		return false, 0, time.Time{}, err
	}
	if limit <= 0 {
		return false, 0, time.Time{}, fmt.Errorf("%w: %d", ErrInvalidLimit, limit)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	hs := m.purge(conn, now)
	if _, ok := hs[holder]; !ok && len(hs) >= limit {
		var first time.Time
		for _, exp := range hs {
			if first.IsZero() || exp.Before(first) {
				first = exp
			}
		}
		return false, len(hs), first, nil
	}
	if hs == nil {
		hs = map[string]time.Time{}
		m.conns[conn] = hs
	}
	hs[holder] = now.Add(m.ttl)
	return true, len(hs), time.Time{}, nil
}

func (m *memory) Release(ctx context.Context, conn, holder string, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if hs := m.conns[conn]; hs != nil {
		delete(hs, holder)
		if len(hs) == 0 {
			delete(m.conns, conn)
		}
	}
	return nil
}

func (m *memory) Renew(ctx context.Context, held []Slot, now time.Time) ([]Slot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var lost []Slot
	for _, s := range held {
		hs := m.purge(s.Conn, now)
		if _, ok := hs[s.Holder]; !ok {
			lost = append(lost, s)
			continue
		}
		hs[s.Holder] = now.Add(m.ttl)
	}
	return lost, nil
}
