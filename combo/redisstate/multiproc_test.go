package redisstate_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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
	envMPRace   = "ROUTEGUARD_MP_RACE" // Unix ms: the race for the connections starts
	envMPEnd    = "ROUTEGUARD_MP_END"  // Unix ms: the holders let go
	mpResult    = "MPRESULT "

	mpReplicas   = 3
	mpGoroutines = 100 // per replica: 300 in all
	mpConns      = 10
	mpRounds     = 1 // capped calls per goroutine
	mpCapped     = "cap1"
	mpLeaseTTL   = 3 * time.Second
	mpRenewEvery = 400 * time.Millisecond
)

// replicaResult is what a replica reports on its stdout.
type replicaResult struct {
	Replica       int
	Grants        int // leases won in the race for the connections
	Busy          int // acquires refused: every connection taken
	Renewals      int // renewals of the won leases
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

// mpConfig is the replicas' State configuration: the fence mirror on
// (S = 1 s) and the re-lease quarantine that makes it safe (Q = 1.5 s).
func mpConfig(ns string, id int) redisstate.Config {
	return redisstate.Config{Namespace: ns, Replica: "replica" + strconv.Itoa(id), Timeout: 5 * time.Second,
		FenceStaleness: time.Second, ReleaseQuarantine: 1500 * time.Millisecond}
}

// TestMultiProcessLeasesAndCaps runs 3 replica processes on one Redis,
// 100 goroutines each, with the fence mirror and the re-lease quarantine
// on. Every goroutine's owner first holds and ends a lease of its own (so
// that it has a stale generation), then all 300 race for leases on 10
// connections: the 10 winners keep theirs by renewing and fence with the
// live and the stale generation, the 290 others keep trying and are
// refused; every goroutine also makes calls to a connection capped at 1
// through the shared slot store (the winners after they let go, so that
// waiting for the slot never delays a renewal). The parent samples the server all along:
// from the first sample with 10 active owners until the holders let go,
// every sample has exactly 10, one per connection; exactly 10 leases are
// won; no stale generation is admitted and no live one refused; the
// upstream, counting requests in flight, never sees 2.
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
	race := start.Add(3 * time.Second) // the replicas have started and ended their first leases
	end := race.Add(5 * time.Second)
	outs := make([]bytes.Buffer, mpReplicas)
	errs := make(chan error, mpReplicas)
	var wg sync.WaitGroup
	for i := range mpReplicas {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestMultiProcessReplica$", "-test.count=1")
		cmd.Env = append(os.Environ(), envRole+"="+strconv.Itoa(i), envMPAddr+"="+addr, envMPNS+"="+ns, envUpstream+"="+up.URL(),
			envMPRace+"="+strconv.FormatInt(race.UnixMilli(), 10), envMPEnd+"="+strconv.FormatInt(end.UnixMilli(), 10))
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

	// Sample the server until every replica is done. The holders let go
	// at end; a sample taken from 300 ms before it is not judged.
	hist := map[int64]int{}
	samples, judged, bad := 0, 0, 0
	var filled time.Time
	for sampling := true; sampling; {
		select {
		case <-done:
			sampling = false
		case <-time.After(2 * time.Millisecond):
		}
		at := time.Now()
		v, err := sampleScript.Run(ctx, rdb, []string{meta}).Int64Slice()
		if err != nil {
			t.Fatalf("sample: %v", err)
		}
		samples++
		if at.Before(race) || !time.Now().Before(end.Add(-300*time.Millisecond)) {
			continue
		}
		if filled.IsZero() && v[0] == mpConns {
			filled = at
		}
		if filled.IsZero() {
			if v[0] > mpConns || v[0] != v[1] {
				t.Errorf("sample %d: %d active owners on %d connections during the fill", samples, v[0], v[1])
			}
			continue
		}
		judged++
		hist[v[0]]++
		if (v[0] != mpConns || v[1] != mpConns) && bad < 10 {
			bad++
			t.Errorf("sample %d, %v after the fill: %d active owners on %d connections, want exactly %d, one per connection",
				samples, at.Sub(filled).Round(time.Millisecond), v[0], v[1], mpConns)
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
		t.Logf("replica %d: %d leases won (%d busy refusals, %d renewals), %d capped calls, acquire p50 %v p99 %v, slot wait p99 %v, in %v",
			i, r.Grants, r.Busy, r.Renewals, r.Capped, r.AcquireP50, r.AcquireP99, r.SlotWaitP99, r.Took)
		total.Grants += r.Grants
		total.Busy += r.Busy
		total.StaleRefused += r.StaleRefused
		total.StaleAdmitted += r.StaleAdmitted
		total.FenceFailed += r.FenceFailed
		total.Capped += r.Capped
	}
	var dist []string
	for _, k := range slices.Sorted(maps.Keys(hist)) {
		dist = append(dist, fmt.Sprintf("%d:%d", k, hist[k]))
	}
	t.Logf("3 replicas × %d goroutines: %d leases won, %d refusals, %d capped calls in %v; filled %v after the race began; %d server samples, %d judged, active owners (count:samples) %s",
		mpGoroutines, total.Grants, total.Busy, total.Capped, took, filled.Sub(race).Round(time.Millisecond), samples, judged, strings.Join(dist, " "))

	if total.Grants != mpConns {
		t.Fatalf("%d leases won, want exactly %d", total.Grants, mpConns)
	}
	if filled.IsZero() || judged < 100 {
		t.Fatalf("the %d connections were not all taken in time (%d samples judged)", mpConns, judged)
	}
	if want := mpReplicas * mpGoroutines * mpRounds; total.Capped != want {
		t.Fatalf("%d capped calls, want %d", total.Capped, want)
	}
	if total.Busy == 0 {
		t.Fatalf("no acquire was refused")
	}
	if total.StaleAdmitted != 0 || total.FenceFailed != 0 {
		t.Fatalf("%d stale generations admitted, %d live leases refused; want 0 and 0", total.StaleAdmitted, total.FenceFailed)
	}
	if total.StaleRefused < mpReplicas*mpGoroutines {
		t.Fatalf("%d stale fences refused, want at least %d", total.StaleRefused, mpReplicas*mpGoroutines)
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
	ms := func(env string) time.Time {
		v, _ := strconv.ParseInt(os.Getenv(env), 10, 64)
		return time.UnixMilli(v)
	}
	r := runReplica(t, n, os.Getenv(envMPAddr), os.Getenv(envMPNS), os.Getenv(envUpstream), ms(envMPRace), ms(envMPEnd))
	b, _ := json.Marshal(r)
	fmt.Println(mpResult + string(b))
}

func runReplica(t *testing.T, id int, addr, ns, upstream string, race, end time.Time) replicaResult {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, PoolSize: 32})
	defer rdb.Close()
	st := newState(t, rdb, mpConfig(ns, id))
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
	count := func(p *int) {
		mu.Lock()
		*p++
		mu.Unlock()
	}
	start := time.Now()
	for g := range mpGoroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(id), uint64(g)))
			h := lease.Holder{Owner: lease.HashOwner(fmt.Sprintf("replica%d-goroutine%d", id, g)), APIKeyID: "k"}
			// A first lease on a connection of its own, ended: its
			// generation is stale from now on.
			own := fmt.Sprintf("own-%d-%d", id, g)
			first, _, err := ls.Acquire(bg, h, "p", own, mpLeaseTTL, time.Now())
			if err != nil {
				fail("goroutine %d: first acquire: %v", g, err)
				return
			}
			old := h
			old.Generation = first.Generation
			if _, _, err := ls.Release(bg, old, lease.ReasonOwnerExit, time.Now()); err != nil {
				fail("goroutine %d: first release: %v", g, err)
				return
			}
			stale := func(conn string) {
				err := ls.Fence(bg, old, conn, time.Now())
				mu.Lock()
				if err == nil {
					res.StaleAdmitted++
				} else {
					res.StaleRefused++
				}
				mu.Unlock()
			}
			capped := 0
			call := func(round int) bool {
				holder := st.Holder(fmt.Sprintf("g%d-r%d", g, round))
				t0 := time.Now()
				for {
					ok, _, _, err := slots.TryAcquire(bg, mpCapped, 1, holder, time.Now())
					if err != nil {
						fail("goroutine %d: slot: %v", g, err)
						return false
					}
					if ok {
						break
					}
					if time.Now().After(end.Add(30 * time.Second)) {
						fail("goroutine %d: no slot in time", g)
						return false
					}
					time.Sleep(time.Duration(5+rng.IntN(20)) * time.Millisecond)
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
					return false
				}
				count(&res.Capped)
				return true
			}
			// Every goroutine joins the race at its own moment of the
			// first 200 ms, so that no replica's clock decides it.
			time.Sleep(time.Until(race.Add(time.Duration(rng.IntN(200)) * time.Millisecond)))

			// The race: until end, try a connection now and then; the
			// winner keeps it by renewing.
			var won lease.Lease
			for time.Now().Before(end) && won.Generation == 0 {
				conn := "c" + strconv.Itoa(rng.IntN(mpConns))
				t0 := time.Now()
				got, _, err := ls.Acquire(bg, h, "p", conn, mpLeaseTTL, t0)
				mu.Lock()
				acquires = append(acquires, time.Since(t0))
				mu.Unlock()
				switch {
				case err == nil:
					won = got
					count(&res.Grants)
				case errors.Is(err, lease.ErrCapacityUnavailable):
					count(&res.Busy)
					stale(conn)
					if capped < mpRounds && rng.IntN(8) == 0 {
						if !call(capped) {
							return
						}
						capped++
					}
					time.Sleep(time.Duration(50+rng.IntN(100)) * time.Millisecond)
				default:
					fail("goroutine %d: acquire: %v", g, err)
					return
				}
			}
			if won.Generation != 0 {
				if won.Generation <= old.Generation {
					fail("goroutine %d: generation %d after %d", g, won.Generation, old.Generation)
				}
				cur := h
				cur.Generation = won.Generation
				for time.Now().Before(end) {
					if err := ls.Fence(bg, cur, won.Connection, time.Now()); err != nil {
						fail("goroutine %d: fence of the live lease: %v", g, err)
						count(&res.FenceFailed)
					}
					stale(won.Connection)
					time.Sleep(mpRenewEvery)
					if _, err := ls.Renew(bg, cur, mpLeaseTTL, time.Now()); err != nil {
						fail("goroutine %d: renew: %v", g, err)
						return
					}
					count(&res.Renewals)
				}
				if _, _, err := ls.Release(bg, cur, lease.ReasonOwnerExit, time.Now()); err != nil {
					fail("goroutine %d: release: %v", g, err)
				}
			}
			for ; capped < mpRounds; capped++ {
				if !call(capped) {
					return
				}
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
