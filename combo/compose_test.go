package combo_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/lockout"
)

// judgeRecorder is a judge that joins the panel's bodies and remembers
// what it saw.
type judgeRecorder struct {
	mu    sync.Mutex
	calls [][]string
}

func (j *judgeRecorder) judge(_ context.Context, answers []combo.Answer) (combo.Answer, error) {
	var names []string
	for _, a := range answers {
		names = append(names, a.Target.Provider)
	}
	j.mu.Lock()
	j.calls = append(j.calls, names)
	j.mu.Unlock()
	return combo.Answer{Status: 200, Body: []byte("judged:" + strings.Join(names, ","))}, nil
}

func panel(providers ...string) []combo.Target {
	var out []combo.Target
	for _, p := range providers {
		out = append(out, target(p, "", "m"))
	}
	return out
}

func TestFusionNormalize(t *testing.T) {
	tests := []struct {
		name           string
		in             combo.Fusion
		minPanel       int
		grace, hardCap time.Duration
	}{
		{"defaults", combo.Fusion{Panel: panel("a", "b", "c")}, 2, 8 * time.Second, 90 * time.Second},
		{"quorum above panel", combo.Fusion{Panel: panel("a", "b"), MinPanel: 5}, 2, 8 * time.Second, 90 * time.Second},
		{"quorum below two", combo.Fusion{Panel: panel("a", "b", "c"), MinPanel: 1}, 2, 8 * time.Second, 90 * time.Second},
		{"one member", combo.Fusion{Panel: panel("a")}, 1, 8 * time.Second, 90 * time.Second},
		{"clamps", combo.Fusion{Panel: panel("a", "b"), Grace: time.Hour, HardCap: time.Millisecond}, 2, 10 * time.Minute, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.Normalize()
			assert.Equal(t, tt.minPanel, got.MinPanel)
			assert.Equal(t, tt.grace, got.Grace)
			assert.Equal(t, tt.hardCap, got.HardCap)
		})
	}
}

func FuzzFusionNormalize(f *testing.F) {
	f.Add(3, 2, int64(0), int64(0))
	f.Add(0, -1, int64(-1), int64(-1))
	f.Add(8, 100, int64(1<<62), int64(1<<62))
	f.Fuzz(func(t *testing.T, n, minPanel int, grace, hardCap int64) {
		n = n & 63
		fu := combo.Fusion{Panel: make([]combo.Target, n), MinPanel: minPanel,
			Grace: time.Duration(grace), HardCap: time.Duration(hardCap)}.Normalize()
		if n >= 2 && (fu.MinPanel < 2 || fu.MinPanel > n) || n < 2 && fu.MinPanel != n {
			t.Fatalf("quorum %d for panel %d", fu.MinPanel, n)
		}
		if fu.Grace <= 0 || fu.Grace > 10*time.Minute || fu.HardCap < time.Second || fu.HardCap > 30*time.Minute {
			t.Fatalf("out of range: %v %v", fu.Grace, fu.HardCap)
		}
	})
}

func TestFusionAllAnswerGoesToJudgeInPanelOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "a", "b", "c")
		f.up["a"].Script("", combotest.OK("A").After(3*time.Second))
		f.up["b"].Script("", combotest.OK("B").After(1*time.Second))
		f.up["c"].Script("", combotest.OK("C").After(2*time.Second))
		j := &judgeRecorder{}
		fu := &combo.Fusion{Name: "fuse", Panel: panel("a", "b", "c"), Judge: j.judge}
		start := time.Now()
		ans, err := f.router.Fuse(context.Background(), fu, combo.Request{}, f.send)
		require.NoError(t, err)
		assert.Equal(t, "judged:a,b,c", string(ans.Body))
		assert.Equal(t, 3*time.Second, time.Since(start), "every member answered within the grace")
		assert.Equal(t, [][]string{{"a", "b", "c"}}, j.calls)
	})
}

func TestFusionStragglerCutAfterGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "a", "b", "c")
		f.up["a"].Script("", combotest.OK("A").After(time.Second))
		f.up["b"].Script("", combotest.OK("B").After(2*time.Second))
		f.up["c"].Script("", combotest.OK("C").After(60*time.Second))
		j := &judgeRecorder{}
		fu := &combo.Fusion{Name: "fuse", Panel: panel("a", "b", "c"), Judge: j.judge}
		start := time.Now()
		ans, err := f.router.Fuse(context.Background(), fu, combo.Request{}, f.send)
		require.NoError(t, err)
		assert.Equal(t, 10*time.Second, time.Since(start), "quorum at 2 s plus 8 s grace")
		assert.Equal(t, "judged:a,b", string(ans.Body))
		assert.Equal(t, 1, f.up["c"].Total(), "the straggler was asked")
		assert.Equal(t, int64(0), f.router.Stats(&fu.Panel[2]).InFlight, "the straggler's leg has ended")
		assert.Equal(t, int64(0), f.router.Stats(&fu.Panel[2]).Failures, "a cut straggler is not blamed")
	})
}

func TestFusionFailingLeg(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "a", "b", "c")
		f.up["a"].Script("", combotest.Error(500, "boom"))
		f.up["b"].Script("", combotest.OK("B").After(time.Second))
		f.up["c"].Script("", combotest.OK("C").After(time.Second))
		j := &judgeRecorder{}
		fu := &combo.Fusion{Name: "fuse", Panel: panel("a", "b", "c"), MinPanel: 3, Judge: j.judge}
		ans, err := f.router.Fuse(context.Background(), fu, combo.Request{}, f.send)
		require.NoError(t, err)
		assert.Equal(t, "judged:b,c", string(ans.Body), "the quorum is not reachable; the answers that came are judged")
		assert.Equal(t, int64(1), f.router.Stats(&fu.Panel[0]).Failures, "the failing leg went through the layers")
	})
}

func TestFusionOneAnswerReturnedDirectly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "a", "b")
		f.up["a"].Script("", combotest.Error(503, "down"))
		f.up["b"].Script("", combotest.OK("only B"))
		j := &judgeRecorder{}
		fu := &combo.Fusion{Name: "fuse", Panel: panel("a", "b"), Judge: j.judge}
		ans, err := f.router.Fuse(context.Background(), fu, combo.Request{}, f.send)
		require.NoError(t, err)
		assert.Equal(t, "b", ans.Target.Provider)
		assert.Contains(t, string(ans.Body), "only B")
		assert.Empty(t, j.calls, "the judge is not asked for one answer")
	})
}

func TestFusionNoAnswerIs503(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "a", "b")
		f.up["a"].Script("", combotest.Error(500, "boom"))
		f.up["b"].Script("", combotest.Reset())
		fu := &combo.Fusion{Name: "fuse", Panel: panel("a", "b"), Judge: (&judgeRecorder{}).judge}
		_, err := f.router.Fuse(context.Background(), fu, combo.Request{}, f.send)
		var ce *combo.Error
		require.ErrorAs(t, err, &ce)
		assert.ErrorIs(t, err, combo.ErrNoPanelAnswer)
		assert.Equal(t, 503, ce.Status)
		assert.Len(t, ce.Errs, 2)
		assert.ErrorIs(t, err, combo.ErrUpstream, "the legs' failures are wrapped")
	})
}

func TestFusionHardCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "a", "b", "c")
		f.up["a"].Script("", combotest.OK("A").After(time.Second))
		f.up["b"].Script("", combotest.Hang())
		f.up["c"].Script("", combotest.Hang())
		fu := &combo.Fusion{Name: "fuse", Panel: panel("a", "b", "c"), Judge: (&judgeRecorder{}).judge}
		start := time.Now()
		ans, err := f.router.Fuse(context.Background(), fu, combo.Request{}, f.send)
		require.NoError(t, err)
		assert.Equal(t, 90*time.Second, time.Since(start), "the quorum is never reached; the hard cap ends the panel")
		assert.Equal(t, "a", ans.Target.Provider, "the one answer is returned as it is")
		assert.Contains(t, string(ans.Body), `"content":"A"`)
		for i := range fu.Panel {
			s := f.router.Stats(&fu.Panel[i])
			assert.Equal(t, int64(0), s.InFlight, fu.Panel[i].Provider)
			assert.Equal(t, int64(0), s.Failures, "a leg cut by the hard cap is not blamed")
		}
	})
}

func TestFusionCallerCancels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "a", "b")
		f.up["a"].Script("", combotest.Hang())
		f.up["b"].Script("", combotest.Hang())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		fu := &combo.Fusion{Name: "fuse", Panel: panel("a", "b"), Judge: (&judgeRecorder{}).judge}
		start := time.Now()
		_, err := f.router.Fuse(ctx, fu, combo.Request{}, f.send)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 5*time.Second, time.Since(start))
		for i := range fu.Panel {
			s := f.router.Stats(&fu.Panel[i])
			assert.Equal(t, int64(0), s.InFlight)
			assert.Equal(t, int64(0), s.Failures, "a cancelled leg is not blamed")
		}
	})
}

func TestFusionWithToolsGoesToJudgeOnly(t *testing.T) {
	f := newFleet(t, "a", "b", "judge")
	jt := target("judge", "", "big")
	fu := &combo.Fusion{Name: "fuse", Panel: panel("a", "b"), JudgeTarget: &jt, Judge: (&judgeRecorder{}).judge}
	ans, err := f.router.Fuse(context.Background(), fu, combo.Request{Tools: 2}, f.send)
	require.NoError(t, err)
	assert.Equal(t, "judge", ans.Target.Provider)
	assert.Equal(t, 0, f.up["a"].Total()+f.up["b"].Total())

	fu.JudgeTarget = nil
	ans, err = f.router.Fuse(context.Background(), fu, combo.Request{Tools: 2}, f.send)
	require.NoError(t, err)
	assert.Equal(t, "a", ans.Target.Provider, "panel[0] judges by default")
	assert.Equal(t, 0, f.up["b"].Total())
}

// pipelineFleet answers every call on "step" providers with the request
// body prefixed by the provider's name.
func pipelineFleet(t *testing.T, providers ...string) (*fleet, combo.StepSendFunc) {
	f := newFleet(t, providers...)
	for _, p := range providers {
		f.up[p].Handle("", func(c combotest.Call) combotest.Reply {
			return combotest.Reply{Status: 200, Body: p + "(" + string(c.Body) + ")"}
		})
	}
	send := func(ctx context.Context, tg *combo.Target, step int, input []byte) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+tg.Provider+".test/v1", strings.NewReader(string(input)))
		if err != nil {
			return nil, err
		}
		return f.up[tg.Provider].Transport().RoundTrip(req)
	}
	return f, send
}

func TestPipelineChainsSteps(t *testing.T) {
	f, send := pipelineFleet(t, "draft", "review", "polish")
	var seen []int
	p := &combo.Pipeline{
		Steps: []*combo.Combo{
			{Name: "s0", Targets: []combo.Target{target("draft", "", "m")}},
			{Name: "s1", Targets: []combo.Target{target("review", "", "m")}},
			{Name: "s2", Targets: []combo.Target{target("polish", "", "m")}},
		},
		Next: func(_ context.Context, step int, prev combo.Answer) ([]byte, error) {
			seen = append(seen, step)
			return []byte(string(prev.Body) + "+"), nil
		},
	}
	ans, err := p.Run(context.Background(), f.router, combo.Request{}, []byte("q"), send)
	require.NoError(t, err)
	assert.Equal(t, "polish(review(draft(q)+)+)", string(ans.Body))
	assert.Equal(t, "polish", ans.Target.Provider)
	assert.Equal(t, []int{0, 1}, seen)
}

func TestPipelineStepFallsBackThenFails(t *testing.T) {
	f, send := pipelineFleet(t, "a", "b", "c", "d")
	f.up["a"].Script("", combotest.Error(500, "boom"))
	f.up["c"].Script("", combotest.Error(502, "bad gateway"))
	p := &combo.Pipeline{Steps: []*combo.Combo{
		{Name: "s0", Targets: []combo.Target{target("a", "", "m"), target("b", "", "m")}},
		{Name: "s1", Targets: []combo.Target{target("c", "", "m")}},
		{Name: "s2", Targets: []combo.Target{target("d", "", "m")}},
	}}
	ans, err := p.Run(context.Background(), f.router, combo.Request{}, []byte("q"), send)
	var ce *combo.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 1, ce.Step)
	assert.Equal(t, 502, ce.Status)
	assert.Equal(t, "pipeline_step_failed", ce.Code)
	assert.ErrorIs(t, err, combo.ErrUpstream)
	assert.Equal(t, "b(q)", string(ans.Body), "the last good answer is kept")
	require.Len(t, f.up["c"].Calls(), 1)
	assert.Equal(t, "b(q)", string(f.up["c"].Calls()[0].Body), "the failing step got the previous output unchanged")
	assert.Equal(t, 0, f.up["d"].Total(), "later steps do not run")
}

func TestPipelineCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, send := pipelineFleet(t, "a", "b")
		f.up["b"].Script("", combotest.Hang())
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		p := &combo.Pipeline{Steps: []*combo.Combo{
			{Name: "s0", Targets: []combo.Target{target("a", "", "m")}},
			{Name: "s1", Targets: []combo.Target{target("b", "", "m")}},
		}}
		_, err := p.Run(ctx, f.router, combo.Request{}, []byte("q"), send)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

func TestRelayCallsHandoffInDeclaredOrder(t *testing.T) {
	f := newFleet(t, "a", "b", "c")
	f.up["a"].Script("", combotest.Error(500, "boom"))
	c := &combo.Combo{Name: "relay", Strategy: combo.StrategyRoundRobin, Targets: []combo.Target{
		target("a", "", "m"), target("b", "", "m"), target("c", "", "m")}}
	var got []combo.Handoff
	for range 2 {
		res, err := f.router.Relay(context.Background(), combo.Request{Combo: c}, f.send, func(_ context.Context, h combo.Handoff) {
			got = append(got, h)
		})
		require.NoError(t, err)
		res.Response.Body.Close()
	}
	require.Len(t, got, 2)
	for _, h := range got {
		assert.Equal(t, "b", h.Served.Provider, "declared order, whatever the combo's strategy")
		assert.Equal(t, []combo.Target{target("c", "", "m")}, h.Next)
	}
	assert.Equal(t, 0, f.up["c"].Total())

	f.up["b"].Script("", combotest.Error(500, "boom"))
	f.up["c"].Script("", combotest.Error(500, "boom"))
	called := false
	_, err := f.router.Relay(context.Background(), combo.Request{Combo: c}, f.send, func(context.Context, combo.Handoff) { called = true })
	require.Error(t, err)
	assert.False(t, called, "no hand-off after a failure")
}

// A panel with a failing leg, a straggler cut after the grace and two
// answers, on the wall clock: every leg has ended when Fuse returns and no
// goroutine is left behind.
func TestFusionLeavesNoGoroutine(t *testing.T) {
	f := newFleet(t, "a", "b", "c", "d")
	f.up["a"].Script("", combotest.OK("A"))
	f.up["b"].Script("", combotest.Error(500, "boom"))
	f.up["c"].Script("", combotest.Hang())
	f.up["d"].Script("", combotest.OK("D").After(5*time.Millisecond))
	ignore := goleak.IgnoreCurrent()
	j := &judgeRecorder{}
	fu := &combo.Fusion{Name: "fuse", Panel: panel("a", "b", "c", "d"), Grace: 20 * time.Millisecond, Judge: j.judge}
	ans, err := f.router.Fuse(context.Background(), fu, combo.Request{}, f.send)
	require.NoError(t, err)
	assert.Equal(t, "judged:a,d", string(ans.Body))
	for i := range fu.Panel {
		assert.Equal(t, int64(0), f.router.Stats(&fu.Panel[i]).InFlight, fu.Panel[i].Provider)
	}
	assert.Equal(t, int64(1), f.router.Stats(&fu.Panel[1]).Failures, "the failing leg is blamed")
	assert.Equal(t, int64(0), f.router.Stats(&fu.Panel[2]).Failures, "the cut straggler is not")
	goleak.VerifyNone(t, ignore)
}

// The caller gives up during the grace that follows the quorum: Fuse
// returns the context's error, not the answers gathered so far, and blames
// no leg.
func TestFusionCallerCancelsDuringGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "a", "b", "c")
		f.up["a"].Script("", combotest.OK("A").After(time.Second))
		f.up["b"].Script("", combotest.OK("B").After(time.Second))
		f.up["c"].Script("", combotest.Hang())
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		j := &judgeRecorder{}
		fu := &combo.Fusion{Name: "fuse", Panel: panel("a", "b", "c"), Judge: j.judge}
		start := time.Now()
		_, err := f.router.Fuse(ctx, fu, combo.Request{}, f.send)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 3*time.Second, time.Since(start), "cut inside the 8 s grace")
		assert.Empty(t, j.calls)
		for i := range fu.Panel {
			s := f.router.Stats(&fu.Panel[i])
			assert.Equal(t, int64(0), s.InFlight)
			assert.Equal(t, int64(0), s.Failures)
		}
	})
}

// Every leg goes through the layers: a leg whose model is locked is not
// dispatched, and the one answer left is returned as it is.
func TestFusionLegScreenedByLayers(t *testing.T) {
	f := newFleet(t, "a", "b")
	f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "a", Model: "m", Status: 429, Cooldown: time.Minute}, time.Now())
	j := &judgeRecorder{}
	fu := &combo.Fusion{Name: "fuse", Panel: panel("a", "b"), Judge: j.judge,
		Settings: combo.Settings{CooldownWait: combo.CooldownWait{Disabled: true}}}
	ans, err := f.router.Fuse(context.Background(), fu, combo.Request{}, f.send)
	require.NoError(t, err)
	assert.Equal(t, "b", ans.Target.Provider)
	assert.Equal(t, 0, f.up["a"].Total(), "the locked leg is screened out before dispatch")
	assert.Empty(t, j.calls)
}

func TestFusionJudgeFailure(t *testing.T) {
	f := newFleet(t, "a", "b")
	boom := errors.New("judge down")
	fu := &combo.Fusion{Name: "fuse", Panel: panel("a", "b"),
		Judge: func(context.Context, []combo.Answer) (combo.Answer, error) { return combo.Answer{}, boom }}
	_, err := f.router.Fuse(context.Background(), fu, combo.Request{}, f.send)
	require.ErrorIs(t, err, boom)

	// No judge: the first answer in panel order is returned.
	fu.Judge = nil
	ans, err := f.router.Fuse(context.Background(), fu, combo.Request{}, f.send)
	require.NoError(t, err)
	assert.Equal(t, "a", ans.Target.Provider)

	// An empty panel has no answer.
	_, err = f.router.Fuse(context.Background(), &combo.Fusion{Name: "empty"}, combo.Request{}, f.send)
	require.ErrorIs(t, err, combo.ErrNoPanelAnswer)
}

func TestPipelineNextFailure(t *testing.T) {
	f, send := pipelineFleet(t, "a", "b")
	bad := errors.New("no input")
	p := &combo.Pipeline{
		Steps: []*combo.Combo{
			{Name: "s0", Targets: []combo.Target{target("a", "", "m")}},
			{Name: "s1", Targets: []combo.Target{target("b", "", "m")}},
		},
		Next: func(context.Context, int, combo.Answer) ([]byte, error) { return nil, bad },
	}
	ans, err := p.Run(context.Background(), f.router, combo.Request{}, []byte("q"), send)
	var ce *combo.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 1, ce.Step)
	assert.Equal(t, 502, ce.Status)
	assert.ErrorIs(t, err, bad)
	assert.Equal(t, "a(q)", string(ans.Body))
	assert.Equal(t, 0, f.up["b"].Total())
}

// A step whose every target is cooling down fails with the terminal answer's
// status, and nothing after it runs.
func TestPipelineStepWithNoEligibleTarget(t *testing.T) {
	f, send := pipelineFleet(t, "a", "b", "c")
	f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "b", Model: "m", Status: 429, Cooldown: time.Minute}, time.Now())
	p := &combo.Pipeline{Steps: []*combo.Combo{
		{Name: "s0", Targets: []combo.Target{target("a", "", "m")}},
		{Name: "s1", Targets: []combo.Target{target("b", "", "m")},
			Settings: combo.Settings{CooldownWait: combo.CooldownWait{Disabled: true}}},
		{Name: "s2", Targets: []combo.Target{target("c", "", "m")}},
	}}
	_, err := p.Run(context.Background(), f.router, combo.Request{}, []byte("q"), send)
	var ce *combo.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 1, ce.Step)
	assert.Equal(t, 503, ce.Status)
	assert.ErrorIs(t, err, combo.ErrAllCoolingDown, "the step's own terminal answer is wrapped")
	assert.Equal(t, 0, f.up["b"].Total()+f.up["c"].Total())
}

func TestPipelineCancelledEndsTheStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, send := pipelineFleet(t, "a", "b", "c")
		f.up["b"].Script("", combotest.Hang())
		ctx, cancel := context.WithCancel(context.Background())
		p := &combo.Pipeline{Steps: []*combo.Combo{
			{Name: "s0", Targets: []combo.Target{target("a", "", "m")}},
			{Name: "s1", Targets: []combo.Target{target("b", "", "m")}},
			{Name: "s2", Targets: []combo.Target{target("c", "", "m")}},
		}}
		time.AfterFunc(2*time.Second, cancel)
		ans, err := p.Run(ctx, f.router, combo.Request{}, []byte("q"), send)
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, "a(q)", string(ans.Body), "the last finished step's answer")
		assert.Equal(t, int64(0), f.router.Stats(&p.Steps[1].Targets[0]).InFlight)
		assert.Equal(t, int64(0), f.router.Stats(&p.Steps[1].Targets[0]).Failures, "a cancelled step is not blamed")
		assert.Equal(t, 0, f.up["c"].Total())
	})
}

// Relay does not change the caller's combo, and the hook sees the result it
// returns.
func TestRelayKeepsCallerCombo(t *testing.T) {
	f := newFleet(t, "a", "b")
	c := &combo.Combo{Name: "relay", Strategy: combo.StrategyRandom, Targets: []combo.Target{
		target("a", "", "m"), target("b", "", "m")}}
	var seen *combo.Result
	res, err := f.router.Relay(context.Background(), combo.Request{Combo: c}, f.send, func(_ context.Context, h combo.Handoff) {
		seen = h.Result
		assert.Equal(t, combo.StrategyPriority, h.Combo.Strategy)
		assert.Equal(t, target("a", "", "m"), h.Served)
		assert.Equal(t, []combo.Target{target("b", "", "m")}, h.Next)
	})
	require.NoError(t, err)
	res.Response.Body.Close()
	assert.Same(t, res, seen)
	assert.Equal(t, combo.StrategyRandom, c.Strategy)

	// A nil hook is allowed.
	res, err = f.router.Relay(context.Background(), combo.Request{Combo: c}, f.send, nil)
	require.NoError(t, err)
	res.Response.Body.Close()
}

func TestPipelineWithoutSteps(t *testing.T) {
	f, send := pipelineFleet(t, "a")
	_, err := (&combo.Pipeline{}).Run(context.Background(), f.router, combo.Request{}, []byte("q"), send)
	var ce *combo.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 404, ce.Status)
	assert.Equal(t, "pipeline_no_steps", ce.Code)
	assert.Equal(t, -1, ce.Step)
	assert.NotErrorIs(t, err, combo.ErrNoPanelAnswer)
	assert.Equal(t, "combo: pipeline_no_steps", err.Error())
	assert.Equal(t, 0, f.up["a"].Total())
}

// A combo declared with the seed name "context-relay" is served by Relay in
// declared order, and the hook sees the last target with nothing after it.
func TestRelayContextRelayCombo(t *testing.T) {
	f := newFleet(t, "a", "b")
	f.up["a"].Script("", combotest.Error(503, "down"))
	c := &combo.Combo{Name: "relay", Strategy: "context-relay", Targets: []combo.Target{
		target("a", "", "m"), target("b", "", "m")}}
	var got []combo.Handoff
	res, err := f.router.Relay(context.Background(), combo.Request{Combo: c}, f.send, func(_ context.Context, h combo.Handoff) {
		got = append(got, h)
	})
	require.NoError(t, err)
	res.Response.Body.Close()
	require.Len(t, got, 1)
	assert.Equal(t, target("b", "", "m"), got[0].Served)
	assert.Empty(t, got[0].Next)
	assert.Equal(t, []string{"a//m:failed:Service Unavailable", "b//m:succeeded:OK"}, outcomes(res))
}

// Panel legs do not take the emergency fallback one by one: with one leg
// answering, the emergency target is never asked.
func TestFusionLegsDoNotTakeEmergencyFallback(t *testing.T) {
	f := newFleet(t, "a", "b", "nvidia")
	f.cfg.Emergency = &combo.EmergencyFallback{}
	f.rebuild()
	f.up["a"].Script("", combotest.Error(402, "payment required"))
	fu := &combo.Fusion{Name: "fuse", Panel: panel("a", "b"), Judge: (&judgeRecorder{}).judge}
	ans, err := f.router.Fuse(context.Background(), fu, combo.Request{}, f.send)
	require.NoError(t, err)
	assert.Equal(t, "b", ans.Target.Provider)
	assert.False(t, ans.Emergency)
	assert.Equal(t, 0, f.up["nvidia"].Total())
}

// A panel without any answer takes the emergency fallback once, whatever
// the number of legs whose failure triggers it, with the capped budget.
func TestFusionWithoutAnswerTakesEmergencyOnce(t *testing.T) {
	f := newFleet(t, "a", "b", "c", "nvidia")
	f.cfg.Emergency = &combo.EmergencyFallback{}
	f.rebuild()
	f.up["a"].Script("", combotest.Error(500, "boom"))
	f.up["b"].Script("", combotest.Error(402, "payment required"))
	f.up["c"].Script("", combotest.Error(429, "insufficient funds"))
	var budget int
	send := func(ctx context.Context, tg *combo.Target) (*http.Response, error) {
		if tg.Provider == "nvidia" {
			budget, _ = combo.OutputBudget(ctx)
		}
		return f.send(ctx, tg)
	}
	j := &judgeRecorder{}
	fu := &combo.Fusion{Name: "fuse", Panel: panel("a", "b", "c"), Judge: j.judge}
	ans, err := f.router.Fuse(context.Background(), fu, combo.Request{}, send)
	require.NoError(t, err)
	assert.True(t, ans.Emergency)
	assert.Equal(t, combo.Target{Provider: "nvidia", Model: "openai/gpt-oss-120b"}, ans.Target)
	assert.Equal(t, 200, ans.Status)
	assert.Equal(t, 4096, budget)
	assert.Equal(t, 1, f.up["nvidia"].Total(), "asked once")
	assert.Empty(t, j.calls)
	assert.Equal(t, []string{
		"a//m:failed:Internal Server Error",
		"b//m:failed:Payment Required",
		"c//m:failed:Too Many Requests",
		"nvidia//openai/gpt-oss-120b:succeeded:OK",
	}, outcomes(&combo.Result{Attempts: ans.Attempts}), "every leg's attempt in panel order, then the emergency one")

	// The emergency target fails too: one call, and the panel's 503.
	f.up["nvidia"].Script("", combotest.Error(503, "down"))
	_, err = f.router.Fuse(context.Background(), fu, combo.Request{}, send)
	var ce *combo.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 503, ce.Status)
	assert.Equal(t, "fusion_no_answers", ce.Code)
	assert.Equal(t, 2, f.up["nvidia"].Total(), "asked once more, not once per leg")

	// No leg failure triggers it: no emergency call.
	f.up["b"].Script("", combotest.Error(500, "boom"))
	f.up["c"].Script("", combotest.Error(500, "boom"))
	_, err = f.router.Fuse(context.Background(), fu, combo.Request{}, send)
	require.ErrorIs(t, err, combo.ErrNoPanelAnswer)
	assert.Equal(t, 2, f.up["nvidia"].Total())
}
