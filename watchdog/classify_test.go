package watchdog

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		name      string
		event     string
		data      string
		useful    int64
		protected bool
		ping      bool
		isError   bool
	}{
		{"chat content", "", `{"choices":[{"delta":{"content":"hello"}}]}`, 5, false, false, false},
		{"chat delta text", "", `{"choices":[{"delta":{"text":"abc"}}]}`, 3, false, false, false},
		{"chat content and text", "", `{"choices":[{"delta":{"content":"ab","text":"cd"}}]}`, 4, false, false, false},
		{"legacy choice text", "", `{"choices":[{"text":"xyz","index":0}]}`, 3, false, false, false},
		{"two choices", "", `{"choices":[{"delta":{"content":"ab"}},{"delta":{"content":"cde"}}]}`, 5, false, false, false},
		{"utf8 multibyte", "", `{"choices":[{"delta":{"content":"żółw 猫"}}]}`, 11, false, false, false},
		{"escapes", "", `{"choices":[{"delta":{"content":"a\n\u00e9\ud83d\ude00\\"}}]}`, 1 + 1 + 2 + 4 + 1, false, false, false},
		{"lone surrogate", "", `{"choices":[{"delta":{"content":"\ud800"}}]}`, 3, false, false, false},
		{"responses delta", "response.output_text.delta", `{"type":"response.output_text.delta","delta":"hello"}`, 5, false, false, false},
		{"anthropic text_delta", "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi!"}}`, 3, false, false, false},
		{"anthropic thinking_delta", "content_block_delta", `{"type":"content_block_delta","delta":{"type":"thinking_delta","thinking":"hmm"}}`, 0, true, false, false},
		{"anthropic tool_use start", "content_block_start", `{"type":"content_block_start","content_block":{"type":"tool_use","id":"t"}}`, 0, true, false, false},
		{"anthropic text block start", "content_block_start", `{"type":"content_block_start","content_block":{"type":"text","text":""}}`, 0, false, false, false},
		{"anthropic input_json_delta", "", `{"type":"content_block_delta","delta":{"type":"input_json_delta","partial_json":"{\"a\""}}`, 0, false, false, false},
		{"anthropic ping", "ping", `{"type": "ping"}`, 0, false, true, false},
		{"tool_calls delta", "", `{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}`, 0, true, false, false},
		{"empty tool_calls with text", "", `{"choices":[{"delta":{"content":"ok","tool_calls":[]}}]}`, 2, false, false, false},
		{"function_call delta", "", `{"choices":[{"delta":{"function_call":{"name":"f"}}}]}`, 0, true, false, false},
		{"null function_call", "", `{"choices":[{"delta":{"content":"ok","function_call":null}}]}`, 2, false, false, false},
		{"reasoning_content", "", `{"choices":[{"delta":{"reasoning_content":"think"}}]}`, 0, true, false, false},
		{"reasoning string", "", `{"choices":[{"delta":{"reasoning":"think","content":"x"}}]}`, 0, true, false, false},
		{"empty reasoning with text", "", `{"choices":[{"delta":{"reasoning_content":"","content":"x"}}]}`, 1, false, false, false},
		{"responses reasoning summary", "", `{"type":"response.reasoning_summary_text.delta","delta":"plan"}`, 0, true, false, false},
		{"responses function args", "", `{"type":"response.function_call_arguments.delta","delta":"{}"}`, 0, true, false, false},
		{"type from event name", "response.reasoning_text.delta", `{"delta":"plan"}`, 0, true, false, false},
		{"json type beats event name", "tool", `{"type":"response.output_text.delta","delta":"ok"}`, 2, false, false, false},
		{"type case insensitive", "", `{"type":"Response.THINKING","delta":"x"}`, 0, true, false, false},
		{"usage only", "", `{"usage":{"output_tokens":99}}`, 0, false, false, false},
		{"empty delta", "", `{"choices":[{"delta":{}}]}`, 0, false, false, false},
		{"empty content", "", `{"choices":[{"delta":{"content":""}}]}`, 0, false, false, false},
		{"done", "", `[DONE]`, 0, false, false, false},
		{"empty data", "", ``, 0, false, false, false},
		{"not json", "", `hello world`, 0, false, false, false},
		{"not json but protected name", "thinking", `hello`, 0, false, false, false},
		{"truncated json", "", `{"choices":[{"delta":{"content":"hel`, 0, false, false, false},
		{"trailing garbage", "", `{"delta":"x"} y`, 0, false, false, false},
		{"trailing comma", "", `{"delta":"x",}`, 0, false, false, false},
		{"non-object json", "", `[1,2,3]`, 0, false, false, false},
		{"non-object json protected name", "tool_call", `"x"`, 0, true, false, false},
		{"duplicate key last wins", "", `{"delta":"long text","delta":"ab"}`, 2, false, false, false},
		{"duplicate type last wins", "", `{"type":"tool","type":"x","delta":"ab"}`, 2, false, false, false},
		{"escaped key", "", `{"\u0064elta":"abc"}`, 3, false, false, false},
		{"content not string", "", `{"choices":[{"delta":{"content":12}}]}`, 0, false, false, false},
		{"openai error", "", `{"error":{"message":"overloaded","type":"server_error"}}`, 0, false, false, true},
		{"anthropic error", "error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, 0, false, false, true},
		{"error event name non-json", "error", `boom`, 0, false, false, true},
		{"responses failed", "", `{"type":"response.failed","response":{"error":{"code":"server_error"}}}`, 0, false, false, true},
		{"null error", "", `{"error":null,"choices":[{"delta":{"content":"a"}}]}`, 1, false, false, false},
		{"numbers and literals", "", `{"a":[-1.5e+3,0,true,false,null,{"b":"c"}],"delta":"z"}`, 1, false, false, false},
		{"bad number", "", `{"a":01,"delta":"z"}`, 0, false, false, false},
		{"control char in string", "", "{\"delta\":\"a\tb\"}", 0, false, false, false},
		{"deep nesting", "", deep(200), 0, false, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := classify([]byte(tc.data), []byte(tc.event))
			want := eventInfo{useful: tc.useful, protected: tc.protected, ping: tc.ping, isError: tc.isError}
			assert.Equal(t, want, got)
		})
	}
}

func deep(n int) string {
	b := make([]byte, 0, 2*n+20)
	b = append(b, `{"delta":"x","a":`...)
	for range n {
		b = append(b, '[')
	}
	for range n {
		b = append(b, ']')
	}
	return string(append(b, '}'))
}

func TestDecodeIntoTruncates(t *testing.T) {
	var buf [4]byte
	assert.Equal(t, "abcd", string(decodeInto(buf[:0], []byte("abcdef"))))
	assert.Equal(t, "ab", string(decodeInto(buf[:0], []byte(`ab\u00e9\u00e9`)[:8])[:2]))
	assert.Equal(t, "a\n", string(decodeInto(buf[:0], []byte(`a\n`))))
}
