package redisstate_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/redisstate"
	"github.com/routeguard/routeguard/combo/redisstate/internal/redistest"
	"github.com/routeguard/routeguard/cooldown"
)

// The replication test re-executes the test binary as 3 replicas
// (TestMultiProcessReplicationReplica with these variables set).
const (
	envReplRole = "ROUTEGUARD_MPR_REPLICA"
	envReplAddr = "ROUTEGUARD_MPR_ADDR"
	envReplNS   = "ROUTEGUARD_MPR_NS"
	replResult  = "MPRRESULT "
	replEvents  = 200
)

type replResultT struct {
	Replica   int
	Cooled    bool          // saw sk-1 cooling until A's end
	Skipped   bool          // its router skipped sk-1 and the open provider
	Opened    bool          // its breaker of the provider A opened was open
	Latencies int           // latency samples
	P50, P99  time.Duration // propagation from A's hook to this replica's apply
	Errors    []string
}

// TestMultiProcessReplication runs 3 replica processes on one real Redis.
// Replica A takes a 429 with Retry-After: 30 on sk-1 and opens the breaker
// of one provider; replicas B and C must keep off sk-1 until A's end and
// skip the provider. A then writes 200 cooldowns and B and C measure the
// propagation latency (A's hook to their apply, one machine clock), which
// is printed.
func TestMultiProcessReplication(t *testing.T) {
	addr := redistest.Addr(t)
	ns := namespace()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	outs := make([]bytes.Buffer, 3)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range 3 {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestMultiProcessReplicationReplica$", "-test.count=1")
		cmd.Env = append(os.Environ(), envReplRole+"="+strconv.Itoa(i), envReplAddr+"="+addr, envReplNS+"="+ns)
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = cmd.Wait()
		}()
	}
	wg.Wait()
	for i := range 3 {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v\n%s", i, errs[i], outs[i].String())
		}
		var r replResultT
		found := false
		sc := bufio.NewScanner(&outs[i])
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), replResult); ok {
				found = json.Unmarshal([]byte(line), &r) == nil
			}
		}
		if !found {
			t.Fatalf("replica %d printed no result:\n%s", i, outs[i].String())
		}
		for _, e := range r.Errors {
			t.Errorf("replica %d: %s", i, e)
		}
		if i == 0 {
			continue
		}
		if !r.Cooled || !r.Skipped || !r.Opened || r.Latencies != replEvents {
			t.Errorf("replica %d: %+v", i, r)
		}
		t.Logf("replica %d: propagation from replica 0 over %d events: p50 %v, p99 %v (goal p99 ≤ 100ms)", i, r.Latencies, r.P50, r.P99)
	}
}

// TestMultiProcessReplicationReplica is one replica of
// TestMultiProcessReplication; it does nothing unless that test started
// it.
func TestMultiProcessReplicationReplica(t *testing.T) {
	id := os.Getenv(envReplRole)
	if id == "" {
		return
	}
	n, _ := strconv.Atoi(id)
	r := runReplReplica(t, n, os.Getenv(envReplAddr), os.Getenv(envReplNS))
	b, _ := json.Marshal(r)
	fmt.Println(replResult + string(b))
}

func runReplReplica(t *testing.T, id int, addr, ns string) replResultT {
	res := replResultT{Replica: id}
	fail := func(format string, a ...any) { res.Errors = append(res.Errors, fmt.Sprintf(format, a...)) }
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	bg := context.Background()
	meta := "{" + ns + ":mpr}:"

	var mu sync.Mutex
	var lat []time.Duration
	onApply := func(a redisstate.Applied) {
		rest, ok := strings.CutPrefix(a.Key, "lat-")
		if !ok || a.Kind != "cooldown" {
			return
		}
		_, ns, _ := strings.Cut(rest, "-")
		sent, err := strconv.ParseInt(ns, 10, 64)
		if err != nil {
			return
		}
		mu.Lock()
		lat = append(lat, time.Since(time.Unix(0, sent)))
		mu.Unlock()
	}
	x := newReplica(t, rdb, ns, "replica"+strconv.Itoa(id), redisstate.ReplicatorConfig{OnApply: onApply})
	x.start(t)
	defer x.stop()
	waitFor(t, 5*time.Second, "first resync", func() bool { return x.rep.Stats().Resyncs >= 1 })
	rdb.Incr(bg, meta+"ready")
	router := combo.New(combo.Config{Breakers: x.set, Cooldowns: x.cd, Lockouts: x.lk, Pins: x.pins})
	var served []string
	send := func(_ context.Context, tg *combo.Target) (*http.Response, error) {
		served = append(served, tg.Connection)
		if tg.Connection == "sk-1" {
			return reply(429, http.Header{"Retry-After": {"30"}}), nil
		}
		return reply(200, nil), nil
	}
	do := func(targets ...combo.Target) {
		served = nil
		r, err := router.Do(bg, combo.Request{Combo: &combo.Combo{Name: "c", Targets: targets}}, send)
		if err != nil {
			fail("do: %v", err)
			return
		}
		r.Response.Body.Close()
	}
	sk1 := combo.Target{Provider: "openai", Connection: "sk-1", Model: "gpt-4o"}
	ak1 := combo.Target{Provider: "anthropic", Connection: "ak-1", Model: "claude"}
	mk1 := combo.Target{Provider: "mistral", Connection: "mk-1", Model: "large"}

	if id == 0 {
		waitFor(t, 20*time.Second, "the other replicas", func() bool {
			n, _ := rdb.Get(bg, meta+"ready").Int()
			return n == 3
		})
		do(sk1, mk1) // a 429 with Retry-After: 30 on sk-1
		st := x.cd.StatusAt("sk-1", time.Now())
		if st.State != cooldown.Cooling {
			fail("sk-1 not cooling: %v", st)
		}
		rdb.Set(bg, meta+"until", st.Until.UnixNano(), 0)
		now := time.Now()
		for range 20 {
			done, err := x.set.AllowReportAt("anthropic", now)
			if err != nil {
				break
			}
			done(breaker.Report{Outcome: breaker.Failure, At: now})
		}
		if s, _ := x.set.StateAt("anthropic", now); s != breaker.Open {
			fail("breaker not open: %v", s)
		}
		waitFor(t, 20*time.Second, "the checks of the other replicas", func() bool {
			n, _ := rdb.Get(bg, meta+"checked").Int()
			return n == 2
		})
		for k := range replEvents {
			x.cd.FailAt("lat-"+strconv.Itoa(k)+"-"+strconv.FormatInt(time.Now().UnixNano(), 10),
				cooldown.Failure{Status: 429, RetryAfter: time.Minute}, time.Now())
			time.Sleep(2 * time.Millisecond)
		}
		waitFor(t, 10*time.Second, "outbox drained", func() bool { return x.rep.Stats().Pending == 0 })
		waitFor(t, 20*time.Second, "the other replicas finish", func() bool {
			n, _ := rdb.Get(bg, meta+"finished").Int()
			return n == 2
		})
		return res
	}

	var want int64
	waitFor(t, 20*time.Second, "replica 0's cooldown end", func() bool {
		var err error
		want, err = rdb.Get(bg, meta+"until").Int64()
		return err == nil
	})
	waitFor(t, 2*time.Second, "sk-1 cooling", func() bool {
		return x.cd.StatusAt("sk-1", time.Now()).State == cooldown.Cooling
	})
	res.Cooled = x.cd.StatusAt("sk-1", time.Now()).Until.UnixNano() == want
	do(sk1, mk1)
	skippedKey := slices.Equal(served, []string{"mk-1"})
	waitFor(t, 2*time.Second, "the breaker open", func() bool {
		s, _ := x.set.StateAt("anthropic", time.Now())
		return s == breaker.Open
	})
	res.Opened = true
	do(ak1, mk1)
	res.Skipped = skippedKey && slices.Equal(served, []string{"mk-1"})
	rdb.Incr(bg, meta+"checked")
	waitFor(t, 20*time.Second, "every latency event", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(lat) >= replEvents
	})
	mu.Lock()
	slices.Sort(lat)
	res.Latencies, res.P50, res.P99 = len(lat), lat[len(lat)/2], lat[len(lat)*99/100]
	mu.Unlock()
	rdb.Incr(bg, meta+"finished")
	return res
}
