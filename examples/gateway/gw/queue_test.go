package gw_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// resilience.requestQueue and a connection's maxConcurrent reach the
// admission queue: with one slot and room for one waiter, a third request
// to the connection is refused at once while the first runs and the second
// waits, and the waiter is served when the slot frees. The refused request
// is told 429 RATE_LIMIT_QUEUE_FULL with Retry-After (queue contract D10).
func TestRequestQueueSettingsApply(t *testing.T) {
	release := make(chan struct{})
	up := combotest.New()
	up.Handle("", func(c combotest.Call) combotest.Reply {
		if c.N == 1 {
			<-release
		}
		return combotest.OK("served")
	})
	p := provider("p", up, 1)
	p.Connections[0].MaxConcurrent = 1
	cfg := &gw.Config{Providers: []gw.Provider{p}}
	cfg.Resilience.ComboCooldownWait.Disabled = true
	cfg.Resilience.RequestQueue = gw.QueueConfig{MaxQueueDepth: 1, MaxQueueWaitMs: 5000, RequestsPerMinute: 600}
	r := newRig(t, cfg, map[string]*combotest.Upstream{"p": up})
	q := r.gw.Layers().Queue

	var wg sync.WaitGroup
	results := make([]result, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = r.chat("p/"+rigModel, false, 10*time.Second)
		}()
		// The first request holds the slot, the second waits for it.
		require.Eventually(t, func() bool {
			st := q.StatusAt("p-1", time.Now())
			return st.Running == 1 && st.Waiting == i
		}, 5*time.Second, time.Millisecond, "request %d", i+1)
	}
	st := q.StatusAt("p-1", time.Now())
	assert.Equal(t, 1, st.Cap)
	assert.Equal(t, 1, st.Depth)

	third := r.chat("p/"+rigModel, false, 10*time.Second)
	assert.Equal(t, http.StatusTooManyRequests, third.Status, "%s", third.Body)
	assert.Equal(t, "RATE_LIMIT_QUEUE_FULL", third.Code)
	assert.Equal(t, "1", third.Header.Get("Retry-After"))
	assert.Contains(t, string(third.Body), `"reason":"queue_full"`)
	assert.Equal(t, 1, up.Total(), "the refused request never went upstream")

	close(release)
	wg.Wait()
	for i, res := range results {
		assert.Equal(t, http.StatusOK, res.Status, "request %d: %s", i+1, res.Body)
	}
	assert.Equal(t, 2, up.Total())
	found := false
	for _, ks := range q.SnapshotAt(time.Now()) {
		if ks.Key == "p-1" {
			found = true
			assert.Equal(t, 600, ks.RequestsPerMinute)
		}
	}
	assert.True(t, found, "the connection's queue is listed")
}
