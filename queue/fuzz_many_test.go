package queue_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/routeguard/routeguard/queue"
)

// FuzzAcquireMany drives two keys through random hierarchical
// acquisitions (of one key or both), cancellations, releases, resets and
// clock steps, checking after each step that every key runs between 0 and
// its cap, that no key holds more waiters than the queue limit, and that
// the counts match what the callers hold and wait for.
func FuzzAcquireMany(f *testing.F) {
	f.Add(uint8(1), uint8(2), uint8(2), []byte{2, 2, 2, 0, 1, 9, 3, 4, 2, 5, 5})
	f.Add(uint8(2), uint8(1), uint8(0), []byte{0, 0, 1, 1, 2, 2, 2, 10, 6, 6, 6})
	f.Add(uint8(1), uint8(1), uint8(1), []byte{2, 0, 1, 2, 3, 7, 4, 5, 8, 2})
	f.Fuzz(func(t *testing.T, capA, capB, limit uint8, ops []byte) {
		if len(ops) > 200 {
			ops = ops[:200]
		}
		caps := map[string]int{"a": int(capA%3) + 1, "b": int(capB%3) + 1}
		maxQueue := int(limit % 4)
		synctest.Test(t, func(t *testing.T) {
			q := queue.New(queue.Config{})
			type pending struct {
				keys   []string
				cancel context.CancelFunc
				done   chan queue.Grant
			}
			type holder struct {
				keys []string
				g    queue.Grant
			}
			var waiting []pending
			var held []holder
			sets := [][]string{{"a"}, {"b"}, {"a", "b"}}
			collect := func() {
				synctest.Wait()
				keep := waiting[:0]
				for _, p := range waiting {
					select {
					case g := <-p.done:
						if g.Held() {
							held = append(held, holder{p.keys, g})
						}
						p.cancel()
					default:
						keep = append(keep, p)
					}
				}
				waiting = keep
			}
			check := func(step int) {
				for key, capN := range caps {
					running, waiters := 0, 0
					for _, h := range held {
						for _, k := range h.keys {
							if k == key {
								running++
							}
						}
					}
					for _, p := range waiting {
						for _, k := range p.keys {
							if k == key {
								waiters++
							}
						}
					}
					st := q.StatusAt(key, time.Now())
					if st.Running < 0 || st.Running > capN || st.Running != running {
						t.Fatalf("step %d: %s running %d, held %d, cap %d", step, key, st.Running, running, capN)
					}
					if maxQueue > 0 && st.Waiting > maxQueue {
						t.Fatalf("step %d: %s waiting %d above limit %d", step, key, st.Waiting, maxQueue)
					}
					if st.Waiting != waiters {
						t.Fatalf("step %d: %s waiting %d, pending %d", step, key, st.Waiting, waiters)
					}
				}
			}
			for i, op := range ops {
				switch op % 6 {
				case 0, 1, 2: // acquire one key or both
					keys := sets[int(op/6)%len(sets)]
					needs := make([]queue.Need, len(keys))
					for j, k := range keys {
						needs[j] = queue.Need{Key: k, Cap: caps[k]}
					}
					ctx, cancel := context.WithCancel(context.Background())
					p := pending{keys, cancel, make(chan queue.Grant, 1)}
					go func() {
						g, err := q.AcquireMany(ctx, needs, queue.ManyOptions{Timeout: 5 * time.Second, MaxQueue: maxQueue, FailOpen: op%2 == 0})
						if err != nil && g.Held() {
							t.Errorf("failed acquisition holds a grant: %v", err)
						}
						if g.Bypassed != nil && g.Held() {
							t.Errorf("bypassed grant holds slots")
						}
						p.done <- g
					}()
					waiting = append(waiting, p)
				case 3: // cancel a waiter
					if len(waiting) > 0 {
						waiting[int(op/6)%len(waiting)].cancel()
					}
				case 4: // release a holder (twice: idempotent)
					if len(held) > 0 {
						j := int(op/6) % len(held)
						held[j].g.Release()
						held[j].g.Release()
						held = append(held[:j], held[j+1:]...)
					}
				case 5:
					if op&0x80 != 0 {
						q.ResetAt([]string{"a", "b"}[int(op/6)%2], time.Now())
					} else {
						time.Sleep(time.Duration(op) * 20 * time.Millisecond)
					}
				}
				collect()
				check(i)
			}
			for _, p := range waiting {
				p.cancel()
			}
			collect()
			for _, h := range held {
				h.g.Release()
			}
			for key := range caps {
				if st := q.StatusAt(key, time.Now()); st.Running != 0 || st.Waiting != 0 {
					t.Fatalf("%s left running %d waiting %d", key, st.Running, st.Waiting)
				}
			}
		})
	})
}
