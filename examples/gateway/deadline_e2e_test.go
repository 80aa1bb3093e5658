package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// resilience.throughputWatchdog.attemptDeadlineMs bounds every streamed
// attempt, whatever the upstream sends, well before the per-target
// timeout: an upstream that sends bytes without a line end for ever is cut
// at the deadline without anything reaching the client, and the next
// target answers; one that sends useful chunks for ever is cut at the
// deadline after its commit, and the client sees its stream break off.
func TestE2EAttemptDeadlineCutsEndlessStreams(t *testing.T) {
	const (
		deadline      = 600 * time.Millisecond
		targetTimeout = 20 * time.Second // far above: only the deadline can cut in time
		// slack covers the cut's delivery and scheduling on a loaded
		// machine; it is far below the per-target timeout.
		slack = 3 * time.Second
	)
	up := upstreams(t, "noline", "chatty", "good")
	// 2,000 chunks 10 ms apart: 20 s of output, never ending within the
	// test.
	noline := make([]combotest.Event, 2000)
	chatty := make([]combotest.Event, 2000)
	for i := range noline {
		noline[i] = combotest.Event{Raw: strings.Repeat("x", 64)}
		chatty[i] = combotest.ChatDelta("more ")
	}
	up["noline"].Script("", combotest.SSE(10*time.Millisecond, noline...))
	up["chatty"].Script("", combotest.SSE(10*time.Millisecond, chatty...))
	up["good"].Script("", combotest.TextStream(0, "the ", "whole ", "answer"))
	settings := gw.ComboSettings{TargetTimeoutMs: int(targetTimeout / time.Millisecond)}
	cfg := config([]gw.Provider{provider("noline", up["noline"], "n1"), provider("chatty", up["chatty"], "c1"),
		provider("good", up["good"], "g1")},
		gw.Combo{Name: "noline-first", Strategy: "priority", Settings: settings,
			Targets: []gw.Target{{Provider: "noline", Model: "m"}, {Provider: "good", Model: "m"}}},
		gw.Combo{Name: "chatty", Strategy: "priority", Settings: settings,
			Targets: []gw.Target{{Provider: "chatty", Model: "m"}}})
	cfg.Resilience.ThroughputWatchdog.AttemptDeadlineMs = new(int(deadline / time.Millisecond))
	g := startGateway(t, cfg)

	stream := func(model string) (*http.Response, []byte, time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), targetTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.base+"/v1/chat/completions",
			strings.NewReader(chatBody(model, "hi", true)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := testClient(t).Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, b, time.Since(start), err
	}

	t.Run("bytes without a line end, then the next target", func(t *testing.T) {
		resp, body, wall, err := stream("noline-first")
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		assert.Equal(t, "good/m", resp.Header.Get("X-Routeguard-Target"))
		assert.Equal(t, "the whole answer", sseText(body))
		assert.NotContains(t, string(body), "xxxx", "nothing of the cut attempt reached the client")
		assert.GreaterOrEqual(t, wall, deadline, "the first attempt ran to its deadline")
		assert.Less(t, wall, deadline+slack, "and no longer")
		assert.Equal(t, 1, up["noline"].Total())
	})
	t.Run("useful chunks for ever, cut after the commit", func(t *testing.T) {
		resp, body, wall, err := stream("chatty")
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "the client sees the stream break off")
		assert.False(t, errors.Is(err, context.DeadlineExceeded), "the gateway cut it, not the client")
		assert.Contains(t, sseText(body), "more more ", "the stream was committed and relayed")
		assert.NotContains(t, string(body), "[DONE]")
		assert.GreaterOrEqual(t, wall, deadline, "the attempt ran to its deadline")
		assert.Less(t, wall, deadline+slack, "and no longer")
	})
}
