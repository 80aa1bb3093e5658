package combo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lease/leasetest"
	"github.com/routeguard/routeguard/lockout"
	"github.com/routeguard/routeguard/queue"
	"github.com/routeguard/routeguard/watchdog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fleet is a set of fake providers, one upstream each, and a router with
// every layer on.
type fleet struct {
	up     map[string]*combotest.Upstream
	router *combo.Router
	cfg    combo.Config
}

func newFleet(t *testing.T, providers ...string) *fleet {
	t.Helper()
	f := &fleet{up: map[string]*combotest.Upstream{}}
	for _, p := range providers {
		u := combotest.New()
		t.Cleanup(u.Close)
		f.up[p] = u
	}
	f.cfg = combo.Config{
		Breakers:  breaker.NewSet(breaker.Config{}),
		Cooldowns: cooldown.New(cooldown.Config{}),
		Lockouts:  lockout.New(lockout.Config{Enabled: true}),
		Pins:      affinity.New(affinity.Config{TTL: time.Hour}),
		Leases:    lease.New(lease.Config{}),
		Queue:     queue.New(queue.Config{}),
	}
	f.router = combo.New(f.cfg)
	return f
}

// rebuild makes a new router after f.cfg changed.
func (f *fleet) rebuild() { f.router = combo.New(f.cfg) }

// send dispatches to the target's provider upstream with the connection id
// as bearer token and the model in the path.
func (f *fleet) send(ctx context.Context, t *combo.Target) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		"http://"+t.Provider+".test/v1/chat/completions?model="+t.Model, strings.NewReader(`{}`))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+t.Connection)
	return f.up[t.Provider].Transport().RoundTrip(req)
}

func (f *fleet) do(t *testing.T, c *combo.Combo, opts ...func(*combo.Request)) (*combo.Result, error) {
	t.Helper()
	req := combo.Request{Combo: c}
	for _, o := range opts {
		o(&req)
	}
	res, err := f.router.Do(context.Background(), req, f.send)
	if err == nil {
		_, _ = io.Copy(io.Discard, res.Response.Body)
		res.Response.Body.Close()
	}
	return res, err
}

func outcomes(res *combo.Result) []string {
	var out []string
	for _, a := range res.Attempts {
		s := a.Target.Provider + "/" + a.Target.Connection + "/" + a.Target.Model + ":" + string(a.Outcome)
		if a.Status != 0 {
			s += ":" + http.StatusText(a.Status)
		}
		if a.Reason != "" {
			s += ":" + string(a.Reason)
		}
		out = append(out, s)
	}
	return out
}

func target(p, c, m string) combo.Target {
	return combo.Target{Provider: p, Connection: c, Model: m}
}

func TestPriorityFallsBackToNextTarget(t *testing.T) {
	f := newFleet(t, "openai", "anthropic")
	f.up["openai"].Script("k1", combotest.Error(500, "boom"))
	c := &combo.Combo{Name: "smart", Targets: []combo.Target{target("openai", "k1", "gpt-4o"), target("anthropic", "a1", "claude")}}
	res, err := f.do(t, c)
	require.NoError(t, err)
	assert.Equal(t, "anthropic", res.Target.Provider)
	assert.Equal(t, []string{
		"openai/k1/gpt-4o:failed:Internal Server Error",
		"anthropic/a1/claude:succeeded:OK",
	}, outcomes(res))
}

func TestOpenBreakerMovesTrafficWithoutTouchingProvider(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "openai", "anthropic")
		f.cfg.Lockouts = nil // a locked model would keep traffic away before the breaker opens
		f.rebuild()
		f.up["openai"].Script("", combotest.Error(503, "unavailable"))
		c := &combo.Combo{Name: "smart", Targets: []combo.Target{target("openai", "", "gpt-4o"), target("anthropic", "a1", "claude")}}
		// APIKey profile: open at 12 failures.
		for i := range 12 {
			res, err := f.do(t, c)
			require.NoError(t, err, "request %d", i)
			assert.Equal(t, "anthropic", res.Target.Provider)
		}
		require.Equal(t, 12, f.up["openai"].Total())
		s, wait := f.cfg.Breakers.StateAt("openai", time.Now())
		require.Equal(t, breaker.Open, s)
		assert.Equal(t, 30*time.Second, wait)

		res, err := f.do(t, c)
		require.NoError(t, err)
		assert.Equal(t, []string{"anthropic/a1/claude:succeeded:OK"}, outcomes(res))
		assert.Equal(t, 12, f.up["openai"].Total(), "the open provider is not called")

		// After the reset time one probe goes through and closes it.
		time.Sleep(30 * time.Second)
		f.up["openai"].Script("", combotest.OK("back"))
		res, err = f.do(t, c)
		require.NoError(t, err)
		assert.Equal(t, "openai", res.Target.Provider)
		s, _ = f.cfg.Breakers.StateAt("openai", time.Now())
		assert.Equal(t, breaker.Closed, s)
	})
}

func TestRetryAfterCoolsOneKeyWhileSiblingServes(t *testing.T) {
	f := newFleet(t, "openai")
	f.up["openai"].Script("k1", combotest.RateLimited(20*time.Second))
	c := &combo.Combo{Name: "keys", Targets: []combo.Target{target("openai", "k1", "gpt-4o"), target("openai", "k2", "gpt-4o")}}
	res, err := f.do(t, c)
	require.NoError(t, err)
	assert.Equal(t, "k2", res.Target.Connection)

	st := f.cfg.Cooldowns.Status("k1")
	assert.Equal(t, cooldown.Cooling, st.State)
	assert.InDelta(t, 20, time.Until(st.Until).Seconds(), 1)

	res, err = f.do(t, c)
	require.NoError(t, err)
	assert.Equal(t, "k2", res.Target.Connection)
	assert.Equal(t, 1, f.up["openai"].Count("k1"), "the cooling key is not called again")
	assert.Equal(t, 2, f.up["openai"].Count("k2"))
	require.Len(t, res.Excluded, 1, "the result names what was kept out")
	x := res.Excluded[0]
	assert.Equal(t, "k1", x.Connection)
	assert.Equal(t, combo.ReasonModelLockout, x.Reason, "a 429 also locks the model, which is asked first")
	assert.InDelta(t, 20, x.RetryAfter.Seconds(), 1)
}

func TestNotFoundLocksOneModelOnly(t *testing.T) {
	f := newFleet(t, "openai")
	f.up["openai"].Handle("k1", func(c combotest.Call) combotest.Reply {
		if strings.Contains(c.Header.Get("X-Model"), "retired") {
			return combotest.Error(404, "model not found")
		}
		return combotest.OK("fine")
	})
	send := func(ctx context.Context, t *combo.Target) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://openai.test/v1/chat/completions", nil)
		req.Header.Set("Authorization", "Bearer "+t.Connection)
		req.Header.Set("X-Model", t.Model)
		return f.up["openai"].Transport().RoundTrip(req)
	}
	old := &combo.Combo{Name: "old", Targets: []combo.Target{target("openai", "k1", "retired-1")}}
	_, err := f.router.Do(context.Background(), combo.Request{Combo: old}, send)
	var ue *combo.Error
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, 404, ue.Status)

	_, _, locked := f.cfg.Lockouts.Locked("openai", "k1", "retired-1")
	assert.True(t, locked, "the model is locked")
	assert.Equal(t, cooldown.Available, f.cfg.Cooldowns.Status("k1").State, "the connection is not cooled")

	fresh := &combo.Combo{Name: "new", Targets: []combo.Target{target("openai", "k1", "gpt-4o")}}
	res, err := f.router.Do(context.Background(), combo.Request{Combo: fresh}, send)
	require.NoError(t, err)
	res.Response.Body.Close()
	assert.Equal(t, "gpt-4o", res.Target.Model)

	_, err = f.router.Do(context.Background(), combo.Request{Combo: old}, send)
	assert.ErrorIs(t, err, combo.ErrAllCoolingDown)
	assert.Equal(t, 2, f.up["openai"].Count("k1"), "the locked model is not sent again")
}

func TestAgentrouterQuotaIsRestatedTo429(t *testing.T) {
	f := newFleet(t, "agentrouter", "openai")
	f.up["agentrouter"].Script("", combotest.Error(403, "额度不足, please top up"))
	c := &combo.Combo{Name: "ar", Targets: []combo.Target{target("agentrouter", "r1", "claude"), target("openai", "k1", "gpt-4o")}}
	res, err := f.do(t, c)
	require.NoError(t, err)
	require.Len(t, res.Attempts, 2)
	assert.Equal(t, 429, res.Attempts[0].Status, "403 restated to 429")
	assert.Equal(t, "quota_exhausted", res.Attempts[0].Code)
	assert.Equal(t, "openai", res.Target.Provider)
	assert.Equal(t, cooldown.Cooling, f.cfg.Cooldowns.Status("r1").State, "a quota 429, not a ban: the key cools")
}

func TestBadRequestDoesNotFallBack(t *testing.T) {
	f := newFleet(t, "openai", "anthropic")
	f.up["openai"].Script("", combotest.Error(400, "missing field messages"))
	c := &combo.Combo{Name: "x", Targets: []combo.Target{target("openai", "k1", "gpt-4o"), target("anthropic", "a1", "claude")}}
	_, err := f.do(t, c)
	var ue *combo.Error
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, 400, ue.Status)
	assert.Contains(t, string(ue.Body), "missing field")
	assert.Equal(t, 0, f.up["anthropic"].Total())
}

func TestAllFailedReturnsLastUpstreamAnswer(t *testing.T) {
	f := newFleet(t, "openai", "anthropic")
	f.up["openai"].Script("", combotest.Error(500, "a"))
	f.up["anthropic"].Script("", combotest.Error(502, "b"))
	c := &combo.Combo{Name: "x", Targets: []combo.Target{target("openai", "k1", "gpt-4o"), target("anthropic", "a1", "claude")}}
	res, err := f.do(t, c)
	var ue *combo.Error
	require.ErrorAs(t, err, &ue)
	assert.ErrorIs(t, err, combo.ErrUpstream)
	assert.Equal(t, 502, ue.Status)
	assert.Len(t, res.Attempts, 2)
	assert.Len(t, ue.Attempts, 2)
}

// Terminal answers (combo contract 6e, scenarios 1, 2, 5, 6 and 4).
func TestTerminalAnswers(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name       string
		setup      func(f *fleet)
		wantStatus int
		wantRetry  string
		wantReason map[string]combo.Reason
	}{
		{
			name: "both models locked",
			setup: func(f *fleet) {
				f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "openai", Connection: "a", Model: "m", Status: 429, Cooldown: 60 * time.Second}, now)
				f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "claude", Connection: "b", Model: "m", Status: 429, Cooldown: 120 * time.Second}, now)
			},
			wantStatus: 503, wantRetry: "60",
			wantReason: map[string]combo.Reason{"openai": combo.ReasonModelLockout, "claude": combo.ReasonModelLockout},
		},
		{
			name: "locked and unavailable",
			setup: func(f *fleet) {
				f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "openai", Connection: "a", Model: "m", Status: 429, Cooldown: 60 * time.Second}, now)
				f.cfg.Cooldowns.FailAt("b", cooldown.Failure{Status: 401}, now)
			},
			wantStatus: 503, wantRetry: "60",
			wantReason: map[string]combo.Reason{"openai": combo.ReasonModelLockout, "claude": combo.ReasonUnavailable},
		},
		{
			name: "both connections cooling 5 s",
			setup: func(f *fleet) {
				f.cfg.Cooldowns.FailAt("a", cooldown.Failure{Status: 429, Cooldown: 5 * time.Second}, now)
				f.cfg.Cooldowns.FailAt("b", cooldown.Failure{Status: 429, Cooldown: 5 * time.Second}, now)
			},
			wantStatus: 503, wantRetry: "5",
			wantReason: map[string]combo.Reason{"openai": combo.ReasonConnectionCooldown, "claude": combo.ReasonConnectionCooldown},
		},
		{
			name: "both unavailable",
			setup: func(f *fleet) {
				f.cfg.Cooldowns.FailAt("a", cooldown.Failure{Status: 401}, now)
				f.cfg.Cooldowns.FailAt("b", cooldown.Failure{Status: 403, Permanent: true}, now)
			},
			wantStatus: 404,
			wantReason: map[string]combo.Reason{"openai": combo.ReasonUnavailable, "claude": combo.ReasonUnavailable},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFleet(t, "openai", "claude")
			f.cfg.Now = func() time.Time { return now }
			f.rebuild()
			tt.setup(f)
			c := &combo.Combo{Name: "w", Targets: []combo.Target{target("openai", "a", "m"), target("claude", "b", "m")},
				Settings: combo.Settings{CooldownWait: combo.CooldownWait{Disabled: true}}}
			res, err := f.do(t, c)
			var te *combo.Error
			require.ErrorAs(t, err, &te)
			assert.Equal(t, tt.wantStatus, te.Status)
			assert.Equal(t, 0, f.up["openai"].Total()+f.up["claude"].Total(), "no dispatch")
			assert.Empty(t, res.Attempts)
			assert.Equal(t, 2, te.PoolSize)
			assert.Equal(t, 0, te.Attempted)
			got := map[string]combo.Reason{}
			for _, x := range te.Excluded {
				got[x.Provider] = x.Reason
			}
			assert.Equal(t, tt.wantReason, got)
			resp := te.Response(nil)
			assert.Equal(t, tt.wantRetry, resp.Header.Get("Retry-After"))
			assert.Equal(t, te.TerminalReason, resp.Header.Get("X-Omniroute-Combo-Terminal-Reason"))
			for _, p := range []string{"openai", "claude"} {
				s, _ := f.cfg.Breakers.StateAt(p, time.Now())
				assert.Equal(t, breaker.Closed, s)
			}
		})
	}
}

func TestSessionStaysOnItsConnection(t *testing.T) {
	f := newFleet(t, "openai")
	c := &combo.Combo{Name: "rr", Strategy: combo.StrategyRoundRobin,
		Targets: []combo.Target{target("openai", "k1", "m"), target("openai", "k2", "m"), target("openai", "k3", "m")}}
	session := func(r *combo.Request) { r.Session = "agent-42" }
	first, err := f.do(t, c, session)
	require.NoError(t, err)
	for i := range 5 {
		res, err := f.do(t, c, session)
		require.NoError(t, err)
		assert.Equal(t, first.Target.Connection, res.Target.Connection, "request %d", i)
	}
	// Without a session, round-robin spreads the load.
	seen := map[string]bool{}
	for range 3 {
		res, err := f.do(t, c)
		require.NoError(t, err)
		seen[res.Target.Connection] = true
	}
	assert.Len(t, seen, 3)
}

func TestStaleLeaseRefusedBeforeUpstream(t *testing.T) {
	f := newFleet(t, "openai")
	owner := leasetest.Owner('A')
	l, err := f.cfg.Leases.AcquireAt(context.Background(), lease.Holder{Owner: lease.HashOwner(owner), APIKeyID: "kid"},
		"openai", []string{"k2"}, time.Now())
	require.NoError(t, err)
	require.Equal(t, "k2", l.Connection)
	c := &combo.Combo{Name: "x", Targets: []combo.Target{target("openai", "k1", "m"), target("openai", "k2", "m")}}

	res, err := f.do(t, c, func(r *combo.Request) {
		r.Lease = &combo.LeaseClaim{Owner: owner, APIKeyID: "kid", Generation: int64(l.Generation)}
	})
	require.NoError(t, err)
	assert.Equal(t, "k2", res.Target.Connection, "the lease restricts to its connection")

	_, err = f.do(t, c, func(r *combo.Request) {
		r.Lease = &combo.LeaseClaim{Owner: owner, APIKeyID: "kid", Generation: int64(l.Generation) + 1}
	})
	var le *lease.Error
	require.ErrorAs(t, err, &le)
	assert.Equal(t, 1, f.up["openai"].Total(), "no upstream call for a stale generation")
}

func TestSlowStreamCutBeforeCommitCompletesElsewhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "slow", "fast")
		f.cfg.Watchdog = watchdog.Config{Throughput: true}
		f.rebuild()
		beats := make([]combotest.Event, 200)
		for i := range beats {
			beats[i] = combotest.Heartbeat()
		}
		f.up["slow"].Script("", combotest.SSE(time.Second, beats...))
		f.up["fast"].Script("", combotest.TextStream(10*time.Millisecond, "Hello", " world"))
		c := &combo.Combo{Name: "s", Targets: []combo.Target{target("slow", "s1", "m"), target("fast", "f1", "m")}}
		start := time.Now()
		res, err := f.router.Do(context.Background(), combo.Request{Combo: c}, f.send)
		require.NoError(t, err)
		body, err := io.ReadAll(res.Response.Body)
		require.NoError(t, err)
		res.Response.Body.Close()
		assert.Equal(t, "fast", res.Target.Provider)
		assert.Contains(t, string(body), "Hello")
		assert.NotContains(t, string(body), "ping", "nothing of the cut stream reaches the caller")
		require.Len(t, res.Attempts, 2)
		assert.Equal(t, combo.OutcomeFailed, res.Attempts[0].Outcome)
		var we *watchdog.Error
		assert.ErrorAs(t, res.Attempts[0].Err, &we)
		// Warm-up 30 s plus one full 30 s window before the verdict.
		assert.InDelta(t, 60, time.Since(start).Seconds(), 2)
	})
}

func TestErrorEventInsideStreamFallsBack(t *testing.T) {
	f := newFleet(t, "a", "b")
	f.up["a"].Script("", combotest.SSE(0, combotest.ErrorEvent("rate_limit_exceeded", "Rate limit reached, retry later")))
	c := &combo.Combo{Name: "s", Targets: []combo.Target{target("a", "a1", "m"), target("b", "b1", "m")}}
	res, err := f.do(t, c)
	require.NoError(t, err)
	assert.Equal(t, "b", res.Target.Provider)
	assert.Equal(t, combo.OutcomeFailed, res.Attempts[0].Outcome)
}

func TestCooldownAwareRetryWaitsOutShortLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "openai")
		f.rebuild()
		now := time.Now()
		f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "openai", Connection: "k1", Model: "m",
			Status: 429, Reason: lockout.ReasonRateLimited, Cooldown: 5 * time.Second}, now)
		c := &combo.Combo{Name: "x", Targets: []combo.Target{target("openai", "k1", "m")}}
		start := time.Now()
		res, err := f.do(t, c)
		require.NoError(t, err)
		assert.Equal(t, 5*time.Second+50*time.Millisecond, time.Since(start))
		assert.Equal(t, "k1", res.Target.Connection)

		// Disabled: the 503 comes at once.
		f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "openai", Connection: "k1", Model: "m",
			Status: 429, Reason: lockout.ReasonRateLimited, Cooldown: 5 * time.Second}, time.Now())
		c.Settings.CooldownWait.Disabled = true
		start = time.Now()
		_, err = f.do(t, c)
		assert.ErrorIs(t, err, combo.ErrAllCoolingDown)
		assert.Equal(t, time.Duration(0), time.Since(start))
	})
}

func TestQuotaLockIsNotWaitedOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "openai")
		f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "openai", Connection: "k1", Model: "m",
			Status: 429, Reason: lockout.ReasonQuotaExhausted, Cooldown: 5 * time.Second}, time.Now())
		c := &combo.Combo{Name: "x", Targets: []combo.Target{target("openai", "k1", "m")}}
		start := time.Now()
		_, err := f.do(t, c)
		assert.ErrorIs(t, err, combo.ErrAllCoolingDown)
		assert.Equal(t, time.Duration(0), time.Since(start))
	})
}

func TestCallerCancellationStopsAndBlamesNoOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "openai", "anthropic")
		f.up["openai"].Script("", combotest.Hang())
		c := &combo.Combo{Name: "x", Targets: []combo.Target{target("openai", "k1", "m"), target("anthropic", "a1", "m")}}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := f.router.Do(ctx, combo.Request{Combo: c}, f.send)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 0, f.up["anthropic"].Total())
		assert.Equal(t, cooldown.Available, f.cfg.Cooldowns.Status("k1").State)
	})
}

func TestTargetTimeoutMovesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "openai", "anthropic")
		f.up["openai"].Script("", combotest.Hang())
		c := &combo.Combo{Name: "x", Settings: combo.Settings{TargetTimeout: 2 * time.Second},
			Targets: []combo.Target{target("openai", "k1", "m"), target("anthropic", "a1", "m")}}
		start := time.Now()
		res, err := f.do(t, c)
		require.NoError(t, err)
		assert.Equal(t, "anthropic", res.Target.Provider)
		assert.Equal(t, 2*time.Second, time.Since(start))
		assert.Equal(t, 504, res.Attempts[0].Status)
	})
}

func TestExhaustedConnectionSkippedForRestOfRequest(t *testing.T) {
	f := newFleet(t, "openai")
	f.cfg.Cooldowns = nil // only the per-request sets remain
	f.cfg.Lockouts = nil
	f.rebuild()
	f.up["openai"].Script("", combotest.Error(429, "You exceeded your current quota, please check your plan"))
	c := &combo.Combo{Name: "x", Targets: []combo.Target{target("openai", "c1", "m"), target("openai", "c2", "m")}}
	res, err := f.do(t, c)
	require.Error(t, err)
	assert.Equal(t, 1, f.up["openai"].Total(), "c2 is skipped: the provider is exhausted this request")
	assert.Equal(t, []string{"openai/c1/m:failed:Too Many Requests", "openai/c2/m:skipped:exhausted"}, outcomes(res))
	assert.Equal(t, "quota_exhausted", res.Attempts[0].Code)
	assert.Equal(t, "provider openai marked exhausted this request", res.Attempts[1].Code)
}

// A connection that failed with a 403 is skipped for the rest of the
// request with its own message, while its sibling still serves.
func TestForbiddenConnectionSkippedSiblingServes(t *testing.T) {
	f := newFleet(t, "anthropic")
	f.cfg.Cooldowns, f.cfg.Lockouts = nil, nil
	f.rebuild()
	f.up["anthropic"].Script("c9", combotest.Error(403, "forbidden"))
	c := &combo.Combo{Name: "x", Targets: []combo.Target{
		target("anthropic", "c9", "m1"), target("anthropic", "c9", "m2"), target("anthropic", "c10", "m1")}}
	res, err := f.do(t, c)
	require.NoError(t, err)
	assert.Equal(t, "c10", res.Target.Connection)
	assert.Equal(t, []string{
		"anthropic/c9/m1:failed:Forbidden",
		"anthropic/c9/m2:skipped:exhausted",
		"anthropic/c10/m1:succeeded:OK",
	}, outcomes(res))
	assert.Equal(t, "connection c9 for provider anthropic had connection error", res.Attempts[1].Code)
	assert.Equal(t, 1, f.up["anthropic"].Count("c9"))
}

// An empty pool is logged once as a warning that lists every exclusion.
func TestTerminalAnswerIsLogged(t *testing.T) {
	now := time.Now()
	var buf bytes.Buffer
	f := newFleet(t, "openai", "claude")
	f.cfg.Now = func() time.Time { return now }
	f.cfg.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	f.rebuild()
	f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "openai", Connection: "a", Model: "m", Status: 429,
		Cooldown: 57400 * time.Millisecond}, now)
	f.cfg.Cooldowns.FailAt("b", cooldown.Failure{Status: 401}, now)
	c := &combo.Combo{Name: "w", Targets: []combo.Target{target("openai", "a", "m"), target("claude", "b", "m")},
		Settings: combo.Settings{CooldownWait: combo.CooldownWait{Disabled: true}}}
	_, err := f.do(t, c)
	var te *combo.Error
	require.ErrorAs(t, err, &te)
	assert.Equal(t, 58*time.Second, te.RetryAfter)
	out := buf.String()
	assert.Equal(t, 1, strings.Count(out, "level=WARN"), out)
	assert.Contains(t, out, "every target excluded before dispatch — openai/m: model_lockout (58s), claude/m: unavailable")
	assert.Contains(t, out, "terminal_reason=all_targets_cooling_down")
}

func TestUnknownStrategy(t *testing.T) {
	f := newFleet(t, "openai")
	_, err := f.do(t, &combo.Combo{Name: "x", Strategy: "fastest", Targets: []combo.Target{target("openai", "k", "m")}})
	var se *combo.Error
	require.ErrorAs(t, err, &se)
	assert.Contains(t, err.Error(), `"fastest"`)
	assert.Contains(t, err.Error(), "priority")
}

func TestEmptyComboIsNotExecutable(t *testing.T) {
	f := newFleet(t)
	_, err := f.do(t, &combo.Combo{Name: "none"})
	assert.True(t, errors.Is(err, combo.ErrNoExecutableTargets))
}

func TestLeasedConnectionIsHeldFromOthers(t *testing.T) {
	f := newFleet(t, "openai")
	owner := leasetest.Owner('A')
	_, err := f.cfg.Leases.AcquireAt(context.Background(), lease.Holder{Owner: lease.HashOwner(owner), APIKeyID: "kid"},
		"openai", []string{"k1"}, time.Now())
	require.NoError(t, err)
	c := &combo.Combo{Name: "x", Targets: []combo.Target{target("openai", "k1", "m"), target("openai", "k2", "m")}}
	res, err := f.do(t, c)
	require.NoError(t, err)
	assert.Equal(t, "k2", res.Target.Connection)
	assert.Equal(t, 0, f.up["openai"].Count("k1"))

	only := &combo.Combo{Name: "y", Targets: []combo.Target{target("openai", "k1", "m")}}
	_, err = f.do(t, only)
	var te *combo.Error
	require.ErrorAs(t, err, &te)
	assert.Equal(t, combo.ReasonLeaseHeld, te.Excluded[0].Reason)
	assert.Equal(t, 503, te.Status)
}

func TestQueueFullSkipsToSibling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "openai")
		f.cfg.Queue = queue.New(queue.Config{MaxConcurrency: 1, MaxQueueDepth: 1})
		f.rebuild()
		f.up["openai"].Script("k1", combotest.OK("slow").After(10*time.Second))
		c := &combo.Combo{Name: "x", Targets: []combo.Target{target("openai", "k1", "m"), target("openai", "k2", "m")}}
		// Two requests hold and queue on k1; the third finds k1 full and goes to k2.
		done := make(chan string, 2)
		for range 2 {
			go func() {
				res, err := f.do(t, c)
				if err != nil {
					done <- err.Error()
					return
				}
				done <- res.Target.Connection
			}()
		}
		synctest.Wait()
		res, err := f.do(t, c)
		require.NoError(t, err)
		assert.Equal(t, "k2", res.Target.Connection)
		assert.Equal(t, []string{"openai/k2/m:succeeded:OK"}, outcomes(res), "k1 is screened out before dispatch")
		assert.Equal(t, "k1", <-done)
		assert.Equal(t, "k1", <-done)
	})
}

func TestTransportRoutesPlainHTTPCalls(t *testing.T) {
	f := newFleet(t, "openai", "anthropic")
	f.up["openai"].Script("", combotest.Error(503, "down"))
	c := &combo.Combo{Name: "smart", Targets: []combo.Target{target("openai", "k1", "gpt-4o"), target("anthropic", "a1", "claude")}}
	tr := &combo.Transport{
		Router: f.router,
		Combo:  func(*http.Request) (*combo.Combo, error) { return c, nil },
		Rewrite: func(req *http.Request, t *combo.Target) (*http.Request, error) {
			req.URL.Host = t.Provider + ".test"
			req.Header.Set("Authorization", "Bearer "+t.Connection)
			return req, nil
		},
		Base: roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			return f.up[strings.TrimSuffix(req.URL.Host, ".test")].Transport().RoundTrip(req)
		}),
	}
	client := &http.Client{Transport: tr}
	resp, err := client.Post("http://gateway/v1/chat/completions", "application/json", strings.NewReader(`{"model":"smart"}`))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Contains(t, string(body), `"content":"ok"`)
	calls := f.up["anthropic"].Calls()
	require.Len(t, calls, 1)
	assert.Equal(t, `{"model":"smart"}`, string(calls[0].Body), "the body is replayed for the fallback")

	// Everything down: the caller gets the last upstream answer, not an error.
	f.up["anthropic"].Script("", combotest.Error(502, "also down"))
	resp, err = client.Post("http://gateway/v1/chat/completions", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 502, resp.StatusCode)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// breakerOnly is a fleet of one provider whose breaker has profile p, with
// no connection cooldowns nor model lockouts to keep traffic away first.
func breakerOnly(t *testing.T, provider string, p breaker.Profile) *fleet {
	f := newFleet(t, provider)
	f.cfg.Breakers = breaker.NewSet(breaker.Config{Profiles: map[string]breaker.Profile{provider: p}})
	f.cfg.Cooldowns, f.cfg.Lockouts = nil, nil
	f.rebuild()
	return f
}

// A target refused at dispatch (here: a half-open breaker whose one probe is
// still out) is a timed exclusion of the terminal answer, not a missing one.
func TestHalfOpenProbeInFlightAnswersCoolingDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := breakerOnly(t, "openai", breaker.Profile{OpenAt: 1, Reset: time.Second})
		f.up["openai"].Script("", combotest.Error(503, "unavailable"), combotest.Hang())
		c := &combo.Combo{Name: "solo", Targets: []combo.Target{target("openai", "k1", "m")}}

		_, err := f.do(t, c)
		require.ErrorIs(t, err, combo.ErrUpstream)
		time.Sleep(time.Second) // open → half-open

		ctx, cancel := context.WithCancel(context.Background())
		probe := make(chan error, 1)
		go func() {
			_, err := f.router.Do(ctx, combo.Request{Combo: c}, f.send)
			probe <- err
		}()
		synctest.Wait() // the probe hangs upstream

		res, err := f.do(t, c)
		var te *combo.Error
		require.ErrorAs(t, err, &te)
		assert.Equal(t, combo.TerminalAllCoolingDown, te.Code)
		assert.Equal(t, 503, te.Status)
		require.Len(t, te.Excluded, 1)
		assert.Equal(t, combo.ReasonCircuitOpen, te.Excluded[0].Reason)
		assert.Equal(t, []string{"openai/k1/m:skipped:circuit_open"}, outcomes(res))
		assert.Equal(t, 2, f.up["openai"].Total(), "the refused request made no upstream call")

		cancel()
		assert.ErrorIs(t, <-probe, context.Canceled)
	})
}

// The per-target timer and the stream watchdog may end one attempt at the
// same instant; the router must not race on which of them did.
func TestTargetTimeoutAndWatchdogAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "slow", "fast")
		f.cfg.Watchdog = watchdog.Config{IdleTimeout: 100 * time.Millisecond}
		f.rebuild()
		f.up["slow"].Script("", combotest.Reply{Status: 200, Stream: &combotest.Stream{Events: []combotest.Event{combotest.Heartbeat()}, HangAfter: true}})
		f.up["fast"].Script("", combotest.TextStream(0, "hel", "lo"))
		c := &combo.Combo{Name: "s", Settings: combo.Settings{TargetTimeout: 100 * time.Millisecond},
			Targets: []combo.Target{target("slow", "s1", "m"), target("fast", "f1", "m")}}
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				res, err := f.do(t, c)
				if assert.NoError(t, err) {
					assert.Equal(t, "fast", res.Target.Provider)
				}
			})
		}
		wg.Wait()
	})
}

// With no watchdog guard configured, a stream is still handed over at its
// first useful output, not held until it ends.
func TestStreamCommitsAtFirstTextWithoutGuards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "a")
		f.up["a"].Script("", combotest.Reply{Status: 200, Stream: &combotest.Stream{
			Events: []combotest.Event{combotest.Heartbeat(), combotest.ChatDelta("Hello")}, HangAfter: true}})
		c := &combo.Combo{Name: "s", Targets: []combo.Target{target("a", "a1", "m")}}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		start := time.Now()
		res, err := f.router.Do(ctx, combo.Request{Combo: c}, f.send)
		require.NoError(t, err)
		assert.Zero(t, time.Since(start), "handed over at once, while the upstream still streams")
		buf := make([]byte, 512)
		n, err := res.Response.Body.Read(buf)
		require.NoError(t, err)
		assert.Contains(t, string(buf[:n]), "Hello")
		cancel()
		_, _ = io.Copy(io.Discard, res.Response.Body)
		res.Response.Body.Close()
	})
}

// The router reports each failure with its connection: one connection's
// failures within 5 s count once, so a single bad key cannot open its
// provider's breaker alone in a burst; failures of several keys do.
func TestBreakerCountsOneConnectionOncePerFiveSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := breakerOnly(t, "openai", breaker.Profile{OpenAt: 3, Reset: time.Minute})
		f.up["openai"].Script("", combotest.Error(503, "unavailable"))
		failures := func() int { return f.cfg.Breakers.SnapshotAt(time.Now())[0].Failures }
		k1 := &combo.Combo{Name: "k1", Targets: []combo.Target{target("openai", "k1", "m")}}
		k2 := &combo.Combo{Name: "k2", Targets: []combo.Target{target("openai", "k2", "m")}}

		for range 3 {
			_, err := f.do(t, k1)
			require.ErrorIs(t, err, combo.ErrUpstream)
		}
		assert.Equal(t, 1, failures(), "three failures of k1 at once count once")
		_, err := f.do(t, k2)
		require.ErrorIs(t, err, combo.ErrUpstream)
		assert.Equal(t, 2, failures(), "k2 is another connection")
		time.Sleep(5 * time.Second)
		_, err = f.do(t, k1)
		require.ErrorIs(t, err, combo.ErrUpstream)
		s, _ := f.cfg.Breakers.StateAt("openai", time.Now())
		assert.Equal(t, breaker.Open, s, "k1 counts again after 5 s: the third failure opens")
		assert.Equal(t, 5, f.up["openai"].Total())
	})
}

// The cache-affinity hint beats session stickiness: a session pinned to k1
// goes to the connection the hint names.
func TestCacheHintBeatsSessionPin(t *testing.T) {
	f := newFleet(t, "openai")
	hinted := ""
	f.cfg.CacheHint = func(_ *combo.Request, t *combo.Target) float64 {
		if t.Connection == hinted {
			return 1
		}
		return 0
	}
	f.rebuild()
	c := &combo.Combo{Name: "cache", Strategy: combo.StrategyCacheOptimized,
		Targets: []combo.Target{target("openai", "k1", "m"), target("openai", "k2", "m")}}
	session := func(r *combo.Request) { r.Session = "agent-7" }
	res, err := f.do(t, c, session)
	require.NoError(t, err)
	require.Equal(t, "k1", res.Target.Connection, "no hint: declared order, and the session is pinned to k1")

	hinted = "k2"
	res, err = f.do(t, c, session)
	require.NoError(t, err)
	assert.Equal(t, "k2", res.Target.Connection, "the hinted connection goes first, ahead of the pin")
}

// Queue scenario 5: a quota-share request holds a slot of its first
// connection for the whole request; with the cap held and the queue full, a
// request goes on without a slot instead of failing.
func TestQuotaShareSlotFailsOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "openai")
		f.up["openai"].Script("", combotest.OK("slow").After(10*time.Second))
		c := &combo.Combo{Name: "qs", Strategy: combo.StrategyQuotaShare,
			Settings: combo.Settings{QueueDepth: 1},
			Targets:  []combo.Target{{Provider: "openai", Connection: "c1", Model: "m", MaxConcurrent: 1}}}
		done := make(chan time.Duration, 3)
		start := time.Now()
		for range 2 {
			go func() {
				_, err := f.do(t, c)
				assert.NoError(t, err)
				done <- time.Since(start)
			}()
			synctest.Wait()
		}
		assert.Equal(t, 1, f.up["openai"].Total(), "the second request waits for the slot")

		go func() {
			_, err := f.do(t, c)
			assert.NoError(t, err)
			done <- time.Since(start)
		}()
		synctest.Wait()
		assert.Equal(t, 2, f.up["openai"].Total(), "the queue is full: the third goes on without a slot")

		assert.Equal(t, 10*time.Second, <-done)
		assert.Equal(t, 10*time.Second, <-done)
		assert.Equal(t, 20*time.Second, <-done, "the waiter got the slot when the first finished")
		assert.Equal(t, 3, f.up["openai"].Total())
	})
}

// Round-robin caps each target at its connection's MaxConcurrent, else the
// combo's ConcurrencyPerModel; a target whose slot queue is full or whose
// wait times out is skipped like a full admission queue.
func TestRoundRobinPerTargetConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "openai")
		f.up["openai"].Script("", combotest.OK("slow").After(10*time.Second))
		c := &combo.Combo{Name: "rr", Strategy: combo.StrategyRoundRobin,
			Settings: combo.Settings{ConcurrencyPerModel: 1, QueueDepth: 1, QueueTimeout: time.Second},
			Targets:  []combo.Target{target("openai", "k1", "m")}}
		first := make(chan error, 1)
		go func() { _, err := f.do(t, c); first <- err }()
		synctest.Wait()
		waiter := make(chan error, 1)
		start := time.Now()
		go func() { _, err := f.do(t, c); waiter <- err }()
		synctest.Wait()

		res, err := f.do(t, c)
		var te *combo.Error
		require.ErrorAs(t, err, &te, "the slot queue is full")
		assert.Equal(t, combo.ReasonQueueFull, te.Excluded[0].Reason)
		assert.Equal(t, []string{"openai/k1/m:skipped:queue_full"}, outcomes(res))

		err = <-waiter
		require.ErrorAs(t, err, &te, "the waiter timed out")
		assert.Equal(t, time.Second, time.Since(start))
		assert.Equal(t, combo.ReasonQueueFull, te.Excluded[0].Reason)
		assert.NoError(t, <-first)
		assert.Equal(t, 1, f.up["openai"].Total())
	})
}

// An error event that is not JSON is still an error: its event name says so.
func TestPlainTextErrorEventInsideStreamFallsBack(t *testing.T) {
	f := newFleet(t, "a", "b")
	f.up["a"].Script("", combotest.SSE(0, combotest.Event{Raw: "event: error\ndata: upstream exploded\n\n"}))
	c := &combo.Combo{Name: "s", Targets: []combo.Target{target("a", "a1", "m"), target("b", "b1", "m")}}
	res, err := f.do(t, c)
	require.NoError(t, err)
	assert.Equal(t, "b", res.Target.Provider)
	assert.Equal(t, []string{
		"a/a1/m:failed:Internal Server Error",
		"b/b1/m:succeeded:OK",
	}, outcomes(res))
}

// Queue contract 3c, scenario 9: a 429 whose Retry-After locks the only
// model for 2 s is waited out (2 s + 50 ms) and dispatched again.
func TestCooldownWaitAfterUpstream429(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "openai")
		f.up["openai"].Script("k1", combotest.RateLimited(2*time.Second), combotest.OK("hi"))
		c := &combo.Combo{Name: "x", Targets: []combo.Target{target("openai", "k1", "m")}}
		start := time.Now()
		res, err := f.do(t, c)
		require.NoError(t, err)
		assert.Equal(t, 2*time.Second+50*time.Millisecond, time.Since(start))
		assert.Equal(t, []string{
			"openai/k1/m:failed:Too Many Requests",
			"openai/k1/m:succeeded:OK",
		}, outcomes(res))
		assert.Equal(t, 2, f.up["openai"].Total())
	})
}

// Queue contract 3c, scenario 10: with the wait turned off, a 429 is the
// answer after exactly one dispatch.
func TestCooldownWaitDisabledAnswers429(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "openai")
		f.up["openai"].Script("k1", combotest.RateLimited(2*time.Second), combotest.OK("hi"))
		c := &combo.Combo{Name: "x", Targets: []combo.Target{target("openai", "k1", "m")},
			Settings: combo.Settings{CooldownWait: combo.CooldownWait{Disabled: true}}}
		start := time.Now()
		res, err := f.do(t, c)
		var ue *combo.Error
		require.ErrorAs(t, err, &ue)
		assert.Equal(t, 429, ue.Status)
		assert.Equal(t, "rate_limit_exceeded", ue.Reason)
		assert.Equal(t, time.Duration(0), time.Since(start))
		assert.Equal(t, []string{"openai/k1/m:failed:Too Many Requests"}, outcomes(res))
		assert.Equal(t, 1, f.up["openai"].Total())
	})
}

// A caller that gives up during a cooldown wait stops it at once: no
// dispatch follows and the context's error is the answer.
func TestCooldownWaitStopsOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "openai")
		f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "openai", Connection: "k1", Model: "m",
			Status: 429, Reason: lockout.ReasonRateLimited, Cooldown: 5 * time.Second}, time.Now())
		c := &combo.Combo{Name: "x", Targets: []combo.Target{target("openai", "k1", "m")}}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		_, err := f.router.Do(ctx, combo.Request{Combo: c}, f.send)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, time.Second, time.Since(start))
		assert.Equal(t, 0, f.up["openai"].Total())
	})
}

// The wait is bounded: a lock longer than MaxWait is not waited out, and a
// request waits at most MaxAttempts times.
func TestCooldownWaitBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "openai")
		lock := func(d time.Duration) {
			f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "openai", Connection: "k1", Model: "m",
				Status: 429, Reason: lockout.ReasonRateLimited, Cooldown: d}, time.Now())
		}
		c := &combo.Combo{Name: "x", Targets: []combo.Target{target("openai", "k1", "m")},
			Settings: combo.Settings{CooldownWait: combo.CooldownWait{MaxWait: new(10 * time.Second), MaxAttempts: new(2)}}}

		lock(10 * time.Second) // 10 s + 50 ms > MaxWait
		start := time.Now()
		_, err := f.do(t, c)
		var te *combo.Error
		require.ErrorAs(t, err, &te)
		assert.Equal(t, 10*time.Second, te.RetryAfter)
		assert.Equal(t, time.Duration(0), time.Since(start))

		// Every dispatch meets a fresh 1 s lock: two waits, then the 429.
		f.cfg.Lockouts.Clear("openai", "k1", "m")
		f.up["openai"].Script("k1", combotest.RateLimited(time.Second))
		start = time.Now()
		res, err := f.do(t, c)
		var ue *combo.Error
		require.ErrorAs(t, err, &ue)
		assert.Equal(t, 429, ue.Status)
		assert.Equal(t, 3, f.up["openai"].Total(), "one dispatch, then one after each of the two waits")
		assert.Equal(t, 2*(time.Second+50*time.Millisecond), time.Since(start))
		assert.Len(t, res.Attempts, 3)

		// The budget bounds the total: 2 s allow one wait of 1.05 s, not two.
		f.cfg.Lockouts.Clear("openai", "k1", "m")
		f.cfg.Cooldowns.SucceedAt("k1", time.Now())
		c.Settings.CooldownWait = combo.CooldownWait{MaxWait: new(2 * time.Second), Budget: 2 * time.Second}
		start = time.Now()
		res, err = f.do(t, c)
		require.ErrorAs(t, err, &ue)
		assert.Equal(t, 429, ue.Status)
		assert.Equal(t, time.Second+50*time.Millisecond, time.Since(start))
		assert.Len(t, res.Attempts, 2)
	})
}

func TestSettingsNormalize(t *testing.T) {
	const s = time.Second
	wait := func(maxWait time.Duration, attempts int, budget time.Duration) combo.CooldownWait {
		return combo.CooldownWait{MaxWait: new(maxWait), MaxAttempts: new(attempts), Budget: budget}
	}
	base := func(timeout time.Duration, cw combo.CooldownWait) combo.Settings {
		return combo.Settings{MaxAttempts: 30, TargetTimeout: timeout, RequestTimeout: 10 * time.Minute, ConcurrencyPerModel: 3, QueueTimeout: 30 * s,
			QueueDepth: 20, MaxRetries: new(1), RetryDelay: new(2 * s), CooldownWait: cw,
			StreamRecovery: combo.StreamRecovery{MaxContinuations: 1}}
	}
	off := func(cw combo.CooldownWait) combo.CooldownWait { cw.Disabled = true; return cw }
	tests := []struct {
		name string
		in   combo.Settings
		want combo.Settings
	}{
		{"zero value means the defaults", combo.Settings{}, base(120*s, wait(90*s, 5, 300*s))},
		{"clamped to the maxima", combo.Settings{MaxAttempts: 500, ConcurrencyPerModel: 99, QueueDepth: 1000,
			MaxRetries: new(9), RetryDelay: new(time.Hour),
			CooldownWait: combo.CooldownWait{MaxWait: new(999999 * time.Millisecond), MaxAttempts: new(50), Budget: time.Hour}},
			func() combo.Settings {
				w := base(120*s, wait(300*s, 10, 300*s))
				w.MaxAttempts, w.ConcurrencyPerModel, w.QueueDepth = 200, 32, 100
				w.MaxRetries, w.RetryDelay = new(5), new(60*s)
				return w
			}()},
		{"budget never below the longest wait", combo.Settings{
			CooldownWait: combo.CooldownWait{MaxWait: new(5 * s), Budget: 100 * time.Millisecond}},
			base(120*s, wait(5*s, 5, 5*s))},
		{"waiting off keeps the plain timeout", combo.Settings{MaxAttempts: -1, StickyLimit: -3,
			CooldownWait: combo.CooldownWait{Disabled: true}},
			base(120*s, off(wait(90*s, 5, 300*s)))},
		{"an explicit timeout is kept", combo.Settings{TargetTimeout: 5 * s, StickyLimit: 4},
			func() combo.Settings { w := base(5*s, wait(90*s, 5, 300*s)); w.StickyLimit = 4; return w }()},
		{"negative retries clamp to off", combo.Settings{MaxRetries: new(-2), RetryDelay: new(-s)},
			func() combo.Settings {
				w := base(120*s, wait(90*s, 5, 300*s))
				w.MaxRetries, w.RetryDelay = new(0), new(time.Duration(0))
				return w
			}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.Normalize()
			assert.Equal(t, tt.want, got)
			assert.Equal(t, got, got.Normalize(), "idempotent")
		})
	}
	assert.False(t, combo.CooldownWait{Disabled: true}.Normalize().Enabled())
	assert.True(t, combo.CooldownWait{}.Normalize().Enabled())
}

// Queue contract 3a, normalisation: maxWaitMs is clamped to 0..300 000 and
// maxAttempts to 0..10, and waiting is off when either is 0. 0 is a value,
// not "the default" (nil is).
func TestZeroIsAValueForTheCooldownAwareRetry(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name        string
		in          combo.CooldownWait
		maxWait     time.Duration
		maxAttempts int
		budget      time.Duration
		enabled     bool
	}{
		{"nil means the defaults", combo.CooldownWait{}, 90 * s, 5, 300 * s, true},
		{"maxWait 0 turns waiting off", combo.CooldownWait{MaxWait: new(time.Duration(0))}, 0, 5, 300 * s, false},
		{"maxAttempts 0 turns waiting off", combo.CooldownWait{MaxAttempts: new(0)}, 90 * s, 0, 300 * s, false},
		{"a negative maxWait clamps to 0", combo.CooldownWait{MaxWait: new(-s)}, 0, 5, 300 * s, false},
		{"a patch of 999 999 ms clamps to 300 s", combo.CooldownWait{MaxWait: new(999999 * time.Millisecond)}, 300 * s, 5, 300 * s, true},
		{"budget follows maxWait", combo.CooldownWait{MaxWait: new(5 * s), Budget: 100 * time.Millisecond}, 5 * s, 5, 5 * s, true},
		{"maxAttempts 11 clamps to 10", combo.CooldownWait{MaxAttempts: new(11)}, 90 * s, 10, 300 * s, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := tt.in.Normalize()
			require.NotNil(t, n.MaxWait)
			require.NotNil(t, n.MaxAttempts)
			assert.Equal(t, tt.maxWait, *n.MaxWait)
			assert.Equal(t, tt.maxAttempts, *n.MaxAttempts)
			assert.Equal(t, tt.budget, n.Budget)
			assert.Equal(t, tt.enabled, n.Enabled())
			assert.Equal(t, tt.enabled, tt.in.Enabled(), "Enabled agrees before normalising")
		})
	}

	// In a router: maxWait 0 answers at once where the default would wait.
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "openai")
		c := &combo.Combo{Name: "x", Targets: []combo.Target{target("openai", "k1", "m")},
			Settings: combo.Settings{CooldownWait: combo.CooldownWait{MaxWait: new(time.Duration(0))}}}
		f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "openai", Connection: "k1", Model: "m",
			Status: 429, Reason: lockout.ReasonRateLimited, Cooldown: 2 * time.Second}, time.Now())
		start := time.Now()
		_, err := f.do(t, c)
		assert.ErrorIs(t, err, combo.ErrAllCoolingDown)
		assert.Equal(t, time.Duration(0), time.Since(start))
		assert.Equal(t, 0, f.up["openai"].Total())
	})
}

func FuzzSettingsNormalize(f *testing.F) {
	f.Add(0, int64(0), 0, 0, int64(0), 0, false, int64(0), 0, int64(0))
	f.Add(500, int64(-1), -2, 99, int64(time.Hour), 1000, true, int64(999999*time.Millisecond), 50, int64(100*time.Millisecond))
	f.Fuzz(func(t *testing.T, attempts int, timeout int64, sticky, conc int, qTimeout int64, depth int,
		disabled bool, maxWait int64, waits int, budget int64) {
		s := combo.Settings{MaxAttempts: attempts, TargetTimeout: time.Duration(timeout), StickyLimit: sticky,
			ConcurrencyPerModel: conc, QueueTimeout: time.Duration(qTimeout), QueueDepth: depth,
			MaxRetries: new(waits), RetryDelay: new(time.Duration(budget)),
			CooldownWait: combo.CooldownWait{Disabled: disabled, MaxWait: new(time.Duration(maxWait)),
				MaxAttempts: new(waits), Budget: time.Duration(budget)}}
		n := s.Normalize()
		if n.MaxAttempts < 1 || n.MaxAttempts > 200 || n.ConcurrencyPerModel < 1 || n.ConcurrencyPerModel > 32 ||
			n.QueueDepth < 1 || n.QueueDepth > 100 || n.QueueTimeout <= 0 || n.TargetTimeout <= 0 || n.StickyLimit < 0 {
			t.Fatalf("out of range: %+v", n)
		}
		if *n.MaxRetries < 0 || *n.MaxRetries > 5 || *n.RetryDelay < 0 || *n.RetryDelay > time.Minute {
			t.Fatalf("retry out of range: %d %v", *n.MaxRetries, *n.RetryDelay)
		}
		cw := n.CooldownWait
		if *cw.MaxWait < 0 || *cw.MaxWait > 300*time.Second || *cw.MaxAttempts < 0 || *cw.MaxAttempts > 10 ||
			cw.Budget < *cw.MaxWait || cw.Budget > 300*time.Second {
			t.Fatalf("cooldown wait out of range: %+v", cw)
		}
		if (*cw.MaxWait == 0 || *cw.MaxAttempts == 0) && cw.Enabled() {
			t.Fatalf("enabled with a zero bound: %+v", cw)
		}
		if nn := n.Normalize(); !reflect.DeepEqual(nn, n) {
			t.Fatalf("not idempotent: %+v", n)
		}
		if *s.CooldownWait.MaxWait != time.Duration(maxWait) || *s.MaxRetries != waits {
			t.Fatal("Normalize changed the caller's values")
		}
	})
}

// Retry-After is the earliest recovery rounded up to whole seconds (combo
// contract 6c: 57 400 ms → 58, 12 000 ms → 12, 1 200 ms → 2), in both
// headers and the body's recovery hint.
func TestTerminalRetryAfterRounding(t *testing.T) {
	for _, tt := range []struct {
		lock time.Duration
		want string
	}{{57400 * time.Millisecond, "58"}, {12 * time.Second, "12"}, {1200 * time.Millisecond, "2"}} {
		t.Run(tt.want, func(t *testing.T) {
			now := time.Now()
			f := newFleet(t, "openai")
			f.cfg.Now = func() time.Time { return now }
			f.rebuild()
			f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "openai", Connection: "a", Model: "m", Status: 429, Cooldown: tt.lock}, now)
			c := &combo.Combo{Name: "w", Targets: []combo.Target{target("openai", "a", "m")},
				Settings: combo.Settings{CooldownWait: combo.CooldownWait{Disabled: true}}}
			_, err := f.do(t, c)
			var te *combo.Error
			require.ErrorAs(t, err, &te)
			h := combo.TerminalHeader(te)
			assert.Equal(t, tt.want, h.Get("Retry-After"))
			assert.Equal(t, tt.want, h.Get("X-Omniroute-Retry-After-Seconds"))
			assert.Equal(t, "all_targets_cooling_down", h.Get("X-Omniroute-Combo-Terminal-Reason"))
			assert.Equal(t, "wait", h.Get("X-Omniroute-Recovery-Action"))
			body := combo.TerminalBody(te)
			assert.Equal(t, "all_targets_cooling_down", body.Error.Code)
			assert.Equal(t, "All targets of w are cooling down: openai/m: model_lockout ("+tt.want+"s)", body.Error.Message)
			assert.Equal(t, tt.want, strconv.FormatInt(body.RecoveryHint.RetryAfterSeconds, 10))
			assert.Equal(t, "wait", body.RecoveryHint.Action)
			require.Len(t, body.Diagnostics.Excluded, 1)
			assert.Equal(t, combo.ExclusionJSON{Provider: "openai", Connection: "a", Model: "m",
				Reason: combo.ReasonModelLockout, Detail: "rate_limited", RetryAfterSeconds: body.RecoveryHint.RetryAfterSeconds},
				body.Diagnostics.Excluded[0])
		})
	}
}

// With no timer anywhere, the answer is 404 no_executable_targets with no
// Retry-After and the switch-combo hint.
func TestNoExecutableTargetsAnswer(t *testing.T) {
	f := newFleet(t, "openai")
	f.cfg.Cooldowns.FailAt("a", cooldown.Failure{Status: 401}, time.Now())
	c := &combo.Combo{Name: "w", Targets: []combo.Target{target("openai", "a", "m")}}
	_, err := f.do(t, c)
	var te *combo.Error
	require.ErrorAs(t, err, &te)
	assert.ErrorIs(t, err, combo.ErrNoExecutableTargets)
	assert.Equal(t, 404, te.Status)
	h := combo.TerminalHeader(te)
	assert.Empty(t, h.Get("Retry-After"))
	assert.Empty(t, h.Get("X-Omniroute-Retry-After-Seconds"))
	assert.Equal(t, "switch-combo", h.Get("X-Omniroute-Recovery-Action"))
	body := combo.TerminalBody(te)
	assert.Equal(t, "model_not_found", body.Error.Code)
	assert.Equal(t, "Combo has no executable targets", body.Error.Message)
	assert.Equal(t, "no_executable_targets", body.Diagnostics.TerminalReason)
	assert.Equal(t, "switch-combo", body.RecoveryHint.Action)
	assert.Zero(t, body.RecoveryHint.RetryAfterSeconds)
	assert.Equal(t, 0, f.up["openai"].Total())
}

// A stream that stalls after its first text was handed over is never
// replayed on another target: the caller's read fails, and closing the body
// twice finalizes the attempt once.
func TestStreamStallAfterCommitIsNotReplayed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "a", "b")
		f.cfg.Watchdog = watchdog.Config{IdleTimeout: time.Second}
		f.rebuild()
		f.up["a"].Script("", combotest.Reply{Status: 200, Stream: &combotest.Stream{
			Events: []combotest.Event{combotest.ChatDelta("Hello")}, HangAfter: true}})
		a := target("a", "a1", "m")
		c := &combo.Combo{Name: "s", Targets: []combo.Target{a, target("b", "b1", "m")}}
		start := time.Now()
		res, err := f.router.Do(context.Background(), combo.Request{Combo: c}, f.send)
		require.NoError(t, err)
		assert.Equal(t, int64(1), f.router.Stats(&a).InFlight)
		body, err := io.ReadAll(res.Response.Body)
		var we *watchdog.Error
		require.ErrorAs(t, err, &we)
		assert.Equal(t, watchdog.CodeIdleTimeout, we.Code)
		assert.Contains(t, string(body), "Hello")
		assert.Equal(t, time.Second, time.Since(start))
		require.NoError(t, res.Response.Body.Close())
		_ = res.Response.Body.Close()
		assert.Equal(t, int64(0), f.router.Stats(&a).InFlight, "finalized once")
		assert.Equal(t, 0, f.up["b"].Total(), "a committed stream is never replayed")
		assert.Equal(t, []string{"a/a1/m:succeeded:OK"}, outcomes(res))
	})
}

// The layers are asked in the fixed order (breaker, provider gate, model
// lockout, connection, lease, …); the first refusal names the exclusion.
func TestExclusionOrder(t *testing.T) {
	now := time.Now()
	f := newFleet(t, "openai")
	f.cfg.Now = func() time.Time { return now }
	f.cfg.Breakers = breaker.NewSet(breaker.Config{Profiles: map[string]breaker.Profile{"openai": {OpenAt: 1, Reset: time.Hour}}})
	f.cfg.Gate = breaker.NewGate(breaker.GateConfig{Enabled: true})
	f.rebuild()

	f.cfg.Breakers.ReportAt("openai", breaker.Report{Outcome: breaker.Failure}, now)
	f.cfg.Gate.RecordFailureAt("openai", "k1", now)
	f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "openai", Connection: "k1", Model: "m", Status: 429, Cooldown: time.Minute}, now)
	f.cfg.Cooldowns.FailAt("k1", cooldown.Failure{Status: 429, Cooldown: 10 * time.Second}, now)
	owner := leasetest.Owner('A')
	_, err := f.cfg.Leases.AcquireAt(context.Background(), lease.Holder{Owner: lease.HashOwner(owner), APIKeyID: "kid"},
		"openai", []string{"k1"}, now)
	require.NoError(t, err)

	c := &combo.Combo{Name: "x", Targets: []combo.Target{target("openai", "k1", "m")},
		Settings: combo.Settings{CooldownWait: combo.CooldownWait{Disabled: true}}}
	steps := []struct {
		want  combo.Reason
		after func()
	}{
		{combo.ReasonCircuitOpen, func() { f.cfg.Breakers.ResetAt("openai", now) }},
		{combo.ReasonProviderCooldown, func() { f.cfg.Gate.RecordSuccessAt("openai", "k1", now) }},
		{combo.ReasonModelLockout, func() { f.cfg.Lockouts.ClearAt("openai", "k1", "m", now) }},
		{combo.ReasonConnectionCooldown, func() { f.cfg.Cooldowns.SucceedAt("k1", now) }},
		{combo.ReasonLeaseHeld, nil},
	}
	for _, s := range steps {
		_, err := f.do(t, c)
		var te *combo.Error
		require.ErrorAs(t, err, &te, "want %s", s.want)
		require.Len(t, te.Excluded, 1)
		assert.Equal(t, s.want, te.Excluded[0].Reason)
		assert.Equal(t, 503, te.Status)
		if s.after != nil {
			s.after()
		}
	}
	assert.Equal(t, 0, f.up["openai"].Total())
}

// A success is reported to every layer: the connection's backoff level
// falls to 0, the model's failure count decays, and the session is pinned
// to the connection that served it.
func TestSuccessTellsEveryLayer(t *testing.T) {
	now := time.Now()
	f := newFleet(t, "openai")
	f.cfg.Now = func() time.Time { return now }
	f.rebuild()
	f.cfg.Cooldowns.FailAt("k2", cooldown.Failure{Status: 429, Backoff: true}, now)
	require.Equal(t, 1, f.cfg.Lockouts.RecordFailureAt(lockout.Failure{Provider: "openai", Connection: "k2", Model: "m", Status: 429}, now).FailureCount)
	require.Equal(t, 1, f.cfg.Cooldowns.StatusAt("k2", now).Level)
	now = now.Add(3 * time.Minute) // both lapsed; the level and the count remain
	require.Equal(t, 1, f.cfg.Cooldowns.StatusAt("k2", now).Level)

	c := &combo.Combo{Name: "rr", Strategy: combo.StrategyRoundRobin,
		Targets: []combo.Target{target("openai", "k2", "m")}}
	res, err := f.do(t, c, func(r *combo.Request) { r.Session = "agent-1" })
	require.NoError(t, err)
	assert.Equal(t, "k2", res.Target.Connection)

	assert.Equal(t, cooldown.Status{State: cooldown.Available}, f.cfg.Cooldowns.StatusAt("k2", now))
	count, cleared := f.cfg.Lockouts.DecayAt("openai", "k2", "m", now)
	assert.Equal(t, 0, count)
	assert.False(t, cleared, "the success already decayed the count to 0")
	key, ok := affinity.NewKey("session", "agent-1")
	require.True(t, ok)
	pin, ok := f.cfg.Pins.LookupAt("openai", key, now)
	require.True(t, ok)
	assert.Equal(t, "k2", pin.Connection)
}

// Every layer is optional: a router with none still orders, dispatches and
// falls back.
func TestRouterWithoutLayers(t *testing.T) {
	f := newFleet(t, "openai", "anthropic")
	f.cfg = combo.Config{}
	f.rebuild()
	f.up["openai"].Script("", combotest.Error(503, "down"))
	c := &combo.Combo{Name: "x", Targets: []combo.Target{target("openai", "k1", "m"), target("anthropic", "a1", "m")}}
	for range 2 {
		res, err := f.do(t, c)
		require.NoError(t, err)
		assert.Equal(t, []string{
			"openai/k1/m:failed:Service Unavailable",
			"anthropic/a1/m:succeeded:OK",
		}, outcomes(res), "nothing is remembered between requests without layers")
	}
}

// The lease is fenced again after an admission wait: a request whose lease
// was replaced while it queued is refused without an upstream call.
func TestLeaseFencedAgainAfterQueueWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "openai")
		f.cfg.Queue = queue.New(queue.Config{MaxConcurrency: 1, MaxQueueDepth: 5})
		f.rebuild()
		f.up["openai"].Script("k1", combotest.OK("slow").After(10*time.Second))
		owner := leasetest.Owner('A')
		claim := lease.Holder{Owner: lease.HashOwner(owner), APIKeyID: "kid"}
		l, err := f.cfg.Leases.AcquireAt(context.Background(), claim, "openai", []string{"k1"}, time.Now())
		require.NoError(t, err)
		c := &combo.Combo{Name: "x", Targets: []combo.Target{target("openai", "k1", "m")}}
		withLease := func(r *combo.Request) {
			r.Lease = &combo.LeaseClaim{Owner: owner, APIKeyID: "kid", Generation: int64(l.Generation)}
		}
		first := make(chan error, 1)
		go func() { _, err := f.do(t, c, withLease); first <- err }()
		synctest.Wait()
		second := make(chan error, 1)
		go func() { _, err := f.do(t, c, withLease); second <- err }()
		synctest.Wait() // the second waits for k1's slot

		holder := lease.Holder{Owner: lease.HashOwner(owner), APIKeyID: "kid", Generation: l.Generation}
		_, err = f.cfg.Leases.ReleaseAt(context.Background(), holder, lease.ReasonOwnerExit, time.Now())
		require.NoError(t, err)
		l2, err := f.cfg.Leases.AcquireAt(context.Background(), claim, "openai", []string{"k1"}, time.Now())
		require.NoError(t, err)
		require.NotEqual(t, l.Generation, l2.Generation)

		require.NoError(t, <-first)
		var le *lease.Error
		require.ErrorAs(t, <-second, &le)
		assert.Equal(t, 1, f.up["openai"].Total(), "the stale request made no upstream call")
	})
}

// Through the Transport, an empty pool is the router's own 503 with
// Retry-After and the JSON diagnostics, not a Go error.
func TestTransportAnswersTerminal503(t *testing.T) {
	now := time.Now()
	f := newFleet(t, "openai")
	f.cfg.Now = func() time.Time { return now }
	f.rebuild()
	f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "openai", Connection: "k1", Model: "m", Status: 429, Cooldown: 12 * time.Second}, now)
	c := &combo.Combo{Name: "smart", Targets: []combo.Target{target("openai", "k1", "m")},
		Settings: combo.Settings{CooldownWait: combo.CooldownWait{Disabled: true}}}
	client := &http.Client{Transport: &combo.Transport{
		Router:  f.router,
		Combo:   func(*http.Request) (*combo.Combo, error) { return c, nil },
		Rewrite: func(req *http.Request, _ *combo.Target) (*http.Request, error) { return req, nil },
		Base: roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			return f.up["openai"].Transport().RoundTrip(req)
		}),
	}}
	resp, err := client.Post("http://gateway/v1/chat/completions", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	var body combo.Body
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode)
	assert.Equal(t, "12", resp.Header.Get("Retry-After"))
	assert.Equal(t, "all_targets_cooling_down", body.Error.Code)
	assert.Equal(t, 1, body.Diagnostics.PoolSize)
	assert.Equal(t, int64(12), body.RecoveryHint.RetryAfterSeconds)
	assert.Equal(t, 0, f.up["openai"].Total())
}

// A request whose attempts all failed still says which targets the layers
// kept out of it.
func TestFailedRequestListsExclusions(t *testing.T) {
	now := time.Now()
	f := newFleet(t, "openai", "anthropic")
	f.cfg.Now = func() time.Time { return now }
	f.rebuild()
	f.up["openai"].Script("", combotest.Error(500, "boom"))
	f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "anthropic", Connection: "a1", Model: "m", Status: 429, Cooldown: time.Minute}, now)
	c := &combo.Combo{Name: "x", Targets: []combo.Target{target("openai", "k1", "m"), target("anthropic", "a1", "m")},
		Settings: combo.Settings{CooldownWait: combo.CooldownWait{Disabled: true}}}
	res, err := f.do(t, c)
	var ue *combo.Error
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, 500, ue.Status)
	assert.Equal(t, []string{"openai/k1/m:failed:Internal Server Error"}, outcomes(res))
	assert.Equal(t, []combo.Exclusion{{Provider: "anthropic", Connection: "a1", Model: "m",
		Reason: combo.ReasonModelLockout, Detail: "rate_limited", RetryAfter: time.Minute}}, res.Excluded)
}

// The attempt budget is shared by the whole request: with MaxAttempts 2 the
// third target is never called.
func TestAttemptBudgetIsShared(t *testing.T) {
	f := newFleet(t, "a", "b", "c")
	for _, p := range []string{"a", "b", "c"} {
		f.up[p].Script("", combotest.Error(503, "down"))
	}
	c := &combo.Combo{Name: "x", Settings: combo.Settings{MaxAttempts: 2},
		Targets: []combo.Target{target("a", "a1", "m"), target("b", "b1", "m"), target("c", "c1", "m")}}
	res, err := f.do(t, c)
	var ue *combo.Error
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, 503, ue.Status)
	assert.Equal(t, []string{"a/a1/m:failed:Service Unavailable", "b/b1/m:failed:Service Unavailable"}, outcomes(res))
	assert.Equal(t, 0, f.up["c"].Total())
}
