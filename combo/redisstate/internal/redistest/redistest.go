// Package redistest finds a real Redis server for tests: the one at
// ROUTEGUARD_REDIS_ADDR, or a private redis-server it starts on a free
// loopback port. Without either, a test fails when CI is set and is
// skipped otherwise.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvAddr names the variable that gives the address of a Redis server to
// test against.
const EnvAddr = "ROUTEGUARD_REDIS_ADDR"

// Server is a private redis-server started by Start.
type Server struct {
	Addr string
	Port int
	cmd  *exec.Cmd
	mu   sync.Mutex
}

var (
	sharedMu sync.Mutex
	shared   *Server
)

// Addr returns the address of a real Redis server for t: the one at
// ROUTEGUARD_REDIS_ADDR, else a private one shared by the tests of this
// process, started on first use and stopped by StopShared.
func Addr(t testing.TB) string {
	t.Helper()
	if a := os.Getenv(EnvAddr); a != "" {
		return a
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		shared = startServer(t)
	}
	return shared.Addr
}

// StopShared stops the server Addr started, if any. Call it from TestMain
// after the tests ran.
func StopShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.Stop()
		shared = nil
	}
}

// Start starts a private redis-server (no persistence) on a free loopback
// port and stops it at t's cleanup. Without a redis-server binary it
// fails t when CI is set and skips it otherwise.
func Start(t testing.TB) *Server {
	t.Helper()
	s := startServer(t)
	t.Cleanup(s.Stop)
	return s
}

func startServer(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Redis: %s is unset and redis-server is not installed", EnvAddr)
		}
		t.Skipf("no Redis: set %s or install redis-server", EnvAddr)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), Port: port}
	s.start(t, bin)
	return s
}

func (s *Server) start(t testing.TB, bin string) {
	t.Helper()
	cmd := exec.Command(bin, "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", "")
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if ping(s.Addr) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.Stop()
	t.Fatalf("redis-server on %s did not answer", s.Addr)
}

// Restart stops the server without saving (SHUTDOWN NOSAVE) and starts
// it again, empty, on the same port.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Command(t, "SHUTDOWN", "NOSAVE")
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd != nil {
		cmd.Wait()
	}
	bin, _ := exec.LookPath("redis-server")
	s.start(t, bin)
}

// Stop stops the server.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	cmd.Process.Kill()
	cmd.Wait()
}

// Command sends one command in RESP and ignores its reply; for
// administrative commands in fault tests.
func (s *Server) Command(t testing.TB, args ...string) { Command(t, s.Addr, args...) }

// Command sends one command to the server at addr and returns the first
// line of its reply.
func Command(t testing.TB, addr string, args ...string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(b.String())); err != nil {
		t.Fatalf("write %s: %v", addr, err)
	}
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line)
}

func ping(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.HasPrefix(line, "+PONG")
}

// Signal sends sig to the server process (syscall.SIGSTOP, SIGCONT in
// fault tests).
func (s *Server) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		t.Fatalf("redis-server on %s is not running", s.Addr)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal redis-server: %v", err)
	}
}
