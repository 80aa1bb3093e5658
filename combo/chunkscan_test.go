package combo

import (
	"bytes"
	"encoding/json"
	"testing"
)

// refChunk is scanChunk written with encoding/json, for the fuzz test.
func refChunk(data []byte) (c chunkInfo, text string) {
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil || top == nil {
		return chunkInfo{}, ""
	}
	_, typed := top["type"]
	obj, hasObj := top["object"]
	bad := typed
	if hasObj {
		var s string
		bad = bad || len(obj) == 0 || obj[0] != '"' || json.Unmarshal(obj, &s) != nil || s != "chat.completion.chunk"
	}
	if u := top["usage"]; u != nil && string(u) != "null" {
		c.usage = u
	}
	choices, hasChoices := top["choices"]
	if hasChoices {
		var list []json.RawMessage
		if json.Unmarshal(choices, &list) != nil || choices[0] != '[' {
			bad = true
		}
		for _, raw := range list {
			var ch map[string]json.RawMessage
			if json.Unmarshal(raw, &ch) != nil || raw[0] != '{' {
				bad = true
				break
			}
			if idx, ok := ch["index"]; ok && string(idx) != "0" {
				bad = true
				break
			}
			if f := ch["finish_reason"]; f != nil && string(f) != "null" {
				c.finish = f
			}
			var d map[string]json.RawMessage
			if dr := ch["delta"]; len(dr) > 0 && dr[0] == '{' && json.Unmarshal(dr, &d) == nil {
				for _, k := range []string{"tool_calls", "function_call"} {
					if v, ok := d[k]; ok && string(v) != "null" {
						c.tool = true
					}
				}
				for _, k := range []string{"reasoning", "reasoning_content"} {
					var s string
					if v := d[k]; len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &s) == nil && s != "" {
						c.think = true
					}
				}
				var s string
				if v := d["content"]; len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &s) == nil {
					text += s
				}
			}
		}
	}
	c.plain = !bad && (hasChoices || c.usage != nil)
	return c, text
}

func FuzzScanChunk(f *testing.F) {
	for _, s := range []string{
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hé\"llo\u00e9"},"finish_reason":null}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{\"a\":"}}]}}]}`,
		`{"choices":[{"delta":{"reasoning_content":"hmm"}}]}`,
		`{"choices":[{"index":1,"delta":{"content":"x"}}]}`,
		`{"choices":[],"usage":{"total_tokens":3}}`,
		`{"type":"response.output_text.delta","delta":"x"}`,
		`{"object":"chat.completion","choices":[]}`,
		`{"choices":[{"delta":{"content":"a","content":"b"}}],"choices":[{"delta":{"content":"c"}}]}`,
		`{"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}]}`,
		`{"usage":null}`, `[1]`, `"x"`, `{"choices":{}}`, `{"\u0063hoices":[{"delta":{"content":"k"}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c chunkInfo
		scanChunk(data, nil, &c)
		want, text := refChunk(data)
		if c.plain != want.plain || c.tool != want.tool || c.think != want.think ||
			!bytes.Equal(c.finish, want.finish) || !bytes.Equal(c.usage, want.usage) {
			t.Fatalf("%s:\n got  %+v\n want %+v", data, c, want)
		}
		if c.plain && string(c.text) != text {
			t.Fatalf("%s: text %q, want %q", data, c.text, text)
		}
	})
}
