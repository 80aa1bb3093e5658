package combo_test

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lockout"
)

func TestRoundRobinRotatesOnePerRequest(t *testing.T) {
	ts := mk("a", "b", "c")
	rr := combo.NewRoundRobin()
	c := &combo.Combo{Name: "rr"}
	want := [][]string{{"a", "b", "c"}, {"b", "c", "a"}, {"c", "a", "b"}, {"a", "b", "c"}, {"b", "c", "a"}}
	for i, w := range want {
		assert.Equal(t, w, order(rr, c, ts, nil), "request %d", i)
	}
	// A sticky limit of 1 (or less) still rotates on every request.
	for _, limit := range []int{1, 0, -3} {
		rr := combo.NewRoundRobin()
		c := &combo.Combo{Name: "rr", Settings: combo.Settings{StickyLimit: limit}}
		for i, w := range want {
			assert.Equal(t, w, order(rr, c, ts, nil), "limit %d, request %d", limit, i)
		}
	}
	// Each combo has a counter of its own.
	rr = combo.NewRoundRobin()
	assert.Equal(t, []string{"a", "b", "c"}, order(rr, &combo.Combo{Name: "x"}, ts, nil))
	assert.Equal(t, []string{"a", "b", "c"}, order(rr, &combo.Combo{Name: "y"}, ts, nil))
	assert.Equal(t, []string{"b", "c", "a"}, order(rr, &combo.Combo{Name: "x"}, ts, nil))
	// One target: nothing to rotate.
	assert.Equal(t, []string{"a"}, order(rr, c, ts[:1], nil))
}

func TestRoundRobinStickyBatches(t *testing.T) {
	ts := mk("a", "b", "c")
	rr := combo.NewRoundRobin()
	c := &combo.Combo{Name: "sticky", Settings: combo.Settings{StickyLimit: 3}}
	var firsts []string
	for range 10 {
		firsts = append(firsts, order(rr, c, ts, nil)[0])
	}
	assert.Equal(t, []string{"a", "a", "a", "b", "b", "b", "c", "c", "c", "a"}, firsts)

	// The sticky target becomes unavailable: the batch ends and the next
	// request rotates over the eligible ones (counter 4 mod 2 = 0: b).
	assert.Equal(t, []string{"b", "c"}, order(rr, c, mk("b", "c"), nil))
	// The new sticky target keeps the lead once a is back, for the rest of
	// its batch; then the rotation goes on (counter 5 mod 3 = 2: c).
	assert.Equal(t, []string{"b", "c", "a"}, order(rr, c, ts, nil))
	assert.Equal(t, []string{"b", "c", "a"}, order(rr, c, ts, nil))
	assert.Equal(t, []string{"c", "a", "b"}, order(rr, c, ts, nil))
}

func TestFillFirstServesDeclaredOrderThroughRouter(t *testing.T) {
	f := newFleet(t, "openai", "claude")
	c := &combo.Combo{Name: "ff", Strategy: combo.StrategyFillFirst,
		Targets: []combo.Target{target("openai", "a", "m"), target("claude", "b", "m")}}
	for i := range 3 {
		res, err := f.do(t, c)
		require.NoError(t, err)
		assert.Equal(t, "openai", res.Target.Provider, "request %d", i)
	}
	assert.Equal(t, 0, f.up["claude"].Total())
}

// openBreaker reports failures until provider's breaker opens.
func openBreaker(t *testing.T, s *breaker.Set, provider string) {
	t.Helper()
	for range 100 {
		if st, _ := s.StateAt(provider, time.Now()); st == breaker.Open {
			return
		}
		done, err := s.AllowReportAt(provider, time.Now())
		require.NoError(t, err)
		done(breaker.Report{Outcome: breaker.Failure})
	}
	t.Fatalf("the breaker of %s does not open", provider)
}

// Combo scenarios 1–6: a weighted combo {openai/a w50, claude/b w50} whose
// targets are screened before dispatch.
func TestWeightedComboScreeningScenarios(t *testing.T) {
	now := time.Now()
	lockA := func(f *fleet) {
		f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "openai", Connection: "a", Model: "m", Status: 429, Cooldown: 60 * time.Second}, now)
	}
	tests := []struct {
		name        string
		setup       func(t *testing.T, f *fleet)
		wantStatus  int // 200: served
		wantServed  string
		wantRetry   string
		wantReasons map[string]combo.Reason
		wantAction  string
	}{
		{
			name: "1 both locked",
			setup: func(_ *testing.T, f *fleet) {
				lockA(f)
				f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "claude", Connection: "b", Model: "m", Status: 429, Cooldown: 120 * time.Second}, now)
			},
			wantStatus: 503, wantRetry: "60", wantAction: "wait",
			wantReasons: map[string]combo.Reason{"claude": combo.ReasonModelLockout, "openai": combo.ReasonModelLockout},
		},
		{
			name: "2 a locked, claude breaker open",
			setup: func(t *testing.T, f *fleet) {
				lockA(f)
				openBreaker(t, f.cfg.Breakers, "claude")
			},
			wantStatus: 503, wantAction: "wait",
			wantReasons: map[string]combo.Reason{"claude": combo.ReasonCircuitOpen, "openai": combo.ReasonModelLockout},
		},
		{
			name:       "3 only a locked",
			setup:      func(_ *testing.T, f *fleet) { lockA(f) },
			wantStatus: 200, wantServed: "claude/b/m",
		},
		{
			name: "4 both unavailable",
			setup: func(_ *testing.T, f *fleet) {
				f.cfg.Cooldowns.FailAt("a", cooldown.Failure{Status: 401}, now)
				f.cfg.Cooldowns.FailAt("b", cooldown.Failure{Status: 401}, now)
			},
			wantStatus: 404, wantAction: "switch-combo",
			wantReasons: map[string]combo.Reason{"claude": combo.ReasonUnavailable, "openai": combo.ReasonUnavailable},
		},
		{
			name: "5 a locked, b unavailable",
			setup: func(_ *testing.T, f *fleet) {
				lockA(f)
				f.cfg.Cooldowns.FailAt("b", cooldown.Failure{Status: 401}, now)
			},
			wantStatus: 503, wantRetry: "60", wantAction: "wait",
			wantReasons: map[string]combo.Reason{"claude": combo.ReasonUnavailable, "openai": combo.ReasonModelLockout},
		},
		{
			name: "6 both connections cooling 5 s",
			setup: func(_ *testing.T, f *fleet) {
				f.cfg.Cooldowns.FailAt("a", cooldown.Failure{Status: 429, Cooldown: 5 * time.Second}, now)
				f.cfg.Cooldowns.FailAt("b", cooldown.Failure{Status: 429, Cooldown: 5 * time.Second}, now)
			},
			wantStatus: 503, wantRetry: "5", wantAction: "wait",
			wantReasons: map[string]combo.Reason{"claude": combo.ReasonConnectionCooldown, "openai": combo.ReasonConnectionCooldown},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFleet(t, "openai", "claude")
			f.cfg.Now = func() time.Time { return now }
			f.rebuild()
			tt.setup(t, f)
			a, b := target("openai", "a", "m"), target("claude", "b", "m")
			a.Weight, b.Weight = 50, 50
			c := &combo.Combo{Name: "w", Strategy: combo.StrategyWeighted, Targets: []combo.Target{a, b},
				Settings: combo.Settings{CooldownWait: combo.CooldownWait{Disabled: true}}}
			res, err := f.do(t, c)
			if tt.wantStatus == 200 {
				require.NoError(t, err)
				assert.Equal(t, []string{tt.wantServed + ":succeeded:OK"}, outcomes(res))
				assert.Equal(t, 0, f.up["openai"].Total())
				return
			}
			var te *combo.Error
			require.ErrorAs(t, err, &te)
			assert.Equal(t, tt.wantStatus, te.Status)
			assert.Equal(t, 0, f.up["openai"].Total()+f.up["claude"].Total(), "no dispatch")
			assert.Equal(t, 2, te.PoolSize)
			assert.Equal(t, 0, te.Attempted)
			got := map[string]combo.Reason{}
			for _, x := range te.Excluded {
				got[x.Provider] = x.Reason
			}
			assert.Equal(t, tt.wantReasons, got)
			body := combo.TerminalBody(te)
			assert.Equal(t, tt.wantAction, body.RecoveryHint.Action)
			assert.Len(t, body.Diagnostics.Excluded, 2)
			resp := te.Response(nil)
			if tt.wantRetry != "" {
				assert.Equal(t, tt.wantRetry, resp.Header.Get("Retry-After"))
			}
			if tt.wantStatus == 503 {
				sec := te.RetryAfter / time.Second
				assert.True(t, sec >= 1 && sec <= 60, "Retry-After %v", te.RetryAfter)
			}
			if tt.name == "6 both connections cooling 5 s" {
				for _, r := range f.cfg.Breakers.SnapshotAt(time.Now()) {
					if r.Provider == "openai" || r.Provider == "claude" {
						assert.Equal(t, 0, r.Failures, r.Provider)
					}
				}
			}
		})
	}
}

func TestResetAwareScoreWeights(t *testing.T) {
	session := combo.Window{Known: true, Remaining: 0.5, ResetAt: t0.Add(combo.SessionWindow / 2)} // 0.3625
	weekly := combo.Window{Known: true, Remaining: 0.8}                                            // 0.275
	both := combo.Quota{Session: session, Weekly: weekly}
	tests := []struct {
		name   string
		sw, ww float64
		q      combo.Quota
		want   float64
	}{
		{"defaults", 0, 0, both, 0.35*0.3625 + 0.65*0.275},
		{"NaN means defaults", math.NaN(), 1, both, 0.35*0.3625 + 0.65*0.275},
		{"negative counts as 0", -1, 1, both, 0.275},
		{"weekly only", 0, 1, both, 0.275},
		{"normalised", 3, 1, both, 0.75*0.3625 + 0.25*0.275},
		{"a weighted window that is not reported drops out", 1, 1, combo.Quota{Weekly: weekly}, 0.275},
		{"monthly alone", 0, 0, combo.Quota{Monthly: combo.Window{Known: true, Remaining: 0.4}}, 0.25*0.4 + 0.75*0.5*0.6},
		{"the guard applies even to an unweighted session", 0, 1,
			combo.Quota{Session: combo.Window{Known: true, Remaining: 0.05}, Weekly: combo.Window{Known: true, Remaining: 1}}, 0.25 * 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &combo.ResetAware{SessionWeight: tt.sw, WeeklyWeight: tt.ww}
			assert.InDelta(t, tt.want, s.Score(tt.q, t0), 1e-12)
		})
	}
}

// Quota-share gates apply to connections: a target that names no connection
// is never set aside as saturated or at its cap.
func TestQuotaShareTargetWithoutConnectionAlwaysHasRoom(t *testing.T) {
	ts := []*combo.Target{
		{Provider: "p", Connection: "spent", Model: "m"},
		{Provider: "p", Model: "m", MaxConcurrent: 1},
		{Provider: "p", Connection: "busy", Model: "m", MaxConcurrent: 1},
	}
	// The source reports every target but "busy" spent (a provider-wide
	// figure for the target without a connection).
	q := combo.QuotaFunc(func(t *combo.Target, _ time.Time) (combo.Quota, bool) {
		return combo.Quota{LimitReached: t.Connection != "busy"}, true
	})
	sig := signals{ts[1]: {InFlight: 1}, ts[2]: {InFlight: 1}}
	s := &combo.QuotaShare{Quota: q}
	p := pick(&combo.Combo{Name: "noconn"}, ts, sig)
	s.Order(p)
	assert.Equal(t, []*combo.Target{ts[1], ts[2], ts[0]}, p.Targets, "no-connection target first, then at-cap, then saturated")
}

// Every built-in strategy orders from many goroutines at once (run with
// -race): each result holds only targets of the input, each once.
func TestStrategiesConcurrentUse(t *testing.T) {
	ts, sig, q, hint := benchFleet()
	for _, ns := range builtins(q, hint) {
		t.Run(ns.name, func(t *testing.T) {
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					c := &combo.Combo{Name: fmt.Sprint("c", g%3), Settings: combo.Settings{StickyLimit: g % 4}}
					sig := maps.Clone(sig) // a fake view per goroutine: maps are not safe to share while written
					for i := range 200 {
						s := sig[ts[i%len(ts)]]
						s.AvgLatency += time.Duration(g*1000+i) * time.Microsecond // new latency averages
						sig[ts[i%len(ts)]] = s
						p := &combo.Pick{Combo: c, Targets: slices.Clone(ts), Now: t0.Add(time.Duration(i) * time.Second),
							Request: &combo.Request{Combo: c, PromptTokens: 1000}, Signals: sig}
						ns.s.Order(p)
						seen := map[*combo.Target]bool{}
						for _, x := range p.Targets {
							if x == nil || seen[x] || !slices.Contains(ts, x) {
								t.Errorf("%s: bad order %v", ns.name, names(p.Targets))
								return
							}
							seen[x] = true
						}
					}
				})
			}
			wg.Wait()
		})
	}
}
