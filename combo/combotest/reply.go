package combotest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Reply is one scripted answer of an upstream.
//
// Exactly one of the behaviours applies, in this order: Reset closes the
// connection without an answer; Hang blocks until the request is cancelled or
// the upstream is closed; Stream answers with server-sent events; otherwise
// Status, Header and Body are sent. Latency is waited out before any of them.
type Reply struct {
	Status  int         // HTTP status; 0 means 200
	Header  http.Header // extra response headers
	Body    string      // response body for plain answers
	Latency time.Duration
	Reset   bool // drop the connection: the client sees a transport error
	Hang    bool // never answer: block until the request context ends
	Stream  *Stream
}

// Stream is a server-sent-event answer, sent with status 200 and
// Content-Type text/event-stream.
type Stream struct {
	Events []Event
	// Pace is the delay before each event after the first.
	Pace time.Duration
	// HangAfter, when set, leaves the stream open after the last event until
	// the request is cancelled, as an upstream that stalls mid-stream.
	HangAfter bool
	// CutAfter, when above 0, breaks the stream off after that many bytes
	// of its encoded events, wherever they fall (between events, inside an
	// event, a JSON string or a UTF-8 sequence); see [Cut].
	CutAfter int
}

// Event is one server-sent event. Raw, when set, is written as is and the
// other fields are ignored.
type Event struct {
	Name    string // the event: field, if any
	Data    string // the data: field; several lines are split into data: lines
	Comment string // a comment line (": ..."), as used for heartbeats
	Raw     string
}

// Encode returns the wire form of the event, ending with a blank line.
func (e Event) Encode() string {
	if e.Raw != "" {
		return e.Raw
	}
	var b strings.Builder
	if e.Comment != "" {
		b.WriteString(": ")
		b.WriteString(e.Comment)
		b.WriteByte('\n')
	}
	if e.Name != "" {
		b.WriteString("event: ")
		b.WriteString(e.Name)
		b.WriteByte('\n')
	}
	if e.Data != "" {
		for _, line := range strings.Split(e.Data, "\n") {
			b.WriteString("data: ")
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	b.WriteByte('\n')
	return b.String()
}

// OK is a 200 answer with a Chat Completions JSON body carrying text.
func OK(text string) Reply {
	return Reply{Status: http.StatusOK, Header: jsonHeader(), Body: chatCompletion(text)}
}

// Error is an error answer with an OpenAI-style JSON error body.
func Error(status int, message string) Reply {
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "code": status}})
	return Reply{Status: status, Header: jsonHeader(), Body: string(body)}
}

// RateLimited is a 429 answer with a Retry-After header in whole seconds.
func RateLimited(retryAfter time.Duration) Reply {
	r := Error(http.StatusTooManyRequests, "Rate limit reached, please retry later")
	r.Header.Set("Retry-After", strconv.Itoa(int(retryAfter/time.Second)))
	return r
}

// WithHeader returns a copy of r with the header key set to value.
func (r Reply) WithHeader(key, value string) Reply {
	h := make(http.Header, len(r.Header)+1)
	for k, v := range r.Header {
		h[k] = append([]string(nil), v...)
	}
	h.Set(key, value)
	r.Header = h
	return r
}

// After returns a copy of r that waits d before answering.
func (r Reply) After(d time.Duration) Reply {
	r.Latency = d
	return r
}

// Reset is a reply that drops the connection.
func Reset() Reply { return Reply{Reset: true} }

// Hang is a reply that never answers.
func Hang() Reply { return Reply{Hang: true} }

// SSE is a streamed answer with the given events, paced by pace.
func SSE(pace time.Duration, events ...Event) Reply {
	return Reply{Status: http.StatusOK, Stream: &Stream{Events: events, Pace: pace}}
}

// TextStream is a Chat Completions stream that sends each chunk as a content
// delta, then [DONE].
func TextStream(pace time.Duration, chunks ...string) Reply {
	events := make([]Event, 0, len(chunks)+1)
	for _, c := range chunks {
		events = append(events, ChatDelta(c))
	}
	events = append(events, Done())
	return SSE(pace, events...)
}

// ChatDelta is a Chat Completions chunk with a content delta.
func ChatDelta(text string) Event {
	return Event{Data: mustJSON(map[string]any{
		"object":  "chat.completion.chunk",
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": text}}},
	})}
}

// ResponsesDelta is a Responses API output_text delta event.
func ResponsesDelta(text string) Event {
	return Event{Name: "response.output_text.delta", Data: mustJSON(map[string]any{
		"type": "response.output_text.delta", "delta": text,
	})}
}

// AnthropicDelta is an Anthropic Messages text_delta event.
func AnthropicDelta(text string) Event {
	return Event{Name: "content_block_delta", Data: mustJSON(map[string]any{
		"type": "content_block_delta", "index": 0,
		"delta": map[string]any{"type": "text_delta", "text": text},
	})}
}

// ToolCall is a Chat Completions chunk carrying a tool-call delta.
func ToolCall(name, arguments string) Event {
	return Event{Data: mustJSON(map[string]any{
		"object": "chat.completion.chunk",
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{
			"tool_calls": []any{map[string]any{"index": 0, "type": "function",
				"function": map[string]any{"name": name, "arguments": arguments}}},
		}}},
	})}
}

// Reasoning is a Chat Completions chunk carrying a reasoning delta.
func Reasoning(text string) Event {
	return Event{Data: mustJSON(map[string]any{
		"object":  "chat.completion.chunk",
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"reasoning_content": text}}},
	})}
}

// Heartbeat is an SSE comment line that keeps a connection alive and carries
// no output.
func Heartbeat() Event { return Event{Comment: "ping"} }

// ErrorEvent is an error object sent inside a 200 stream.
func ErrorEvent(code, message string) Event {
	return Event{Name: "error", Data: mustJSON(map[string]any{
		"error": map[string]any{"code": code, "message": message},
	})}
}

// Done is the Chat Completions end-of-stream marker.
func Done() Event { return Event{Data: "[DONE]"} }

func jsonHeader() http.Header {
	return http.Header{"Content-Type": []string{"application/json"}}
}

func chatCompletion(text string) string {
	return mustJSON(map[string]any{
		"object": "chat.completion",
		"choices": []any{map[string]any{
			"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": text},
		}},
	})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic("combotest: " + err.Error())
	}
	return string(b)
}
