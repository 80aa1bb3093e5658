package gw

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/routeguard/routeguard/combo"
)

// fusionRoute is a configured fusion combo, ready to serve.
type fusionRoute struct {
	fusion combo.Fusion // Judge unset: it is bound per request
	// judge is the configured judge target, for the synthesis request.
	judge Target
}

// buildCompositions builds the fusion and pipeline combos of c.
func buildCompositions(c *Config, providers map[string]*Provider) (map[string]*fusionRoute, map[string][]string) {
	fusions, pipelines := map[string]*fusionRoute{}, map[string][]string{}
	for _, cb := range c.Combos {
		switch cb.Strategy {
		case StrategyFusion:
			fu := FusionConfig{}
			if cb.Fusion != nil {
				fu = *cb.Fusion
			}
			fr := &fusionRoute{fusion: combo.Fusion{
				Name: cb.Name, MinPanel: fu.MinPanel, Grace: msDur(fu.GraceMs), HardCap: msDur(fu.HardCapMs),
				Settings: comboSettings(c, cb.Settings),
			}}
			for _, t := range cb.Targets {
				fr.fusion.Panel = append(fr.fusion.Panel, legTarget(providers[t.Provider], t))
			}
			fr.judge = cb.Targets[0]
			if fu.Judge != nil {
				fr.judge = *fu.Judge
				jt := legTarget(providers[fu.Judge.Provider], *fu.Judge)
				fr.fusion.JudgeTarget = &jt
			}
			fusions[cb.Name] = fr
		case StrategyPipeline:
			pipelines[cb.Name] = cb.Steps
		}
	}
	return fusions, pipelines
}

// legTarget is the one router target of a panel member: its connection,
// or the provider's first one when it names none.
func legTarget(p *Provider, t Target) combo.Target {
	if t.Connection == "" {
		t.Connection = p.Connections[0].ID
	}
	return expand(p, t)[0]
}

// composedFields returns the body for a composed request: the client's
// fields without streaming, and without tools when noTools is set.
func composedFields(fields map[string]json.RawMessage, noTools bool) map[string]json.RawMessage {
	cp := make(map[string]json.RawMessage, len(fields))
	for k, v := range fields {
		switch k {
		case "stream", "stream_options":
			continue
		case "tools", "tool_choice", "parallel_tool_calls":
			if noTools {
				continue
			}
		}
		cp[k] = v
	}
	return cp
}

// toolChoiceNone reports whether the request says tool_choice "none".
func toolChoiceNone(fields map[string]json.RawMessage) bool {
	var s string
	return json.Unmarshal(fields["tool_choice"], &s) == nil && s == "none"
}

// serveFusion answers a request to a fusion combo.
func (s *Server) serveFusion(w http.ResponseWriter, r *http.Request, cr *chatRequest, fr *fusionRoute) {
	f := fr.fusion
	judge := fr.judge
	if len(cr.prefs.only)+len(cr.prefs.ignore)+len(cr.prefs.order) > 0 {
		f.Panel = cr.prefs.apply(f.Panel)
		if len(f.Panel) == 0 {
			writeNoProviderLeft(w)
			return
		}
		if !cr.prefs.allows(judge.Provider) {
			p := f.Panel[0]
			judge = Target{Provider: p.Provider, Model: p.Model, Connection: p.Connection}
			f.JudgeTarget = &p
		}
	}
	rr := cr.rr
	if rr.Tools > 0 && toolChoiceNone(cr.fields) {
		rr.Tools = 0
	}
	legFields := composedFields(cr.fields, rr.Tools == 0)
	answered, judged := 1, ""
	f.Judge = func(ctx context.Context, answers []combo.Answer) (combo.Answer, error) {
		answered = len(answers)
		a, err := s.judge(ctx, cr, judge, f.Settings, answers)
		if err != nil {
			s.logError(r, fmt.Errorf("fusion %s: the judge failed, returning the first answer: %w", f.Name, err))
			judged = "failed"
			return answers[0], nil
		}
		judged = a.Target.Provider + "/" + a.Target.Model
		return a, nil
	}
	send := func(ctx context.Context, t *combo.Target) (*http.Response, error) {
		return s.send(ctx, cr.st, t, legFields, cr.header)
	}
	a, err := cr.st.router.Fuse(r.Context(), &f, rr, send)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("X-Routeguard-Answers", strconv.Itoa(answered))
	if judged != "" {
		w.Header().Set("X-Routeguard-Judge", judged)
	}
	s.writeAnswer(w, cr, a)
}

// judgePrompt asks the judge to write one answer from the panel's.
const judgePrompt = "You are the judge of a panel of models. Each answered the conversation above; their answers follow. " +
	"Write the single best answer to the conversation, using what is right in each. Reply with that answer only."

// judge asks the judge target, over every connection of its provider
// when it names none, for one answer synthesised from answers.
func (s *Server) judge(ctx context.Context, cr *chatRequest, judge Target, set combo.Settings, answers []combo.Answer) (combo.Answer, error) {
	var prompt strings.Builder
	prompt.WriteString(judgePrompt)
	for i, a := range answers {
		fmt.Fprintf(&prompt, "\n\n--- Answer %d (%s/%s) ---\n%s", i+1, a.Target.Provider, a.Target.Model, answerText(a.Body))
	}
	fields := composedFields(cr.fields, true)
	var msgs []json.RawMessage
	_ = json.Unmarshal(fields["messages"], &msgs)
	m, _ := json.Marshal(map[string]string{"role": "user", "content": prompt.String()})
	msgs = append(msgs, m)
	fields["messages"], _ = json.Marshal(msgs)
	p := cr.st.providers[judge.Provider]
	rr := cr.rr
	rr.Tools = 0
	rr.Combo = &combo.Combo{Name: cr.model + "/judge", Strategy: "priority", Targets: expand(p, judge), Settings: set}
	res, err := cr.st.router.Do(ctx, rr, func(ctx context.Context, t *combo.Target) (*http.Response, error) {
		return s.send(ctx, cr.st, t, fields, cr.header)
	})
	if err != nil {
		return combo.Answer{}, err
	}
	return readResult(res)
}

// readResult reads the winning answer of res whole.
func readResult(res *combo.Result) (combo.Answer, error) {
	defer res.Response.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Response.Body, 32<<20))
	return combo.Answer{Target: res.Target, Status: res.Response.StatusCode, Header: res.Response.Header, Body: body,
		Attempts: res.Attempts, Emergency: res.Emergency}, err
}

// answerText is the text of a chat completion: its first choice's
// message content, or the whole body when it has none.
func answerText(body []byte) string {
	var c struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if json.Unmarshal(body, &c) == nil && len(c.Choices) > 0 && c.Choices[0].Message.Content != "" {
		return c.Choices[0].Message.Content
	}
	return string(body)
}

// errNoContent is a pipeline step whose answer has no text to pass on.
var errNoContent = errors.New("the step's answer has no message content")

// servePipeline answers a request to a pipeline combo: each step is a full
// routed request over its combo; the next step receives the request with
// its messages replaced by one user message holding the previous step's
// answer.
func (s *Server) servePipeline(w http.ResponseWriter, r *http.Request, cr *chatRequest, steps []string) {
	p := combo.Pipeline{Next: func(_ context.Context, _ int, prev combo.Answer) ([]byte, error) {
		text := answerText(prev.Body)
		if text == "" || text == string(prev.Body) {
			return nil, errNoContent
		}
		next := composedFields(cr.fields, false)
		next["messages"], _ = json.Marshal([]map[string]string{{"role": "user", "content": text}})
		return json.Marshal(next)
	}}
	for _, name := range steps {
		c, err := cr.st.resolve(name)
		if err != nil { // validated: cannot happen
			s.writeError(w, r, err)
			return
		}
		c, ok := cr.prefs.narrow(c)
		if !ok {
			writeNoProviderLeft(w)
			return
		}
		p.Steps = append(p.Steps, c)
	}
	input, err := json.Marshal(composedFields(cr.fields, false))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	send := func(ctx context.Context, t *combo.Target, _ int, in []byte) (*http.Response, error) {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(in, &fields); err != nil {
			return nil, err
		}
		return s.send(ctx, cr.st, t, fields, cr.header)
	}
	a, err := p.Run(r.Context(), cr.st.router, cr.rr, input, send)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("X-Routeguard-Steps", strconv.Itoa(len(steps)))
	s.writeAnswer(w, cr, a)
}

// isComposition reports whether code is a failure of a fusion or a
// pipeline.
func isComposition(code string) bool {
	return code == combo.CodeFusionNoAnswers || code == combo.CodePipelineStepFailed || code == combo.CodePipelineNoSteps
}

// writeCompositionError answers a failed fusion or pipeline: the code and
// status of e; for a pipeline the failed step (from 0) in the body and
// the X-Routeguard-Pipeline-Step header, and the step's retry time when
// it has one.
func (s *Server) writeCompositionError(w http.ResponseWriter, r *http.Request, e *combo.Error) {
	status := e.Status
	if status == 0 {
		status = http.StatusBadGateway
	}
	body := map[string]any{"type": "upstream_error", "code": e.Code}
	switch e.Code {
	case combo.CodeFusionNoAnswers:
		body["message"] = "No member of the fusion panel answered"
	default:
		body["message"] = "Pipeline step " + strconv.Itoa(e.Step) + " failed"
		body["step"] = e.Step
		w.Header().Set("X-Routeguard-Pipeline-Step", strconv.Itoa(e.Step))
		for _, err := range e.Errs {
			var se *combo.Error
			if !errors.As(err, &se) {
				continue
			}
			v := se.Header.Get("Retry-After")
			if v == "" && se.RetryAfterSeconds() > 0 {
				v = strconv.FormatInt(se.RetryAfterSeconds(), 10)
			}
			if sec, ok := ClientRetryAfter(v, time.Now()); ok {
				w.Header().Set("Retry-After", strconv.FormatInt(sec, 10))
			}
		}
	}
	for _, err := range e.Errs {
		s.logError(r, err)
	}
	writeJSON(w, status, map[string]any{"error": body})
}

// writeAnswer sends a composed answer: as it is, or, when the client asked
// for a stream, as a stream of one chunk holding the whole answer.
func (s *Server) writeAnswer(w http.ResponseWriter, cr *chatRequest, a combo.Answer) {
	relayHeader(w.Header(), a.Header)
	w.Header().Set("X-Routeguard-Target", a.Target.Provider+"/"+a.Target.Model)
	var stream bool
	_ = json.Unmarshal(cr.fields["stream"], &stream)
	if sse, ok := asStream(a.Body); stream && a.Status == http.StatusOK && ok {
		w.Header().Del("Content-Length")
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(sse)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(a.Body)))
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
}

// asStream turns a chat completion into the server-sent events of a
// stream that carries it in one chunk.
func asStream(body []byte) ([]byte, bool) {
	var c struct {
		ID      string `json:"id"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []struct {
			Index        int             `json:"index"`
			Message      json.RawMessage `json:"message"`
			FinishReason *string         `json:"finish_reason"`
		} `json:"choices"`
	}
	if json.Unmarshal(body, &c) != nil || len(c.Choices) == 0 {
		return nil, false
	}
	type choice struct {
		Index        int             `json:"index"`
		Delta        json.RawMessage `json:"delta"`
		FinishReason *string         `json:"finish_reason"`
	}
	chunk := map[string]any{"id": c.ID, "object": "chat.completion.chunk", "created": c.Created, "model": c.Model}
	var choices []choice
	for _, ch := range c.Choices {
		choices = append(choices, choice{Index: ch.Index, Delta: ch.Message, FinishReason: ch.FinishReason})
	}
	chunk["choices"] = choices
	b, err := json.Marshal(chunk)
	if err != nil {
		return nil, false
	}
	var out bytes.Buffer
	out.WriteString("data: ")
	out.Write(b)
	out.WriteString("\n\ndata: [DONE]\n\n")
	return out.Bytes(), true
}
