package combo

import "github.com/routeguard/routeguard/internal/jsonscan"

// chunkInfo is what mid-stream continuation reads of one event's data: a
// Chat Completions chunk (chat.completion.chunk) of one choice, or not.
// The byte slices point into the data, or into the caller's scratch buffer
// for text.
type chunkInfo struct {
	plain   bool   // a chat chunk: a JSON object with choices or usage, no type, one choice at index 0
	id      []byte // the raw JSON values of the framing, nil when absent
	model   []byte
	created []byte
	usage   []byte // the raw usage value, nil when absent or null
	text    []byte // the decoded content of the deltas
	finish  []byte // the raw finish_reason value, nil when absent or null
	tool    bool   // a delta carries tool_calls or function_call
	think   bool   // a delta carries reasoning text
}

// scanChunk reads data into c, decoding the deltas' text into scratch
// (reused: c.text aliases it). Like encoding/json, the last of duplicate
// keys wins. It allocates only for text or keys written with JSON escapes.
func scanChunk(data, scratch []byte, c *chunkInfo) []byte {
	*c = chunkInfo{}
	scratch = scratch[:0]
	if !jsonscan.Valid(data) {
		return scratch
	}
	i := jsonscan.Space(data, 0)
	if data[i] != '{' {
		return scratch
	}
	var object, choices []byte
	typed := false
	for i = i + 1; ; {
		ks, ke, vs, ve, ok := jsonscan.Member(data, i)
		if !ok {
			break
		}
		i = ve
		key, val := data[ks:ke], data[vs:ve]
		switch {
		case jsonscan.KeyIs(key, "id"):
			c.id = val
		case jsonscan.KeyIs(key, "model"):
			c.model = val
		case jsonscan.KeyIs(key, "created"):
			c.created = val
		case jsonscan.KeyIs(key, "type"):
			typed = true
		case jsonscan.KeyIs(key, "object"):
			object = val
		case jsonscan.KeyIs(key, "usage"):
			c.usage = nil
			if !jsNull(val) {
				c.usage = val
			}
		case jsonscan.KeyIs(key, "choices"):
			choices = val
		}
	}
	bad := typed || (object != nil && !jsStringIs(object, "chat.completion.chunk"))
	if choices != nil {
		var ok bool
		scratch, ok = scanChoices(choices, scratch, c)
		bad = bad || !ok
	}
	c.plain = !bad && (choices != nil || c.usage != nil)
	c.text = scratch
	return scratch
}

// scanChoices reads a choices array: every choice at index 0, its delta
// and finish_reason.
func scanChoices(arr, scratch []byte, c *chunkInfo) ([]byte, bool) {
	if arr[0] != '[' {
		return scratch, false
	}
	for i := 1; ; {
		vs, ve, ok := jsonscan.Item(arr, i)
		if !ok {
			return scratch, true
		}
		i = ve
		ch := arr[vs:ve]
		if ch[0] != '{' {
			return scratch, false
		}
		var index, delta, finish []byte
		for j := 1; ; {
			ks, ke, ws, we, ok := jsonscan.Member(ch, j)
			if !ok {
				break
			}
			j = we
			key, val := ch[ks:ke], ch[ws:we]
			switch {
			case jsonscan.KeyIs(key, "index"):
				index = val
			case jsonscan.KeyIs(key, "finish_reason"):
				finish = val
			case jsonscan.KeyIs(key, "delta"):
				delta = val
			}
		}
		if index != nil && string(index) != "0" {
			return scratch, false
		}
		if finish != nil && !jsNull(finish) {
			c.finish = finish
		}
		if delta != nil && delta[0] == '{' {
			scratch = scanDelta(delta, scratch, c)
		}
	}
}

// scanDelta reads a choice's delta: its content text, tool calls and
// reasoning.
func scanDelta(d, scratch []byte, c *chunkInfo) []byte {
	var content, tools, fn, reasoning, reasoningContent []byte
	for j := 1; ; {
		ks, ke, vs, ve, ok := jsonscan.Member(d, j)
		if !ok {
			break
		}
		j = ve
		key, val := d[ks:ke], d[vs:ve]
		switch {
		case jsonscan.KeyIs(key, "content"):
			content = val
		case jsonscan.KeyIs(key, "tool_calls"):
			tools = val
		case jsonscan.KeyIs(key, "function_call"):
			fn = val
		case jsonscan.KeyIs(key, "reasoning"):
			reasoning = val
		case jsonscan.KeyIs(key, "reasoning_content"):
			reasoningContent = val
		}
	}
	if (tools != nil && !jsNull(tools)) || (fn != nil && !jsNull(fn)) {
		c.tool = true
	}
	for _, r := range [][]byte{reasoning, reasoningContent} {
		if len(r) > 2 && r[0] == '"' {
			c.think = true
		}
	}
	if len(content) > 0 && content[0] == '"' {
		scratch, _ = jsonscan.AppendString(scratch, content, -1)
	}
	return scratch
}

// jsNull reports whether the raw value v is null.
func jsNull(v []byte) bool { return string(v) == "null" }

// jsStringIs reports whether v is a JSON string decoding to str.
func jsStringIs(v []byte, str string) bool {
	return len(v) > 0 && v[0] == '"' && jsonscan.KeyIs(v, str)
}

// jsString decodes the JSON string raw; "" for anything else.
func jsString(raw []byte) string {
	if len(raw) < 2 || raw[0] != '"' {
		return ""
	}
	b, _ := jsonscan.AppendString(nil, raw, -1)
	return string(b)
}
