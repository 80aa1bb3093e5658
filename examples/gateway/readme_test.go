package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeBlock returns the fenced block that follows marker in the
// repository's README.
func readmeBlock(t *testing.T, marker string) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), marker+"\n```")
	require.True(t, ok, "README has no block after %q", marker)
	_, rest, _ = strings.Cut(rest, "\n") // the fence's language
	block, _, ok := strings.Cut(rest, "```\n")
	require.True(t, ok, "unterminated block after %q", marker)
	return block
}

// The README's gateway configurations are the committed example files, as
// they are (the end-to-end tests and the schema test run those files).
func TestReadmeGatewayConfigIsTheExampleFile(t *testing.T) {
	for _, name := range []string{"gateway.yaml", "stream-recovery.yaml"} {
		want, err := os.ReadFile("examples/" + name)
		require.NoError(t, err)
		assert.Equal(t, string(want), readmeBlock(t, "<!-- examples/gateway/examples/"+name+" -->"), name)
	}
}

// The README's gateway commands work as written: the exports set the
// example's secrets, -check says ok, the gateway starts on the example,
// and SIGHUP and the curl line reload it.
func TestReadmeGatewayCommands(t *testing.T) {
	lines := strings.Split(strings.TrimSpace(readmeBlock(t, "<!-- gateway commands: run by TestReadmeGatewayCommands -->")), "\n")
	require.Len(t, lines, 5)
	vars, ok := strings.CutPrefix(lines[0], "export ")
	require.True(t, ok, lines[0])
	env := strings.Fields(vars)
	lookup := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		lookup[k] = v
	}
	args := func(line string) []string {
		rest, ok := strings.CutPrefix(line, "go run ./examples/gateway ")
		require.True(t, ok, line)
		out := strings.Fields(rest)
		for i, a := range out {
			out[i] = strings.TrimPrefix(a, "examples/gateway/") // the test runs in examples/gateway
		}
		return out
	}

	cmd := exec.Command(gatewayBinary(t), args(lines[1])...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "ok\n", string(out))

	// The state file goes to a temporary directory, not beside the example.
	g := startGatewayFile(t, "", env, append(args(lines[2]), "-state", filepath.Join(t.TempDir(), "state.db"))...)
	require.Equal(t, `kill -HUP "$GATEWAY_PID"`, lines[3])
	require.NoError(t, g.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return strings.Contains(g.stderr.String(), "config reloaded") }, 5*time.Second, 10*time.Millisecond)

	f := strings.Fields(lines[4])
	require.Equal(t, []string{"curl", "-s", "-X", "POST"}, f[:4])
	url, ok := strings.CutPrefix(f[4], "http://127.0.0.1:8080")
	require.True(t, ok, f[4])
	_, hv, ok := strings.Cut(lines[4], ` -H "`)
	require.True(t, ok)
	k, v, _ := strings.Cut(strings.TrimSuffix(hv, `"`), ": ")
	a := g.do(t, http.MethodPost, url, hdr(k, os.Expand(v, func(n string) string { return lookup[n] })), "")
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.JSONEq(t, `{"ok":true,"generation":3,"added":[],"removed":[],"restartRequired":[]}`, a.body)
}
