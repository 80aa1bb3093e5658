package queue_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/routeguard/routeguard/queue"
)

// Twice MaxKeys distinct idle keys leave the queue at MaxKeys keys at every
// step, the least recently used going first; with every key busy a new key
// is refused and the queue does not grow.
func TestKeysStayWithinCapAfterTwiceTheCap(t *testing.T) {
	const limit = 64
	q := queue.New(queue.Config{MaxKeys: limit})
	now := t0
	for i := range 2 * limit {
		now = now.Add(time.Millisecond)
		release, ok := q.TryAcquireAt("k"+strconv.Itoa(i), now)
		if !ok {
			t.Fatalf("key %d refused", i)
		}
		release()
		if n := len(q.SnapshotAt(now)); n > limit {
			t.Fatalf("after key %d the queue keeps %d keys, cap %d", i, n, limit)
		}
	}
	kept := map[string]bool{}
	for _, k := range q.SnapshotAt(now) {
		kept[k.Key] = true
	}
	for i := range 2 * limit {
		if want := i >= limit; kept["k"+strconv.Itoa(i)] != want {
			t.Fatalf("key %d kept = %v, want %v (the least recently used go)", i, !want, want)
		}
	}

	busy := queue.New(queue.Config{MaxKeys: limit})
	for i := range limit {
		if _, ok := busy.TryAcquireAt("b"+strconv.Itoa(i), now); !ok {
			t.Fatalf("busy key %d refused", i)
		}
	}
	for i := range limit {
		if _, ok := busy.TryAcquireAt("n"+strconv.Itoa(i), now); ok {
			t.Fatalf("new key %d taken while every key is busy", i)
		}
	}
	if n := len(busy.SnapshotAt(now)); n != limit {
		t.Fatalf("busy queue keeps %d keys, want %d", n, limit)
	}
}
