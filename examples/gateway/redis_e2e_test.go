package main

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// Two gateway processes started with -redis share a connection's
// maxConcurrent of 1: while the first has a request in flight on it, the
// second refuses its own without calling upstream; each logs the Redis it
// shares state on and stops cleanly on SIGTERM.
func TestE2ERedisFlagSharesCaps(t *testing.T) {
	mr := miniredis.RunT(t)
	up := upstreams(t, "main")
	started, release := make(chan struct{}), make(chan struct{})
	up["main"].Handle("sk-only", func(c combotest.Call) combotest.Reply {
		if c.N == 1 {
			close(started)
			<-release
		}
		return combotest.OK("served")
	})
	p := provider("main", up["main"], "only")
	p.Connections[0].MaxConcurrent = 1
	cfg := config([]gw.Provider{p}, gw.Combo{Name: "keys", Strategy: "priority", Targets: []gw.Target{{Provider: "main", Model: "m"}}})
	path := writeConfig(t, cfg)
	url := "redis://" + mr.Addr()
	a := startGatewayFile(t, path, nil, "-state", "memory", "-redis", url)
	b := startGatewayFile(t, path, nil, "-state", "memory", "-redis", url)

	first := make(chan int, 1)
	go func() {
		resp, err := testClient(t).Post(a.base+"/v1/chat/completions", "application/json", strings.NewReader(chatBody("keys", "hi", false)))
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-started
	refused := b.chat(t, "keys", "hi", nil)
	assert.NotEqual(t, http.StatusOK, refused.StatusCode, "%s", refused.body)
	assert.Contains(t, refused.body, `"reason":"queue_full"`)
	assert.Equal(t, 1, up["main"].Total(), "the refused request never went upstream")
	close(release)
	assert.Equal(t, http.StatusOK, <-first)
	assert.Equal(t, http.StatusOK, b.chat(t, "keys", "hi", nil).StatusCode)

	for _, g := range []*gatewayProc{a, b} {
		assert.Contains(t, g.stderr.String(), "redis="+mr.Addr())
		require.NoError(t, g.cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, g.wait(t, 10*time.Second))
	}
}
