package main

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// realRedisAddr returns the address of a real Redis for t: the one at
// ROUTEGUARD_REDIS_ADDR, else a redis-server (no persistence) started on
// a free loopback port and stopped at t's cleanup. Without either it
// fails t when CI is set and skips it otherwise.
func realRedisAddr(t *testing.T) string {
	t.Helper()
	const env = "ROUTEGUARD_REDIS_ADDR"
	if a := os.Getenv(env); a != "" {
		return a
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Redis: %s is unset and redis-server is not installed", env)
		}
		t.Skipf("no Redis: set %s or install redis-server", env)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--logfile", "")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := "127.0.0.1:" + port
	end := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return addr
		}
		require.True(t, time.Now().Before(end), "redis-server on %s did not answer", addr)
		time.Sleep(10 * time.Millisecond)
	}
}

// Two gateway processes started with -redis on a real Redis share
// cooldowns: a 429 with Retry-After: 30 that key "a" answers through the
// first cools "a" on the second too, whose next request goes to key "b"
// at once without calling "a"; both stop cleanly on SIGTERM.
func TestE2ERedisSharesCooldowns(t *testing.T) {
	addr := realRedisAddr(t)
	ns := make([]byte, 6)
	rand.Read(ns)
	up := upstreams(t, "main")
	up["main"].Script("sk-a", combotest.RateLimited(30*time.Second))
	up["main"].Script("sk-b", combotest.OK("served"))
	cfg := config([]gw.Provider{provider("main", up["main"], "a", "b")},
		gw.Combo{Name: "keys", Strategy: "priority", Targets: []gw.Target{
			{Provider: "main", Connection: "a", Model: "m"}, {Provider: "main", Connection: "b", Model: "m"}}})
	cfg.Redis.Namespace = "e2e-" + hex.EncodeToString(ns) // a shared Redis may hold others' keys
	path := writeConfig(t, cfg)
	url := "redis://" + addr
	a := startGatewayFile(t, path, nil, "-state", "memory", "-redis", url)
	b := startGatewayFile(t, path, nil, "-state", "memory", "-redis", url)

	first := a.chat(t, "keys", "hi", nil)
	require.Equal(t, http.StatusOK, first.StatusCode, first.body)
	require.Equal(t, 1, up["main"].Count("sk-a"))
	require.Equal(t, 1, up["main"].Count("sk-b"))
	want := cooldownList(t, a)["a"]
	require.NotEmpty(t, want)
	require.NotEqual(t, "available", want)

	end := time.Now().Add(10 * time.Second)
	for cooldownList(t, b)["a"] != want {
		require.True(t, time.Now().Before(end), "the second gateway did not learn a's cooldown: %v", cooldownList(t, b))
		time.Sleep(10 * time.Millisecond)
	}
	second := b.chat(t, "keys", "hi", nil)
	require.Equal(t, http.StatusOK, second.StatusCode, second.body)
	assert.Equal(t, "1", second.Header.Get("X-Routeguard-Attempts"), "b first")
	assert.Equal(t, 1, up["main"].Count("sk-a"), "the second gateway never called a")
	assert.Equal(t, 2, up["main"].Count("sk-b"))

	for _, g := range []*gatewayProc{a, b} {
		require.NoError(t, g.cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, g.wait(t, 10*time.Second))
	}
}
