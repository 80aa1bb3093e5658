package affinity

// The implementation of KeyFromBody before the streaming scan, kept as the
// reference of the differential fuzz test: it decodes the whole body.

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"
)

// refMaxTextDepth bounds how deeply nested objects are searched for text.
const refMaxTextDepth = 8

type refObject = map[string]json.RawMessage

// refKeyFromBody is KeyFromBody by whole-document decoding.
func refKeyFromBody(body []byte) (Key, bool) {
	body = bytes.TrimLeft(body, " \t\r\n")
	if len(body) == 0 || body[0] != '{' {
		return Key{}, false
	}
	var root refObject
	if json.Unmarshal(body, &root) != nil {
		return Key{}, false
	}
	if md := refAsObject(root["metadata"]); md != nil {
		if k, ok := refStringKey("metadata", md["session_id"]); ok {
			return k, true
		}
		if k, ok := refStringKey("metadata", md["sessionId"]); ok {
			return k, true
		}
		if k, ok := refClaudeCodeKey(md["user_id"]); ok {
			return k, true
		}
	}
	for _, f := range [...]struct{ field, source string }{
		{"conversation_id", "conversation"},
		{"session_id", "session"},
		{"prompt_cache_key", "prompt-cache"},
	} {
		if k, ok := refStringKey(f.source, root[f.field]); ok {
			return k, true
		}
	}
	if text := refFirstInputText(root); text != "" {
		return hashedKey("input", text), true
	}
	return Key{}, false
}

// refStringKey normalises raw when it is a JSON string.
func refStringKey(source string, raw json.RawMessage) (Key, bool) {
	s, ok := refAsString(raw)
	if !ok {
		return Key{}, false
	}
	return NewKey(source, s)
}

// refClaudeCodeKey reads the session_id held in a JSON-encoded user_id string.
func refClaudeCodeKey(raw json.RawMessage) (Key, bool) {
	s, ok := refAsString(raw)
	if !ok || len(s) > maxKeyInput && utf8.RuneCountInString(s) > maxKeyInput {
		return Key{}, false
	}
	inner := refAsObject(json.RawMessage(strings.TrimSpace(s)))
	if inner == nil {
		return Key{}, false
	}
	return refStringKey("claude-code", inner["session_id"])
}

func refAsString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func refAsObject(raw json.RawMessage) refObject {
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	var o refObject
	if json.Unmarshal(raw, &o) != nil {
		return nil
	}
	return o
}

func refAsArray(raw json.RawMessage) []json.RawMessage {
	if len(raw) == 0 || raw[0] != '[' {
		return nil
	}
	var a []json.RawMessage
	if json.Unmarshal(raw, &a) != nil {
		return nil
	}
	return a
}

// refFirstInputText finds the first user text of a request, or "".
func refFirstInputText(root refObject) string {
	if in, ok := root["input"]; ok {
		if items := refAsArray(in); items != nil {
			for _, item := range items {
				var t string
				if o := refAsObject(item); o != nil {
					if c, ok := o["content"]; ok {
						t = refTextOf(c, 0)
					} else {
						t = refTextOf(item, 0)
					}
				} else {
					t = refTextOf(item, 0)
				}
				if t != "" {
					return t
				}
			}
		} else if t := refTextOf(in, 0); t != "" {
			return t
		}
	}
	if msg := refFirstUserEntry(root["messages"]); msg != nil {
		if t := refTextOf(msg["content"], 0); t != "" {
			return t
		}
	}
	if entry := refFirstUserEntry(root["contents"]); entry != nil {
		if t := refTextOf(entry["parts"], 0); t != "" {
			return t
		}
	}
	for _, f := range [...]string{"prompt", "query", "instruction"} {
		if t := refTextOf(root[f], 0); t != "" {
			return t
		}
	}
	return ""
}

// refFirstUserEntry returns the first refObject of the array raw whose role is
// "user", else its first item when that is an refObject, else nil.
func refFirstUserEntry(raw json.RawMessage) refObject {
	items := refAsArray(raw)
	if len(items) == 0 {
		return nil
	}
	for _, item := range items {
		if o := refAsObject(item); o != nil {
			if role, _ := refAsString(o["role"]); role == "user" {
				return o
			}
		}
	}
	return refAsObject(items[0])
}

// refTextOf extracts text from a JSON value, or returns "".
func refTextOf(raw json.RawMessage, depth int) string {
	if len(raw) == 0 || depth > refMaxTextDepth {
		return ""
	}
	switch raw[0] {
	case '"':
		s, _ := refAsString(raw)
		return refUsable(refCutChars(s, maxKeyInput))
	case '[':
		return refUsable(refJoinText(refAsArray(raw)))
	case '{':
		o := refAsObject(raw)
		for _, f := range [...]string{"text", "content", "prompt", "parts"} {
			if t := refTextOf(o[f], depth+1); t != "" {
				return t
			}
		}
	}
	return ""
}

// refJoinText joins the string items of an array and the string text or content
// fields of its refObject items with "\n", within a budget of maxKeyInput
// characters.
func refJoinText(items []json.RawMessage) string {
	var b strings.Builder
	budget := maxKeyInput
	for _, item := range items {
		if budget <= 0 {
			break
		}
		s, ok := refAsString(item)
		if !ok {
			o := refAsObject(item)
			if s, ok = refAsString(o["text"]); !ok {
				s, ok = refAsString(o["content"])
			}
		}
		if !ok || s == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
			budget--
			if budget <= 0 {
				break
			}
		}
		s = refCutChars(s, budget)
		budget -= utf8.RuneCountInString(s)
		b.WriteString(s)
	}
	return b.String()
}

// refCutChars returns the first n characters of s.
func refCutChars(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}

// refUsable returns s when it contains a character that is not white space,
// else "".
func refUsable(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsSpace(r) }) < 0 {
		return ""
	}
	return s
}
