package queue_test

import (
	"context"
	"testing"

	"github.com/routeguard/routeguard/queue"
)

// A grant on known keys that need not wait allocates nothing, and neither
// does its release.
func TestAcquireManyAllocations(t *testing.T) {
	q := queue.New(queue.Config{})
	ctx := context.Background()
	needs := []queue.Need{{Key: "global", Cap: 100}, {Key: "openai", Cap: 10}, {Key: "openai:k1", Cap: 3}}
	g, err := q.AcquireMany(ctx, needs, queue.ManyOptions{}) // the keys are new once
	if err != nil {
		t.Fatal(err)
	}
	g.Release()
	if n := testing.AllocsPerRun(1000, func() {
		g, err := q.AcquireMany(ctx, needs, queue.ManyOptions{})
		if err != nil || !g.Held() {
			t.Fatalf("AcquireMany = %+v, %v", g, err)
		}
		g.Release()
	}); n != 0 {
		t.Errorf("AcquireMany+Release allocates %v times, want 0", n)
	}
	if st := q.StatusAt("openai:k1", t0); st.Running != 0 || st.Waiting != 0 {
		t.Errorf("after the grants: %+v", st)
	}
}
