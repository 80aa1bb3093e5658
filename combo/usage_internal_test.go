package combo

import (
	"bytes"
	"strings"
	"testing"
)

// Answers as the providers send them, shortened.
var usageBodies = []struct {
	name string
	body string
	want Usage
}{
	{"openai chat", `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o",
		"choices":[{"index":0,"message":{"role":"assistant","content":"Hi, usage is fine"},"finish_reason":"stop"}],
		"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,
		"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`, Usage{19, 10}},
	{"openai responses", `{"id":"resp_1","object":"response","status":"completed","model":"gpt-4.1",
		"output":[{"type":"message","content":[{"type":"output_text","text":"Hi"}]}],
		"usage":{"input_tokens":36,"input_tokens_details":{"cached_tokens":0},"output_tokens":87,
		"output_tokens_details":{"reasoning_tokens":0},"total_tokens":123}}`, Usage{36, 87}},
	{"anthropic", `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4",
		"content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn",
		"usage":{"input_tokens":2095,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":503}}`, Usage{2095, 503}},
	{"no usage", `{"id":"x","choices":[{"message":{"content":"the word usage in text"}}]}`, Usage{}},
	{"null usage", `{"usage":null}`, Usage{}},
	{"usage in a message only", `{"choices":[{"message":{"usage":{"prompt_tokens":5}}}]}`, Usage{}},
	{"last duplicate wins", `{"usage":{"prompt_tokens":1},"usage":{"prompt_tokens":2,"completion_tokens":3}}`, Usage{2, 3}},
	{"whole floats", `{"usage":{"prompt_tokens":12.0,"completion_tokens":7.00}}`, Usage{12, 7}},
	{"not counts", `{"usage":{"prompt_tokens":-3,"completion_tokens":1e3,"input_tokens":"9","output_tokens":2.5}}`, Usage{}},
	{"too many digits", `{"usage":{"prompt_tokens":1234567890,"completion_tokens":999999999}}`, Usage{0, 999999999}},
	{"escaped key", `{"us\u0061ge":{"prompt_tokens":4,"completion_tokens":5}}`, Usage{}}, // no "usage" to find: not read
	{"not json", `usage: {"prompt_tokens":4}`, Usage{}},
	{"truncated", `{"usage":{"prompt_tokens":4,"completion_tokens":5}`, Usage{}},
	{"array", `[{"usage":{"prompt_tokens":4}}]`, Usage{}},
	{"empty", ``, Usage{}},
}

func TestBodyUsage(t *testing.T) {
	for _, c := range usageBodies {
		if got := bodyUsage([]byte(c.body)); got != c.want {
			t.Errorf("%s: bodyUsage = %+v, want %+v", c.name, got, c.want)
		}
	}
}

// Streams as the providers send them, up to where the router commits or
// further.
var usageStreams = []struct {
	name   string
	stream string
	want   Usage
}{
	{"anthropic message_start", "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4","stop_reason":null,"usage":{"input_tokens":472,"output_tokens":2}}}` + "\n\n" +
		"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}` + "\n\n",
		Usage{472, 2}},
	{"anthropic message_delta", "event: message_start\r\n" +
		`data: {"type":"message_start","message":{"usage":{"input_tokens":472,"output_tokens":2}}}` + "\r\n\r\n" +
		"event: message_delta\r\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":89}}` + "\r\n\r\n",
		Usage{472, 89}},
	{"openai final chunk", `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"}}],"usage":null}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":2,"total_tokens":10}}` + "\n\n" +
		"data: [DONE]\n\n", Usage{8, 2}},
	{"openai responses completed", "event: response.created\n" + `data: {"type":"response.created","response":{"id":"resp_1","usage":null}}` + "\n\n" +
		"event: response.completed\n" + `data: {"type":"response.completed","response":{"id":"resp_1","status":"completed","usage":{"input_tokens":11,"output_tokens":22,"total_tokens":33}}}` + "\n\n",
		Usage{11, 22}},
	{"no usage", `data: {"choices":[{"index":0,"delta":{"content":"usage"}}]}` + "\n\n", Usage{}},
	{"usage in a comment", ": usage {\"prompt_tokens\":3}\n\n", Usage{}},
	{"no newline at the end", `data: {"usage":{"prompt_tokens":3,"completion_tokens":4}}`, Usage{3, 4}},
	{"empty", "", Usage{}},
}

func TestStreamUsage(t *testing.T) {
	for _, c := range usageStreams {
		if got := streamUsage([]byte(c.stream)); got != c.want {
			t.Errorf("%s: streamUsage = %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestUsageAllocatesNothing: reading usage allocates
// nothing, and a body without the word costs one byte search.
func TestUsageAllocatesNothing(t *testing.T) {
	body := []byte(strings.Repeat(`{"choices":[{"delta":{"content":"hello"}}]}`, 100))
	stream, openai := []byte(usageStreams[0].stream), []byte(usageBodies[0].body)
	if n := testing.AllocsPerRun(100, func() {
		_ = bodyUsage(body)
		_ = bodyUsage(openai)
		_ = streamUsage(stream)
	}); n != 0 {
		t.Errorf("%v allocations, want 0", n)
	}
}

// FuzzUsage: any input reads without a panic as counts that are never
// negative, and a one-line document reads the same as a body and as the
// data line of a stream.
func FuzzUsage(f *testing.F) {
	for _, c := range usageBodies {
		f.Add([]byte(c.body))
	}
	for _, c := range usageStreams {
		f.Add([]byte(c.stream))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		u, s := bodyUsage(b), streamUsage(b)
		for _, v := range []Usage{u, s} {
			if v.InputTokens < 0 || v.OutputTokens < 0 {
				t.Fatalf("negative usage %+v", v)
			}
		}
		if bytes.ContainsAny(b, "\r\n") {
			return
		}
		line := append([]byte("data: "), b...)
		if got := streamUsage(line); got != u {
			t.Fatalf("as a data line %+v, as a body %+v", got, u)
		}
	})
}
