package queue_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/routeguard/routeguard/queue"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// state returns key's entry in the snapshot, or a zero KeyState.
func state(q *queue.Queue, key string) queue.KeyState {
	for _, ks := range q.SnapshotAt(time.Now()) {
		if ks.Key == key {
			return ks
		}
	}
	return queue.KeyState{}
}

// result of a background Acquire.
type result struct {
	release func()
	err     error
	at      time.Duration
}

// goAcquire starts Acquire in a goroutine and returns its result channel.
func goAcquire(ctx context.Context, q *queue.Queue, key string) <-chan result {
	ch := make(chan result, 1)
	start := time.Now()
	go func() {
		release, err := q.Acquire(ctx, key)
		ch <- result{release, err, time.Since(start)}
	}()
	return ch
}

func mustAcquire(t *testing.T, q *queue.Queue, key string) func() {
	t.Helper()
	release, err := q.Acquire(context.Background(), key)
	require.NoError(t, err)
	return release
}

func TestAcquireUncontendedAndIdempotentRelease(t *testing.T) {
	q := queue.New(queue.Config{MaxConcurrency: 1})
	release := mustAcquire(t, q, "openai:k1")
	assert.Equal(t, 1, state(q, "openai:k1").Running)
	assert.Equal(t, queue.Wait, q.CheckAt("openai:k1", time.Now()))
	release()
	release()
	assert.Equal(t, 0, state(q, "openai:k1").Running)
	r2 := mustAcquire(t, q, "openai:k1")
	release() // stale release of a reused ticket must not free r2's slot
	assert.Equal(t, 1, state(q, "openai:k1").Running)
	r2()
	assert.Equal(t, queue.Admit, q.CheckAt("openai:k1", time.Now()))
}

func TestZeroQueueUsable(t *testing.T) {
	var q queue.Queue
	release, err := q.Acquire(context.Background(), "k")
	require.NoError(t, err)
	release()
	assert.Equal(t, queue.Admit, q.CheckAt("k", time.Now()))
}

func TestAlreadyCancelled(t *testing.T) {
	q := queue.New(queue.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := q.Acquire(ctx, "k")
	assert.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, q.SnapshotAt(time.Now()))
}

// Scenario 4c-2 and 4c-1: admission by queue depth. The waiters are queued
// with an unbounded depth, then the depth of the case is put in force.
func TestCheckAdmissionByDepth(t *testing.T) {
	for _, tc := range []struct {
		depth, queued int
		want          queue.Decision
	}{
		{0, 0, queue.Wait}, {0, 1000, queue.Wait},
		{2, 0, queue.Wait}, {2, 1, queue.Wait}, {2, 2, queue.Refuse}, {2, 5, queue.Refuse},
	} {
		synctest.Test(t, func(t *testing.T) {
			var depth atomic.Int64
			q := queue.New(queue.Config{
				MaxConcurrency: 1,
				Overrides:      func(string) queue.Config { return queue.Config{MaxQueueDepth: int(depth.Load())} },
			})
			hold := mustAcquire(t, q, "k")
			ctx, cancel := context.WithCancel(context.Background())
			var chans []<-chan result
			for range tc.queued {
				chans = append(chans, goAcquire(ctx, q, "k"))
			}
			synctest.Wait()
			depth.Store(int64(tc.depth))
			st := q.StatusAt("k", time.Now())
			assert.Equal(t, tc.queued, st.Waiting)
			assert.Equal(t, tc.want, st.Decision, "depth %d queued %d", tc.depth, tc.queued)
			if tc.want == queue.Refuse {
				_, err := q.Acquire(ctx, "k")
				var qe *queue.Error
				require.ErrorAs(t, err, &qe)
				assert.Equal(t, queue.CodeQueueFull, qe.Code)
				assert.Equal(t, http.StatusTooManyRequests, qe.Status)
				assert.Equal(t, tc.depth, qe.Depth)
			}
			cancel()
			for _, ch := range chans {
				assert.ErrorIs(t, (<-ch).err, context.Canceled)
			}
			hold()
			assert.Equal(t, queue.KeyState{}.Running, state(q, "k").Running)
			assert.Equal(t, 0, state(q, "k").Waiting)
		})
	}
}

// The request queue's form of scenario 3c-1 (see
// TestSemaphoreQueueFullRefusedAtOnce for the semaphore's): with one holder
// and a full queue, the next request is refused at once, before any waiting,
// with RATE_LIMIT_QUEUE_FULL.
func TestQueueFullRefusedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{MaxConcurrency: 1, MaxQueueDepth: 20})
		hold := mustAcquire(t, q, "k")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var chans []<-chan result
		for range 20 {
			chans = append(chans, goAcquire(ctx, q, "k"))
			synctest.Wait()
		}
		start := time.Now()
		_, err := q.Acquire(ctx, "k")
		assert.Zero(t, time.Since(start))
		require.ErrorIs(t, err, queue.ErrQueueFull)
		assert.EqualError(t, err, "queue: queue full (20 waiting) for k")
		assert.Equal(t, 20, state(q, "k").Waiting)
		hold()
		for i, ch := range chans {
			r := <-ch
			require.NoError(t, r.err, "waiter %d", i)
			r.release()
		}
	})
}

// Scenario 4c-3: concurrency 1, four 15 ms jobs finish in order.
func TestFIFOOrderFourJobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{MaxConcurrency: 1})
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		start := time.Now()
		for _, name := range []string{"job1", "job2", "job3", "job4"} {
			wg.Go(func() {
				err := q.Do(context.Background(), "k", func(context.Context) error {
					time.Sleep(15 * time.Millisecond)
					mu.Lock()
					order = append(order, name)
					mu.Unlock()
					return nil
				})
				assert.NoError(t, err)
			})
			synctest.Wait() // each job queues before the next is submitted
		}
		wg.Wait()
		assert.Equal(t, []string{"job1", "job2", "job3", "job4"}, order)
		assert.Equal(t, 60*time.Millisecond, time.Since(start))
	})
}

// The request queue's form of scenario 3c-2 (see TestSemaphoreTimeout for the
// semaphore's): a waiter with a 50 ms budget is refused after exactly 50 ms
// with RATE_LIMIT_QUEUE_TIMEOUT and leaves the queue empty.
func TestQueueTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var events []queue.Event
		var mu sync.Mutex
		q := queue.New(queue.Config{
			MaxConcurrency: 1, MaxQueueWait: 50 * time.Millisecond,
			OnChange: func(e queue.Event) { mu.Lock(); events = append(events, e); mu.Unlock() },
		})
		hold := mustAcquire(t, q, "k")
		defer hold()
		r := <-goAcquire(context.Background(), q, "k")
		assert.Equal(t, 50*time.Millisecond, r.at)
		require.ErrorIs(t, r.err, queue.ErrQueueTimeout)
		var qe *queue.Error
		require.ErrorAs(t, r.err, &qe)
		assert.Equal(t, queue.CodeQueueTimeout, qe.Code)
		assert.Equal(t, http.StatusTooManyRequests, qe.Status)
		assert.Equal(t, 50*time.Millisecond, qe.Budget)
		assert.Equal(t, 0, state(q, "k").Waiting)
		assert.Equal(t, 1, state(q, "k").Running)
		mu.Lock()
		require.Len(t, events, 1)
		assert.Equal(t, queue.EventQueueTimeout, events[0].Kind)
		mu.Unlock()
	})
}

// Cancelling a waiter leaves neither a queue entry nor a slot, and the
// next waiter moves up.
func TestCancelLeavesNothingBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{MaxConcurrency: 1})
		hold := mustAcquire(t, q, "k")
		ctx, cancel := context.WithCancel(context.Background())
		first := goAcquire(ctx, q, "k")
		synctest.Wait()
		second := goAcquire(context.Background(), q, "k")
		synctest.Wait()
		assert.Equal(t, 2, state(q, "k").Waiting)
		cancel()
		assert.ErrorIs(t, (<-first).err, context.Canceled)
		assert.Equal(t, 1, state(q, "k").Waiting)
		assert.Equal(t, 1, state(q, "k").Running)
		hold()
		r := <-second
		require.NoError(t, r.err)
		assert.Equal(t, 1, state(q, "k").Running)
		r.release()
		assert.Equal(t, queue.KeyState{Key: "k"}.Running, state(q, "k").Running)
	})
}

// A context deadline shorter than the wait budget ends the wait with the
// context's error.
func TestContextDeadlineBeforeBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{MaxConcurrency: 1})
		hold := mustAcquire(t, q, "k")
		defer hold()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r := <-goAcquire(ctx, q, "k")
		assert.ErrorIs(t, r.err, context.DeadlineExceeded)
		assert.Equal(t, time.Second, r.at)
		assert.Equal(t, 0, state(q, "k").Waiting)
	})
}

// D10: the execution budget ends a run that goes on too long with 504.
func TestExecutionTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{ExecutionTimeout: time.Second})
		start := time.Now()
		err := q.Do(context.Background(), "k", func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		})
		assert.Equal(t, time.Second, time.Since(start))
		require.ErrorIs(t, err, queue.ErrExecutionTimeout)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		var qe *queue.Error
		require.ErrorAs(t, err, &qe)
		assert.Equal(t, http.StatusGatewayTimeout, qe.Status)
		assert.Equal(t, queue.CodeExecutionTimeout, qe.Code)
		assert.Equal(t, "queue: execution on k exceeded 1s", qe.Error())
		assert.Equal(t, 0, state(q, "k").Running)
	})
}

// Scenario 4c-7: a 200 s run under a 600 s execution budget and a 30 s wait
// budget is not cut; the wait budget stops counting once the run starts.
func TestLongRunWithinExecutionBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{MaxQueueWait: 30 * time.Second, ExecutionTimeout: 600 * time.Second})
		err := q.Do(context.Background(), "k", func(ctx context.Context) error {
			select {
			case <-time.After(200 * time.Second):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		assert.NoError(t, err)
	})
}

// The wait budget and the execution budget are separate: a request that
// waited nearly its whole wait budget still gets its full execution budget.
func TestBudgetsAreIndependent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{MaxConcurrency: 1, MaxQueueWait: 10 * time.Second, ExecutionTimeout: 20 * time.Second})
		hold := mustAcquire(t, q, "k")
		time.AfterFunc(9*time.Second, hold)
		start := time.Now()
		err := q.Do(context.Background(), "k", func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		})
		assert.ErrorIs(t, err, queue.ErrExecutionTimeout)
		assert.Equal(t, 29*time.Second, time.Since(start))
	})
}

func TestDoPassesThroughErrors(t *testing.T) {
	q := queue.New(queue.Config{})
	boom := errors.New("boom")
	assert.Same(t, boom, q.Do(context.Background(), "k", func(context.Context) error { return boom }))
}

func TestMinSpacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{MinSpacing: 100 * time.Millisecond})
		start := time.Now()
		for i := range 3 {
			release := mustAcquire(t, q, "k")
			assert.Equal(t, time.Duration(i)*100*time.Millisecond, time.Since(start))
			release()
		}
	})
}

func TestRequestsPerMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{RequestsPerMinute: 60})
		start := time.Now()
		for range 60 {
			mustAcquire(t, q, "k")()
		}
		assert.Zero(t, time.Since(start))
		st := q.StatusAt("k", time.Now())
		assert.Equal(t, queue.Wait, st.Decision)
		assert.Equal(t, start.Add(time.Second), st.ReadyAt)
		mustAcquire(t, q, "k")()
		assert.Equal(t, time.Second, time.Since(start))
	})
}

// Scenario 4c-9: rpm 0 in the override and the defaults means no reservoir
// limit at all.
func TestZeroRPMIsUnlimited(t *testing.T) {
	q := queue.New(queue.Config{Overrides: func(string) queue.Config { return queue.Config{RequestsPerMinute: 0} }})
	for i := range 10_000 {
		release, ok := q.TryAcquireAt("k", t0)
		require.True(t, ok, "request %d", i)
		release()
	}
}

func TestTryAcquire(t *testing.T) {
	q := queue.New(queue.Config{MaxConcurrency: 2, MinSpacing: time.Second})
	r1, ok := q.TryAcquireAt("k", t0)
	require.True(t, ok)
	_, ok = q.TryAcquireAt("k", t0.Add(500*time.Millisecond))
	assert.False(t, ok, "spacing")
	r2, ok := q.TryAcquireAt("k", t0.Add(time.Second))
	require.True(t, ok)
	_, ok = q.TryAcquireAt("k", t0.Add(5*time.Second))
	assert.False(t, ok, "cap")
	r1()
	r2()
	r3, ok := q.TryAcquireAt("k", time.Now())
	require.True(t, ok)
	r3()
}

// The clock going back is treated as no time passing.
func TestClockJumpsBackwards(t *testing.T) {
	q := queue.New(queue.Config{MinSpacing: time.Second})
	r, ok := q.TryAcquireAt("k", t0)
	require.True(t, ok)
	r()
	st := q.StatusAt("k", t0.Add(-time.Hour))
	assert.Equal(t, queue.Wait, st.Decision)
	assert.Equal(t, t0.Add(-time.Hour).Add(time.Second), st.ReadyAt)
	_, ok = q.TryAcquireAt("k", t0.Add(-time.Hour))
	assert.False(t, ok)
	r, ok = q.TryAcquireAt("k", t0.Add(-time.Hour+time.Second))
	require.True(t, ok)
	r()
}

func TestStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{MaxConcurrency: 1, MaxQueueDepth: 1})
		now := time.Now()
		assert.Equal(t, queue.Status{Decision: queue.Admit, Cap: 1, Depth: 1, ReadyAt: now}, q.StatusAt("k", time.Now()))
		hold := mustAcquire(t, q, "k")
		assert.Equal(t, queue.Status{Decision: queue.Wait, Running: 1, Cap: 1, Depth: 1, Saturated: true}, q.StatusAt("k", time.Now()))
		ctx, cancel := context.WithCancel(context.Background())
		ch := goAcquire(ctx, q, "k")
		synctest.Wait()
		assert.Equal(t, queue.Status{Decision: queue.Refuse, Running: 1, Waiting: 1, Cap: 1, Depth: 1, Saturated: true}, q.StatusAt("k", time.Now()))
		cancel()
		<-ch
		hold()
		assert.Equal(t, "admit", queue.Admit.String())
		assert.Equal(t, "wait", queue.Wait.String())
		assert.Equal(t, "refuse", queue.Refuse.String())
	})
}

func TestBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{})
		start := time.Now()
		q.BlockAt("k", start.Add(3*time.Second), time.Now())
		st := q.StatusAt("k", time.Now())
		assert.True(t, st.Saturated)
		assert.Equal(t, queue.Wait, st.Decision)
		assert.Equal(t, start.Add(3*time.Second), st.ReadyAt)
		r := <-goAcquire(context.Background(), q, "k")
		require.NoError(t, r.err)
		assert.Equal(t, 3*time.Second, r.at)
		r.release()

		q.BlockAt("k", time.Now().Add(time.Hour), time.Now())
		ch := goAcquire(context.Background(), q, "k")
		time.Sleep(time.Second)
		q.UnblockAt("k", time.Now())
		r = <-ch
		require.NoError(t, r.err)
		assert.Equal(t, time.Second, r.at)
		r.release()
		assert.True(t, state(q, "k").BlockedUntil.IsZero())
	})
}

func TestReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{MaxConcurrency: 1})
		hold := mustAcquire(t, q, "k")
		a := goAcquire(context.Background(), q, "k")
		synctest.Wait()
		q.ResetAt("k", time.Now())
		r := <-a
		require.ErrorIs(t, r.err, queue.ErrReset)
		assert.EqualError(t, r.err, "queue: k was reset")
		assert.Equal(t, 1, state(q, "k").Running, "slots in use stay counted")
		assert.Equal(t, 0, state(q, "k").Waiting)
		b := goAcquire(context.Background(), q, "k")
		synctest.Wait()
		q.ResetAllAt(time.Now())
		require.ErrorIs(t, (<-b).err, queue.ErrReset)
		hold()
		assert.Equal(t, queue.Admit, q.CheckAt("k", time.Now()))
		q.ResetAt("unknown", time.Now())
		q.UnblockAt("unknown", time.Now())
	})
}

// Scenario 4c-8: header learning.
func TestLearnFromHeaders(t *testing.T) {
	q := queue.New(queue.Config{})
	h := http.Header{}
	h.Set("X-RateLimit-Limit", "60")
	h.Set("X-RateLimit-Remaining", "3")
	q.LearnAt("k", http.StatusOK, h, t0)
	ks := q.SnapshotAt(t0)[0]
	assert.Equal(t, 990*time.Millisecond, ks.LearnedSpacing)
	assert.Equal(t, 3, ks.Reservoir)
	assert.Equal(t, 60, ks.ReservoirMax)

	h.Set("X-RateLimit-Remaining", "40")
	q.LearnAt("k", http.StatusOK, h, t0)
	ks = state(q, "k")
	assert.Zero(t, ks.LearnedSpacing)
	assert.Zero(t, ks.Reservoir)
	assert.Zero(t, ks.ReservoirMax)

	// Between 10 % and 50 %: spacing only.
	h.Set("X-RateLimit-Remaining", "20")
	q.LearnAt("k", http.StatusOK, h, t0)
	ks = state(q, "k")
	assert.Equal(t, 990*time.Millisecond, ks.LearnedSpacing)
	assert.Zero(t, ks.ReservoirMax)

	over := http.Header{}
	over.Set("X-Ratelimit-Over-Limit", "yes")
	q.LearnAt("fw", http.StatusOK, over, t0)
	assert.Equal(t, 200*time.Millisecond, state(q, "fw").LearnedSpacing)

	q.LearnAt("none", http.StatusOK, http.Header{}, t0)
	assert.Equal(t, queue.KeyState{}, state(q, "none"))
}

// A learned reservoir spaces the remaining starts and then pauses until the
// window resets; a 429 gives the key a fresh limiter.
func TestLearnedReservoirAndReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var kinds []queue.EventKind
		q := queue.New(queue.Config{
			MaxQueueWait: 30 * time.Second,
			OnChange:     func(e queue.Event) { mu.Lock(); kinds = append(kinds, e.Kind); mu.Unlock() },
		})
		start := time.Now()
		h := http.Header{}
		h.Set("X-RateLimit-Limit", "60")
		h.Set("X-RateLimit-Remaining", "2")
		h.Set("X-RateLimit-Reset", "20")
		q.LearnAt("k", http.StatusOK, h, time.Now())
		for _, want := range []time.Duration{0, 990 * time.Millisecond, 20 * time.Second} {
			mustAcquire(t, q, "k")()
			assert.Equal(t, want, time.Since(start))
		}
		ks := state(q, "k")
		assert.Equal(t, 59, ks.Reservoir)
		assert.Equal(t, start.Add(40*time.Second), ks.ReservoirRefill)

		q.LearnAt("k", http.StatusTooManyRequests, nil, time.Now())
		ks = state(q, "k")
		assert.Zero(t, ks.LearnedSpacing)
		assert.Zero(t, ks.ReservoirMax)
		mustAcquire(t, q, "k")()
		assert.Equal(t, 20*time.Second, time.Since(start))
		mu.Lock()
		assert.Equal(t, []queue.EventKind{queue.EventLimitsLearned, queue.EventLimiterReset}, kinds)
		mu.Unlock()
	})
}

// Learning that relaxes the spacing lets a waiter go early.
func TestLearningWakesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{})
		h := http.Header{}
		h.Set("X-RateLimit-Limit", "1") // spacing 59.99 s
		q.LearnAt("k", http.StatusOK, h, time.Now())
		mustAcquire(t, q, "k")()
		ch := goAcquire(context.Background(), q, "k")
		time.Sleep(time.Second)
		q.LearnAt("k", http.StatusTooManyRequests, nil, time.Now())
		r := <-ch
		require.NoError(t, r.err)
		assert.Equal(t, time.Second, r.at)
		r.release()
	})
}

func TestIdleKeysArePruned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{IdleTTL: time.Minute, MaxKeys: 3})
		for _, k := range []string{"a", "b", "c"} {
			mustAcquire(t, q, k)()
		}
		busy := mustAcquire(t, q, "busy")
		assert.Len(t, q.SnapshotAt(time.Now()), 3, "the cap drops idle keys to make room")
		time.Sleep(2 * time.Minute)
		mustAcquire(t, q, "d")()
		keys := []string{}
		for _, ks := range q.SnapshotAt(time.Now()) {
			keys = append(keys, ks.Key)
		}
		assert.Equal(t, []string{"busy", "d"}, keys)
		busy()
	})
}

func TestOverridesFallThrough(t *testing.T) {
	q := queue.New(queue.Config{
		MaxConcurrency: 5, MaxQueueDepth: 7,
		Overrides: func(key string) queue.Config {
			if key == "one" {
				return queue.Config{MaxConcurrency: 1}
			}
			return queue.Config{}
		},
	})
	assert.Equal(t, 1, q.StatusAt("one", t0).Cap)
	assert.Equal(t, 7, q.StatusAt("one", t0).Depth)
	assert.Equal(t, 5, q.StatusAt("two", t0).Cap)
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// A waiter cancelled at the very moment it is granted either keeps the slot
// (and gets no error) or gives it back; nothing is leaked either way.
func TestCancelRacingGrant(t *testing.T) {
	for i := range 100 {
		synctest.Test(t, func(t *testing.T) {
			q := queue.New(queue.Config{MaxConcurrency: 1})
			hold := mustAcquire(t, q, "k")
			ctx, cancel := context.WithCancel(context.Background())
			ch := goAcquire(ctx, q, "k")
			synctest.Wait()
			if i%2 == 0 {
				hold()
				cancel()
			} else {
				cancel()
				hold()
			}
			r := <-ch
			if r.err == nil {
				assert.Equal(t, 1, state(q, "k").Running)
				r.release()
			} else {
				assert.ErrorIs(t, r.err, context.Canceled)
			}
			assert.Equal(t, 0, state(q, "k").Running)
			assert.Equal(t, 0, state(q, "k").Waiting)
		})
	}
}

// Changing a key's rate takes effect on the next acquisition, and a 429
// refills the bucket.
func TestRateChangesAndResetRefill(t *testing.T) {
	var rpm atomic.Int64
	rpm.Store(2)
	q := queue.New(queue.Config{Overrides: func(string) queue.Config {
		return queue.Config{RequestsPerMinute: int(rpm.Load())}
	}})
	for range 2 {
		r, ok := q.TryAcquireAt("k", t0)
		require.True(t, ok)
		r()
	}
	_, ok := q.TryAcquireAt("k", t0)
	assert.False(t, ok, "bucket of 2 is empty")
	assert.Equal(t, t0.Add(30*time.Second), q.StatusAt("k", t0).ReadyAt)
	q.LearnAt("k", http.StatusTooManyRequests, nil, t0)
	for range 2 {
		r, ok := q.TryAcquireAt("k", t0)
		require.True(t, ok, "a 429 gives a fresh, full bucket")
		r()
	}
	rpm.Store(60)
	_, ok = q.TryAcquireAt("k", t0)
	assert.False(t, ok, "raising the rate does not add tokens at once")
	r, ok := q.TryAcquireAt("k", t0.Add(time.Second))
	require.True(t, ok, "one token per second at 60 rpm")
	r()
	assert.Equal(t, 60, state(q, "k").RequestsPerMinute)
	rpm.Store(0)
	for range 100 {
		r, ok := q.TryAcquireAt("k", t0.Add(time.Second))
		require.True(t, ok, "rpm 0 is unlimited")
		r()
	}
}

func TestEventsOnBlockAndReset(t *testing.T) {
	var events []queue.Event
	q := queue.New(queue.Config{
		MaxConcurrency: 1, MaxQueueDepth: 1,
		OnChange: func(e queue.Event) { events = append(events, e) },
	})
	until := time.Now().Add(time.Hour)
	q.BlockAt("k", until, time.Now())
	q.UnblockAt("k", time.Now())
	q.UnblockAt("k", time.Now()) // not blocked: no event
	q.ResetAt("k", time.Now())
	q.ResetAllAt(time.Now())
	require.Len(t, events, 4)
	assert.Equal(t, queue.EventBlocked, events[0].Kind)
	assert.Equal(t, until, events[0].Until)
	assert.Equal(t, queue.EventUnblocked, events[1].Kind)
	assert.Equal(t, queue.EventReset, events[2].Kind)
	assert.Equal(t, queue.EventReset, events[3].Kind)
	assert.Equal(t, "k", events[3].Key)
}
