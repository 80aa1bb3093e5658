package queue_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/routeguard/routeguard/queue"
)

func ExampleQueue_Acquire() {
	q := queue.New(queue.Config{MaxConcurrency: 1, MaxQueueDepth: 1})
	ctx := context.Background()

	release, err := q.Acquire(ctx, "openai:k1")
	if err != nil {
		panic(err)
	}
	fmt.Println("running:", q.StatusAt("openai:k1", time.Now()).Running)
	fmt.Println("next request would:", q.CheckAt("openai:k1", time.Now()))
	release()
	fmt.Println("after release:", q.CheckAt("openai:k1", time.Now()))
	// Output:
	// running: 1
	// next request would: wait
	// after release: admit
}

func ExampleQueue_AcquireMany() {
	q := queue.New(queue.Config{})
	ctx := context.Background()
	needs := []queue.Need{{Key: "global", Cap: 100}, {Key: "openai", Cap: 10}, {Key: "qsconn:c1", Cap: 1}}

	first, _ := q.AcquireMany(ctx, needs, queue.ManyOptions{})
	defer first.Release()

	// The connection is busy: in fail-open mode a full queue lets the
	// request go on without a slot, and says so.
	second, err := q.AcquireMany(ctx, needs, queue.ManyOptions{MaxQueue: -1, Timeout: time.Millisecond, FailOpen: true})
	defer second.Release()
	fmt.Println(err, second.Held(), errors.Is(second.Bypassed, queue.ErrSemaphoreTimeout))
	// Output:
	// <nil> false true
}

func ExampleQueue_LearnAt() {
	q := queue.New(queue.Config{})
	h := http.Header{}
	h.Set("X-RateLimit-Limit", "60")
	h.Set("X-RateLimit-Remaining", "3")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q.LearnAt("openai:k1", http.StatusOK, h, now)
	ks := q.SnapshotAt(now)[0]
	fmt.Println(ks.LearnedSpacing, ks.Reservoir, ks.ReservoirMax)
	// Output:
	// 990ms 3 60
}
