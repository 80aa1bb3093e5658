package queue_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/routeguard/routeguard/queue"
)

// overridesQueue returns a queue whose eight keys have caps of their own
// through Overrides, as a gateway gives its connections, with one request
// running on the first key.
func overridesQueue(b *testing.B) (*queue.Queue, []string, func()) {
	keys := make([]string, 8)
	caps := map[string]queue.Config{}
	for i := range keys {
		keys[i] = "conn-" + strconv.Itoa(i)
		caps[keys[i]] = queue.Config{MaxConcurrency: 2 + i%3}
	}
	q := queue.New(queue.Config{Overrides: func(k string) queue.Config { return caps[k] }})
	release, err := q.Acquire(context.Background(), keys[0])
	if err != nil {
		b.Fatal(err)
	}
	return q, keys, release
}

// BenchmarkCheckScreenOverrides is BenchmarkCheckScreen on a queue whose
// keys have per-key caps: eight CheckAt calls per op, all admitted.
func BenchmarkCheckScreenOverrides(b *testing.B) {
	q, keys, release := overridesQueue(b)
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

// BenchmarkAcquireReleaseOverrides is BenchmarkAcquireRelease on a key
// with a cap of its own.
func BenchmarkAcquireReleaseOverrides(b *testing.B) {
	q, keys, release := overridesQueue(b)
	defer release()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r, err := q.Acquire(ctx, keys[1])
		if err != nil {
			b.Fatal(err)
		}
		r()
	}
}
