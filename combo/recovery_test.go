package combo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/watchdog"
)

// origBody is the client's request in the recovery tests.
const origBody = `{"model":"m","stream":true,"messages":[{"role":"user","content":"Say it"}]}`

// fullText is the answer the recovery tests stream, in pieces with
// multi-byte UTF-8 and characters JSON escapes.
var fullPieces = []string{"Héllo", " wörld", " — \"ça\" va?", " 日本語の", "テキスト", ".\n", "Done"}

func fullText() string { return strings.Join(fullPieces, "") }

// chunk is a chat.completion.chunk with the given framing.
func chunk(id, model string, delta map[string]any, finish any) combotest.Event {
	b, _ := json.Marshal(map[string]any{
		"id": id, "object": "chat.completion.chunk", "created": 1700000000, "model": model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
	})
	return combotest.Event{Data: string(b)}
}

// answer is a complete streamed answer of pieces under id and model: a
// role chunk, one chunk per piece, a finish chunk and [DONE].
func answer(id, model string, pieces ...string) []combotest.Event {
	evs := []combotest.Event{chunk(id, model, map[string]any{"role": "assistant", "content": ""}, nil)}
	for _, p := range pieces {
		evs = append(evs, chunk(id, model, map[string]any{"content": p}, nil))
	}
	return append(evs, chunk(id, model, map[string]any{}, "stop"), combotest.Done())
}

// textBefore is the text of the events that end within the first n bytes
// of evs.
func textBefore(evs []combotest.Event, n int) string {
	var b strings.Builder
	at := 0
	for _, ev := range evs {
		enc := ev.Encode()
		at += len(enc)
		if at > n {
			break
		}
		var c struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(ev.Data), &c) == nil && len(c.Choices) > 0 {
			b.WriteString(c.Choices[0].Delta.Content)
		}
	}
	return b.String()
}

// recoveryRig is a router over providers "a" and "b" with mid-stream
// continuation on, whose sends carry origBody and whose continuations
// carry combo.ContinuationBody of it.
type recoveryRig struct {
	f     *fleet
	combo *combo.Combo
	conts []string // the partial text of each continuation request, in order
}

func newRecoveryRig(t *testing.T, rec combo.StreamRecovery, providers ...string) *recoveryRig {
	t.Helper()
	if len(providers) == 0 {
		providers = []string{"a", "b"}
	}
	rg := &recoveryRig{f: newFleet(t, providers...)}
	var ts []combo.Target
	for _, p := range providers {
		ts = append(ts, target(p, p+"1", "m"))
	}
	rg.combo = &combo.Combo{Name: "rec", Targets: ts, Settings: combo.Settings{StreamRecovery: rec}}
	return rg
}

func (rg *recoveryRig) post(ctx context.Context, t *combo.Target, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+t.Provider+".test/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+t.Connection)
	return rg.f.up[t.Provider].Transport().RoundTrip(req)
}

func (rg *recoveryRig) request() combo.Request {
	return combo.Request{Combo: rg.combo, Continue: func(ctx context.Context, t *combo.Target, partial string) (*http.Response, error) {
		rg.conts = append(rg.conts, partial)
		body, err := combo.ContinuationBody([]byte(origBody), partial)
		if err != nil {
			return nil, err
		}
		return rg.post(ctx, t, body)
	}}
}

// do routes one request and reads its body whole: what the client got and
// the error that ended it (nil at io.EOF).
func (rg *recoveryRig) do(t *testing.T) (*combo.Result, string, error) {
	t.Helper()
	res, err := rg.f.router.Do(context.Background(), rg.request(), func(ctx context.Context, tg *combo.Target) (*http.Response, error) {
		return rg.post(ctx, tg, []byte(origBody))
	})
	require.NoError(t, err)
	got, rerr := io.ReadAll(res.Response.Body)
	require.NoError(t, res.Response.Body.Close())
	return res, string(got), rerr
}

// clientView is what an SSE client assembles from a chat stream: the
// text, the framing of every chunk, the [DONE] count, and every data that
// is neither JSON nor [DONE].
type clientView struct {
	text    string
	ids     map[string]int
	models  map[string]int
	done    int
	broken  []string
	finishs []string
}

func assemble(t *testing.T, stream string) clientView {
	t.Helper()
	v := clientView{ids: map[string]int{}, models: map[string]int{}}
	var b strings.Builder
	// Only whole events count: the client's parser drops an unfinished one.
	whole := ""
	if i := strings.LastIndex(stream, "\n\n"); i >= 0 {
		whole = stream[:i]
	}
	for ev := range strings.SplitSeq(whole, "\n\n") {
		var data string
		for l := range strings.SplitSeq(ev, "\n") {
			if d, ok := strings.CutPrefix(l, "data: "); ok {
				data += d
			}
		}
		if data == "" {
			continue
		}
		if data == "[DONE]" {
			v.done++
			continue
		}
		var c struct {
			ID      string `json:"id"`
			Model   string `json:"model"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			v.broken = append(v.broken, data)
			continue
		}
		v.ids[c.ID]++
		v.models[c.Model]++
		for _, ch := range c.Choices {
			b.WriteString(ch.Delta.Content)
			if ch.FinishReason != nil {
				v.finishs = append(v.finishs, *ch.FinishReason)
			}
		}
	}
	v.text = b.String()
	return v
}

// cutPoints are byte offsets into the encoded original stream: between
// events, inside an event's "data:" prefix, inside a UTF-8 sequence and
// inside a JSON delta string.
func cutPoints(t *testing.T, evs []combotest.Event) map[string]int {
	t.Helper()
	enc := (&combotest.Stream{Events: evs}).Encoded()
	off := func(ev int) int { return len((&combotest.Stream{Events: evs[:ev]}).Encoded()) }
	inEvent := func(ev int, sub string, delta int) int {
		i := strings.Index(evs[ev].Encode(), sub)
		require.GreaterOrEqual(t, i, 0, "%q in event %d", sub, ev)
		return off(ev) + i + delta
	}
	pts := map[string]int{
		"between events":        off(3),
		"inside an event":       off(3) + 3,
		"inside a UTF-8 rune":   inEvent(4, "日", 1),
		"inside a 2-byte rune":  inEvent(2, "ö", 1),
		"inside a JSON string":  inEvent(3, "ça", 0),
		"inside a JSON escape":  inEvent(3, `\"ça`, 1),
		"before the last event": off(len(evs) - 3),
	}
	for name, n := range pts {
		require.Less(t, n, len(enc), name)
	}
	return pts
}

func TestMidStreamContinuationAtCutPoints(t *testing.T) {
	orig := answer("chatcmpl-1", "m-orig", fullPieces...)
	for name, n := range cutPoints(t, orig) {
		for _, mode := range []string{"continues", "restarts"} {
			t.Run(name+"/"+mode, func(t *testing.T) {
				rg := newRecoveryRig(t, combo.StreamRecovery{MidStream: true})
				rg.f.up["a"].Script("", combotest.Cut(combotest.SSE(0, orig...), n))
				partial := textBefore(orig, n)
				rest := strings.TrimPrefix(fullText(), partial)
				var gotBody []byte
				rg.f.up["b"].Handle("", func(c combotest.Call) combotest.Reply {
					gotBody = c.Body
					if mode == "restarts" {
						return combotest.SSE(0, answer("chatcmpl-2", "m-next", fullPieces...)...)
					}
					// The rest in two pieces, after its first rune.
					if rest == "" {
						return combotest.SSE(0, answer("chatcmpl-2", "m-next")...)
					}
					_, size := utf8.DecodeRuneInString(rest)
					return combotest.SSE(0, answer("chatcmpl-2", "m-next", rest[:size], rest[size:])...)
				})
				res, got, err := rg.do(t)
				require.NoError(t, err, "the stream ends as a whole answer")
				v := assemble(t, got)
				assert.Equal(t, fullText(), v.text, "the client's text is the whole answer, once")
				assert.Equal(t, 1, v.done, "one [DONE]")
				assert.Empty(t, v.broken, "no event the client cannot parse")
				assert.Equal(t, []string{"stop"}, v.finishs)
				assert.Len(t, v.ids, 1, "every chunk carries the original id: %v", v.ids)
				assert.Contains(t, v.ids, "chatcmpl-1")
				assert.Equal(t, []string{"m-orig"}, keys(v.models))
				// The continuation request: the original messages plus the
				// text already sent as the assistant's partial answer.
				assert.Equal(t, []string{partial}, rg.conts)
				var body struct {
					Model    string `json:"model"`
					Stream   bool   `json:"stream"`
					Messages []struct {
						Role    string `json:"role"`
						Content string `json:"content"`
					} `json:"messages"`
				}
				require.NoError(t, json.Unmarshal(gotBody, &body))
				assert.True(t, body.Stream)
				require.Len(t, body.Messages, 2)
				assert.Equal(t, "user", body.Messages[0].Role)
				assert.Equal(t, "Say it", body.Messages[0].Content)
				assert.Equal(t, "assistant", body.Messages[1].Role)
				assert.Equal(t, partial, body.Messages[1].Content, "the assistant partial is the text already sent, exactly")
				// The trail: a's commit, then b's continuation.
				require.Len(t, res.Attempts, 2)
				assert.Equal(t, "a", res.Attempts[0].Target.Provider)
				assert.Equal(t, combo.OutcomeSucceeded, res.Attempts[0].Outcome)
				assert.Equal(t, "b", res.Attempts[1].Target.Provider)
				assert.Equal(t, combo.OutcomeSucceeded, res.Attempts[1].Outcome)
				assert.Equal(t, "stream_continuation", res.Attempts[1].Code)
			})
		}
	}
}

func keys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestMidStreamContinuationClientBytes checks the exact bytes: the
// original's whole events, then b's suffix re-framed, then one [DONE].
func TestMidStreamContinuationClientBytes(t *testing.T) {
	orig := answer("chatcmpl-1", "m-orig", "Hello", " wor", "ld")
	n := len((&combotest.Stream{Events: orig[:2]}).Encoded()) + 10 // inside " wor"'s event
	rg := newRecoveryRig(t, combo.StreamRecovery{MidStream: true})
	rg.f.up["a"].Script("", combotest.Cut(combotest.SSE(0, orig...), n))
	rg.f.up["b"].Script("", combotest.SSE(0, answer("chatcmpl-9", "other", " wor", "ld")...))
	_, got, err := rg.do(t)
	require.NoError(t, err)
	want := (&combotest.Stream{Events: orig[:2]}).Encoded() +
		`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m-orig","choices":[{"index":0,"delta":{"content":" wor"},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m-orig","choices":[{"index":0,"delta":{"content":"ld"},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m-orig","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		"data: [DONE]\n\n"
	assert.Equal(t, want, got)
	assert.Equal(t, []string{"Hello"}, rg.conts)
	for i := range rg.combo.Targets {
		st := rg.f.router.Stats(&rg.combo.Targets[i])
		assert.Equal(t, int64(0), st.InFlight, "%s finalized once the body is closed", rg.combo.Targets[i].Provider)
		assert.Equal(t, int64(1), st.Successes, rg.combo.Targets[i].Provider)
	}
}

func TestMidStreamNoContinuation(t *testing.T) {
	text := chunk("c1", "m", map[string]any{"content": "Let me look"}, nil)
	tool := chunk("c1", "m", map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_1",
		"type": "function", "function": map[string]any{"name": "lookup", "arguments": `{"q":`}}}}, nil)
	think := chunk("c1", "m", map[string]any{"reasoning_content": "hmm"}, nil)
	more := chunk("c1", "m", map[string]any{"content": " more"}, nil)
	enc := func(evs ...combotest.Event) string { return (&combotest.Stream{Events: evs}).Encoded() }
	bad := combotest.Error(500, "down")
	for _, tt := range []struct {
		name      string
		rec       combo.StreamRecovery
		events    []combotest.Event
		providers []string
		cont      bool             // the request carries Continue
		b         *combotest.Reply // b's answer; nil: a good one
		wantConts int              // continuation requests made
	}{
		{name: "tool call in flight", rec: combo.StreamRecovery{MidStream: true}, cont: true,
			events: []combotest.Event{text, tool, more}},
		{name: "reasoning in flight", rec: combo.StreamRecovery{MidStream: true}, cont: true,
			events: []combotest.Event{text, think, more}},
		{name: "not opted in", rec: combo.StreamRecovery{Early: true}, cont: true,
			events: []combotest.Event{text, more, more}},
		{name: "no Continue", rec: combo.StreamRecovery{MidStream: true},
			events: []combotest.Event{text, more, more}},
		{name: "Responses framing", rec: combo.StreamRecovery{MidStream: true}, cont: true,
			events: []combotest.Event{combotest.ResponsesDelta("Hi"), combotest.ResponsesDelta(" there"), more}},
		{name: "no target left", rec: combo.StreamRecovery{MidStream: true}, cont: true, providers: []string{"a"},
			events: []combotest.Event{text, more, more}},
		{name: "next target fails", rec: combo.StreamRecovery{MidStream: true}, cont: true,
			events: []combotest.Event{text, more, more}, b: &bad, wantConts: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			providers := tt.providers
			if providers == nil {
				providers = []string{"a", "b"}
			}
			rg := newRecoveryRig(t, tt.rec, providers...)
			cut := len(enc(tt.events[:2]...)) + 5 // inside the third event
			rg.f.up["a"].Script("", combotest.Cut(combotest.SSE(0, tt.events...), cut))
			if rg.f.up["b"] != nil {
				b := combotest.SSE(0, answer("c2", "m", " more")...)
				if tt.b != nil {
					b = *tt.b
				}
				rg.f.up["b"].Script("", b)
			}
			req := rg.request()
			if !tt.cont {
				req.Continue = nil
			}
			res, err := rg.f.router.Do(context.Background(), req, func(ctx context.Context, tg *combo.Target) (*http.Response, error) {
				return rg.post(ctx, tg, []byte(origBody))
			})
			require.NoError(t, err)
			got, rerr := io.ReadAll(res.Response.Body)
			require.NoError(t, res.Response.Body.Close())
			assert.ErrorIs(t, rerr, syscall.ECONNRESET, "the client gets the bytes sent, then the error")
			assert.Equal(t, enc(tt.events...)[:cut], string(got), "exactly the bytes the upstream sent")
			assert.Len(t, rg.conts, tt.wantConts)
			if rg.f.up["b"] != nil {
				assert.Equal(t, tt.wantConts, rg.f.up["b"].Total(), "continuation requests to b")
			}
			assert.Equal(t, `event: error`, strings.SplitN(string(combo.StreamError(rerr)), "\n", 2)[0])
		})
	}
}

// TestMidStreamContinuationBounded: each continuation that breaks off is
// continued in turn up to MaxContinuations, then the error stands.
func TestMidStreamContinuationBounded(t *testing.T) {
	pieces := []string{"one", " two", " three", " four"}
	orig := answer("c1", "m", pieces...)
	for _, tt := range []struct {
		max      int
		wantErr  bool
		wantText string
	}{
		{max: 0, wantErr: true, wantText: "one two"}, // default 1: b's continuation breaks too
		{max: 2, wantErr: false, wantText: "one two three four"},
	} {
		rg := newRecoveryRig(t, combo.StreamRecovery{MidStream: true, MaxContinuations: tt.max}, "a", "b", "c")
		rg.f.up["a"].Script("", combotest.Cut(combotest.SSE(0, orig...), len((&combotest.Stream{Events: orig[:2]}).Encoded())+1))
		contB := answer("c2", "m", " two", " three")
		rg.f.up["b"].Script("", combotest.Cut(combotest.SSE(0, contB...), len((&combotest.Stream{Events: contB[:2]}).Encoded())+1))
		rg.f.up["c"].Script("", combotest.SSE(0, answer("c3", "m", " three", " four")...))
		_, got, err := rg.do(t)
		if tt.wantErr {
			assert.ErrorIs(t, err, syscall.ECONNRESET, "max %d: the continuation's own error", tt.max)
			assert.Equal(t, []string{"one"}, rg.conts)
		} else {
			assert.NoError(t, err)
			assert.Equal(t, []string{"one", "one two"}, rg.conts)
		}
		v := assemble(t, got)
		assert.Equal(t, tt.wantText, v.text, "max %d", tt.max)
		assert.Empty(t, v.broken)
	}
}

func TestContinuationBody(t *testing.T) {
	got, err := combo.ContinuationBody([]byte(`{"model":"x","stream":true,"temperature":0.2,"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}]}`), "Hé \"q\"")
	require.NoError(t, err)
	assert.JSONEq(t, `{"model":"x","stream":true,"temperature":0.2,"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"},{"role":"assistant","content":"Hé \"q\""}]}`, string(got))
	for _, bad := range []string{``, `[]`, `null`, `{"model":"x"}`, `{"messages":{}}`} {
		_, err := combo.ContinuationBody([]byte(bad), "p")
		assert.Error(t, err, bad)
	}
}

func TestEarlyRecovery(t *testing.T) {
	good := combotest.SSE(0, answer("c1", "m", "fine")...)
	empty := combotest.SSE(0, combotest.Heartbeat())
	errEv := combotest.SSE(0, combotest.ErrorEvent("server_error", "boom"))
	cutEarly := combotest.Cut(good, 10)
	for _, tt := range []struct {
		name  string
		early bool
		a     []combotest.Reply
		want  []string // provider:outcome:code
	}{
		{name: "reopened", early: true, a: []combotest.Reply{empty, good},
			want: []string{"a:failed:stream_reopen", "a:succeeded:"}},
		{name: "read error reopened", early: true, a: []combotest.Reply{cutEarly, good},
			want: []string{"a:failed:stream_reopen", "a:succeeded:"}},
		{name: "once", early: true, a: []combotest.Reply{empty, empty},
			want: []string{"a:failed:stream_reopen", "a:failed:server_error", "b:succeeded:"}},
		{name: "off", early: false, a: []combotest.Reply{empty, good},
			want: []string{"a:failed:server_error", "b:succeeded:"}},
		{name: "error event moves on", early: true, a: []combotest.Reply{errEv, good},
			want: []string{"a:failed:server_error", "b:succeeded:"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rg := newRecoveryRig(t, combo.StreamRecovery{Early: tt.early})
			rg.f.up["a"].Script("", tt.a...)
			rg.f.up["b"].Script("", good)
			res, got, err := rg.do(t)
			require.NoError(t, err)
			assert.Equal(t, fullOf(answer("c1", "m", "fine")), got, "the client sees only the recovered stream")
			var trail []string
			for _, at := range res.Attempts {
				trail = append(trail, at.Target.Provider+":"+string(at.Outcome)+":"+codeOrReason(at))
			}
			assert.Equal(t, tt.want, trail)
		})
	}
}

func fullOf(evs []combotest.Event) string { return (&combotest.Stream{Events: evs}).Encoded() }

// codeOrReason is the attempt's code, or "upstream_error" for a failed
// attempt whose classifier named none, "" for a success.
func codeOrReason(a combo.Attempt) string {
	if a.Outcome == combo.OutcomeSucceeded {
		return a.Code
	}
	if a.Code == "" {
		return "upstream_error"
	}
	return a.Code
}

// TestEarlyRecoveryReadiness is the spec's scenario 9: a stream of pings
// only is cut by the readiness timeout, reopened once on the same target,
// and the client receives only the recovered stream; the watchdog aborted
// once and the reopen's trail entry names it.
func TestEarlyRecoveryReadiness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRecoveryRig(t, combo.StreamRecovery{Early: true})
		rg.f.cfg.Watchdog = watchdog.Config{ReadinessTimeout: new(2 * time.Second)}
		rg.f.rebuild()
		pings := combotest.Reply{Stream: &combotest.Stream{Events: []combotest.Event{combotest.Heartbeat(), combotest.Heartbeat(), combotest.Heartbeat()},
			Pace: time.Second, HangAfter: true}}
		rg.f.up["a"].Script("", pings, combotest.SSE(0, answer("c1", "m", "ok")...))
		start := time.Now()
		res, got, err := rg.do(t)
		require.NoError(t, err)
		assert.Equal(t, fullOf(answer("c1", "m", "ok")), got)
		assert.Equal(t, 2*time.Second, time.Since(start))
		require.Len(t, res.Attempts, 2)
		assert.Equal(t, "stream_reopen", res.Attempts[0].Code)
		assert.Equal(t, http.StatusGatewayTimeout, res.Attempts[0].Status)
		var we *watchdog.Error
		require.ErrorAs(t, res.Attempts[0].Err, &we)
		assert.Equal(t, watchdog.CodeReadinessTimeout, we.Code)
		assert.Equal(t, 2, rg.f.up["a"].Total(), "reopened once")
		assert.Equal(t, 0, rg.f.up["b"].Total())
		assert.Equal(t, int64(0), rg.f.router.Stats(&rg.combo.Targets[0]).InFlight, "every attempt finalized")
	})
}

// FuzzContinuationCut: wherever the first stream breaks off, the client
// assembles the whole answer exactly once (a cut before commit falls back
// to b with the original request; after commit, b continues).
func FuzzContinuationCut(f *testing.F) {
	orig := answer("chatcmpl-1", "m-orig", fullPieces...)
	enc := fullOf(orig)
	for _, n := range []int{0, 1, 60, 150, 200, 333, len(enc) - 20, len(enc) - 1, len(enc)} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n int) {
		if n < 0 || n > len(enc) {
			return
		}
		rg := newRecoveryRig(t, combo.StreamRecovery{MidStream: true})
		rg.f.up["a"].Script("", combotest.Cut(combotest.SSE(0, orig...), n))
		rg.f.up["b"].Handle("", func(c combotest.Call) combotest.Reply {
			var body struct {
				Messages []struct{ Role, Content string } `json:"messages"`
			}
			_ = json.Unmarshal(c.Body, &body)
			last := body.Messages[len(body.Messages)-1]
			if last.Role != "assistant" {
				return combotest.SSE(0, answer("chatcmpl-2", "m-next", fullPieces...)...)
			}
			return combotest.SSE(0, answer("chatcmpl-2", "m-next", strings.TrimPrefix(fullText(), last.Content))...)
		})
		_, got, err := rg.do(t)
		if err != nil {
			t.Fatalf("cut at %d: %v", n, err)
		}
		v := assemble(t, got)
		if v.text != fullText() || v.done != 1 || len(v.broken) > 0 {
			t.Fatalf("cut at %d: text %q, done %d, broken %q", n, v.text, v.done, v.broken)
		}
	})
}

func TestStreamRecoveryNormalize(t *testing.T) {
	for _, tt := range []struct{ in, want int }{{-3, 1}, {0, 1}, {1, 1}, {3, 3}, {5, 5}, {6, 5}, {100, 5}} {
		got := combo.StreamRecovery{MidStream: true, MaxContinuations: tt.in}.Normalize()
		assert.Equal(t, combo.StreamRecovery{MidStream: true, MaxContinuations: tt.want}, got, "in %d", tt.in)
	}
	assert.Equal(t, combo.StreamRecovery{MaxContinuations: 1}, combo.Settings{}.Normalize().StreamRecovery, "off by default")
}

// TestMidStreamEnds covers how a committed stream may end: an end with
// neither finish_reason nor [DONE] is continued; an answer that broke off
// after its finish_reason is whole and only gets the [DONE] it lacks; CRLF
// line endings are events like any other.
func TestMidStreamEnds(t *testing.T) {
	orig := answer("c1", "m", "Hello", " world")
	crlf := make([]combotest.Event, len(orig))
	for i, ev := range orig {
		crlf[i] = combotest.Event{Raw: strings.ReplaceAll(ev.Encode(), "\n", "\r\n")}
	}
	for _, tt := range []struct {
		name      string
		a         combotest.Reply
		wantConts []string
		wantBody  string // "" : only the assembled text is checked
		wantDone  int    // [DONE] events the client gets
	}{
		{name: "clean end mid-answer", a: combotest.SSE(0, orig[:2]...), wantConts: []string{"Hello"}, wantDone: 1},
		{name: "clean end after finish_reason", a: combotest.SSE(0, orig[:4]...),
			wantBody: fullOf(orig[:4]), wantDone: 0},
		{name: "cut after finish_reason", a: combotest.Cut(combotest.SSE(0, orig...), len(fullOf(orig[:4]))+3),
			wantBody: fullOf(orig[:4]) + "data: [DONE]\n\n", wantDone: 1},
		{name: "CRLF cut inside an event", a: combotest.Cut(combotest.SSE(0, crlf...), len(fullOf(crlf[:2]))+7),
			wantConts: []string{"Hello"}, wantDone: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rg := newRecoveryRig(t, combo.StreamRecovery{MidStream: true})
			rg.f.up["a"].Script("", tt.a)
			rg.f.up["b"].Script("", combotest.SSE(0, answer("c2", "m2", " world")...))
			_, got, err := rg.do(t)
			require.NoError(t, err)
			assert.Equal(t, tt.wantConts, rg.conts)
			if tt.wantBody != "" {
				assert.Equal(t, tt.wantBody, got)
			}
			v := assemble(t, strings.ReplaceAll(got, "\r\n", "\n"))
			assert.Equal(t, "Hello world", v.text)
			assert.Equal(t, tt.wantDone, v.done)
			assert.Empty(t, v.broken)
		})
	}
}

func ExampleContinuationBody() {
	body := []byte(`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"Count to five"}]}`)
	cont, err := combo.ContinuationBody(body, "One, two,")
	if err != nil {
		panic(err)
	}
	fmt.Println(string(cont))
	// Output:
	// {"messages":[{"role":"user","content":"Count to five"},{"role":"assistant","content":"One, two,"}],"model":"gpt-4o","stream":true}
}
