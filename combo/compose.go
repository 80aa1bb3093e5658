package combo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Defaults and ranges of [Fusion].
const (
	defaultFusionMinPanel = 2
	defaultFusionGrace    = 8 * time.Second
	defaultFusionHardCap  = 90 * time.Second

	maxFusionGrace   = 10 * time.Minute
	maxFusionHardCap = 30 * time.Minute
)

// maxAnswerBody bounds how much of one composed leg's answer is read.
const maxAnswerBody = 32 << 20

// Answer is one complete, non-streamed upstream answer, as the legs of a
// fusion or the steps of a pipeline produce it.
type Answer struct {
	Target   Target
	Status   int
	Header   http.Header
	Body     []byte
	Attempts []Attempt
	// Emergency reports that the emergency fallback gave the answer.
	Emergency bool
}

// Fusion fans one request out to a panel of targets in parallel and lets a
// judge synthesise their answers. Once MinPanel legs have answered, the
// stragglers get Grace more to finish; HardCap bounds the whole panel.
// Every leg is a one-target request routed like [Router.Do], so every
// layer screens it and learns from it; the emergency fallback is taken by
// the fusion as a whole, not by each leg. Legs are not streamed: send should ask for
// a complete answer and strip tools.
type Fusion struct {
	// Name prefixes the names of the one-target combos of the legs.
	Name  string
	Panel []Target
	// MinPanel is the quorum. Default 2; Normalize clamps it to
	// [2, len(Panel)] (to len(Panel) when the panel has fewer than two).
	MinPanel int
	// Grace is how long stragglers may still answer once the quorum is
	// reached. Default 8 s (for any value ≤ 0); Normalize caps it at
	// 10 min.
	Grace time.Duration
	// HardCap bounds the whole panel. Default 90 s; Normalize clamps to
	// [1 s, 30 min].
	HardCap time.Duration
	// Judge synthesises one answer from two or more answers of the panel,
	// in panel order, usually by asking a judge model; nil returns the
	// first of them.
	Judge func(ctx context.Context, answers []Answer) (Answer, error)
	// JudgeTarget serves requests that carry tools, alone; nil means
	// Panel[0].
	JudgeTarget *Target
	// Settings are the per-leg combo settings.
	Settings Settings
}

// normalize returns f with defaults filled in and values clamped.
func (f Fusion) normalize() Fusion {
	n := len(f.Panel)
	if f.MinPanel <= 0 {
		f.MinPanel = defaultFusionMinPanel
	}
	f.MinPanel = max(f.MinPanel, 2)
	f.MinPanel = min(f.MinPanel, n)
	if f.Grace <= 0 {
		f.Grace = defaultFusionGrace
	}
	f.Grace = min(f.Grace, maxFusionGrace)
	if f.HardCap <= 0 {
		f.HardCap = defaultFusionHardCap
	}
	f.HardCap = min(max(f.HardCap, time.Second), maxFusionHardCap)
	return f
}

// leg routes req to the single target t and reads its answer. A panel leg
// (emergency false) never takes the emergency fallback on its own: the
// fusion takes it once, when no leg answered.
func (r *Router) leg(ctx context.Context, name string, t Target, set Settings, req Request, send SendFunc, emergency bool) (Answer, error) {
	req.Combo = &Combo{Name: name, Strategy: strategyPriority, Targets: []Target{t}, Settings: set}
	do := r.dispatch
	if emergency {
		do = r.Do
	}
	res, err := do(ctx, req, send)
	if err != nil {
		return Answer{Target: t, Attempts: res.Attempts}, err
	}
	return readAnswer(res)
}

// readAnswer reads and closes the winning response of res.
func readAnswer(res *Result) (Answer, error) {
	resp := res.Response
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBody))
	a := Answer{Target: res.Target, Status: resp.StatusCode, Header: resp.Header, Body: body, Attempts: res.Attempts,
		Emergency: res.Emergency}
	if err != nil {
		return a, fmt.Errorf("combo: reading the answer of %s: %w", res.Target.String(), err)
	}
	return a, nil
}

// Fuse runs f for req. A request with tools goes to the judge target
// alone; a caller whose request says tool_choice "none" should strip its
// tools and pass Tools 0, so that the panel serves it. Otherwise every
// panel member is asked in parallel; one answer is returned as it is, and
// two or more go to f.Judge in panel order. Panel legs do not take the
// emergency fallback one by one: when no leg answered and a leg's failure
// triggers it, the request is sent once to the emergency target (see
// [EmergencyFallback]) and its answer returned; otherwise the error is a
// [*Error] (503, [CodeFusionNoAnswers], matching [ErrNoPanelAnswer]).
// Every leg has ended when Fuse returns. If ctx ends first, its error is
// returned.
func (r *Router) Fuse(ctx context.Context, f *Fusion, req Request, send SendFunc) (Answer, error) {
	cfg := f.normalize()
	if len(cfg.Panel) == 0 {
		return Answer{}, &Error{Status: http.StatusServiceUnavailable, Code: CodeFusionNoAnswers, Combo: f.Name, Step: -1}
	}
	if req.Tools > 0 {
		t := cfg.Panel[0]
		if cfg.JudgeTarget != nil {
			t = *cfg.JudgeTarget
		}
		return r.leg(ctx, cfg.Name+"/judge", t, cfg.Settings, req, send, true)
	}

	type result struct {
		i   int
		a   Answer
		err error
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.HardCap)
	defer cancel()
	results := make(chan result, len(cfg.Panel))
	var wg sync.WaitGroup
	for i, t := range cfg.Panel {
		wg.Go(func() {
			a, err := r.leg(pctx, cfg.Name+"/"+t.String(), t, cfg.Settings, req, send, false)
			results <- result{i, a, err}
		})
	}

	var got, failed []result
	var errs []error
	var grace <-chan time.Time
	answered := 0
collect:
	for done := 0; done < len(cfg.Panel); done++ {
		select {
		case res := <-results:
			if res.err != nil {
				errs = append(errs, res.err)
				failed = append(failed, res)
				continue
			}
			got = append(got, res)
			answered++
			if answered == cfg.MinPanel && grace == nil && answered < len(cfg.Panel) {
				timer := time.NewTimer(cfg.Grace)
				defer timer.Stop()
				grace = timer.C
			}
		case <-grace:
			break collect
		case <-pctx.Done():
			break collect
		}
	}
	cancel()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Answer{}, err
	}

	switch len(got) {
	case 0:
		if r.cfg.Emergency != nil {
			slices.SortFunc(failed, func(x, y result) int { return x.i - y.i })
			var tried Result
			for _, f := range failed {
				tried.Attempts = append(tried.Attempts, f.a.Attempts...)
			}
			ereq := req
			ereq.Combo = &Combo{Name: cfg.Name, Settings: cfg.Settings}
			for _, f := range failed {
				if _, _, _, ok := r.emergencyTrigger(ctx, ereq, &tried, f.err); !ok {
					continue
				}
				res, err := r.emergency(ctx, ereq, send, &tried, f.err)
				if err == nil {
					return readAnswer(res)
				}
				if ctx.Err() != nil {
					return Answer{}, ctx.Err()
				}
				break // asked once, and it failed too
			}
		}
		return Answer{}, &Error{Status: http.StatusServiceUnavailable, Code: CodeFusionNoAnswers, Combo: f.Name, Step: -1, Errs: errs}
	case 1:
		return got[0].a, nil
	}
	slices.SortFunc(got, func(x, y result) int { return x.i - y.i })
	answers := make([]Answer, len(got))
	for i, g := range got {
		answers[i] = g.a
	}
	if cfg.Judge == nil {
		return answers[0], nil
	}
	return cfg.Judge(ctx, answers)
}

// Pipeline runs combos in sequence: the answer of each step, turned into an
// input by Next, is the input of the following step; only the last answer
// is returned. Each step is a full request through [Router.Do] over its
// combo, so it is screened, ordered and falls back like any other.
type Pipeline struct {
	Steps []*Combo
	// Next turns the answer of step into the input of step+1. Nil passes
	// the answer's body on unchanged.
	Next func(ctx context.Context, step int, prev Answer) ([]byte, error)
}

// Run runs p for req, starting from input. A failed step ends the run with
// an [*Error] ([CodePipelineStepFailed]) naming it (its status is the step's upstream or terminal
// status, 502 otherwise); a context error is returned as it is. A pipeline
// without steps fails with an [*Error] (404, [CodePipelineNoSteps]).
func (p *Pipeline) Run(ctx context.Context, r *Router, req Request, input []byte,
	send func(ctx context.Context, t *Target, step int, input []byte) (*http.Response, error)) (Answer, error) {
	if len(p.Steps) == 0 {
		return Answer{}, &Error{Status: http.StatusNotFound, Code: CodePipelineNoSteps, Step: -1}
	}
	var last Answer
	for i, c := range p.Steps {
		if i > 0 {
			if p.Next != nil {
				in, err := p.Next(ctx, i-1, last)
				if err != nil {
					return last, &Error{Status: http.StatusBadGateway, Code: CodePipelineStepFailed, Step: i, Errs: []error{err}}
				}
				input = in
			} else {
				input = last.Body
			}
		}
		in, step := input, i
		req.Combo = c
		res, err := r.Do(ctx, req, func(ctx context.Context, t *Target) (*http.Response, error) {
			return send(ctx, t, step, in)
		})
		if err == nil {
			last, err = readAnswer(res)
		}
		if err != nil {
			if ctx.Err() != nil {
				return last, ctx.Err()
			}
			return last, &Error{Status: statusOf(err), Code: CodePipelineStepFailed, Step: i, Errs: []error{err}}
		}
	}
	return last, nil
}

// statusOf is the HTTP status a routing error stands for.
func statusOf(err error) int {
	if e, ok := errors.AsType[*Error](err); ok && e.Status != 0 {
		return e.Status
	}
	return http.StatusBadGateway
}

// Handoff is what a context-relay hook learns after a success: the target
// that served, and the targets after it in declared order, which may serve
// the conversation's next turns and need its context handed over.
type Handoff struct {
	Combo  *Combo
	Served Target
	Next   []Target
	Result *Result
}

// Relay routes req in declared (priority) order, whatever the combo's
// strategy, and after a success calls hook, before returning, with the
// serving target and the ones after it; a hook may, for example, write a
// summary of the conversation for the next targets. The caller's combo is
// not modified.
func (r *Router) Relay(ctx context.Context, req Request, send SendFunc, hook func(ctx context.Context, h Handoff)) (*Result, error) {
	req.Combo = inDeclaredOrder(req.Combo)
	res, err := r.Do(ctx, req, send)
	if err != nil || hook == nil || res.Emergency {
		return res, err
	}
	h := Handoff{Combo: req.Combo, Served: res.Target, Result: res}
	k := keyOf(&res.Target)
	for i := range req.Combo.Targets {
		if keyOf(&req.Combo.Targets[i]) == k {
			h.Next = req.Combo.Targets[i+1:]
			break
		}
	}
	hook(ctx, h)
	return res, nil
}
