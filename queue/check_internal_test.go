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

var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// lockedCheck is CheckAt's answer worked out under the lock, without the
// lock-free shortcut: the reference the shortcut must agree with.
func (q *Queue) lockedCheck(key string, now time.Time) Decision {
	s := q.settingsFor(key)
	q.mu.RLock()
	defer q.mu.RUnlock()
	g := q.gates[key]
	if g == nil {
		if !q.roomLocked(now) {
			return Refuse
		}
		return Admit
	}
	return g.decide(s, now)
}

// heatError reports where the count of hot gates and the lock-free flag
// disagree with the gates' state.
func (q *Queue) heatError() error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	n := 0
	for k, g := range q.gates {
		hot := g.waiters.Len() > 0 || !g.blockedUntil.IsZero() || g.lim != nil ||
			g.spacing > 0 || g.learned > 0 || g.resMax > 0
		if hot != g.hot && !q.limited {
			return fmt.Errorf("gate %s: hot %v, state says %v", k, g.hot, hot)
		}
		if hot {
			n++
		}
	}
	if n != q.hot {
		return fmt.Errorf("hot count %d, gates say %d", q.hot, n)
	}
	if q.limited {
		return nil // keeps no count
	}
	if want := n == 0 && len(q.gates) < q.maxKeys(); q.admitAll.Load() != want {
		return fmt.Errorf("admitAll %v, want %v (%d hot, %d keys)", q.admitAll.Load(), want, n, len(q.gates))
	}
	return nil
}

// CheckAt answers a queue that limits nothing without taking its lock.
func TestCheckAtTakesNoLockWhenNothingLimits(t *testing.T) {
	q := New(Config{})
	release, ok := q.TryAcquireAt("c0", base)
	if !ok {
		t.Fatal("refused")
	}
	defer release()
	q.mu.Lock() // a writer holds the lock while the checks run
	done := make(chan [2]Decision, 1)
	go func() { done <- [2]Decision{q.CheckAt("c0", base), q.CheckAt("c1", base)} }()
	select {
	case d := <-done:
		q.mu.Unlock()
		if d != [2]Decision{Admit, Admit} {
			t.Fatalf("CheckAt = %v, want [admit admit]", d)
		}
	case <-time.After(time.Second):
		q.mu.Unlock()
		<-done
		t.Fatal("CheckAt waited for the lock")
	}
}

// Random acquisitions, releases, waits, blocks, learned limits and resets
// on a queue that limits nothing (but the needs' caps and MaxKeys) keep the
// lock-free answer equal to the locked one for every key, kept or not, and
// the count of hot gates exact.
func TestCheckAtShortcutMatchesLockedDecision(t *testing.T) {
	var shortcut, waits, blocks int // steps where the shortcut was on, a key had waiters, a key was blocked
	for seed := range uint64(20) {
		synctest.Test(t, func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 22))
			q := New(Config{MaxKeys: 2 + int(seed%4), IdleTTL: time.Second})
			keys := []string{"a", "b", "c", "d", "e", "f"}
			var held []func()
			var grants []Grant
			var cancels []context.CancelFunc
			var wg sync.WaitGroup
			var mu sync.Mutex // guards grants
			for step := range 300 {
				now := time.Now()
				k := keys[r.IntN(len(keys))]
				switch op := r.IntN(11); op {
				case 0, 1:
					if release, ok := q.TryAcquireAt(k, now); ok {
						held = append(held, release)
					}
				case 2:
					if len(held) > 0 {
						j := r.IntN(len(held))
						held[j]()
						held = append(held[:j], held[j+1:]...)
					}
				case 3, 4: // a grant that may have to wait behind another
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
				case 10:
					if len(cancels) > 0 {
						cancels[r.IntN(len(cancels))]()
					}
					time.Sleep(time.Duration(r.IntN(1500)) * time.Millisecond)
				}
				synctest.Wait()
				if err := q.heatError(); err != nil {
					t.Fatalf("seed %d step %d: %v", seed, step, err)
				}
				now = time.Now()
				if q.admitAll.Load() {
					shortcut++
				}
				for _, k := range keys {
					if st := q.StatusAt(k, now); st.Waiting > 0 {
						waits++
					} else if st.Saturated && st.Running == 0 {
						blocks++
					}
				}
				for _, k := range keys {
					if got, want := q.CheckAt(k, now), q.lockedCheck(k, now); got != want {
						t.Fatalf("seed %d step %d: CheckAt(%s) = %v, locked answer %v", seed, step, k, got, want)
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
		})
	}
	if shortcut == 0 || waits == 0 || blocks == 0 {
		t.Fatalf("the steps did not cover the cases: %d with the shortcut, %d waiting, %d blocked", shortcut, waits, blocks)
	}
	t.Logf("%d steps with the shortcut, %d keys waiting, %d blocked", shortcut, waits, blocks)
}

// CheckAt read without the lock while other goroutines block and unblock
// a key, and make and settle waits on others, never answers from a state
// the key was not in: Wait for the whole time the key is known blocked,
// Admit for the whole time it is known free.
func TestCheckAtConcurrentWithChanges(t *testing.T) {
	q := New(Config{})
	base := time.Now()     // AcquireMany reads the clock too
	var phase atomic.Int64 // 4n+1 blocking, 4n+2 blocked, 4n+3 unblocking, 4n+4 free
	var seen atomic.Int64  // the last phase a check ran through
	var stop atomic.Bool
	var wg sync.WaitGroup
	far := base.Add(time.Hour)
	// settle waits until a check has run through the current phase.
	settle := func() {
		for p := phase.Load(); seen.Load() != p && !stop.Load(); {
			runtime.Gosched()
		}
	}
	wg.Go(func() {
		defer stop.Store(true)
		for range 300 {
			phase.Add(1)
			q.BlockAt("t", far, base)
			phase.Add(1)
			settle()
			phase.Add(1)
			q.UnblockAt("t", base)
			phase.Add(1)
			settle()
		}
	})
	for range 2 { // contend on other keys so that waits come and go
		wg.Go(func() {
			ctx := context.Background()
			for !stop.Load() {
				g, err := q.AcquireMany(ctx, []Need{{Key: "x", Cap: 1}, {Key: "y", Cap: 1}}, ManyOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				q.CheckAt("x", base)
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
				d := q.CheckAt("t", base)
				if p1 != phase.Load() {
					continue
				}
				seen.Store(p1)
				switch p1 % 4 {
				case 2:
					checked[0].Add(1)
					if d != Wait {
						t.Errorf("phase %d (blocked): CheckAt = %v, want wait", p1, d)
						stop.Store(true)
					}
				case 0:
					checked[1].Add(1)
					if d != Admit {
						t.Errorf("phase %d (free): CheckAt = %v, want admit", p1, d)
						stop.Store(true)
					}
				}
				if d := q.CheckAt("absent", base); d != Admit {
					t.Errorf("CheckAt of an absent key = %v, want admit", d)
					stop.Store(true)
				}
			}
		})
	}
	wg.Wait()
	if err := q.heatError(); err != nil {
		t.Fatal(err)
	}
	if q.CheckAt("t", base) != Admit || !q.admitAll.Load() {
		t.Fatalf("after the churn: CheckAt = %v, admitAll %v", q.CheckAt("t", base), q.admitAll.Load())
	}
	t.Logf("checked %d blocked and %d free phases", checked[0].Load(), checked[1].Load())
}
