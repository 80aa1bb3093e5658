package combo_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lockout"
	"github.com/routeguard/routeguard/queue"
	"github.com/routeguard/routeguard/watchdog"
)

// Queue contract 3a (cooldown-aware retry) and D9: the router waits only
// when every target that is out is held by a short transient model lockout
// (a waitable reason, ending within MaxWait), and only until the earliest
// of them ends. Any other exclusion answers 503 at once, with no upstream
// call.
func TestCooldownWaitOnlyWhenEveryExclusionIsAShortLock(t *testing.T) {
	lockA := func(f *fleet, now time.Time) {
		f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "openai", Connection: "a", Model: "m",
			Status: 429, Reason: lockout.ReasonRateLimited, Cooldown: 2 * time.Second}, now)
	}
	tests := []struct {
		name    string
		setup   func(f *fleet, now time.Time)
		waited  time.Duration // 0: the 503 at once
		reasons []combo.Reason
	}{
		{"two short locks: wait for the earlier", func(f *fleet, now time.Time) {
			lockA(f, now)
			f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "claude", Connection: "b", Model: "m",
				Status: 429, Reason: lockout.ReasonRateLimited, Cooldown: 5 * time.Second}, now)
		}, 2*time.Second + 50*time.Millisecond, nil},
		{"the other provider's breaker is open", func(f *fleet, now time.Time) {
			lockA(f, now)
			require.True(t, f.cfg.Breakers.ReportAt("claude", breaker.Report{Outcome: breaker.Failure}, now))
			st, _ := f.cfg.Breakers.StateAt("claude", now)
			require.Equal(t, breaker.Open, st)
		}, 0, []combo.Reason{combo.ReasonModelLockout, combo.ReasonCircuitOpen}},
		{"the other connection is terminal", func(f *fleet, now time.Time) {
			lockA(f, now)
			f.cfg.Cooldowns.FailAt("b", cooldown.Failure{Status: 403, Permanent: true}, now)
		}, 0, []combo.Reason{combo.ReasonModelLockout, combo.ReasonUnavailable}},
		{"the other connection is cooling", func(f *fleet, now time.Time) {
			lockA(f, now)
			f.cfg.Cooldowns.FailAt("b", cooldown.Failure{Status: 429, Cooldown: time.Second}, now)
		}, 0, []combo.Reason{combo.ReasonModelLockout, combo.ReasonConnectionCooldown}},
		{"the other lock is longer than MaxWait", func(f *fleet, now time.Time) {
			lockA(f, now)
			f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "claude", Connection: "b", Model: "m",
				Status: 429, Reason: lockout.ReasonRateLimited, Cooldown: 100 * time.Second}, now)
		}, 0, []combo.Reason{combo.ReasonModelLockout, combo.ReasonModelLockout}},
		{"the other lock is a quota", func(f *fleet, now time.Time) {
			lockA(f, now)
			f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "claude", Connection: "b", Model: "m",
				Status: 429, Reason: lockout.ReasonQuotaExhausted, Cooldown: 5 * time.Second}, now)
		}, 0, []combo.Reason{combo.ReasonModelLockout, combo.ReasonModelLockout}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFleet(t, "openai", "claude")
				f.cfg.Breakers = breaker.NewSet(breaker.Config{Profiles: map[string]breaker.Profile{"claude": {OpenAt: 1, Reset: time.Minute}}})
				f.rebuild()
				c := &combo.Combo{Name: "w", Targets: []combo.Target{target("openai", "a", "m"), target("claude", "b", "m")}}
				tt.setup(f, time.Now())
				start := time.Now()
				res, err := f.do(t, c)
				elapsed := time.Since(start)
				if tt.waited > 0 {
					require.NoError(t, err)
					assert.Equal(t, tt.waited, elapsed)
					assert.Equal(t, "openai", res.Target.Provider)
					return
				}
				var te *combo.Error
				require.ErrorAs(t, err, &te)
				assert.Equal(t, http.StatusServiceUnavailable, te.Status)
				assert.Equal(t, combo.TerminalAllCoolingDown, te.TerminalReason)
				assert.Equal(t, time.Duration(0), elapsed, "no wait")
				assert.Equal(t, 0, f.up["openai"].Total()+f.up["claude"].Total(), "no upstream call")
				var got []combo.Reason
				for _, x := range te.Excluded {
					got = append(got, x.Reason)
				}
				assert.Equal(t, tt.reasons, got)
			})
		})
	}
}

// Restatement contract M5: the agentrouter rule restates a 403 "额度不足"
// as a 429 and tells the client to come back in 60 s. The retry time
// reaches the caller: on UpstreamError, and as Retry-After through
// Transport when the upstream sent none (an upstream's own header wins).
func TestRestatedRetryAfterReachesTheCaller(t *testing.T) {
	f := newFleet(t, "agentrouter")
	c := &combo.Combo{Name: "ar", Targets: []combo.Target{target("agentrouter", "k1", "m")},
		Settings: combo.Settings{CooldownWait: combo.CooldownWait{Disabled: true}}}
	quota := combotest.Error(403, "用户额度不足")

	f.up["agentrouter"].Script("k1", quota)
	_, err := f.do(t, c)
	var ue *combo.Error
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, 429, ue.Status)
	assert.Equal(t, time.Minute, ue.RetryAfter)
	assert.Equal(t, int64(60), ue.RetryAfterSeconds())

	tr := &combo.Transport{
		Router:  f.router,
		Combo:   func(*http.Request) (*combo.Combo, error) { return c, nil },
		Rewrite: func(req *http.Request, t *combo.Target) (*http.Request, error) { return req, nil },
		Base: roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			return f.up["agentrouter"].Transport().RoundTrip(req)
		}),
	}
	for _, tt := range []struct {
		name  string
		reply combotest.Reply
		want  string
	}{
		{"the rule's 60 s", quota, "60"},
		{"the upstream's own header", quota.WithHeader("Retry-After", "7"), "7"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f.cfg.Cooldowns.SucceedAt("k1", time.Now())
			f.cfg.Lockouts.Clear("agentrouter", "k1", "m")
			f.up["agentrouter"].Script("k1", tt.reply)
			req, _ := http.NewRequest(http.MethodPost, "http://gw/v1/chat/completions", strings.NewReader(`{}`))
			req.Header.Set("Authorization", "Bearer k1")
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, 429, resp.StatusCode)
			assert.Equal(t, tt.want, resp.Header.Get("Retry-After"))
		})
	}

	// The header value is bounded: whole seconds rounded up, at least 1,
	// at most a day; none without a retry time.
	for d, want := range map[time.Duration]int64{0: 0, time.Millisecond: 1, 1500 * time.Millisecond: 2,
		48 * time.Hour: 86400, -time.Second: 0} {
		assert.Equal(t, want, (&combo.Error{RetryAfter: d}).RetryAfterSeconds(), "%v", d)
	}
}

// Queue contract D10: when admission refuses every target because its
// queue is full, the answer is 429 RATE_LIMIT_QUEUE_FULL with Retry-After,
// before any waiting. A pool where some targets cool and the rest are
// queue-full keeps the 503.
func TestFullRequestQueueIsA429(t *testing.T) {
	for _, mixed := range []bool{false, true} {
		t.Run(map[bool]string{false: "every queue full", true: "one cooling, one full"}[mixed], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFleet(t, "openai")
				f.cfg.Queue = queue.New(queue.Config{MaxConcurrency: 1, MaxQueueDepth: 1})
				f.rebuild()
				f.up["openai"].Script("k1", combotest.OK("slow").After(10*time.Second))
				f.up["openai"].Script("k2", combotest.OK("slow").After(10*time.Second))
				one := func(conn string) *combo.Combo {
					return &combo.Combo{Name: conn, Targets: []combo.Target{target("openai", conn, "m")}}
				}
				// On each connection one request runs and one waits.
				done := make(chan error, 4)
				for _, conn := range []string{"k1", "k2"} {
					for range 2 {
						go func() { _, err := f.do(t, one(conn)); done <- err }()
					}
				}
				synctest.Wait()
				if mixed {
					f.cfg.Cooldowns.FailAt("k1", cooldown.Failure{Status: 429, Cooldown: 3 * time.Second}, time.Now())
				}
				c := &combo.Combo{Name: "pool", Targets: []combo.Target{target("openai", "k1", "m"), target("openai", "k2", "m")}}
				start := time.Now()
				_, err := f.do(t, c)
				assert.Equal(t, time.Duration(0), time.Since(start), "no waiting")
				var te *combo.Error
				require.ErrorAs(t, err, &te)
				h := combo.TerminalHeader(te)
				if mixed {
					assert.Equal(t, http.StatusServiceUnavailable, te.Status)
					assert.Equal(t, combo.TerminalAllCoolingDown, te.Code)
					assert.Equal(t, "3", h.Get("Retry-After"))
					assert.False(t, errors.Is(err, combo.ErrQueueFull))
				} else {
					assert.Equal(t, http.StatusTooManyRequests, te.Status)
					assert.Equal(t, "RATE_LIMIT_QUEUE_FULL", te.Code)
					assert.Equal(t, combo.TerminalQueueFull, te.TerminalReason)
					assert.Equal(t, "1", h.Get("Retry-After"))
					assert.Equal(t, "wait", h.Get("X-Omniroute-Recovery-Action"))
					assert.ErrorIs(t, err, combo.ErrQueueFull)
					assert.ErrorIs(t, err, queue.ErrQueueFull)
					assert.NotErrorIs(t, err, combo.ErrAllCoolingDown)
					assert.Equal(t, int64(1), combo.TerminalBody(te).RecoveryHint.RetryAfterSeconds)
				}
				assert.Equal(t, 2, f.up["openai"].Total(), "only the two holders went upstream")
				for range 4 {
					<-done
				}
			})
		})
	}
}

// Affinity contract and D16: session affinity chooses the connection
// within a provider, the strategy the provider and model. Under every
// strategy but cache-optimized, a session pinned to a connection of the
// first provider/model group goes to it, and after a hard rebind it stays
// on the new connection when the old one recovers.
func TestSessionsStayOnTheirConnectionUnderEveryStrategy(t *testing.T) {
	strategies := []string{combo.StrategyPriority, combo.StrategyFillFirst, combo.StrategyContextRelay,
		combo.StrategyRoundRobin, combo.StrategyWeighted, combo.StrategyRandom, combo.StrategyP2C,
		combo.StrategyLeastUsed, combo.StrategyCostOptimized, combo.StrategyLKGP}
	for _, name := range strategies {
		t.Run(name, func(t *testing.T) {
			f := newFleet(t, "openai")
			c := &combo.Combo{Name: "s-" + name, Strategy: name,
				Targets: []combo.Target{target("openai", "k1", "m"), target("openai", "k2", "m"), target("openai", "k3", "m")}}
			session := func(r *combo.Request) { r.Session = "agent-7" }
			first, err := f.do(t, c, session)
			require.NoError(t, err)
			pinned := first.Target.Connection
			for i := range 4 {
				res, err := f.do(t, c, session)
				require.NoError(t, err)
				assert.Equal(t, pinned, res.Target.Connection, "request %d", i)
			}

			// The pinned connection cools: a hard rebind to another one…
			f.cfg.Cooldowns.FailAt(pinned, cooldown.Failure{Status: 429, Cooldown: time.Minute}, time.Now())
			res, err := f.do(t, c, session)
			require.NoError(t, err)
			rebound := res.Target.Connection
			require.NotEqual(t, pinned, rebound)
			// …which holds after the old connection recovers.
			f.cfg.Cooldowns.SucceedAt(pinned, time.Now())
			for i := range 4 {
				res, err := f.do(t, c, session)
				require.NoError(t, err)
				assert.Equal(t, rebound, res.Target.Connection, "after recovery, request %d", i)
			}
		})
	}

	// Priority over two providers: the pin picks the connection of the
	// first group; it never moves a session to another provider.
	t.Run("priority across providers", func(t *testing.T) {
		f := newFleet(t, "openai", "claude")
		now := time.Now()
		f.cfg.Pins.PinAt(affinityReq("openai", "agent-8"), "k2", now)
		c := &combo.Combo{Name: "mix", Targets: []combo.Target{target("openai", "k1", "m"),
			target("claude", "c1", "m"), target("openai", "k2", "m")}}
		res, err := f.do(t, c, func(r *combo.Request) { r.Session = "agent-8" })
		require.NoError(t, err)
		assert.Equal(t, "k2", res.Target.Connection)

		c.Targets = []combo.Target{target("claude", "c1", "m"), target("openai", "k1", "m"), target("openai", "k2", "m")}
		res, err = f.do(t, c, func(r *combo.Request) { r.Session = "agent-8" })
		require.NoError(t, err)
		assert.Equal(t, "c1", res.Target.Connection, "the strategy chooses the provider")
	})
}

// Watchdog contract and D15: a bad stream before commit (a watchdog cut,
// an empty answer) locks the exact provider/connection/model and moves on;
// the connection does not cool, so the same key's other model serves.
func TestBadStreamLocksOneModelNotTheAccount(t *testing.T) {
	tests := []struct {
		name  string
		reply combotest.Reply
		check func(t *testing.T, err error)
	}{
		{"watchdog idle cut", combotest.SSE(10*time.Second, combotest.Heartbeat(), combotest.ChatDelta("late")),
			func(t *testing.T, err error) { assert.ErrorIs(t, err, watchdog.ErrIdleTimeout) }},
		{"empty answer", combotest.SSE(0),
			func(t *testing.T, err error) { assert.ErrorIs(t, err, combo.ErrEmptyStream) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFleet(t, "openai")
				f.cfg.Watchdog = watchdog.Config{IdleTimeout: 5 * time.Second}
				f.rebuild()
				f.up["openai"].Handle("k1", func(call combotest.Call) combotest.Reply {
					if strings.Contains(call.Path, "bad") {
						return tt.reply
					}
					return combotest.TextStream(0, "fine")
				})
				send := func(ctx context.Context, t *combo.Target) (*http.Response, error) {
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://openai.test/v1/"+t.Model, strings.NewReader(`{}`))
					req.Header.Set("Authorization", "Bearer "+t.Connection)
					return f.up["openai"].Transport().RoundTrip(req)
				}
				c := &combo.Combo{Name: "s", Targets: []combo.Target{target("openai", "k1", "bad"), target("openai", "k1", "good")}}
				res, err := f.router.Do(context.Background(), combo.Request{Combo: c}, send)
				require.NoError(t, err)
				_, _ = io.Copy(io.Discard, res.Response.Body)
				res.Response.Body.Close()
				assert.Equal(t, "good", res.Target.Model, "the same connection's other model serves")
				require.Len(t, res.Attempts, 2)
				tt.check(t, res.Attempts[0].Err)

				now := time.Now()
				assert.Equal(t, cooldown.Available, f.cfg.Cooldowns.StatusAt("k1", now).State, "the connection does not cool")
				_, _, locked := f.cfg.Lockouts.LockedAt("openai", "k1", "bad", now)
				assert.True(t, locked, "the bad model is locked")
				_, _, locked = f.cfg.Lockouts.LockedAt("openai", "k1", "good", now)
				assert.False(t, locked)
				var scope lockout.Scope
				for _, l := range f.cfg.Lockouts.Snapshot() {
					if l.Provider == "openai" && l.Connection == "k1" {
						scope = l.Scope
					}
				}
				assert.Equal(t, lockout.ScopeExact, scope)

				// A later request for the good model on the same key is served.
				res, err = f.router.Do(context.Background(), combo.Request{Combo: &combo.Combo{Name: "g",
					Targets: []combo.Target{target("openai", "k1", "good")}}}, send)
				require.NoError(t, err)
				res.Response.Body.Close()
			})
		})
	}
}

// errConnRefused is a transport failure before any response.
var errConnRefused = fmt.Errorf("dial tcp 10.0.0.1:443: %w", syscall.ECONNREFUSED)

// Combo contract 6a and D14: a transport failure before any response is
// sent again to the same target once, after retryDelay (default 2 s); an
// HTTP status never is. MaxRetries 0 turns the retry off; the pause ends
// with the caller's context.
func TestSameTargetRetryCoversTransportFailuresOnly(t *testing.T) {
	run := func(t *testing.T, set combo.Settings, script map[string][]error, status map[string]int, ctx context.Context) ([]string, *combo.Result, time.Duration, error) {
		f := newFleet(t, "openai")
		var calls []string
		n := map[string]int{}
		send := func(ctx context.Context, tg *combo.Target) (*http.Response, error) {
			calls = append(calls, tg.Connection)
			i := n[tg.Connection]
			n[tg.Connection]++
			if errs := script[tg.Connection]; i < len(errs) && errs[i] != nil {
				return nil, errs[i]
			}
			if s := status[tg.Connection]; s != 0 {
				return &http.Response{StatusCode: s, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{"error":{"message":"down"}}`))}, nil
			}
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok"))}, nil
		}
		c := &combo.Combo{Name: "r", Targets: []combo.Target{target("openai", "k1", "m"), target("openai", "k2", "m")}, Settings: set}
		start := time.Now()
		res, err := f.router.Do(ctx, combo.Request{Combo: c}, send)
		if err == nil {
			res.Response.Body.Close()
		}
		return calls, res, time.Since(start), err
	}
	t.Run("refused then served after 2 s", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			calls, res, elapsed, err := run(t, combo.Settings{}, map[string][]error{"k1": {errConnRefused}}, nil, context.Background())
			require.NoError(t, err)
			assert.Equal(t, []string{"k1", "k1"}, calls)
			assert.Equal(t, "k1", res.Target.Connection)
			assert.Equal(t, 2*time.Second, elapsed)
			require.Len(t, res.Attempts, 2)
			assert.ErrorIs(t, res.Attempts[0].Err, syscall.ECONNREFUSED)
		})
	})
	t.Run("retried once only, then the next target", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			calls, res, elapsed, err := run(t, combo.Settings{RetryDelay: new(500 * time.Millisecond)},
				map[string][]error{"k1": {errConnRefused, errConnRefused, errConnRefused}}, nil, context.Background())
			require.NoError(t, err)
			assert.Equal(t, []string{"k1", "k1", "k2"}, calls)
			assert.Equal(t, "k2", res.Target.Connection)
			assert.Equal(t, 500*time.Millisecond, elapsed)
		})
	})
	t.Run("a 503 is not retried on the same target", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			calls, res, elapsed, err := run(t, combo.Settings{}, nil, map[string]int{"k1": 503}, context.Background())
			require.NoError(t, err)
			assert.Equal(t, []string{"k1", "k2"}, calls)
			assert.Equal(t, "k2", res.Target.Connection)
			assert.Equal(t, time.Duration(0), elapsed)
		})
	})
	t.Run("MaxRetries 0 is off", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			calls, _, elapsed, err := run(t, combo.Settings{MaxRetries: new(0)}, map[string][]error{"k1": {errConnRefused}}, nil, context.Background())
			require.NoError(t, err)
			assert.Equal(t, []string{"k1", "k2"}, calls)
			assert.Equal(t, time.Duration(0), elapsed)
		})
	})
	t.Run("the pause ends with the caller", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(time.Second, cancel)
			calls, _, elapsed, err := run(t, combo.Settings{}, map[string][]error{"k1": {errConnRefused}}, nil, ctx)
			assert.ErrorIs(t, err, context.Canceled)
			assert.Equal(t, []string{"k1"}, calls)
			assert.Equal(t, time.Second, elapsed)
		})
	})
	t.Run("no retry past the caller's deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			calls, res, elapsed, err := run(t, combo.Settings{}, map[string][]error{"k1": {errConnRefused}}, nil, ctx)
			require.NoError(t, err)
			assert.Equal(t, []string{"k1", "k2"}, calls, "the 2 s pause would pass the deadline: move on")
			assert.Equal(t, "k2", res.Target.Connection)
			assert.Equal(t, time.Duration(0), elapsed)
		})
	})
	t.Run("the retry counts against MaxAttempts", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			calls, _, _, err := run(t, combo.Settings{MaxAttempts: 1}, map[string][]error{"k1": {errConnRefused}}, nil, context.Background())
			var ue *combo.Error
			require.ErrorAs(t, err, &ue)
			assert.Equal(t, []string{"k1"}, calls)
		})
	})
}

// affinityReq is the pin request the router makes for session s on
// provider p.
func affinityReq(p, s string) affinity.Request {
	key, _ := affinity.NewKey("session", s)
	return affinity.Request{Provider: p, Key: key}
}
