package redisstate_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/combo/redisstate"
	"github.com/routeguard/routeguard/combo/redisstate/internal/redistest"
	"github.com/routeguard/routeguard/lease"
)

// The multi-process test: the test binary runs itself again as replicas
// (TestMultiProcessReplica with these variables set).
const (
	envRole     = "ROUTEGUARD_MP_REPLICA" // the replica's number
	envMPAddr   = "ROUTEGUARD_MP_ADDR"
	envMPNS     = "ROUTEGUARD_MP_NS"
	envUpstream = "ROUTEGUARD_MP_UPSTREAM"
	mpResult    = "MPRESULT "

	mpReplicas   = 3
	mpGoroutines = 100 // per replica: 300 in all
	mpConns      = 10
	mpRounds     = 2 // leases and capped calls per goroutine
	mpCapped     = "cap1"
)

// replicaResult is what a replica reports on its stdout.
type replicaResult struct {
	Replica       int
	Grants        int // leases acquired
	Busy          int // acquires refused: connection busy
	StaleRefused  int // fences with an older generation, refused
	StaleAdmitted int // ... admitted (must be 0)
	FenceFailed   int // fences of the live lease refused (must be 0)
	Capped        int // capped upstream calls made
	Errors        []string
	AcquireP50    time.Duration
	AcquireP99    time.Duration
	SlotWaitP99   time.Duration
	Took          time.Duration
}

// sampleScript reads the live leases of a namespace in one atomic step:
// how many owners hold one, and on how many distinct connections.
var sampleScript = redis.NewScript(`
local P = string.sub(KEYS[1], 1, -5)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local owners = redis.call('ZRANGEBYSCORE', P .. 'act', '(' .. now, '+inf')
local n, d, seen = 0, 0, {}
for _, o in ipairs(owners) do
  local v = redis.call('GET', P .. 'o:' .. o)
  if v then
    local r = cjson.decode(v)
    if r.a and tonumber(r.a.x) > now then
      n = n + 1
      if not seen[r.a.c] then seen[r.a.c] = true d = d + 1 end
    end
  end
end
return {n, d}
`)

// TestMultiProcessLeasesAndCaps runs 3 replica processes on one Redis,
// 100 goroutines each: every goroutine takes a lease on one of 10
// connections, fences with it and with older generations, releases, and
// makes one call to a connection capped at 1 through the shared slot
// store. The parent samples the server all along: never more than 10
// active owners, never two on one connection; every stale generation is
// refused; the upstream, counting requests in flight, never sees 2.
func TestMultiProcessLeasesAndCaps(t *testing.T) {
	addr := redistest.Addr(t)
	ns := namespace()
	up := combotest.New()
	defer up.Close()
	var inFlight, maxInFlight atomic.Int32
	up.Handle(mpCapped, func(combotest.Call) combotest.Reply {
		n := inFlight.Add(1)
		for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
		}
		time.Sleep(500 * time.Microsecond)
		inFlight.Add(-1)
		return combotest.OK("ok")
	})

	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	meta := "{" + ns + ":lease}:meta"

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	outs := make([]bytes.Buffer, mpReplicas)
	errs := make(chan error, mpReplicas)
	var wg sync.WaitGroup
	for i := range mpReplicas {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestMultiProcessReplica$", "-test.count=1")
		cmd.Env = append(os.Environ(), envRole+"="+strconv.Itoa(i), envMPAddr+"="+addr, envMPNS+"="+ns, envUpstream+"="+up.URL())
		cmd.Stdout = &outs[i]
		cmd.Stderr = &outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cmd.Wait(); err != nil {
				errs <- fmt.Errorf("replica %d: %v\n%s", i, err, outs[i].String())
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	// Sample the server until every replica is done.
	hist := map[int64]int{}
	samples, worst := 0, int64(0)
	for sampling := true; sampling; {
		select {
		case <-done:
			sampling = false
		case <-time.After(2 * time.Millisecond):
		}
		v, err := sampleScript.Run(ctx, rdb, []string{meta}).Int64Slice()
		if err != nil {
			t.Fatalf("sample: %v", err)
		}
		samples++
		hist[v[0]]++
		worst = max(worst, v[0])
		if v[0] > mpConns || v[0] != v[1] {
			t.Errorf("sample %d: %d active owners on %d connections: want at most %d, one per connection", samples, v[0], v[1], mpConns)
		}
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	took := time.Since(start)

	var total replicaResult
	for i := range mpReplicas {
		var r replicaResult
		found := false
		sc := bufio.NewScanner(&outs[i])
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), mpResult); ok {
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatal(err)
				}
				found = true
			}
		}
		if !found {
			t.Fatalf("replica %d printed no result", i)
		}
		for _, e := range r.Errors {
			t.Errorf("replica %d: %s", i, e)
		}
		t.Logf("replica %d: %d leases (%d busy refusals), %d capped calls, acquire p50 %v p99 %v, slot wait p99 %v, in %v",
			i, r.Grants, r.Busy, r.Capped, r.AcquireP50, r.AcquireP99, r.SlotWaitP99, r.Took)
		total.Grants += r.Grants
		total.StaleRefused += r.StaleRefused
		total.StaleAdmitted += r.StaleAdmitted
		total.FenceFailed += r.FenceFailed
		total.Capped += r.Capped
	}
	keys := make([]int64, 0, len(hist))
	for k := range hist {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var dist []string
	for _, k := range keys {
		dist = append(dist, fmt.Sprintf("%d:%d", k, hist[k]))
	}
	t.Logf("3 replicas × %d goroutines: %d leases, %d capped calls in %v; %d server samples, active owners (count:samples) %s",
		mpGoroutines, total.Grants, total.Capped, took, samples, strings.Join(dist, " "))

	const want = mpReplicas * mpGoroutines * mpRounds
	if total.Grants != want || total.Capped != want {
		t.Fatalf("%d leases and %d capped calls, want %d each", total.Grants, total.Capped, want)
	}
	if worst != mpConns {
		t.Errorf("at most %d active owners were seen, want the %d connections all taken at some instant", worst, mpConns)
	}
	if total.StaleAdmitted != 0 || total.FenceFailed != 0 {
		t.Fatalf("%d stale generations admitted, %d live leases refused; want 0 and 0", total.StaleAdmitted, total.FenceFailed)
	}
	if total.StaleRefused < want {
		t.Fatalf("%d stale fences refused, want at least %d (one after each release)", total.StaleRefused, want)
	}
	if m := maxInFlight.Load(); m != 1 {
		t.Fatalf("the connection capped at 1 saw %d requests in flight at once", m)
	}
}

// TestMultiProcessReplica is one replica of TestMultiProcessLeasesAndCaps;
// it does nothing unless that test started it.
func TestMultiProcessReplica(t *testing.T) {
	id := os.Getenv(envRole)
	if id == "" {
		return
	}
	n, _ := strconv.Atoi(id)
	r := runReplica(t, n, os.Getenv(envMPAddr), os.Getenv(envMPNS), os.Getenv(envUpstream))
	b, _ := json.Marshal(r)
	fmt.Println(mpResult + string(b))
}

func runReplica(t *testing.T, id int, addr, ns, upstream string) replicaResult {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, PoolSize: 32})
	defer rdb.Close()
	st := newState(t, rdb, redisstate.Config{Namespace: ns, Replica: "replica" + strconv.Itoa(id), Timeout: 5 * time.Second,
		Breaker: nil})
	ls, slots := st.Leases(), st.Slots()
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()

	var (
		mu       sync.Mutex
		res      = replicaResult{Replica: id}
		acquires []time.Duration
		waits    []time.Duration
		wg       sync.WaitGroup
	)
	fail := func(format string, a ...any) {
		mu.Lock()
		if len(res.Errors) < 10 {
			res.Errors = append(res.Errors, fmt.Sprintf(format, a...))
		}
		mu.Unlock()
	}
	deadline := time.Now().Add(90 * time.Second)
	start := time.Now()
	for g := range mpGoroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(id), uint64(g)))
			h := lease.Holder{Owner: lease.HashOwner(fmt.Sprintf("replica%d-goroutine%d", id, g)), APIKeyID: "k"}
			var prev uint64
			for round := range mpRounds {
				// A lease on any of the connections.
				var l lease.Lease
				for {
					if time.Now().After(deadline) {
						fail("goroutine %d: no lease before the deadline", g)
						return
					}
					conn := "c" + strconv.Itoa(rng.IntN(mpConns))
					t0 := time.Now()
					got, _, err := ls.Acquire(bg, h, "p", conn, time.Minute, t0)
					mu.Lock()
					acquires = append(acquires, time.Since(t0))
					mu.Unlock()
					if err == nil {
						l = got
						break
					}
					if !errors.Is(err, lease.ErrCapacityUnavailable) {
						fail("goroutine %d: acquire: %v", g, err)
						return
					}
					mu.Lock()
					res.Busy++
					mu.Unlock()
					time.Sleep(time.Duration(10+rng.IntN(20)) * time.Millisecond)
				}
				if l.Generation <= prev {
					fail("goroutine %d: generation %d after %d", g, l.Generation, prev)
				}
				cur := h
				cur.Generation = l.Generation
				if err := ls.Fence(bg, cur, l.Connection, time.Now()); err != nil {
					mu.Lock()
					res.FenceFailed++
					mu.Unlock()
				}
				stale := func(gen uint64) {
					if gen == 0 {
						return
					}
					old := h
					old.Generation = gen
					err := ls.Fence(bg, old, l.Connection, time.Now())
					mu.Lock()
					if err == nil {
						res.StaleAdmitted++
					} else {
						res.StaleRefused++
					}
					mu.Unlock()
				}
				stale(prev)
				time.Sleep(time.Duration(2+rng.IntN(4)) * time.Millisecond)
				if _, _, err := ls.Release(bg, cur, lease.ReasonOwnerExit, time.Now()); err != nil {
					fail("goroutine %d: release: %v", g, err)
					return
				}
				stale(cur.Generation)
				prev = cur.Generation

				// One call to the connection capped at 1.
				holder := st.Holder(fmt.Sprintf("g%d-r%d", g, round))
				t0 := time.Now()
				for {
					ok, _, _, err := slots.TryAcquire(bg, mpCapped, 1, holder, time.Now())
					if err != nil {
						fail("goroutine %d: slot: %v", g, err)
						return
					}
					if ok {
						break
					}
					if time.Now().After(deadline) {
						fail("goroutine %d: no slot before the deadline", g)
						return
					}
					time.Sleep(time.Duration(1+rng.IntN(4)) * time.Millisecond)
				}
				mu.Lock()
				waits = append(waits, time.Since(t0))
				mu.Unlock()
				req, _ := http.NewRequest(http.MethodPost, upstream+"/v1/chat/completions", strings.NewReader("{}"))
				req.Header.Set("Authorization", "Bearer "+mpCapped)
				resp, err := client.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				if rerr := slots.Release(bg, mpCapped, holder, time.Now()); rerr != nil {
					fail("goroutine %d: slot release: %v", g, rerr)
				}
				if err != nil {
					fail("goroutine %d: upstream: %v", g, err)
					return
				}
				mu.Lock()
				res.Grants++
				res.Capped++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.Took = time.Since(start)
	res.AcquireP50, res.AcquireP99 = pct(acquires, 50), pct(acquires, 99)
	res.SlotWaitP99 = pct(waits, 99)
	return res
}

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, len(ds)*p/100)]
}
