package combo_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/queue"
	"github.com/routeguard/routeguard/queue/slotstore"
)

var slotT0 = time.Date(2026, 8, 12, 19, 30, 0, 0, time.UTC)

func slotSend(u *combotest.Upstream) combo.SendFunc {
	return func(ctx context.Context, t *combo.Target) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+t.Provider+".test/v1/chat/completions", nil)
		req.Header.Set("Authorization", "Bearer "+t.Connection)
		return u.Transport().RoundTrip(req)
	}
}

// TestSlotsCapAcrossRouters: two routers share one slot store; while the
// first has an attempt in flight on a connection capped at 1, the second
// skips it (queue_full, SEMAPHORE_QUEUE_FULL, retry when the slot
// expires) and falls back; once the first is done, the slot is free.
func TestSlotsCapAcrossRouters(t *testing.T) {
	store := slotstore.NewMemory(15 * time.Second)
	up := combotest.New()
	defer up.Close()
	started, unblock := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	up.Handle("k1", func(combotest.Call) combotest.Reply {
		if calls.Add(1) == 1 {
			close(started)
			<-unblock
		}
		return combotest.OK("k1")
	})
	clock := func() time.Time { return slotT0 }
	ra := combo.New(combo.Config{Slots: store, Now: clock})
	rb := combo.New(combo.Config{Slots: store, Now: clock})
	capped := combo.Target{Provider: "openai", Connection: "k1", Model: "m", MaxConcurrent: 1}
	c := &combo.Combo{Name: "c", Targets: []combo.Target{capped, {Provider: "openai", Connection: "k2", Model: "m"}}}

	done := make(chan error, 1)
	go func() {
		res, err := ra.Do(context.Background(), combo.Request{Combo: c}, slotSend(up))
		if err == nil {
			res.Response.Body.Close()
		}
		done <- err
	}()
	<-started
	res, err := rb.Do(context.Background(), combo.Request{Combo: c}, slotSend(up))
	if err != nil {
		t.Fatal(err)
	}
	res.Response.Body.Close()
	if len(res.Attempts) != 2 || res.Attempts[0].Outcome != combo.OutcomeSkipped || res.Attempts[0].Reason != combo.ReasonQueueFull ||
		res.Attempts[0].Code != queue.CodeSemaphoreQueueFull || res.Target.Connection != "k2" {
		t.Fatalf("second router's attempts %+v, served by %s; want k1 skipped as SEMAPHORE_QUEUE_FULL, then k2", res.Attempts, res.Target.Connection)
	}
	// Alone on the capped connection, the second router is told when the
	// slot frees at the latest: its expiry.
	solo := &combo.Combo{Name: "solo", Targets: []combo.Target{capped}}
	_, err = rb.Do(context.Background(), combo.Request{Combo: solo}, slotSend(up))
	var ce *combo.Error
	if !errors.As(err, &ce) || len(ce.Excluded) != 1 || ce.Excluded[0].RetryAfter != 15*time.Second {
		t.Fatalf("solo Do = %v, want an *Error with k1 excluded, retry after 15s", err)
	}
	close(unblock)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	res, err = rb.Do(context.Background(), combo.Request{Combo: solo}, slotSend(up))
	if err != nil {
		t.Fatalf("Do after the first router released the slot: %v", err)
	}
	res.Response.Body.Close()
	if ok, held, _, _ := store.TryAcquire(context.Background(), "k1", 1, "probe", slotT0); !ok || held != 1 {
		t.Fatalf("slot of k1 still held after both requests: ok %v held %d", ok, held)
	}
}

// TestSlotsLostSlotCancelsAttempt: when RenewSlots finds the slot of an
// attempt in flight lost (it expired and another holder took it), the
// attempt is cancelled.
func TestSlotsLostSlotCancelsAttempt(t *testing.T) {
	store := slotstore.NewMemory(time.Second)
	up := combotest.New()
	defer up.Close()
	up.Script("k1", combotest.Reply{Hang: true})
	var now atomic.Int64
	now.Store(slotT0.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
	r := combo.New(combo.Config{Slots: store, Now: clock})
	c := &combo.Combo{Name: "c", Targets: []combo.Target{{Provider: "openai", Connection: "k1", Model: "m", MaxConcurrent: 1}},
		Settings: combo.Settings{MaxRetries: new(0)}}
	if lost, err := r.RenewSlots(context.Background()); lost != 0 || err != nil {
		t.Fatalf("RenewSlots with nothing held = %d, %v", lost, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Do(context.Background(), combo.Request{Combo: c}, slotSend(up))
		done <- err
	}()
	for up.Count("k1") == 0 {
		time.Sleep(time.Millisecond)
	}
	if lost, err := r.RenewSlots(context.Background()); lost != 0 || err != nil {
		t.Fatalf("RenewSlots of a live slot = %d, %v; want nothing lost", lost, err)
	}
	select {
	case err := <-done:
		t.Fatalf("Do returned before its slot was lost: %v", err)
	default:
	}
	// The slot expires, another process takes it: the renewal finds it lost.
	now.Add(int64(2 * time.Second))
	if ok, _, _, _ := store.TryAcquire(context.Background(), "k1", 1, "elsewhere", clock()); !ok {
		t.Fatalf("expired slot not reclaimed")
	}
	if lost, err := r.RenewSlots(context.Background()); lost != 1 || err != nil {
		t.Fatalf("RenewSlots after the slot was taken = %d, %v; want 1 lost", lost, err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("Do succeeded after its slot was lost")
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the attempt was not cancelled")
	}
}
