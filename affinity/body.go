package affinity

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxTextDepth bounds how deeply nested objects are searched for text.
const maxTextDepth = 8

type object = map[string]json.RawMessage

// KeyFromBody derives the session key from a JSON request body. The first of
// these that yields a key wins, each normalised as by [NewKey] with the
// source label shown:
//
//   - metadata.session_id ("metadata")
//   - metadata.sessionId ("metadata")
//   - metadata.user_id, when it is a JSON string that itself holds a JSON
//     object with a string session_id ("claude-code", keyed on that
//     session_id)
//   - conversation_id ("conversation")
//   - session_id ("session")
//   - prompt_cache_key ("prompt-cache")
//   - the first user text ("input", always hashed: "input:sha256:<hex>")
//
// Fields must be JSON strings; other types are ignored. Field names are
// matched exactly. The first user text is looked for in input (a string, or
// the first array item whose content, or the item itself, yields text), then
// messages (the content of the first message with role "user", else of the
// first message), then contents (the parts of the first entry with role
// "user", else of the first entry), then prompt, query and instruction. Text
// is taken from a string (cut to 4096 characters); from an array, by
// joining its string items and its items' string text or content fields with
// "\n" up to 4096 characters in all; from an object, through its
// text, content, prompt or parts field. Text must contain a character that
// is not white space. Other values are never serialised to make text, so a
// message made only of images yields no key.
//
// A body that is not a JSON object yields false. The whole body is decoded;
// callers bound its size as they do for any request body.
func (e *Extractor) KeyFromBody(body []byte) (Key, bool) {
	body = bytes.TrimLeft(body, " \t\r\n")
	if len(body) == 0 || body[0] != '{' {
		return Key{}, false
	}
	var root object
	if json.Unmarshal(body, &root) != nil {
		return Key{}, false
	}
	if md := asObject(root["metadata"]); md != nil {
		if k, ok := stringKey("metadata", md["session_id"]); ok {
			return k, true
		}
		if k, ok := stringKey("metadata", md["sessionId"]); ok {
			return k, true
		}
		if k, ok := claudeCodeKey(md["user_id"]); ok {
			return k, true
		}
	}
	for _, f := range [...]struct{ field, source string }{
		{"conversation_id", "conversation"},
		{"session_id", "session"},
		{"prompt_cache_key", "prompt-cache"},
	} {
		if k, ok := stringKey(f.source, root[f.field]); ok {
			return k, true
		}
	}
	if text := firstInputText(root); text != "" {
		return hashedKey("input", text), true
	}
	return Key{}, false
}

// stringKey normalises raw when it is a JSON string.
func stringKey(source string, raw json.RawMessage) (Key, bool) {
	s, ok := asString(raw)
	if !ok {
		return Key{}, false
	}
	return NewKey(source, s)
}

// claudeCodeKey reads the session_id held in a JSON-encoded user_id string.
func claudeCodeKey(raw json.RawMessage) (Key, bool) {
	s, ok := asString(raw)
	if !ok || len(s) > maxKeyInput && utf8.RuneCountInString(s) > maxKeyInput {
		return Key{}, false
	}
	inner := asObject(json.RawMessage(strings.TrimSpace(s)))
	if inner == nil {
		return Key{}, false
	}
	return stringKey("claude-code", inner["session_id"])
}

func asString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func asObject(raw json.RawMessage) object {
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	var o object
	if json.Unmarshal(raw, &o) != nil {
		return nil
	}
	return o
}

func asArray(raw json.RawMessage) []json.RawMessage {
	if len(raw) == 0 || raw[0] != '[' {
		return nil
	}
	var a []json.RawMessage
	if json.Unmarshal(raw, &a) != nil {
		return nil
	}
	return a
}

// firstInputText finds the first user text of a request, or "".
func firstInputText(root object) string {
	if in, ok := root["input"]; ok {
		if items := asArray(in); items != nil {
			for _, item := range items {
				var t string
				if o := asObject(item); o != nil {
					if c, ok := o["content"]; ok {
						t = textOf(c, 0)
					} else {
						t = textOf(item, 0)
					}
				} else {
					t = textOf(item, 0)
				}
				if t != "" {
					return t
				}
			}
		} else if t := textOf(in, 0); t != "" {
			return t
		}
	}
	if msg := firstUserEntry(root["messages"]); msg != nil {
		if t := textOf(msg["content"], 0); t != "" {
			return t
		}
	}
	if entry := firstUserEntry(root["contents"]); entry != nil {
		if t := textOf(entry["parts"], 0); t != "" {
			return t
		}
	}
	for _, f := range [...]string{"prompt", "query", "instruction"} {
		if t := textOf(root[f], 0); t != "" {
			return t
		}
	}
	return ""
}

// firstUserEntry returns the first object of the array raw whose role is
// "user", else its first item when that is an object, else nil.
func firstUserEntry(raw json.RawMessage) object {
	items := asArray(raw)
	if len(items) == 0 {
		return nil
	}
	for _, item := range items {
		if o := asObject(item); o != nil {
			if role, _ := asString(o["role"]); role == "user" {
				return o
			}
		}
	}
	return asObject(items[0])
}

// textOf extracts text from a JSON value, or returns "".
func textOf(raw json.RawMessage, depth int) string {
	if len(raw) == 0 || depth > maxTextDepth {
		return ""
	}
	switch raw[0] {
	case '"':
		s, _ := asString(raw)
		return usable(cutChars(s, maxKeyInput))
	case '[':
		return usable(joinText(asArray(raw)))
	case '{':
		o := asObject(raw)
		for _, f := range [...]string{"text", "content", "prompt", "parts"} {
			if t := textOf(o[f], depth+1); t != "" {
				return t
			}
		}
	}
	return ""
}

// joinText joins the string items of an array and the string text or content
// fields of its object items with "\n", within a budget of maxKeyInput
// characters.
func joinText(items []json.RawMessage) string {
	var b strings.Builder
	budget := maxKeyInput
	for _, item := range items {
		if budget <= 0 {
			break
		}
		s, ok := asString(item)
		if !ok {
			o := asObject(item)
			if s, ok = asString(o["text"]); !ok {
				s, ok = asString(o["content"])
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
		s = cutChars(s, budget)
		budget -= utf8.RuneCountInString(s)
		b.WriteString(s)
	}
	return b.String()
}

// cutChars returns the first n characters of s.
func cutChars(s string, n int) string {
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

// usable returns s when it contains a character that is not white space,
// else "".
func usable(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsSpace(r) }) < 0 {
		return ""
	}
	return s
}
