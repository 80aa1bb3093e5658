package queue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// summaryError reports where the lock-free summary disagrees with the
// gates: each bucket must count exactly the hot gates and the running
// requests of the keys that hash to it, and its key bits must say whether
// there is room and whether every key is hot.
func (q *Queue) summaryError() error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.sum.buckets == nil {
		return nil
	}
	want := make([]uint64, len(q.sum.buckets))
	hot := 0
	for k, g := range q.gates {
		if b := q.sum.bucket(k); b != g.bucket {
			return fmt.Errorf("gate %s: bucket %d, key hashes to %d", k, g.bucket, b)
		}
		want[g.bucket] += uint64(g.running)
		if g.hot {
			want[g.bucket] += hotUnit
			hot++
		}
	}
	for i := range want {
		if got := q.sum.buckets[i].Load(); got != want[i] {
			return fmt.Errorf("bucket %d: %d hot, %d running; gates say %d and %d",
				i, got>>32, got&runningMask, want[i]>>32, want[i]&runningMask)
		}
	}
	bits := uint64(0)
	if len(q.gates) < q.maxKeys() {
		bits |= 1
	}
	if hot > 0 && hot == len(q.gates) {
		bits |= 2
	}
	if got := q.sum.keys.Load() & 3; got != bits {
		return fmt.Errorf("key bits %02b, want %02b (%d keys, %d hot)", got, bits, len(q.gates), hot)
	}
	return nil
}

// capsFor gives the cap and depth settingsFor does, whatever the overrides.
func TestCapsForMatchesSettings(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := []int{-1, 0, 1, 2, 3, maxConcurrency, maxConcurrency + 1, maxQueueDepth, maxQueueDepth + 7}
	for range 500 {
		def := Config{MaxConcurrency: vals[r.IntN(len(vals))], MaxQueueDepth: vals[r.IntN(len(vals))]}
		o := Config{MaxConcurrency: vals[r.IntN(len(vals))], MaxQueueDepth: vals[r.IntN(len(vals))]}
		for _, cfg := range []Config{def, {MaxConcurrency: def.MaxConcurrency, MaxQueueDepth: def.MaxQueueDepth,
			Overrides: func(string) Config { return o }}} {
			q := New(cfg)
			s := q.settingsFor("k")
			if c, d := q.capsFor("k"); c != s.MaxConcurrency || d != s.MaxQueueDepth {
				t.Fatalf("defaults %+v, override %+v: capsFor = %d, %d; settingsFor = %d, %d",
					def, o, c, d, s.MaxConcurrency, s.MaxQueueDepth)
			}
		}
	}
	var zero Queue
	if c, d := zero.capsFor("k"); c != 0 || d != 0 {
		t.Fatalf("zero Queue: capsFor = %d, %d", c, d)
	}
}

// CheckAt answers a key with room under its own cap, on a queue with
// per-key overrides, without taking the lock; a key at its cap, a blocked
// key and a key with waiters still get the locked answer.
func TestCheckAtTakesNoLockUnderOverrides(t *testing.T) {
	caps := map[string]int{"c0": 2, "c1": 1}
	q := New(Config{Overrides: func(k string) Config { return Config{MaxConcurrency: caps[k]} }})
	release, err := q.Acquire(context.Background(), "c0")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	q.mu.Lock() // a writer holds the lock while the checks run
	done := make(chan [3]Decision, 1)
	go func() { done <- [3]Decision{q.CheckAt("c0", base), q.CheckAt("c1", base), q.CheckAt("c2", base)} }()
	select {
	case d := <-done:
		q.mu.Unlock()
		if d != [3]Decision{Admit, Admit, Admit} {
			t.Fatalf("CheckAt = %v, want [admit admit admit]", d)
		}
	case <-time.After(time.Second):
		q.mu.Unlock()
		<-done
		t.Fatal("CheckAt waited for the lock")
	}
	r2, err := q.Acquire(context.Background(), "c0")
	if err != nil {
		t.Fatal(err)
	}
	defer r2()
	q.BlockAt("c1", base.Add(time.Minute), base)
	if got := [2]Decision{q.CheckAt("c0", base), q.CheckAt("c1", base)}; got != [2]Decision{Wait, Wait} {
		t.Fatalf("at the cap and blocked: CheckAt = %v, want [wait wait]", got)
	}
	if err := q.summaryError(); err != nil {
		t.Fatal(err)
	}
}

// Random acquisitions (through Acquire, TryAcquireAt and AcquireMany),
// releases, waits, blocks, learned limits and resets on queues whose keys
// have overrides (their own caps, depths, rates and spacings, or none),
// changing over time, keep CheckAt's answer equal to the locked one for
// every key, kept or not, and the summary exact. Few buckets make keys
// share them.
func TestCheckAtSummaryMatchesLockedDecision(t *testing.T) {
	var lockFree, waits, blocks, capped int
	for seed := range uint64(24) {
		synctest.Test(t, func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 23))
			keys := []string{"a", "b", "c", "d", "e", "f", "openai:k1", "openai:k2"}
			var omu sync.Mutex // guards over
			over := map[string]Config{}
			pick := func() Config {
				switch r.IntN(6) {
				case 0:
					return Config{}
				case 1:
					return Config{MaxConcurrency: 1 + r.IntN(3)}
				case 2:
					return Config{MaxConcurrency: 1 + r.IntN(2), MaxQueueDepth: 1 + r.IntN(2)}
				case 3:
					return Config{RequestsPerMinute: 60 * (1 + r.IntN(3))}
				case 4:
					return Config{MinSpacing: time.Duration(1+r.IntN(500)) * time.Millisecond}
				}
				return Config{MaxQueueDepth: 1}
			}
			for _, k := range keys {
				over[k] = pick()
			}
			cfg := Config{MaxKeys: 3 + int(seed%6), IdleTTL: time.Second,
				MaxQueueWait: 2 * time.Second,
				Overrides: func(k string) Config {
					omu.Lock()
					defer omu.Unlock()
					return over[k]
				}}
			if seed%3 == 0 {
				cfg.MaxConcurrency = 2 // a default cap under the overrides
			}
			q := New(cfg)
			if seed%2 == 0 { // two buckets: keys share them
				q.sum.buckets = q.sum.buckets[:2]
				q.sum.shift = 63
			}
			var held []func()
			var mu sync.Mutex // guards held and grants
			var grants []Grant
			var cancels []context.CancelFunc
			var wg sync.WaitGroup
			for step := range 300 {
				now := time.Now()
				k := keys[r.IntN(len(keys))]
				switch op := r.IntN(13); op {
				case 0:
					if release, ok := q.TryAcquireAt(k, now); ok {
						mu.Lock()
						held = append(held, release)
						mu.Unlock()
					}
				case 1, 2: // Acquire, which may wait
					ctx, cancel := context.WithCancel(context.Background())
					cancels = append(cancels, cancel)
					wg.Go(func() {
						if release, err := q.Acquire(ctx, k); err == nil {
							mu.Lock()
							held = append(held, release)
							mu.Unlock()
						}
					})
				case 3:
					mu.Lock()
					if len(held) > 0 {
						j := r.IntN(len(held))
						held[j]()
						held[j]() // a second release changes nothing
						held = append(held[:j], held[j+1:]...)
					}
					mu.Unlock()
				case 4: // a grant that may have to wait behind another
					ctx, cancel := context.WithCancel(context.Background())
					cancels = append(cancels, cancel)
					needs := []Need{{Key: k, Cap: 1}, {Key: keys[r.IntN(len(keys))], Cap: 1 + r.IntN(2)}}
					opts := ManyOptions{Timeout: time.Duration(1+r.IntN(3)) * time.Second}
					wg.Go(func() {
						if g, err := q.AcquireMany(ctx, needs, opts); err == nil {
							mu.Lock()
							grants = append(grants, g)
							mu.Unlock()
						}
					})
				case 5:
					mu.Lock()
					if len(grants) > 0 {
						j := r.IntN(len(grants))
						grants[j].Release()
						grants = append(grants[:j], grants[j+1:]...)
					}
					mu.Unlock()
				case 6:
					q.BlockAt(k, now.Add(time.Duration(r.IntN(3000))*time.Millisecond), now)
				case 7:
					q.UnblockAt(k, now)
				case 8:
					status := http.StatusOK
					if r.IntN(3) == 0 {
						status = http.StatusTooManyRequests
					}
					h := http.Header{}
					h.Set("X-Ratelimit-Limit", "600")
					h.Set("X-Ratelimit-Remaining", fmt.Sprint(r.IntN(600)))
					q.LearnAt(k, status, h, now)
				case 9:
					if r.IntN(4) == 0 {
						q.ResetAllAt(now)
					} else {
						q.ResetAt(k, now)
					}
				case 10: // the key's overrides change
					omu.Lock()
					over[k] = pick()
					omu.Unlock()
				default:
					if len(cancels) > 0 {
						cancels[r.IntN(len(cancels))]()
					}
					time.Sleep(time.Duration(r.IntN(1500)) * time.Millisecond)
				}
				synctest.Wait()
				if err := q.heatError(); err != nil {
					t.Fatalf("seed %d step %d: %v", seed, step, err)
				}
				if err := q.summaryError(); err != nil {
					t.Fatalf("seed %d step %d: %v", seed, step, err)
				}
				now = time.Now()
				for _, k := range keys {
					cap, _ := q.capsFor(k)
					st := q.StatusAt(k, now)
					switch {
					case st.Waiting > 0:
						waits++
					case st.Saturated && st.Running == 0:
						blocks++
					case cap > 0 && st.Running >= cap:
						capped++
					}
					if q.sum.admits(k, cap) {
						lockFree++
					}
					if got, want := q.CheckAt(k, now), q.lockedCheck(k, now); got != want {
						t.Fatalf("seed %d step %d: CheckAt(%s) = %v, locked answer %v (%+v)", seed, step, k, got, want, st)
					}
				}
			}
			for _, cancel := range cancels {
				cancel()
			}
			wg.Wait()
			for _, release := range held {
				release()
			}
			for _, g := range grants {
				g.Release()
			}
			if err := q.heatError(); err != nil {
				t.Fatalf("seed %d at the end: %v", seed, err)
			}
			if err := q.summaryError(); err != nil {
				t.Fatalf("seed %d at the end: %v", seed, err)
			}
		})
	}
	if lockFree == 0 || waits == 0 || blocks == 0 || capped == 0 {
		t.Fatalf("the steps did not cover the cases: %d lock-free, %d waiting, %d blocked, %d at the cap",
			lockFree, waits, blocks, capped)
	}
	t.Logf("%d lock-free answers, %d keys waiting, %d blocked, %d at the cap", lockFree, waits, blocks, capped)
}

// A release function or a Grant called again, after its ticket went to
// another grant of the queue, frees nothing: whichever of Acquire,
// TryAcquireAt and AcquireMany made the first grant and the second, the
// second keeps its slot, and the queue counts its request until it is
// released itself.
func TestStaleReleaseOfATicketGivenToAnotherGrant(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	q := New(Config{MaxConcurrency: 1})
	kinds := []struct {
		name string
		take func(key string) func()
	}{
		{"acquire", func(key string) func() {
			release, err := q.Acquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			return release
		}},
		{"try", func(key string) func() {
			release, ok := q.TryAcquireAt(key, now)
			if !ok {
				t.Fatalf("TryAcquireAt(%s) refused", key)
			}
			return release
		}},
		{"many", func(key string) func() {
			g, err := q.AcquireMany(ctx, []Need{{Key: key, Cap: 1}}, ManyOptions{})
			if err != nil || !g.Held() {
				t.Fatalf("AcquireMany(%s) = %+v, %v", key, g, err)
			}
			return g.Release
		}},
	}
	holds := func(tk *ticket, key string) bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return (tk.one != nil && tk.one.key == key) ||
			(len(tk.gates) == 1 && tk.gates[0].key == key)
	}
	check := func(key string, running int, want Decision) {
		t.Helper()
		if st := q.StatusAt(key, now); st.Running != running || st.Decision != want {
			t.Fatalf("%s: running %d, decision %v; want %d and %v", key, st.Running, st.Decision, running, want)
		}
	}
	for _, a := range kinds {
		for _, b := range kinds {
			first, second := a.name+"-"+b.name+"-1", a.name+"-"+b.name+"-2"
			stale := a.take(first)
			stale()
			tk := q.free // the ticket the first grant gave back
			current := b.take(second)
			if tk == nil || !holds(tk, second) {
				t.Fatalf("%s then %s: the second grant did not take the first one's ticket", a.name, b.name)
			}
			stale()
			check(second, 1, Wait)
			if !holds(tk, second) {
				t.Fatalf("%s then %s: the stale release took the ticket from its grant", a.name, b.name)
			}
			current()
			check(second, 0, Admit)
			stale()
			current()
			check(first, 0, Admit)
			check(second, 0, Admit)
		}
	}
	if err := q.heatError(); err != nil {
		t.Fatal(err)
	}
	if err := q.summaryError(); err != nil {
		t.Fatal(err)
	}
}

// A queue keeps at most maxFreeTickets of the tickets its grants gave back,
// and a release called again after its ticket was left to the garbage
// collector frees nothing either.
func TestFreeTicketsBounded(t *testing.T) {
	ctx := context.Background()
	q := New(Config{})
	freeLen := func() (n int) {
		q.mu.Lock()
		defer q.mu.Unlock()
		for tk := q.free; tk != nil; tk = tk.next {
			n++
		}
		if n != q.nfree {
			t.Fatalf("the free list holds %d tickets, counted %d", n, q.nfree)
		}
		return n
	}
	held := make([]func(), maxFreeTickets+50)
	for i := range held {
		r, err := q.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		held[i] = r
	}
	if n := freeLen(); n != 0 {
		t.Fatalf("with every ticket held, %d kept free", n)
	}
	for _, r := range held {
		r()
	}
	if n := freeLen(); n != maxFreeTickets {
		t.Fatalf("after the burst, %d tickets kept; want %d", n, maxFreeTickets)
	}
	current := mustTake(t, q, "k")
	for _, r := range held {
		r()
	}
	if st := q.StatusAt("k", time.Now()); st.Running != 1 {
		t.Fatalf("after stale releases: running %d, want 1", st.Running)
	}
	current()
	if st := q.StatusAt("k", time.Now()); st.Running != 0 {
		t.Fatalf("after the release: running %d, want 0", st.Running)
	}
	if n := freeLen(); n != maxFreeTickets {
		t.Fatalf("at the end, %d tickets kept; want %d", n, maxFreeTickets)
	}
	if err := q.summaryError(); err != nil {
		t.Fatal(err)
	}
}

func mustTake(t *testing.T, q *Queue, key string) func() {
	t.Helper()
	release, err := q.Acquire(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return release
}

// On a queue with per-key caps, CheckAt read without the lock while other
// goroutines fill and empty a key's slots, block and unblock another, and
// make and settle waits on others, never answers from a state the key was
// not in: Wait for the whole time a key is known full or blocked, Admit for
// the whole time it is known free.
func TestCheckAtSummaryConcurrentWithChanges(t *testing.T) {
	caps := map[string]Config{"full": {MaxConcurrency: 2}, "t": {MaxConcurrency: 3}, "x": {MaxConcurrency: 1}}
	q := New(Config{Overrides: func(k string) Config { return caps[k] }})
	base := time.Now()
	var phase atomic.Int64 // 4n+1 changing, 4n+2 full and blocked, 4n+3 changing, 4n+4 free
	var seen atomic.Int64  // the last phase a check ran through
	var stop atomic.Bool
	var wg sync.WaitGroup
	far := base.Add(time.Hour)
	settle := func() {
		for p := phase.Load(); seen.Load() != p && !stop.Load(); {
			runtime.Gosched()
		}
	}
	ctx := context.Background()
	wg.Go(func() {
		defer stop.Store(true)
		for range 300 {
			phase.Add(1)
			r1, err1 := q.Acquire(ctx, "full")
			r2, err2 := q.Acquire(ctx, "full")
			if err1 != nil || err2 != nil {
				t.Error(err1, err2)
				return
			}
			q.BlockAt("t", far, base)
			phase.Add(1)
			settle()
			phase.Add(1)
			r1()
			r2()
			q.UnblockAt("t", base)
			phase.Add(1)
			settle()
		}
	})
	for range 2 { // contend on another key so that waits come and go
		wg.Go(func() {
			for !stop.Load() {
				g, err := q.AcquireMany(ctx, []Need{{Key: "x", Cap: 1}, {Key: "y", Cap: 1}}, ManyOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				g.Release()
				runtime.Gosched()
			}
		})
	}
	var checked [2]atomic.Int64
	for range 2 {
		wg.Go(func() {
			for ; !stop.Load(); runtime.Gosched() {
				p1 := phase.Load()
				d := [2]Decision{q.CheckAt("full", base), q.CheckAt("t", base)}
				if p1 != phase.Load() {
					continue
				}
				seen.Store(p1)
				switch p1 % 4 {
				case 2:
					checked[0].Add(1)
					if d != [2]Decision{Wait, Wait} {
						t.Errorf("phase %d (full, blocked): CheckAt = %v, want [wait wait]", p1, d)
						stop.Store(true)
					}
				case 0:
					checked[1].Add(1)
					if d != [2]Decision{Admit, Admit} {
						t.Errorf("phase %d (free): CheckAt = %v, want [admit admit]", p1, d)
						stop.Store(true)
					}
				}
			}
		})
	}
	wg.Wait()
	if err := q.heatError(); err != nil {
		t.Fatal(err)
	}
	if err := q.summaryError(); err != nil {
		t.Fatal(err)
	}
	t.Logf("checked %d full and %d free phases", checked[0].Load(), checked[1].Load())
}
