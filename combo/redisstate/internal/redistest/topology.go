package redistest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// proc is a redis-server process started for one test.
type proc struct{ cmd *exec.Cmd }

func (p *proc) stop() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
}

// binary returns the redis-server binary, failing t when CI is set and
// skipping it otherwise when there is none.
func binary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Redis: redis-server is not installed")
		}
		t.Skipf("no Redis: install redis-server")
	}
	return bin
}

// freePort returns a free loopback port p whose p+10000 (a cluster
// node's bus port) is free too.
func freePort(t testing.TB) int {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p+10000 > 65535 {
			continue
		}
		if b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000)); err == nil {
			b.Close()
			return p
		}
	}
	t.Fatal("no free port pair")
	return 0
}

// run starts redis-server with args, stopped at t's cleanup, and waits
// until addr answers PING.
func run(t testing.TB, addr string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	p := &proc{cmd: cmd}
	t.Cleanup(p.stop)
	wait(t, 5*time.Second, addr+" answers", func() bool { return ping(addr) })
	return p
}

func wait(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("redistest: %s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StartCluster starts a private one-node Redis Cluster (no persistence)
// that serves every hash slot, waits for cluster_state:ok and returns the
// node's address; it is stopped at t's cleanup. A script whose keys do
// not share one hash slot fails on it with CROSSSLOT.
func StartCluster(t testing.TB) string {
	t.Helper()
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	dir := t.TempDir()
	run(t, addr, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--logfile", "", "--dir", dir,
		"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"))
	if r := Command(t, addr, "CLUSTER", "ADDSLOTSRANGE", "0", "16383"); r != "+OK" {
		t.Fatalf("CLUSTER ADDSLOTSRANGE: %s", r)
	}
	wait(t, 10*time.Second, "cluster_state:ok", func() bool {
		return strings.Contains(bulk(t, addr, "CLUSTER", "INFO"), "cluster_state:ok")
	})
	return addr
}

// StartSentinel starts a private master and a private Sentinel that
// monitors it under the name master; it returns the Sentinel's address
// and the master's. Both are stopped at t's cleanup.
func StartSentinel(t testing.TB, master string) (sentinel, primary string) {
	t.Helper()
	mport := freePort(t)
	primary = "127.0.0.1:" + strconv.Itoa(mport)
	run(t, primary, "--port", strconv.Itoa(mport), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--logfile", "")
	sport := freePort(t)
	sentinel = "127.0.0.1:" + strconv.Itoa(sport)
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %d 1\nsentinel down-after-milliseconds %s 2000\n",
		sport, dir, master, mport, master)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, sentinel, conf, "--sentinel")
	wait(t, 10*time.Second, "the sentinel knows the master", func() bool {
		return strings.Contains(bulk(t, sentinel, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", master), strconv.Itoa(mport))
	})
	return sentinel, primary
}

// bulk sends one command and returns its whole reply, read until a short
// silence: for the multi-line replies of CLUSTER INFO and SENTINEL.
func bulk(t testing.TB, addr string, args ...string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(b.String())); err != nil {
		return ""
	}
	var out []byte
	buf := make([]byte, 4096)
	for {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			return string(out)
		}
	}
}
