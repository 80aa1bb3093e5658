package combo_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/routeguard/routeguard/combo"
)

// The router reads the usage a plain answer's body reports, and the usage
// a stream reported up to its commit, into the successful attempt; an
// answer without usage leaves it zero.
func TestAttemptUsage(t *testing.T) {
	anthropic := "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"usage":{"input_tokens":472,"output_tokens":2}}}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}` + "\n\n" +
		"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":89}}` + "\n\n"
	for _, c := range []struct {
		name, contentType, body string
		byteByByte              bool // the upstream's reads return one byte each
		want                    combo.Usage
	}{
		{"openai", "application/json", `{"object":"chat.completion","choices":[{"index":0,"message":{"content":"Hi"}}],` +
			`"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29}}`, false, combo.Usage{InputTokens: 19, OutputTokens: 10}},
		{"anthropic", "application/json", `{"type":"message","content":[{"type":"text","text":"Hi"}],` +
			`"usage":{"input_tokens":2095,"output_tokens":503}}`, false, combo.Usage{InputTokens: 2095, OutputTokens: 503}},
		{"none", "application/json", `{"choices":[]}`, false, combo.Usage{}},
		// Read whole before the commit: message_delta's count wins.
		{"anthropic stream", "text/event-stream", anthropic, false, combo.Usage{InputTokens: 472, OutputTokens: 89}},
		// Read a byte at a time, the stream commits at its first text,
		// before message_delta: the output count known then is
		// message_start's.
		{"anthropic stream committed early", "text/event-stream", anthropic, true, combo.Usage{InputTokens: 472, OutputTokens: 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var seen []combo.Attempt
			r := combo.New(combo.Config{OnAttempt: func(a combo.Attempt) { seen = append(seen, a) }})
			send := func(context.Context, *combo.Target) (*http.Response, error) {
				var body io.Reader = strings.NewReader(c.body)
				if c.byteByByte {
					body = iotest.OneByteReader(body)
				}
				return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {c.contentType}},
					Body: io.NopCloser(body)}, nil
			}
			res, err := r.Do(context.Background(), combo.Request{Combo: &combo.Combo{Name: "u",
				Targets: []combo.Target{{Provider: "p", Connection: "k", Model: "m"}}}}, send)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(res.Response.Body)
			res.Response.Body.Close()
			if string(got) != c.body {
				t.Errorf("body = %q, want it unchanged", got)
			}
			if len(res.Attempts) != 1 || res.Attempts[0].Usage != c.want {
				t.Fatalf("attempts %+v, want one with usage %+v", res.Attempts, c.want)
			}
			if len(seen) != 1 || seen[0].Usage != c.want {
				t.Errorf("OnAttempt saw %+v, want usage %+v", seen, c.want)
			}
		})
	}
}
