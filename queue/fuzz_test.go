package queue_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"reflect"
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

func FuzzConfigNormalize(f *testing.F) {
	f.Add(0, int64(0), 0, 0, int64(0), int64(0))
	f.Add(-1, int64(-1), -1, -1, int64(-1), int64(-1))
	f.Add(math.MaxInt, int64(math.MaxInt64), math.MaxInt, math.MaxInt, int64(math.MaxInt64), int64(math.MaxInt64))
	f.Add(60, int64(time.Second), 3, 20, int64(5*time.Second), int64(time.Minute))
	f.Fuzz(func(t *testing.T, rpm int, spacing int64, conc, depth int, wait, exec int64) {
		in := queue.Config{RequestsPerMinute: rpm, MinSpacing: time.Duration(spacing), MaxConcurrency: conc,
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
		if !reflect.DeepEqual(s.Normalize(), s) {
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
		vars := map[string]string{
			"RATE_LIMIT_MAX_WAIT_MS": wait, "RATE_LIMIT_EXECUTION_MAX_WAIT_MS": exec, "RATE_LIMIT_MAX_QUEUE_DEPTH": depth,
		}
		c, err := queue.FromEnv(env(vars))
		if c.MaxQueueWait < 0 || c.ExecutionTimeout < 0 || c.MaxQueueDepth < 0 {
			t.Fatalf("FromEnv(%q) = %+v: negative field", vars, c)
		}
		// Every refusal names its variable and leaves the field unset.
		var errs []error
		if err != nil {
			errs = err.(interface{ Unwrap() []error }).Unwrap()
		}
		for _, e := range errs {
			var qe *queue.Error
			if !errors.As(e, &qe) || qe.Code != queue.CodeInvalidConfig || !errors.Is(e, queue.ErrInvalidConfig) {
				t.Fatalf("FromEnv(%q): refusal %v is not an invalid_config *Error", vars, e)
			}
			switch qe.Field {
			case "RATE_LIMIT_MAX_WAIT_MS":
				if c.MaxQueueWait != 0 {
					t.Fatalf("refused wait kept: %+v", c)
				}
			case "RATE_LIMIT_EXECUTION_MAX_WAIT_MS":
				if c.ExecutionTimeout != 0 {
					t.Fatalf("refused execution budget kept: %+v", c)
				}
			case "RATE_LIMIT_MAX_QUEUE_DEPTH":
				if c.MaxQueueDepth != 0 {
					t.Fatalf("refused depth kept: %+v", c)
				}
			default:
				t.Fatalf("refusal names %q", qe.Field)
			}
		}
		n := c.Normalize()
		if !reflect.DeepEqual(n.Normalize(), n) || n.MaxQueueWait < time.Millisecond || n.MaxQueueWait > 30*time.Second ||
			n.ExecutionTimeout < time.Millisecond || n.ExecutionTimeout > 24*time.Hour || n.MaxQueueDepth > 100_000 {
			t.Fatalf("Normalize(FromEnv(%q)) = %+v out of range", vars, n)
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
			q := queue.New(queue.Config{MaxConcurrency: capN, MaxQueueDepth: depthN, MaxQueueWait: 5 * time.Second, MinSpacing: time.Millisecond})
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
				st := q.StatusAt("k", time.Now())
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
					q.ResetAt("k", time.Now())
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
