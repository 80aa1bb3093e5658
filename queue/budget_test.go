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

// ExecutionContext ends a run after the key's execution budget with a
// cause that carries the code and the 504 status.
func TestExecutionContextCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{Overrides: func(key string) queue.Config {
			if key == "slow" {
				return queue.Config{ExecutionTimeout: 3 * time.Second}
			}
			return queue.Config{}
		}})
		start := time.Now()
		ctx, cancel := q.ExecutionContext(context.Background(), "slow")
		defer cancel()
		<-ctx.Done()
		assert.Equal(t, 3*time.Second, time.Since(start))
		assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
		cause := context.Cause(ctx)
		require.ErrorIs(t, cause, queue.ErrExecutionTimeout)
		var qe *queue.Error
		require.ErrorAs(t, cause, &qe)
		assert.Equal(t, []any{queue.CodeExecutionTimeout, http.StatusGatewayTimeout, "slow", 3 * time.Second, nil},
			[]any{qe.Code, qe.Status, qe.Key, qe.Budget, qe.Err})
		assert.EqualError(t, cause, "queue: execution on slow exceeded 3s")

		// Other keys get the default 600 s budget.
		other, cancel2 := q.ExecutionContext(context.Background(), "other")
		defer cancel2()
		deadline, ok := other.Deadline()
		require.True(t, ok)
		assert.Equal(t, 600*time.Second, time.Until(deadline))
	})
}

// A client that goes away during the run is not an execution timeout: Do
// returns the run's own error and frees the slot.
func TestDoClientCancelIsNotExecutionTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{MaxConcurrency: 1, ExecutionTimeout: time.Minute})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(5*time.Second, cancel)
		start := time.Now()
		err := q.Do(ctx, "k", func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		})
		assert.Equal(t, 5*time.Second, time.Since(start))
		require.ErrorIs(t, err, context.Canceled)
		assert.NotErrorIs(t, err, queue.ErrExecutionTimeout)
		assert.Equal(t, 0, state(q, "k").Running)

		// A run that ignores its context and succeeds late is a success.
		err = q.Do(context.Background(), "k", func(context.Context) error {
			time.Sleep(2 * time.Minute)
			return nil
		})
		assert.NoError(t, err)
	})
}

// Waiters held back by the minimum spacing start in arrival order, one
// spacing apart.
func TestSpacingServesWaitersInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{MinSpacing: 200 * time.Millisecond})
		start := time.Now()
		var mu sync.Mutex
		var order []int
		var at []time.Duration
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Go(func() {
				release, err := q.Acquire(context.Background(), "k")
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				order = append(order, i)
				at = append(at, time.Since(start))
				mu.Unlock()
				release()
			})
			synctest.Wait()
		}
		wg.Wait()
		assert.Equal(t, []int{0, 1, 2, 3, 4}, order)
		assert.Equal(t, []time.Duration{0, 200 * time.Millisecond, 400 * time.Millisecond, 600 * time.Millisecond, 800 * time.Millisecond}, at)
	})
}

// The cap of a key is the one given by the latest AcquireMany.
func TestAcquireManyLatestCapWins(t *testing.T) {
	q := queue.New(queue.Config{})
	a := mustMany(t, q, queue.Need{Key: "k", Cap: 1})
	assert.Equal(t, 1, state(q, "k").Cap)
	b := mustMany(t, q, queue.Need{Key: "k", Cap: 2})
	assert.Equal(t, 2, state(q, "k").Cap)
	assert.Equal(t, 2, state(q, "k").Running)
	g, err := q.AcquireMany(context.Background(), []queue.Need{{Key: "k", Cap: 2}}, queue.ManyOptions{Timeout: time.Millisecond})
	require.ErrorIs(t, err, queue.ErrQueueTimeout)
	assert.False(t, g.Held())
	a.Release()
	b.Release()
	assert.Equal(t, 0, state(q, "k").Running)
}

// ManyOptions: a zero timeout is 15 s, a longer one is capped at 30 s, and
// a negative queue limit means no limit.
func TestAcquireManyOptionDefaults(t *testing.T) {
	for _, tc := range []struct {
		timeout, want time.Duration
	}{
		{0, 15 * time.Second},
		{-time.Second, 15 * time.Second},
		{time.Hour, 30 * time.Second},
		{time.Microsecond, time.Millisecond},
		{2 * time.Second, 2 * time.Second},
	} {
		synctest.Test(t, func(t *testing.T) {
			q := queue.New(queue.Config{})
			hold := mustMany(t, q, queue.Need{Key: "k", Cap: 1})
			defer hold.Release()
			r := <-goMany(context.Background(), q, []queue.Need{{Key: "k", Cap: 1}}, queue.ManyOptions{Timeout: tc.timeout, MaxQueue: -1})
			require.ErrorIs(t, r.err, queue.ErrQueueTimeout)
			assert.Equal(t, tc.want, r.at, "timeout %v", tc.timeout)
			var qe *queue.Error
			require.ErrorAs(t, r.err, &qe)
			assert.Equal(t, tc.want, qe.Budget)
			assert.Equal(t, 0, state(q, "k").Waiting)
		})
	}
}

// A learned reservoir without a reset hint refills to the limit every 60 s.
func TestLearnedReservoirDefaultRefill(t *testing.T) {
	q := queue.New(queue.Config{})
	h := http.Header{}
	h.Set("X-RateLimit-Limit", "60")
	h.Set("X-RateLimit-Remaining", "1")
	q.LearnAt("k", http.StatusOK, h, t0)
	ks := q.SnapshotAt(t0)[0]
	assert.Equal(t, 1, ks.Reservoir)
	assert.Equal(t, 60, ks.ReservoirMax)
	assert.Equal(t, t0.Add(time.Minute), ks.ReservoirRefill)

	r, ok := q.TryAcquireAt("k", t0)
	require.True(t, ok)
	r()
	_, ok = q.TryAcquireAt("k", t0.Add(30*time.Second))
	assert.False(t, ok, "reservoir empty until the refill")
	assert.Equal(t, t0.Add(time.Minute), q.StatusAt("k", t0.Add(30*time.Second)).ReadyAt)
	r, ok = q.TryAcquireAt("k", t0.Add(time.Minute))
	require.True(t, ok, "refilled to 60")
	r()
	ks = q.SnapshotAt(t0.Add(time.Minute))[0]
	assert.Equal(t, 59, ks.Reservoir)
	assert.Equal(t, t0.Add(2*time.Minute), ks.ReservoirRefill)
}

// Hierarchical hammer: requests take a global, a provider and a connection
// slot at once. No key ever runs more than its cap, every request ends
// with a grant, and nothing is left running or waiting.
func TestAcquireManyHammerCaps(t *testing.T) {
	q := queue.New(queue.Config{})
	caps := map[string]int{"global": 5, "p0": 3, "p1": 3, "p0:c0": 1, "p0:c1": 1, "p1:c0": 2, "p1:c1": 1}
	var mu sync.Mutex
	inflight := map[string]int{}
	peak := map[string]int{}
	var wg sync.WaitGroup
	for i := range 400 {
		p, c := i%2, (i/2)%2
		keys := []string{"global", "p" + string(rune('0'+p)), "p" + string(rune('0'+p)) + ":c" + string(rune('0'+c))}
		needs := make([]queue.Need, 0, 3)
		for j := len(keys) - 1; j >= 0; j-- { // callers may list keys in any order
			needs = append(needs, queue.Need{Key: keys[j], Cap: caps[keys[j]]})
		}
		wg.Go(func() {
			g, err := q.AcquireMany(context.Background(), needs, queue.ManyOptions{Timeout: 30 * time.Second})
			if !assert.NoError(t, err) || !assert.True(t, g.Held()) {
				return
			}
			mu.Lock()
			for _, k := range keys {
				inflight[k]++
				peak[k] = max(peak[k], inflight[k])
			}
			mu.Unlock()
			time.Sleep(20 * time.Microsecond)
			mu.Lock()
			for _, k := range keys {
				inflight[k]--
			}
			mu.Unlock()
			g.Release()
		})
	}
	wg.Wait()
	for k, n := range peak {
		assert.LessOrEqual(t, n, caps[k], k)
		assert.Positive(t, n, k)
	}
	for _, ks := range q.SnapshotAt(time.Now()) {
		assert.Equal(t, 0, ks.Running, ks.Key)
		assert.Equal(t, 0, ks.Waiting, ks.Key)
	}
}

// FullAt answers for a cap given by the caller, as AcquireMany's needs do:
// full when that many run or the key is blocked.
func TestFullAt(t *testing.T) {
	q := queue.New(queue.Config{})
	assert.False(t, q.FullAt("qsconn:c1", 1, t0), "unknown key")
	g := mustMany(t, q, queue.Need{Key: "qsconn:c1", Cap: 2})
	assert.False(t, q.FullAt("qsconn:c1", 2, t0))
	assert.True(t, q.FullAt("qsconn:c1", 1, t0))
	assert.False(t, q.FullAt("qsconn:c1", 0, t0), "no cap: never full by count")
	g2 := mustMany(t, q, queue.Need{Key: "qsconn:c1", Cap: 2})
	assert.True(t, q.FullAt("qsconn:c1", 2, time.Now()))
	g.Release()
	g2.Release()
	assert.False(t, q.FullAt("qsconn:c1", 1, t0))

	until := time.Now().Add(time.Hour)
	q.BlockAt("qsconn:c1", until, time.Now())
	assert.True(t, q.FullAt("qsconn:c1", 0, until.Add(-time.Second)))
	assert.False(t, q.FullAt("qsconn:c1", 0, until), "the block ends at until")
	assert.Zero(t, testing.AllocsPerRun(1000, func() { q.FullAt("qsconn:c1", 1, t0) }))
}
