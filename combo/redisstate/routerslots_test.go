package redisstate_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/combo/redisstate"
)

// TestRouterSlotsRemoteCalls counts, with a go-redis hook, the commands
// one dispatch sends to Redis when the router's per-connection caps use
// the shared slot store: 2 for a capped connection (the acquire script and
// the release), 0 for an uncapped one.
func TestRouterSlotsRemoteCalls(t *testing.T) {
	_, rdb := newMini(t)
	var cmds atomic.Int32
	rdb.AddHook(countHook{&cmds})
	st := newState(t, rdb, redisstate.Config{})
	up := combotest.New()
	defer up.Close()
	send := func(ctx context.Context, tg *combo.Target) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://x.test/v1/chat/completions", nil)
		req.Header.Set("Authorization", "Bearer "+tg.Connection)
		return up.Transport().RoundTrip(req)
	}
	r := combo.New(combo.Config{Slots: st.Slots()})
	dispatch := func(tg combo.Target) int32 {
		t.Helper()
		cmds.Store(0)
		res, err := r.Do(bg, combo.Request{Combo: &combo.Combo{Name: "c", Targets: []combo.Target{tg}}}, send)
		if err != nil {
			t.Fatal(err)
		}
		res.Response.Body.Close()
		return cmds.Load()
	}
	capped := combo.Target{Provider: "openai", Connection: "k1", Model: "m", MaxConcurrent: 1}
	dispatch(capped) // loads the acquire script (EVALSHA, NOSCRIPT, EVAL)
	for i := range 3 {
		if n := dispatch(capped); n != 2 {
			t.Fatalf("capped dispatch %d sent %d commands, want 2 (acquire, release)", i, n)
		}
		if n := dispatch(combo.Target{Provider: "openai", Connection: "k2", Model: "m"}); n != 0 {
			t.Fatalf("uncapped dispatch %d sent %d commands, want 0", i, n)
		}
	}
	if up.Count("k1") != 4 || up.Count("k2") != 3 {
		t.Fatalf("upstream calls k1 %d k2 %d, want 4 and 3", up.Count("k1"), up.Count("k2"))
	}
}
