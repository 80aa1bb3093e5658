package combo

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

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
	if !json.Valid(data) {
		return scratch
	}
	i := jsWS(data, 0)
	if data[i] != '{' {
		return scratch
	}
	var object, choices []byte
	typed := false
	for i = i + 1; ; {
		ks, ke, vs, ve, next, ok := jsMember(data, i)
		if !ok {
			break
		}
		i = next
		key, val := data[ks:ke], data[vs:ve]
		switch {
		case jsKey(key, "id"):
			c.id = val
		case jsKey(key, "model"):
			c.model = val
		case jsKey(key, "created"):
			c.created = val
		case jsKey(key, "type"):
			typed = true
		case jsKey(key, "object"):
			object = val
		case jsKey(key, "usage"):
			c.usage = nil
			if !jsNull(val) {
				c.usage = val
			}
		case jsKey(key, "choices"):
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
		vs, ve, next, ok := jsItem(arr, i)
		if !ok {
			return scratch, true
		}
		i = next
		ch := arr[vs:ve]
		if ch[0] != '{' {
			return scratch, false
		}
		var index, delta, finish []byte
		for j := 1; ; {
			ks, ke, ws, we, nj, ok := jsMember(ch, j)
			if !ok {
				break
			}
			j = nj
			key, val := ch[ks:ke], ch[ws:we]
			switch {
			case jsKey(key, "index"):
				index = val
			case jsKey(key, "finish_reason"):
				finish = val
			case jsKey(key, "delta"):
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
		ks, ke, vs, ve, nj, ok := jsMember(d, j)
		if !ok {
			break
		}
		j = nj
		key, val := d[ks:ke], d[vs:ve]
		switch {
		case jsKey(key, "content"):
			content = val
		case jsKey(key, "tool_calls"):
			tools = val
		case jsKey(key, "function_call"):
			fn = val
		case jsKey(key, "reasoning"):
			reasoning = val
		case jsKey(key, "reasoning_content"):
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
		scratch = jsAppendString(scratch, content)
	}
	return scratch
}

// The helpers below walk a document that json.Valid accepted.

// jsWS skips white space from i.
func jsWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// jsEnd returns the index just past the value that starts at b[i].
func jsEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return jsStringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = jsStringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	default: // a number or a literal
		for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' &&
			b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
			i++
		}
		return i
	}
}

// jsStringEnd returns the index just past the string that starts at b[i].
func jsStringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			break
		}
		q := j + k
		n := 0 // backslashes right before the quote
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
	return len(b)
}

// jsMember reads the member at or after i inside an object (i just past
// its '{' or at a ','): its key b[ks:ke] (with quotes) and value b[vs:ve],
// and where to go on; ok is false at the object's end.
func jsMember(b []byte, i int) (ks, ke, vs, ve, next int, ok bool) {
	i = jsWS(b, i)
	if i < len(b) && b[i] == ',' {
		i = jsWS(b, i+1)
	}
	if i >= len(b) || b[i] != '"' {
		return 0, 0, 0, 0, i, false
	}
	ks, ke = i, jsStringEnd(b, i)
	i = jsWS(b, ke) + 1 // past ':'
	vs = jsWS(b, i)
	ve = jsEnd(b, vs)
	return ks, ke, vs, ve, ve, true
}

// jsItem reads the item at or after i inside an array, as jsMember.
func jsItem(b []byte, i int) (vs, ve, next int, ok bool) {
	i = jsWS(b, i)
	if i < len(b) && b[i] == ',' {
		i = jsWS(b, i+1)
	}
	if i >= len(b) || b[i] == ']' {
		return 0, 0, i, false
	}
	ve = jsEnd(b, i)
	return i, ve, ve, true
}

func jsNull(v []byte) bool { return string(v) == "null" }

// jsKey reports whether the JSON string raw decodes to name.
func jsKey(raw []byte, name string) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return len(raw) == len(name)+2 && string(raw[1:len(raw)-1]) == name
	}
	var s string
	return json.Unmarshal(raw, &s) == nil && s == name
}

// jsStringIs reports whether v is a JSON string decoding to s.
func jsStringIs(v []byte, s string) bool { return len(v) > 0 && v[0] == '"' && jsKey(v, s) }

// jsAppendString appends the decoded JSON string raw to dst; invalid
// UTF-8 becomes U+FFFD, as encoding/json decodes it.
func jsAppendString(dst, raw []byte) []byte {
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return append(dst, raw[1:len(raw)-1]...)
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return dst
	}
	return append(dst, s...)
}

// jsString decodes the JSON string raw; "" for anything else.
func jsString(raw []byte) string {
	if len(raw) < 2 || raw[0] != '"' {
		return ""
	}
	return string(jsAppendString(nil, raw))
}
