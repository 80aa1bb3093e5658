package queue_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/routeguard/routeguard/queue"
	"golang.org/x/sync/semaphore"
)

func BenchmarkAcquireRelease(b *testing.B) {
	q := queue.New(queue.Config{MaxConcurrency: 3})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		release, err := q.Acquire(ctx, "openai:k1")
		if err != nil {
			b.Fatal(err)
		}
		release()
	}
}

// Baseline: the same uncontended cycle on a bare x/sync semaphore.
func BenchmarkSemaphoreBaseline(b *testing.B) {
	s := semaphore.NewWeighted(3)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Acquire(ctx, 1); err != nil {
			b.Fatal(err)
		}
		s.Release(1)
	}
}

func BenchmarkAcquireReleaseParallel(b *testing.B) {
	q := queue.New(queue.Config{})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			release, err := q.Acquire(ctx, "openai:k1")
			if err != nil {
				b.Fatal(err)
			}
			release()
		}
	})
}

func BenchmarkAcquireManyRelease(b *testing.B) {
	q := queue.New(queue.Config{})
	ctx := context.Background()
	needs := []queue.Need{{Key: "global", Cap: 100}, {Key: "openai", Cap: 10}, {Key: "openai:k1", Cap: 3}}
	b.ReportAllocs()
	for b.Loop() {
		g, err := q.AcquireMany(ctx, needs, queue.ManyOptions{})
		if err != nil {
			b.Fatal(err)
		}
		g.Release()
	}
}

// fullQueue returns a queue whose key "k" has one holder and a full queue
// of one waiter, and a function that tears it down.
func fullQueue(b *testing.B) (*queue.Queue, func()) {
	q := queue.New(queue.Config{MaxConcurrency: 1, MaxQueueDepth: 1, MaxQueueWait: 30 * time.Second})
	hold, err := q.Acquire(context.Background(), "k")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if r, err := q.Acquire(ctx, "k"); err == nil {
			r()
		}
	}()
	for q.StatusAt("k", time.Now()).Waiting == 0 {
		time.Sleep(time.Millisecond)
	}
	return q, func() { cancel(); <-done; hold() }
}

func BenchmarkRefuse(b *testing.B) {
	q, stop := fullQueue(b)
	defer stop()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := q.Acquire(ctx, "k"); err == nil {
			b.Fatal("admitted")
		}
	}
}

func BenchmarkCheck(b *testing.B) {
	q, stop := fullQueue(b)
	defer stop()
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if q.CheckAt("k", now) != queue.Refuse {
			b.Fatal("not refused")
		}
	}
}

func BenchmarkFullAt(b *testing.B) {
	q := queue.New(queue.Config{})
	g, err := q.AcquireMany(context.Background(), []queue.Need{{Key: "qsconn:c1", Cap: 1}}, queue.ManyOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Release()
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if !q.FullAt("qsconn:c1", 1, now) {
			b.Fatal("not full")
		}
	}
}

func BenchmarkCheckParallel(b *testing.B) {
	q := queue.New(queue.Config{MaxConcurrency: 3, RequestsPerMinute: 600})
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = "openai:k" + strconv.Itoa(i)
		q.TryAcquireAt(keys[i], time.Now())
	}
	now := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			q.StatusAt(keys[i%len(keys)], now)
			i++
		}
	})
}

func TestHotPathAllocations(t *testing.T) {
	q := queue.New(queue.Config{MaxConcurrency: 2, RequestsPerMinute: 1_000_000})
	ctx := context.Background()
	release, err := q.Acquire(ctx, "k") // create the key
	if err != nil {
		t.Fatal(err)
	}
	release()
	now := time.Now()
	if n := testing.AllocsPerRun(1000, func() { q.CheckAt("k", now) }); n != 0 {
		t.Errorf("CheckAt allocates %v times", n)
	}
	if n := testing.AllocsPerRun(1000, func() { q.StatusAt("k", now) }); n != 0 {
		t.Errorf("StatusAt allocates %v times", n)
	}
	if n := testing.AllocsPerRun(1000, func() { q.CheckAt("absent", now) }); n != 0 {
		t.Errorf("CheckAt of an absent key allocates %v times", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		r, _ := q.Acquire(ctx, "k")
		r()
	}); n > 1 {
		t.Errorf("Acquire+release allocates %v times", n)
	}
}

// BenchmarkCheckScreen is the router's screening of eight targets against
// a queue that limits nothing, one of them with a request running: eight
// CheckAt calls per op.
func BenchmarkCheckScreen(b *testing.B) {
	q := queue.New(queue.Config{})
	keys := make([]string, 8)
	for i := range keys {
		keys[i] = "c" + strconv.Itoa(i)
	}
	release, err := q.Acquire(context.Background(), keys[0])
	if err != nil {
		b.Fatal(err)
	}
	defer release()
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		for _, k := range keys {
			if q.CheckAt(k, now) != queue.Admit {
				b.Fatal("not admitted")
			}
		}
	}
}
