package redisstate_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/redisstate"
	"github.com/routeguard/routeguard/cooldown"
)

type loopKey struct{}

// requestHook counts the commands whose context does not come from the
// replicator's Run (whose context carries loopKey): commands issued on
// behalf of a request.
type requestHook struct{ request, loop *atomic.Int64 }

func (requestHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h requestHook) count(ctx context.Context, n int) {
	if ctx.Value(loopKey{}) != nil {
		h.loop.Add(int64(n))
	} else {
		h.request.Add(int64(n))
	}
}
func (h requestHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(ctx, 1)
		return next(ctx, cmd)
	}
}
func (h requestHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.count(ctx, len(cmds))
		return next(ctx, cmds)
	}
}

func reply(status int, h http.Header) *http.Response {
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/json")
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(`{"ok":true}`))}
}

// TestHotPathNoRemoteCalls: with the replicator running, a router request
// to uncapped targets (a 429 on the first one, a pinned session on the
// second) issues no Redis command itself; the changes it made reach Redis
// from the replicator's loop.
func TestHotPathNoRemoteCalls(t *testing.T) {
	_, rdb := newMini(t)
	var request, loop atomic.Int64
	rdb.AddHook(requestHook{&request, &loop})
	x := newReplica(t, rdb, namespace(), "a", redisstate.ReplicatorConfig{Block: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), loopKey{}, true))
	done := make(chan struct{})
	go func() { defer close(done); x.rep.Run(ctx, x.layers()) }()
	defer func() { cancel(); <-done }()
	waitFor(t, 2*time.Second, "the replicator's first resync", func() bool { return x.rep.Stats().Resyncs == 1 })

	r := combo.New(combo.Config{Breakers: x.set, Cooldowns: x.cd, Lockouts: x.lk, Pins: x.pins})
	c := &combo.Combo{Name: "c", Targets: []combo.Target{
		{Provider: "openai", Connection: "sk-1", Model: "gpt-4o"},
		{Provider: "anthropic", Connection: "ak-1", Model: "claude"},
	}}
	send := func(_ context.Context, tg *combo.Target) (*http.Response, error) {
		if tg.Connection == "sk-1" {
			return reply(429, http.Header{"Retry-After": {"30"}}), nil
		}
		return reply(200, nil), nil
	}
	for i := range 3 {
		request.Store(0)
		res, err := r.Do(context.Background(), combo.Request{Combo: c, Session: "conversation-1"}, send)
		if err != nil {
			t.Fatal(err)
		}
		res.Response.Body.Close()
		if n := request.Load(); n != 0 {
			t.Fatalf("request %d issued %d Redis commands, want 0", i, n)
		}
	}
	if s := x.cd.StatusAt("sk-1", time.Now()); s.State != cooldown.Cooling {
		t.Fatalf("sk-1: %v", s)
	}
	// The cooldown and the pin reached Redis from the loop.
	waitFor(t, 2*time.Second, "the changes are published", func() bool { return x.rep.Stats().Published >= 2 })
	if loop.Load() == 0 {
		t.Error("the loop issued no command")
	}
}
