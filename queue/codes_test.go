package queue_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/routeguard/routeguard/queue"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The per-connection semaphore (AcquireMany) refuses with
// SEMAPHORE_QUEUE_FULL and times out with SEMAPHORE_TIMEOUT; the request
// queue (Acquire) keeps RATE_LIMIT_QUEUE_FULL and RATE_LIMIT_QUEUE_TIMEOUT.
// Both families answer 429 and match the general sentinels; only the
// semaphore's match the semaphore sentinels.
func TestSemaphoreCodesDifferFromRequestQueueCodes(t *testing.T) {
	sentinels := []struct {
		name string
		err  error
	}{
		{"ErrQueueFull", queue.ErrQueueFull},
		{"ErrQueueTimeout", queue.ErrQueueTimeout},
		{"ErrSemaphoreQueueFull", queue.ErrSemaphoreQueueFull},
		{"ErrSemaphoreTimeout", queue.ErrSemaphoreTimeout},
		{"ErrExecutionTimeout", queue.ErrExecutionTimeout},
		{"ErrReset", queue.ErrReset},
		{"ErrInvalidConfig", queue.ErrInvalidConfig},
	}
	for _, tc := range []struct {
		path    string
		run     func(t *testing.T) error
		code    string
		status  int
		timeout bool
		msg     string
		matches []string // names of the sentinels it matches
	}{
		{
			path: "Acquire, queue full",
			run: func(t *testing.T) error {
				q := queue.New(queue.Config{MaxConcurrency: 1, MaxQueueDepth: 1})
				hold := mustAcquire(t, q, "k")
				defer hold()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				w := goAcquire(ctx, q, "k")
				synctest.Wait()
				_, err := q.Acquire(context.Background(), "k")
				cancel()
				<-w
				return err
			},
			code: queue.CodeQueueFull, status: http.StatusTooManyRequests,
			msg:     "queue: queue full (1 waiting) for k",
			matches: []string{"ErrQueueFull"},
		},
		{
			path: "Acquire, wait ran out",
			run: func(t *testing.T) error {
				q := queue.New(queue.Config{MaxConcurrency: 1, MaxQueueWait: time.Second})
				hold := mustAcquire(t, q, "k")
				defer hold()
				return (<-goAcquire(context.Background(), q, "k")).err
			},
			code: queue.CodeQueueTimeout, status: http.StatusTooManyRequests, timeout: true,
			msg:     "queue: no slot for k within 1s",
			matches: []string{"ErrQueueTimeout"},
		},
		{
			path: "AcquireMany, queue full",
			run: func(t *testing.T) error {
				q := queue.New(queue.Config{})
				need := []queue.Need{{Key: "qsconn:c1", Cap: 1}}
				hold := mustMany(t, q, need...)
				defer hold.Release()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				w := goMany(ctx, q, need, queue.ManyOptions{MaxQueue: 1})
				synctest.Wait()
				_, err := q.AcquireMany(context.Background(), need, queue.ManyOptions{MaxQueue: 1})
				cancel()
				<-w
				return err
			},
			code: queue.CodeSemaphoreQueueFull, status: http.StatusTooManyRequests,
			msg:     "queue: semaphore queue full (1) for qsconn:c1",
			matches: []string{"ErrQueueFull", "ErrSemaphoreQueueFull"},
		},
		{
			path: "AcquireMany, wait ran out",
			run: func(t *testing.T) error {
				q := queue.New(queue.Config{})
				hold := mustMany(t, q, queue.Need{Key: "p", Cap: 1})
				defer hold.Release()
				return (<-goMany(context.Background(), q, []queue.Need{{Key: "g", Cap: 2}, {Key: "p", Cap: 1}},
					queue.ManyOptions{Timeout: 50 * time.Millisecond})).err
			},
			code: queue.CodeSemaphoreTimeout, status: http.StatusTooManyRequests, timeout: true,
			msg:     "queue: semaphore timeout after 50ms for g,p",
			matches: []string{"ErrQueueTimeout", "ErrSemaphoreTimeout"},
		},
		{
			path: "AcquireMany fail-open, queue full",
			run: func(t *testing.T) error {
				q := queue.New(queue.Config{})
				need := []queue.Need{{Key: "qsconn:c1", Cap: 1}}
				hold := mustMany(t, q, need...)
				defer hold.Release()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				w := goMany(ctx, q, need, queue.ManyOptions{MaxQueue: 1})
				synctest.Wait()
				g, err := q.AcquireMany(context.Background(), need, queue.ManyOptions{MaxQueue: 1, FailOpen: true})
				require.NoError(t, err)
				cancel()
				<-w
				return g.Bypassed
			},
			code: queue.CodeSemaphoreQueueFull, status: http.StatusTooManyRequests,
			msg:     "queue: semaphore queue full (1) for qsconn:c1",
			matches: []string{"ErrQueueFull", "ErrSemaphoreQueueFull"},
		},
		{
			path: "AcquireMany fail-open, wait ran out",
			run: func(t *testing.T) error {
				q := queue.New(queue.Config{})
				need := []queue.Need{{Key: "qsconn:c1", Cap: 1}}
				hold := mustMany(t, q, need...)
				defer hold.Release()
				r := <-goMany(context.Background(), q, need, queue.ManyOptions{Timeout: 30 * time.Second, FailOpen: true})
				require.NoError(t, r.err)
				return r.g.Bypassed
			},
			code: queue.CodeSemaphoreTimeout, status: http.StatusTooManyRequests, timeout: true,
			msg:     "queue: semaphore timeout after 30s for qsconn:c1",
			matches: []string{"ErrQueueTimeout", "ErrSemaphoreTimeout"},
		},
		{
			path: "FromEnv, bad value",
			run: func(t *testing.T) error {
				_, err := queue.FromEnv(env(map[string]string{"RATE_LIMIT_MAX_QUEUE_DEPTH": "many"}))
				return err
			},
			code: queue.CodeInvalidConfig, status: http.StatusBadRequest,
			msg:     `queue: invalid_config: RATE_LIMIT_MAX_QUEUE_DEPTH="many": not a number`,
			matches: []string{"ErrInvalidConfig"},
		},
	} {
		t.Run(tc.path, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				err := tc.run(t)
				var qe *queue.Error
				require.ErrorAs(t, err, &qe)
				assert.Equal(t, tc.code, qe.Code)
				assert.Equal(t, tc.status, qe.Status)
				assert.Equal(t, tc.timeout, qe.Budget > 0, "a timeout carries its budget")
				assert.EqualError(t, err, tc.msg)
				for _, s := range sentinels {
					want := false
					for _, m := range tc.matches {
						want = want || m == s.name
					}
					assert.Equal(t, want, errors.Is(err, s.err), "errors.Is(%s)", s.name)
				}
			})
		})
	}
}

// Scenario 3c-1 (the semaphore): a gate of cap 1 with one holder and 20
// queued waiters (MaxQueue 20) refuses the 22nd request at once with
// SEMAPHORE_QUEUE_FULL.
func TestSemaphoreQueueFullRefusedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{})
		need := []queue.Need{{Key: "acct", Cap: 1}}
		opts := queue.ManyOptions{Timeout: 30 * time.Second, MaxQueue: 20}
		hold := mustMany(t, q, need...)
		var waiters []<-chan grantResult
		for range 20 {
			waiters = append(waiters, goMany(context.Background(), q, need, opts))
			synctest.Wait()
		}
		start := time.Now()
		g, err := q.AcquireMany(context.Background(), need, opts)
		assert.Zero(t, time.Since(start))
		assert.False(t, g.Held())
		require.ErrorIs(t, err, queue.ErrSemaphoreQueueFull)
		assert.EqualError(t, err, "queue: semaphore queue full (20) for acct")
		assert.Equal(t, 20, state(q, "acct").Waiting)
		hold.Release()
		for i, ch := range waiters {
			r := <-ch
			require.NoError(t, r.err, "waiter %d", i)
			r.g.Release()
		}
	})
}

// Scenario 3c-2 (the semaphore): a waiter with a 50 ms budget on a held gate
// is rejected after exactly 50 ms with SEMAPHORE_TIMEOUT, and the gate's
// queue is empty.
func TestSemaphoreTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.New(queue.Config{})
		need := []queue.Need{{Key: "acct", Cap: 1}}
		hold := mustMany(t, q, need...)
		defer hold.Release()
		r := <-goMany(context.Background(), q, need, queue.ManyOptions{Timeout: 50 * time.Millisecond})
		assert.Equal(t, 50*time.Millisecond, r.at)
		require.ErrorIs(t, r.err, queue.ErrSemaphoreTimeout)
		var qe *queue.Error
		require.ErrorAs(t, r.err, &qe)
		assert.Equal(t, queue.CodeSemaphoreTimeout, qe.Code)
		assert.Equal(t, 50*time.Millisecond, qe.Budget)
		assert.Equal(t, 0, state(q, "acct").Waiting)
		assert.Equal(t, 1, state(q, "acct").Running)
	})
}
