package queue_test

import (
	"context"
	"math"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/routeguard/routeguard/queue"
)

func FuzzParseLimits(f *testing.F) {
	f.Add("60", "3", "20", "", "")
	f.Add("100, 100;w=60", "7", "6m0s", "120", "yes")
	f.Add("", "", "1767225645", "Thu, 01 Jan 2026 00:01:00 GMT", "")
	f.Add("1e400", "-1", "2026-01-01T00:00:30Z", "NaN", "true")
	f.Add("99999999999999999999", "Inf", "9223372036854775807", "-Inf", "1")
	f.Fuzz(func(t *testing.T, limit, remaining, reset, retryAfter, over string) {
		h := http.Header{}
		h.Set("X-Ratelimit-Limit", limit)
		h.Set("Anthropic-Ratelimit-Requests-Remaining", remaining)
		h.Set("X-Ratelimit-Reset-Requests", reset)
		h.Set("Retry-After", retryAfter)
		h.Set("X-Ratelimit-Over-Limit", over)
		l := queue.ParseLimits(h, t0)
		if l.Limit < 0 || l.Limit > 1<<40 {
			t.Fatalf("limit %d out of range", l.Limit)
		}
		if l.Remaining < -1 || l.Remaining > 1<<40 {
			t.Fatalf("remaining %d out of range", l.Remaining)
		}
		if l.Reset < 0 || l.Reset > time.Hour || l.RetryAfter < 0 || l.RetryAfter > time.Hour {
			t.Fatalf("hints out of range: %+v", l)
		}
		// Learning from any answer keeps the key usable.
		q := queue.New(queue.Config{})
		q.LearnAt("k", http.StatusOK, h, t0)
		for _, ks := range q.SnapshotAt(t0) {
			if ks.LearnedSpacing < 0 || ks.LearnedSpacing > time.Minute || ks.Reservoir < 0 || ks.Reservoir > ks.ReservoirMax {
				t.Fatalf("bad learned state %+v", ks)
			}
		}
		if st := q.StatusAt("k", t0.Add(2*time.Hour)); st.Decision != queue.Admit {
			t.Fatalf("key still limited two hours later: %+v", st)
		}
	})
}

func FuzzSettingsNormalize(f *testing.F) {
	f.Add(0, int64(0), 0, 0, int64(0), int64(0))
	f.Add(-1, int64(-1), -1, -1, int64(-1), int64(-1))
	f.Add(math.MaxInt, int64(math.MaxInt64), math.MaxInt, math.MaxInt, int64(math.MaxInt64), int64(math.MaxInt64))
	f.Add(60, int64(time.Second), 3, 20, int64(5*time.Second), int64(time.Minute))
	f.Fuzz(func(t *testing.T, rpm int, spacing int64, conc, depth int, wait, exec int64) {
		in := queue.Settings{RequestsPerMinute: rpm, MinSpacing: time.Duration(spacing), MaxConcurrency: conc,
			MaxQueueDepth: depth, MaxQueueWait: time.Duration(wait), ExecutionTimeout: time.Duration(exec)}
		s := in.Normalize()
		switch {
		case s.RequestsPerMinute < 0 || s.RequestsPerMinute > 1_000_000,
			s.MinSpacing < 0 || s.MinSpacing > time.Hour,
			s.MaxConcurrency < 0 || s.MaxConcurrency > 10_000,
			s.MaxQueueDepth < 0 || s.MaxQueueDepth > 100_000,
			s.MaxQueueWait < time.Millisecond || s.MaxQueueWait > 30*time.Second,
			s.ExecutionTimeout < time.Millisecond || s.ExecutionTimeout > 24*time.Hour:
			t.Fatalf("Normalize(%+v) = %+v out of range", in, s)
		}
		if s != s.Normalize() {
			t.Fatalf("Normalize is not idempotent: %+v", s)
		}
		if in.MaxConcurrency > 0 && in.MaxConcurrency <= 10_000 && s.MaxConcurrency != in.MaxConcurrency {
			t.Fatalf("in-range concurrency changed: %+v", s)
		}
	})
}

func FuzzFromEnv(f *testing.F) {
	f.Add("15000", "600000", "0")
	f.Add("abc", "-5", "-1")
	f.Add("99999999999999999999999", " 1 ", "1e3")
	f.Fuzz(func(t *testing.T, wait, exec, depth string) {
		base := queue.Settings{MaxQueueWait: 7 * time.Second, ExecutionTimeout: 70 * time.Second, MaxQueueDepth: 7}
		s, _ := queue.FromEnv(base, env(map[string]string{
			queue.EnvMaxQueueWait: wait, queue.EnvExecutionTimeout: exec, queue.EnvMaxQueueDepth: depth,
		}))
		if s != s.Normalize() {
			t.Fatalf("FromEnv result not normalized: %+v", s)
		}
	})
}

// FuzzOps drives a key through random acquire, cancel, release and clock
// steps, checking after each that in-flight stays within 0..cap and the
// queue within its depth.
func FuzzOps(f *testing.F) {
	f.Add(uint8(2), uint8(3), []byte{0, 0, 0, 0, 1, 2, 3, 0, 2, 2, 1})
	f.Add(uint8(1), uint8(0), []byte{0, 0, 0, 0, 0, 0, 4, 1, 1, 2, 2, 2, 3})
	f.Add(uint8(3), uint8(1), []byte{0, 5, 0, 0, 0, 0, 0, 2, 0, 6, 1, 3, 3})
	f.Fuzz(func(t *testing.T, capacity, depth uint8, ops []byte) {
		if len(ops) > 200 {
			ops = ops[:200]
		}
		capN, depthN := int(capacity%5)+1, int(depth%4)
		synctest.Test(t, func(t *testing.T) {
			q := queue.New(queue.Config{Defaults: queue.Settings{
				MaxConcurrency: capN, MaxQueueDepth: depthN, MaxQueueWait: 5 * time.Second, MinSpacing: time.Millisecond,
			}})
			type pending struct {
				cancel context.CancelFunc
				done   chan func()
			}
			var waiting []pending
			var held []func()
			collect := func() {
				synctest.Wait()
				keep := waiting[:0]
				for _, p := range waiting {
					select {
					case r := <-p.done:
						if r != nil {
							held = append(held, r)
						}
						p.cancel()
					default:
						keep = append(keep, p)
					}
				}
				waiting = keep
			}
			check := func(step int) {
				st := q.Status("k")
				if st.Running < 0 || st.Running > capN || st.Running != len(held) {
					t.Fatalf("step %d: running %d, held %d, cap %d", step, st.Running, len(held), capN)
				}
				if depthN > 0 && st.Waiting > depthN {
					t.Fatalf("step %d: waiting %d above depth %d", step, st.Waiting, depthN)
				}
				if st.Waiting != len(waiting) {
					t.Fatalf("step %d: waiting %d, pending %d", step, st.Waiting, len(waiting))
				}
			}
			for i, op := range ops {
				switch op % 5 {
				case 0: // acquire
					ctx, cancel := context.WithCancel(context.Background())
					p := pending{cancel, make(chan func(), 1)}
					go func() {
						r, err := q.Acquire(ctx, "k")
						if err != nil {
							r = nil
						}
						p.done <- r
					}()
					waiting = append(waiting, p)
				case 1: // cancel a waiter
					if len(waiting) > 0 {
						waiting[int(op/5)%len(waiting)].cancel()
					}
				case 2: // release a holder (twice: idempotent)
					if len(held) > 0 {
						j := int(op/5) % len(held)
						held[j]()
						held[j]()
						held = append(held[:j], held[j+1:]...)
					}
				case 3: // let time pass
					time.Sleep(time.Duration(op) * 10 * time.Millisecond)
				case 4:
					q.Reset("k")
				}
				collect()
				check(i)
			}
			for _, p := range waiting {
				p.cancel()
			}
			collect()
			for _, r := range held {
				r()
			}
		})
	})
}
