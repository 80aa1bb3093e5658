package queue_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/routeguard/routeguard/queue"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder collects the events handed to OnChange.
type recorder struct {
	mu     sync.Mutex
	events []queue.Event
}

func (r *recorder) add(e queue.Event) { r.mu.Lock(); r.events = append(r.events, e); r.mu.Unlock() }

func (r *recorder) take() []queue.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

// Each event carries the key, the caller's time of the change and the key's
// state after it: slots running, waiters, and the end of a block.
func TestOnChangeCarriesStateAfterChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		q := queue.New(queue.Config{MaxConcurrency: 1, MaxQueueDepth: 1, MaxQueueWait: time.Second, OnChange: rec.add})
		hold := mustAcquire(t, q, "k")
		ch := goAcquire(context.Background(), q, "k")
		synctest.Wait()
		now := time.Now()
		_, err := q.Acquire(context.Background(), "k")
		require.ErrorIs(t, err, queue.ErrQueueFull)
		assert.Equal(t, []queue.Event{{Kind: queue.EventQueueFull, Key: "k", At: now, Running: 1, Waiting: 1, Err: err}}, rec.take())

		r := <-ch
		require.ErrorIs(t, r.err, queue.ErrQueueTimeout)
		assert.Equal(t, []queue.Event{{Kind: queue.EventQueueTimeout, Key: "k", At: now.Add(time.Second), Running: 1, Err: r.err}}, rec.take())

		until := t0.Add(time.Hour)
		q.BlockAt("k", until, t0)
		q.LearnAt("k", http.StatusOK, hdr("x-ratelimit-limit", "60", "x-ratelimit-remaining", "50"), t0.Add(time.Minute))
		q.LearnAt("k", http.StatusTooManyRequests, nil, t0.Add(2*time.Minute))
		q.UnblockAt("k", t0.Add(3*time.Minute))
		hold()
		q.ResetAt("k", t0.Add(4*time.Minute))
		assert.Equal(t, []queue.Event{
			{Kind: queue.EventBlocked, Key: "k", At: t0, Running: 1, Until: until},
			{Kind: queue.EventLimitsLearned, Key: "k", At: t0.Add(time.Minute), Running: 1, Until: until},
			{Kind: queue.EventLimiterReset, Key: "k", At: t0.Add(2 * time.Minute), Running: 1, Until: until},
			{Kind: queue.EventUnblocked, Key: "k", At: t0.Add(3 * time.Minute), Running: 1},
			{Kind: queue.EventReset, Key: "k", At: t0.Add(4 * time.Minute)},
		}, rec.take())
	})
}

// An idle key dropped by the sweep is reported with Removed set.
func TestOnChangeReportsRemovedIdleKeys(t *testing.T) {
	var rec recorder
	q := queue.New(queue.Config{IdleTTL: time.Minute, OnChange: rec.add})
	q.LearnAt("old", http.StatusOK, hdr("x-ratelimit-limit", "60", "x-ratelimit-remaining", "50"), t0)
	rec.take()
	release, ok := q.TryAcquireAt("new", t0.Add(2*time.Minute))
	require.True(t, ok)
	release()
	assert.Equal(t, []queue.Event{{Kind: queue.EventRemoved, Key: "old", At: t0.Add(2 * time.Minute), Removed: true}}, rec.take())
	assert.Equal(t, []string{"new"}, keysOf(q.SnapshotAt(t0.Add(2*time.Minute))))
}

func keysOf(states []queue.KeyState) []string {
	var out []string
	for _, ks := range states {
		out = append(out, ks.Key)
	}
	return out
}

// OnChange runs after the queue's lock is released, so it may call back into
// the queue.
func TestOnChangeMayCallBackIntoQueue(t *testing.T) {
	var q *queue.Queue
	var seen []queue.Status
	q = queue.New(queue.Config{OnChange: func(e queue.Event) { seen = append(seen, q.StatusAt(e.Key, e.At)) }})
	q.BlockAt("k", t0.Add(time.Minute), t0)
	q.ResetAllAt(t0)
	require.Len(t, seen, 2)
	assert.True(t, seen[0].Saturated, "blocked")
	assert.False(t, seen[1].Saturated, "a reset lifts the block")
}

// A semaphore wait that runs out is reported on every key it needed, with
// each key's own state.
func TestAcquireManyTimeoutReportsEachKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		q := queue.New(queue.Config{OnChange: rec.add})
		hold := mustMany(t, q, queue.Need{Key: "p", Cap: 1})
		defer hold.Release()
		start := time.Now()
		r := <-goMany(context.Background(), q, []queue.Need{{Key: "g", Cap: 2}, {Key: "p", Cap: 1}},
			queue.ManyOptions{Timeout: 50 * time.Millisecond, FailOpen: true})
		require.NoError(t, r.err)
		at := start.Add(50 * time.Millisecond)
		e := r.g.Bypassed
		assert.Equal(t, []queue.Event{
			{Kind: queue.EventQueueTimeout, Key: "g", At: at, Err: e},
			{Kind: queue.EventQueueTimeout, Key: "p", At: at, Running: 1, Err: e},
			{Kind: queue.EventFailOpen, Key: "g", At: at, Err: e},
			{Kind: queue.EventFailOpen, Key: "p", At: at, Running: 1, Err: e},
		}, rec.take())
	})
}

// BlockAt takes the end of the block as an absolute time and the time of
// the call as now: the key is blocked in [now, until) and free from until
// on, with no call needed; an until at or before now blocks nothing.
func TestBlockAtTakesAbsoluteUntilAndNow(t *testing.T) {
	q := queue.New(queue.Config{})
	until := t0.Add(10 * time.Second)
	q.BlockAt("k", until, t0)
	for _, tc := range []struct {
		at   time.Time
		want queue.Decision
	}{
		{t0, queue.Wait}, {until.Add(-time.Nanosecond), queue.Wait}, {until, queue.Admit}, {until.Add(time.Hour), queue.Admit},
	} {
		assert.Equal(t, tc.want, q.CheckAt("k", tc.at), "at %v", tc.at.Sub(t0))
	}
	assert.True(t, q.FullAt("k", 0, t0), "a block makes even an uncapped key full")
	assert.False(t, q.FullAt("k", 0, until))
	assert.Equal(t, until, q.StatusAt("k", t0).ReadyAt)

	q.BlockAt("past", t0, t0)
	assert.Equal(t, queue.Admit, q.CheckAt("past", t0))
	assert.Zero(t, q.SnapshotAt(t0)[1].BlockedUntil)

	// UnblockAt lifts the block early; ResetAt clears it too.
	q.UnblockAt("k", t0.Add(time.Second))
	assert.Equal(t, queue.Admit, q.CheckAt("k", t0.Add(time.Second)))
	q.BlockAt("k", until, t0)
	q.ResetAt("k", t0.Add(time.Second))
	assert.Equal(t, queue.Admit, q.CheckAt("k", t0.Add(time.Second)))
}
