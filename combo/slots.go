package combo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/routeguard/routeguard/queue"
	"github.com/routeguard/routeguard/queue/slotstore"
)

// codeSlotStoreUnavailable is the skip detail of an attempt whose slot
// store could not answer (and does not fall back to a local cap).
const codeSlotStoreUnavailable = "SLOT_STORE_UNAVAILABLE"

// remoteSlots are the slots of Config.Slots a router holds, with the
// attempts to cancel when one is lost. The zero value is ready.
type remoteSlots struct {
	once   sync.Once
	prefix string // this router's part of its holder ids
	seq    atomic.Uint64

	mu   sync.Mutex
	held map[slotstore.Slot]*heldSlot
}

// heldSlot is one attempt's slot.
type heldSlot struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	lost   bool
}

// setCancel gives the slot its attempt's cancel; a slot already lost
// cancels at once. A nil slot does nothing.
func (h *heldSlot) setCancel(cancel context.CancelFunc) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.cancel = cancel
	lost := h.lost
	h.mu.Unlock()
	if lost {
		cancel()
	}
}

// lose marks the slot lost and cancels its attempt.
func (h *heldSlot) lose() {
	h.mu.Lock()
	h.lost = true
	cancel := h.cancel
	h.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// holder returns a new holder id, unique across processes: a random
// prefix per router and a sequence number.
func (rs *remoteSlots) holder() string {
	rs.once.Do(func() {
		var b [8]byte
		rand.Read(b[:])
		rs.prefix = hex.EncodeToString(b[:]) + ":"
	})
	return rs.prefix + strconv.FormatUint(rs.seq.Add(1), 10)
}

func (rs *remoteSlots) add(sl slotstore.Slot) *heldSlot {
	h := &heldSlot{}
	rs.mu.Lock()
	if rs.held == nil {
		rs.held = map[slotstore.Slot]*heldSlot{}
	}
	rs.held[sl] = h
	rs.mu.Unlock()
	return h
}

func (rs *remoteSlots) drop(sl slotstore.Slot) {
	rs.mu.Lock()
	delete(rs.held, sl)
	rs.mu.Unlock()
}

// takeSlot takes a slot of Config.Slots for an attempt on t's capped
// connection, after begin admitted it with h. When the store refuses, the
// attempt is abandoned and skipped; the error is only the end of ctx.
func (r *Router) takeSlot(ctx context.Context, t *Target, h *handle) (*heldSlot, *Exclusion, error) {
	s := r.cfg.Slots
	if s == nil || t.Connection == "" || t.MaxConcurrent <= 0 {
		return nil, nil, nil
	}
	now := r.now()
	sl := slotstore.Slot{Conn: t.Connection, Holder: r.remote.holder()}
	ok, _, retryAt, err := s.TryAcquire(ctx, sl.Conn, t.MaxConcurrent, sl.Holder, now)
	if err != nil || !ok {
		h.abandon()
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		x := &Exclusion{Provider: t.Provider, Connection: t.Connection, Model: t.Model, Reason: ReasonQueueFull,
			Detail: queue.CodeSemaphoreQueueFull, RetryAfter: max(retryAt.Sub(now), 0)}
		if err != nil {
			x.Detail, x.RetryAfter = codeSlotStoreUnavailable, 0
			r.log.Warn("combo: slot store refused", "connection", t.Connection, "err", err)
		}
		return nil, x, nil
	}
	held := r.remote.add(sl)
	prev := h.release
	h.release = func() {
		if prev != nil {
			prev()
		}
		r.remote.drop(sl)
		if err := s.Release(context.WithoutCancel(ctx), sl.Conn, sl.Holder, r.now()); err != nil {
			r.log.Warn("combo: slot release failed", "connection", sl.Conn, "err", err)
		}
	}
	return held, nil, nil
}

// RenewSlots renews, in one call to Config.Slots, every slot this router
// holds, and cancels the attempts whose slot was lost (expired on the
// store, or reported lost after failed renewals); it returns how many were
// lost. Call it every third of the store's slot lifetime from a goroutine
// of your own, for as long as the router serves. Without Config.Slots it
// does nothing.
func (r *Router) RenewSlots(ctx context.Context) (lost int, err error) {
	s := r.cfg.Slots
	if s == nil {
		return 0, nil
	}
	r.remote.mu.Lock()
	held := make([]slotstore.Slot, 0, len(r.remote.held))
	for sl := range r.remote.held {
		held = append(held, sl)
	}
	r.remote.mu.Unlock()
	if len(held) == 0 {
		return 0, nil
	}
	gone, err := s.Renew(ctx, held, r.now())
	for _, sl := range gone {
		r.remote.mu.Lock()
		h := r.remote.held[sl]
		delete(r.remote.held, sl)
		r.remote.mu.Unlock()
		if h != nil {
			h.lose()
		}
	}
	return len(gone), err
}
