package queue_test

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/routeguard/routeguard/queue"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type grantResult struct {
	g   queue.Grant
	err error
	at  time.Duration
}

func goMany(ctx context.Context, q *queue.Queue, needs []queue.Need, opts queue.ManyOptions) <-chan grantResult {
	ch := make(chan grantResult, 1)
	start := time.Now()
	go func() {
		g, err := q.AcquireMany(ctx, needs, opts)
		ch <- grantResult{g, err, time.Since(start)}
	}()
	return ch
}

func mustMany(t *testing.T, q *queue.Queue, needs ...queue.Need) queue.Grant {
	t.Helper()
	g, err := q.AcquireMany(context.Background(), needs, queue.ManyOptions{})
	require.NoError(t, err)
	require.True(t, g.Held())
	return g
}

// Scenario 3c-3: waiting holds no capacity; g is not taken until p frees.
func TestAcquireManyAllOrNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{})
		g1 := mustMany(t, q, queue.Need{Key: "g", Cap: 2})
		g2 := mustMany(t, q, queue.Need{Key: "g", Cap: 2})
		p := mustMany(t, q, queue.Need{Key: "p", Cap: 1})
		ch := goMany(context.Background(), q, []queue.Need{{Key: "g", Cap: 2}, {Key: "p", Cap: 1}}, queue.ManyOptions{})
		synctest.Wait()
		g1.Release()
		synctest.Wait()
		assert.Equal(t, 1, state(q, "g").Running, "g is free but not taken while p is full")
		assert.Equal(t, 1, state(q, "g").Waiting)
		time.Sleep(time.Second)
		p.Release()
		r := <-ch
		require.NoError(t, r.err)
		assert.True(t, r.g.Held())
		assert.Nil(t, r.g.Bypassed)
		assert.Equal(t, time.Second, r.at)
		assert.Equal(t, 2, state(q, "g").Running)
		assert.Equal(t, 1, state(q, "p").Running)
		r.g.Release()
		r.g.Release()
		g2.Release()
		assert.Equal(t, 0, state(q, "g").Running)
		assert.Equal(t, 0, state(q, "p").Running)
	})
}

// Scenario 3c-4: no cap means no gate and an immediate, empty grant.
func TestAcquireManyWithoutCaps(t *testing.T) {
	q := queue.New(queue.Config{})
	g, err := q.AcquireMany(context.Background(), []queue.Need{{Key: "k", Cap: 0}, {Key: "j", Cap: -1}}, queue.ManyOptions{})
	require.NoError(t, err)
	assert.False(t, g.Held())
	assert.Nil(t, g.Bypassed)
	g.Release()
	assert.Empty(t, q.SnapshotAt(time.Now()))
	var zero queue.Grant
	zero.Release()
}

func TestAcquireManyDuplicateKeysTakeSmallerCap(t *testing.T) {
	q := queue.New(queue.Config{})
	g := mustMany(t, q, queue.Need{Key: "k", Cap: 3}, queue.Need{Key: "k", Cap: 1})
	assert.Equal(t, queue.KeyState{Key: "k", Running: 1, Cap: 1}, withoutTimes(state(q, "k")))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := q.AcquireMany(ctx, []queue.Need{{Key: "k", Cap: 5}}, queue.ManyOptions{})
	assert.ErrorIs(t, err, context.Canceled)
	g.Release()
}

func withoutTimes(ks queue.KeyState) queue.KeyState {
	ks.LastUse, ks.NextStart = time.Time{}, time.Time{}
	return ks
}

// Two callers needing the same keys in opposite orders both finish.
func TestAcquireManyNoDeadlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{})
		var wg sync.WaitGroup
		var done atomic.Int64
		for i := range 200 {
			needs := []queue.Need{{Key: "a", Cap: 1}, {Key: "b", Cap: 2}, {Key: "c", Cap: 1}}
			if i%2 == 1 {
				needs = []queue.Need{{Key: "c", Cap: 1}, {Key: "b", Cap: 2}}
			}
			wg.Go(func() {
				g, err := q.AcquireMany(context.Background(), needs, queue.ManyOptions{Timeout: 30 * time.Second})
				if !assert.NoError(t, err) {
					return
				}
				time.Sleep(time.Millisecond)
				done.Add(1)
				g.Release()
			})
		}
		wg.Wait()
		assert.Equal(t, int64(200), done.Load())
	})
}

// Scenario 3c-5: fail-open. A second request waits; with the queue full it
// proceeds without a slot and says so.
func TestAcquireManyFailOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var kinds []queue.EventKind
		q := queue.New(queue.Config{OnChange: func(e queue.Event) { mu.Lock(); kinds = append(kinds, e.Kind); mu.Unlock() }})
		need := []queue.Need{{Key: "qsconn:c1", Cap: 1}}
		opts := queue.ManyOptions{Timeout: 30 * time.Second, MaxQueue: 20, FailOpen: true}
		hold := mustMany(t, q, need...)
		ctx, cancel := context.WithCancel(context.Background())
		var waiters []<-chan grantResult
		for range 20 {
			waiters = append(waiters, goMany(ctx, q, need, opts))
			synctest.Wait()
		}
		assert.Equal(t, 20, state(q, "qsconn:c1").Waiting)

		g, err := q.AcquireMany(context.Background(), need, opts)
		require.NoError(t, err)
		assert.False(t, g.Held())
		require.ErrorIs(t, g.Bypassed, queue.ErrSemaphoreQueueFull)
		g.Release()
		assert.Equal(t, 1, state(q, "qsconn:c1").Running)

		strict, err := q.AcquireMany(context.Background(), need, queue.ManyOptions{MaxQueue: 20})
		require.ErrorIs(t, err, queue.ErrQueueFull)
		assert.False(t, strict.Held())

		cancel()
		for _, ch := range waiters {
			assert.ErrorIs(t, (<-ch).err, context.Canceled)
		}
		assert.Equal(t, 0, state(q, "qsconn:c1").Waiting)

		// A timeout fails open too, after the whole budget.
		r := <-goMany(context.Background(), q, need, opts)
		require.NoError(t, r.err)
		assert.Equal(t, 30*time.Second, r.at)
		require.ErrorIs(t, r.g.Bypassed, queue.ErrSemaphoreTimeout)
		assert.False(t, r.g.Held())
		assert.Equal(t, 0, state(q, "qsconn:c1").Waiting)

		// Without fail-open the timeout is an error.
		r = <-goMany(context.Background(), q, need, queue.ManyOptions{Timeout: time.Second})
		require.ErrorIs(t, r.err, queue.ErrQueueTimeout)
		assert.EqualError(t, r.err, "queue: semaphore timeout after 1s for qsconn:c1")
		hold.Release()
		mu.Lock()
		assert.Equal(t, []queue.EventKind{
			queue.EventQueueFull, queue.EventFailOpen, queue.EventQueueFull,
			queue.EventQueueTimeout, queue.EventFailOpen, queue.EventQueueTimeout,
		}, kinds)
		mu.Unlock()
	})
}

// A hierarchical waiter shares the key's count with Acquire and respects a
// block.
func TestAcquireManySharesGatesWithAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{MaxConcurrency: 1})
		release := mustAcquire(t, q, "openai:k1")
		ch := goMany(context.Background(), q, []queue.Need{{Key: "global", Cap: 10}, {Key: "openai:k1", Cap: 1}}, queue.ManyOptions{})
		synctest.Wait()
		assert.Equal(t, 0, state(q, "global").Running)
		q.BlockAt("global", time.Now().Add(2*time.Second), time.Now())
		release()
		r := <-ch
		require.NoError(t, r.err)
		assert.Equal(t, 2*time.Second, r.at)
		assert.Equal(t, 1, state(q, "global").Running)
		r.g.Release()
	})
}

// A reset rejects hierarchical waiters and frees their place on the other
// keys.
func TestAcquireManyReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{})
		hold := mustMany(t, q, queue.Need{Key: "p", Cap: 1})
		ch := goMany(context.Background(), q, []queue.Need{{Key: "g", Cap: 1}, {Key: "p", Cap: 1}}, queue.ManyOptions{})
		synctest.Wait()
		next := goMany(context.Background(), q, []queue.Need{{Key: "g", Cap: 1}}, queue.ManyOptions{})
		synctest.Wait()
		assert.Equal(t, 2, state(q, "g").Waiting, "FIFO: the single-key waiter queues behind")
		q.ResetAt("p", time.Now())
		require.ErrorIs(t, (<-ch).err, queue.ErrReset)
		r := <-next
		require.NoError(t, r.err)
		r.g.Release()
		hold.Release()
	})
}

// Hammer: 1 000 goroutines on a key with cap 3. The in-flight maximum is
// exactly 3, grants follow arrival order, and every waiter ends with a slot
// or a typed error.
func TestHammerFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{MaxConcurrency: 3, MaxQueueDepth: 900, MaxQueueWait: 20050 * time.Millisecond})
		start := time.Now()
		type started struct {
			id int
			at time.Duration
		}
		var inflight, peak atomic.Int64
		var mu sync.Mutex
		var order []started
		var ok, full, timedOut atomic.Int64
		var wg sync.WaitGroup
		for i := range 1000 {
			wg.Go(func() {
				release, err := q.Acquire(context.Background(), "k")
				switch {
				case err == nil:
				case isCode(err, queue.CodeQueueFull):
					full.Add(1)
					return
				case isCode(err, queue.CodeQueueTimeout):
					timedOut.Add(1)
					return
				default:
					t.Errorf("untyped error %v", err)
					return
				}
				ok.Add(1)
				n := inflight.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				mu.Lock()
				order = append(order, started{i, time.Since(start)})
				mu.Unlock()
				time.Sleep(100 * time.Millisecond)
				inflight.Add(-1)
				release()
			})
			synctest.Wait()
		}
		wg.Wait()
		assert.Equal(t, int64(3), peak.Load())
		assert.Equal(t, int64(1000), ok.Load()+full.Load()+timedOut.Load())
		// 3 run at once, 900 queue and 97 are refused. Waves of 3 start
		// every 100 ms, so the first 600 waiters start within 20 s and the
		// other 300 run out of their 20.05 s budget.
		assert.Equal(t, int64(97), full.Load())
		assert.Equal(t, int64(603), ok.Load())
		assert.Equal(t, int64(300), timedOut.Load())
		// Grants follow arrival order: every request that started earlier
		// arrived earlier (requests granted at the same instant are woken
		// in any order).
		slices.SortFunc(order, func(a, b started) int { return cmp.Compare(a.id, b.id) })
		for i := 1; i < len(order); i++ {
			require.LessOrEqual(t, order[i-1].at, order[i].at, "request %d started before %d", order[i].id, order[i-1].id)
		}
		assert.Equal(t, 20*time.Second, order[len(order)-1].at)
		assert.Equal(t, 0, state(q, "k").Running)
		assert.Equal(t, 0, state(q, "k").Waiting)
		t.Logf("ok %d full %d timed out %d", ok.Load(), full.Load(), timedOut.Load())
	})
}

// The same without fake time: real goroutines racing on a cap of 3.
func TestHammerRace(t *testing.T) {
	q := queue.New(queue.Config{MaxConcurrency: 3})
	var inflight, peak atomic.Int64
	var wg sync.WaitGroup
	for range 1000 {
		wg.Go(func() {
			release, err := q.Acquire(context.Background(), "k")
			if !assert.NoError(t, err) {
				return
			}
			n := inflight.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			time.Sleep(50 * time.Microsecond)
			inflight.Add(-1)
			release()
		})
	}
	wg.Wait()
	assert.Equal(t, int64(3), peak.Load())
	assert.Equal(t, 0, state(q, "k").Running)
	assert.Equal(t, 0, state(q, "k").Waiting)
}

func isCode(err error, code string) bool {
	var e *queue.Error
	return errorsAs(err, &e) && e.Code == code
}
