package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// recoveryChunk is a chat.completion.chunk of id and model carrying text
// (a finish chunk when text is "").
func recoveryChunk(id, model, text string) combotest.Event {
	delta, finish := map[string]any{"content": text}, any(nil)
	if text == "" {
		delta, finish = map[string]any{}, "stop"
	}
	b, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1700000000, "model": model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
	return combotest.Event{Data: string(b)}
}

// recoveryConfig is examples/stream-recovery.yaml with its providers on
// the fake upstreams: openai on a, anthropic on b.
func recoveryConfig(t *testing.T, a, b *combotest.Upstream) *gw.Config {
	t.Helper()
	data, err := os.ReadFile("examples/stream-recovery.yaml")
	require.NoError(t, err)
	cfg, err := gw.ParseWith(data, gw.FormatYAML, func(name string) (string, bool) { return "sk-" + name, true })
	require.NoError(t, err)
	require.Len(t, cfg.Providers, 2)
	cfg.Providers[0].BaseURL, cfg.Providers[1].BaseURL = a.URL()+"/v1", b.URL()+"/v1"
	cfg.Resilience.ComboCooldownWait.Disabled = true
	return cfg
}

func recoveryAnswer(id, model string, pieces ...string) []combotest.Event {
	var evs []combotest.Event
	for _, p := range pieces {
		evs = append(evs, recoveryChunk(id, model, p))
	}
	return append(evs, recoveryChunk(id, model, ""), combotest.Done())
}

// Early recovery: a stream that ends before any event is reopened once on
// the same connection, and the client gets only the reopened stream. The
// route is a provider/model name: the global setting applies.
func TestE2EStreamEarlyRecovery(t *testing.T) {
	up := upstreams(t, "a", "b")
	good := recoveryAnswer("c1", "gpt-4o", "Hello", " there")
	up["a"].Script("", combotest.SSE(0, combotest.Heartbeat()), combotest.SSE(0, good...))
	g := startGateway(t, recoveryConfig(t, up["a"], up["b"]))

	a := g.do(t, http.MethodPost, "/v1/chat/completions", hdr("Content-Type", "application/json"), chatBody("openai/gpt-4o", "hi", true))
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, (&combotest.Stream{Events: good}).Encoded(), a.body, "only the reopened stream")
	assert.Equal(t, "openai/gpt-4o", a.Header.Get("X-Routeguard-Target"))
	assert.Equal(t, "2", a.Header.Get("X-Routeguard-Attempts"), "the reopen is in the trail")
	calls := up["a"].Calls()
	require.Len(t, calls, 2)
	assert.Equal(t, []string{"sk-OPENAI_KEY", "sk-OPENAI_KEY"}, []string{calls[0].Credential, calls[1].Credential}, "the same connection")
	assert.Equal(t, 0, up["b"].Total())
}

// Mid-stream continuation: a stream cut inside a UTF-8 sequence after its
// first text is continued by the next target; the client reads one stream
// with the whole text, in the original's framing, ending with one [DONE].
func TestE2EStreamMidStreamContinuation(t *testing.T) {
	up := upstreams(t, "a", "b")
	pieces := []string{"Grüße", " aus", " Köln", " und 東京"}
	full := strings.Join(pieces, "")
	orig := recoveryAnswer("chatcmpl-a", "model-a", pieces...)
	enc := (&combotest.Stream{Events: orig}).Encoded()
	cut := strings.Index(enc, "Köln") + 2 // inside "ö"
	up["a"].Script("", combotest.Cut(combotest.SSE(0, orig...), cut))
	var partial string
	up["b"].Handle("", func(c combotest.Call) combotest.Reply {
		var body struct {
			Model    string                           `json:"model"`
			Messages []struct{ Role, Content string } `json:"messages"`
		}
		_ = json.Unmarshal(c.Body, &body)
		last := body.Messages[len(body.Messages)-1]
		if last.Role != "assistant" || body.Model != "claude-sonnet-4-5" || len(body.Messages) != 2 {
			return combotest.Error(400, "not a continuation")
		}
		partial = last.Content
		return combotest.SSE(0, recoveryAnswer("chatcmpl-b", "model-b", strings.TrimPrefix(full, last.Content))...)
	})
	g := startGateway(t, recoveryConfig(t, up["a"], up["b"]))

	a := g.do(t, http.MethodPost, "/v1/chat/completions", hdr("Content-Type", "application/json"), chatBody("smart", "hi", true))
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, "Grüße aus", partial, "b is asked to continue the text already sent")
	var text strings.Builder
	done := 0
	for ev := range strings.SplitSeq(strings.TrimSuffix(a.body, "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		require.True(t, ok, "every event is one data line: %q", ev)
		if data == "[DONE]" {
			done++
			continue
		}
		var c struct {
			ID, Model string
			Choices   []struct {
				Delta struct{ Content string }
			}
		}
		require.NoError(t, json.Unmarshal([]byte(data), &c), data)
		assert.Equal(t, "chatcmpl-a", c.ID)
		assert.Equal(t, "model-a", c.Model)
		for _, ch := range c.Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	assert.Equal(t, full, text.String(), "the whole text, once")
	assert.Equal(t, 1, done)
	assert.True(t, strings.HasSuffix(a.body, "data: [DONE]\n\n"))
	assert.Equal(t, 1, up["a"].Total())
	assert.Equal(t, 1, up["b"].Total())
}

// With a tool call in flight the stream is not continued: the client gets
// the bytes sent, then the error event, then the cut.
func TestE2EStreamNotContinuedWithToolCall(t *testing.T) {
	up := upstreams(t, "a", "b")
	text := recoveryChunk("chatcmpl-a", "gpt-4o", "Checking")
	tool := combotest.ToolCall("lookup", `{"q":"we`)
	evs := []combotest.Event{text, tool, recoveryChunk("chatcmpl-a", "gpt-4o", "")}
	cut := len((&combotest.Stream{Events: evs[:2]}).Encoded()) + 4
	up["a"].Script("", combotest.Cut(combotest.SSE(0, evs...), cut))
	up["b"].Script("", combotest.SSE(0, recoveryAnswer("chatcmpl-b", "m", "never")...))
	g := startGateway(t, recoveryConfig(t, up["a"], up["b"]))

	req, err := http.NewRequest(http.MethodPost, g.base+"/v1/chat/completions", strings.NewReader(chatBody("smart", "hi", true)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := testClient(t).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got, rerr := io.ReadAll(resp.Body)
	require.Error(t, rerr, "the stream is cut, never finished")
	want := (&combotest.Stream{Events: evs}).Encoded()[:cut]
	assert.True(t, strings.HasPrefix(string(got), want), "the bytes sent first: %q", got)
	assert.Contains(t, string(got)[len(want):], "event: error\ndata: ")
	assert.Equal(t, 0, up["b"].Total(), "no continuation")
}
