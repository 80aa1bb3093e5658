package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// binDir holds the gateway binary built for the end-to-end tests.
var binDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// gatewayBinary builds the gateway command once per test run and returns
// the path of the binary.
func gatewayBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		goCmd, err := exec.LookPath("go")
		if err != nil {
			buildErr = err
			return
		}
		binDir, buildErr = os.MkdirTemp("", "gateway-e2e-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "gateway")
		cmd := exec.Command(goCmd, "build", "-o", binPath, ".")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// syncBuffer is a bytes.Buffer safe for the writer goroutine of os/exec
// and a reading test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// gatewayProc is a running gateway binary.
type gatewayProc struct {
	cmd    *exec.Cmd
	base   string // http://host:port
	stdout *syncBuffer
	stderr *syncBuffer
	done   chan struct{} // closed when the process has exited
	err    error         // the result of Wait, valid after done
}

// startGateway writes cfg to a file, starts the gateway binary on a free
// loopback port and waits until it answers. A nil cfg runs the built-in
// demo. The process is killed when
// the test ends, if it is still running.
func startGateway(t testing.TB, cfg *gw.Config, args ...string) *gatewayProc {
	t.Helper()
	path := ""
	if cfg != nil {
		data, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		path = filepath.Join(t.TempDir(), "gateway.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return startGatewayFile(t, path, nil, args...)
}

// startGatewayFile starts the gateway binary on the configuration file at
// path ("" runs the demo), with env added to the test's environment, and
// waits until it answers.
func startGatewayFile(t testing.TB, path string, env []string, args ...string) *gatewayProc {
	t.Helper()
	bin := gatewayBinary(t)
	flags := []string{"-listen", "127.0.0.1:0"}
	if path != "" {
		flags = append(flags, "-config", path)
	}
	g := &gatewayProc{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	g.cmd = exec.Command(bin, append(flags, args...)...)
	g.cmd.Env = append(os.Environ(), env...)
	g.cmd.Stdout, g.cmd.Stderr = g.stdout, g.stderr
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		g.err = g.cmd.Wait()
		close(g.done)
	}()
	t.Cleanup(func() {
		select {
		case <-g.done:
		default:
			_ = g.cmd.Process.Kill()
			<-g.done
		}
		if t.Failed() {
			t.Logf("gateway stdout:\n%s\ngateway stderr:\n%s", g.stdout, g.stderr)
		}
	})

	deadline := time.Now().Add(20 * time.Second)
	for g.base == "" {
		sc := bufio.NewScanner(strings.NewReader(g.stdout.String()))
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "routeguard gateway listening on "); ok {
				g.base = strings.TrimSpace(addr)
			}
		}
		if g.base != "" {
			break
		}
		select {
		case <-g.done:
			t.Fatalf("gateway exited before listening: %v\nstderr:\n%s", g.err, g.stderr)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway did not print its address\nstdout:\n%s\nstderr:\n%s", g.stdout, g.stderr)
		}
	}
	resp, err := testClient(t).Get(g.base + "/api/monitoring/health")
	if err != nil {
		t.Fatalf("gateway does not answer: %v", err)
	}
	_ = resp.Body.Close()
	return g
}

// wait waits for the process to exit and returns the result of Wait.
func (g *gatewayProc) wait(t testing.TB, d time.Duration) error {
	t.Helper()
	select {
	case <-g.done:
		return g.err
	case <-time.After(d):
		t.Fatalf("gateway did not exit within %v", d)
		return nil
	}
}

var (
	clientOnce sync.Once
	client     *http.Client
)

// testClient is the HTTP client of the tests; its idle connections are
// closed at the end of every test so that no goroutine outlives it.
func testClient(t testing.TB) *http.Client {
	clientOnce.Do(func() {
		client = &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	})
	t.Cleanup(client.CloseIdleConnections)
	return client
}

// answer is a response with its body read.
type answer struct {
	*http.Response
	body string
}

// json decodes the body into a generic value.
func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(a.body), &v); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, a.body)
	}
	return v
}

// do sends a request and reads the whole answer.
func (g *gatewayProc) do(t *testing.T, method, path string, header http.Header, body string) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, g.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := testClient(t).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return answer{Response: resp, body: string(b)}
}

// hdr builds a header from key, value pairs.
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// chatBody is a minimal chat completion request.
func chatBody(model, text string, stream bool) string {
	b, _ := json.Marshal(map[string]any{
		"model":    model,
		"stream":   stream,
		"messages": []map[string]string{{"role": "user", "content": text}},
	})
	return string(b)
}

// chat sends a chat completion request with the given extra headers.
func (g *gatewayProc) chat(t *testing.T, model, text string, h http.Header) answer {
	t.Helper()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/json")
	return g.do(t, http.MethodPost, "/v1/chat/completions", h, chatBody(model, text, false))
}

// admin sends an admin request with the admin token.
func (g *gatewayProc) admin(t *testing.T, method, path, body string) answer {
	t.Helper()
	h := hdr("Authorization", "Bearer "+adminToken)
	if body != "" {
		h.Set("Content-Type", "application/json")
	}
	return g.do(t, method, path, h, body)
}
