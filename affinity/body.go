package affinity

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/routeguard/routeguard/internal/jsonscan"
)

// maxTextDepth bounds how deeply nested objects are searched for text.
const maxTextDepth = 8

// The top-level body fields KeyFromBody reads, by index into bodyFields.
const (
	fMetadata = iota
	fConversation
	fSession
	fPromptCache
	fInput
	fMessages
	fContents
	fPrompt
	fQuery
	fInstruction
	nFields
)

var bodyFields = [nFields]string{"metadata", "conversation_id", "session_id", "prompt_cache_key",
	"input", "messages", "contents", "prompt", "query", "instruction"}

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
// matched exactly; of duplicate fields the last counts. The first user text
// is looked for in input (a string, or the first array item whose content,
// or the item itself, yields text), then messages (the content of the first
// message with role "user", else of the first message), then contents (the
// parts of the first entry with role "user", else of the first entry), then
// prompt, query and instruction. Text is taken from a string (cut to 4096
// characters); from an array, by joining its string items and its items'
// string text or content fields with "\n" up to 4096 characters in all;
// from an object, through its text, content, prompt or parts field. Text
// must contain a character that is not white space. Other values are never
// serialised to make text, so a message made only of images yields no key.
//
// A body that is not a JSON object yields false. The body is scanned in
// place, without building a document: one validating pass, then a walk to
// the fields named above; a typical chat body costs one allocation, the
// key itself. Callers bound the body's size as they do for any request
// body.
func (e *Extractor) KeyFromBody(body []byte) (Key, bool) {
	i := jsonscan.Space(body, 0)
	if i >= len(body) || body[i] != '{' || !jsonscan.Valid(body[i:]) {
		return Key{}, false
	}
	root := body[i:]
	var f [nFields][]byte
	for j := 1; ; {
		ks, ke, vs, ve, ok := jsonscan.Member(root, j)
		if !ok {
			break
		}
		if n := fieldIndex(root[ks:ke]); n >= 0 {
			f[n] = root[vs:ve]
		}
		j = ve
	}
	if md := f[fMetadata]; isObject(md) {
		if k, ok := stringKey("metadata", jsonscan.Lookup(md, "session_id")); ok {
			return k, true
		}
		if k, ok := stringKey("metadata", jsonscan.Lookup(md, "sessionId")); ok {
			return k, true
		}
		if k, ok := claudeCodeKey(jsonscan.Lookup(md, "user_id")); ok {
			return k, true
		}
	}
	for _, s := range [...]struct {
		field  int
		source string
	}{{fConversation, "conversation"}, {fSession, "session"}, {fPromptCache, "prompt-cache"}} {
		if k, ok := stringKey(s.source, f[s.field]); ok {
			return k, true
		}
	}
	var sc scratch
	defer sc.release()
	if text := sc.firstInputText(&f); len(text) > 0 {
		return hashedKeyBytes("input", text), true
	}
	return Key{}, false
}

// fieldIndex returns the index in bodyFields of the JSON string raw (a
// member name with its quotes), or -1.
func fieldIndex(raw []byte) int {
	switch string(raw) {
	case `"metadata"`:
		return fMetadata
	case `"conversation_id"`:
		return fConversation
	case `"session_id"`:
		return fSession
	case `"prompt_cache_key"`:
		return fPromptCache
	case `"input"`:
		return fInput
	case `"messages"`:
		return fMessages
	case `"contents"`:
		return fContents
	case `"prompt"`:
		return fPrompt
	case `"query"`:
		return fQuery
	case `"instruction"`:
		return fInstruction
	}
	if jsonscan.IsPlain(raw) {
		return -1
	}
	for n, name := range bodyFields {
		if jsonscan.KeyIs(raw, name) {
			return n
		}
	}
	return -1
}

func isObject(raw []byte) bool { return len(raw) > 0 && raw[0] == '{' }
func isArray(raw []byte) bool  { return len(raw) > 0 && raw[0] == '[' }
func isString(raw []byte) bool { return len(raw) > 0 && raw[0] == '"' }

// decode returns the JSON string raw decoded, when it is one.
func decode(raw []byte) (string, bool) {
	if !isString(raw) {
		return "", false
	}
	if jsonscan.IsPlain(raw) {
		return string(raw[1 : len(raw)-1]), true
	}
	b, _ := jsonscan.AppendString(nil, raw, -1)
	return string(b), true
}

// stringKey normalises raw when it is a JSON string.
func stringKey(source string, raw []byte) (Key, bool) {
	s, ok := decode(raw)
	if !ok {
		return Key{}, false
	}
	return NewKey(source, s)
}

// claudeCodeKey reads the session_id held in a JSON-encoded user_id string.
func claudeCodeKey(raw []byte) (Key, bool) {
	s, ok := decode(raw)
	if !ok || len(s) > maxKeyInput && utf8.RuneCountInString(s) > maxKeyInput {
		return Key{}, false
	}
	inner := []byte(strings.TrimSpace(s))
	if !isObject(inner) || !jsonscan.Valid(inner) {
		return Key{}, false
	}
	return stringKey("claude-code", jsonscan.Lookup(inner, "session_id"))
}

// hashedKeyBytes is hashedKey for text as bytes, in one allocation: the
// name is built on the stack and hashed there.
func hashedKeyBytes(source string, text []byte) Key {
	sum := sha256.Sum256(text)
	var buf [32 + len(":sha256:") + 2*sha256.Size]byte
	name := append(buf[:0], source...)
	name = append(name, ":sha256:"...)
	name = hex.AppendEncode(name, sum[:])
	return Key{name: string(name), sum: sha256.Sum256(name)}
}

// textBufs holds the buffers that decoded text is gathered in.
var textBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// scratch lends a pooled text buffer to one KeyFromBody call. Text that
// needs no decoding is used where it lies in the body.
type scratch struct{ p *[]byte }

// buf returns the buffer, emptied.
func (sc *scratch) buf() []byte {
	if sc.p == nil {
		sc.p = textBufs.Get().(*[]byte)
	}
	return (*sc.p)[:0]
}

// keep stores b, grown, as the buffer.
func (sc *scratch) keep(b []byte) { *sc.p = b[:0] }

func (sc *scratch) release() {
	if sc.p != nil && cap(*sc.p) <= 64<<10 {
		textBufs.Put(sc.p)
	}
}

// firstInputText finds the first user text of a request, or nil.
func (sc *scratch) firstInputText(f *[nFields][]byte) []byte {
	if in := f[fInput]; in != nil {
		if isArray(in) {
			for i := 1; ; {
				vs, ve, ok := jsonscan.Item(in, i)
				if !ok {
					break
				}
				item := in[vs:ve]
				var t []byte
				if c := jsonscan.Lookup(item, "content"); c != nil {
					t = sc.textOf(c, 0)
				} else {
					t = sc.textOf(item, 0)
				}
				if len(t) > 0 {
					return t
				}
				i = ve
			}
		} else if t := sc.textOf(in, 0); len(t) > 0 {
			return t
		}
	}
	if msg := firstUserEntry(f[fMessages]); msg != nil {
		if t := sc.textOf(jsonscan.Lookup(msg, "content"), 0); len(t) > 0 {
			return t
		}
	}
	if entry := firstUserEntry(f[fContents]); entry != nil {
		if t := sc.textOf(jsonscan.Lookup(entry, "parts"), 0); len(t) > 0 {
			return t
		}
	}
	for _, n := range [...]int{fPrompt, fQuery, fInstruction} {
		if t := sc.textOf(f[n], 0); len(t) > 0 {
			return t
		}
	}
	return nil
}

// firstUserEntry returns the first object of the array raw whose role is
// "user", else its first item when that is an object, else nil.
func firstUserEntry(raw []byte) []byte {
	if !isArray(raw) {
		return nil
	}
	var first []byte
	for i := 1; ; {
		vs, ve, ok := jsonscan.Item(raw, i)
		if !ok {
			break
		}
		item := raw[vs:ve]
		if first == nil {
			first = item
		}
		if isObject(item) {
			if role := jsonscan.Lookup(item, "role"); isString(role) && jsonscan.KeyIs(role, "user") {
				return item
			}
		}
		i = ve
	}
	if isObject(first) {
		return first
	}
	return nil
}

// textOf extracts text from a JSON value, or returns nil.
func (sc *scratch) textOf(raw []byte, depth int) []byte {
	if len(raw) == 0 || depth > maxTextDepth {
		return nil
	}
	switch raw[0] {
	case '"':
		return usable(sc.stringText(raw))
	case '[':
		return usable(sc.joinText(raw))
	case '{':
		for _, f := range [...]string{"text", "content", "prompt", "parts"} {
			if t := sc.textOf(jsonscan.Lookup(raw, f), depth+1); len(t) > 0 {
				return t
			}
		}
	}
	return nil
}

// stringText returns the first maxKeyInput characters of the JSON string
// raw, decoded.
func (sc *scratch) stringText(raw []byte) []byte {
	if jsonscan.IsPlain(raw) {
		if in := raw[1 : len(raw)-1]; len(in) > maxKeyInput {
			in, _ = cutPlain(in, maxKeyInput)
			return in
		} else {
			return in
		}
	}
	b, _ := jsonscan.AppendString(sc.buf(), raw, maxKeyInput)
	sc.keep(b)
	return b
}

// joinText joins the string items of the array raw and the string text or
// content fields of its object items with "\n", within a budget of
// maxKeyInput characters.
func (sc *scratch) joinText(raw []byte) []byte {
	b := sc.buf()
	budget := maxKeyInput
	for i := 1; budget > 0; {
		vs, ve, ok := jsonscan.Item(raw, i)
		if !ok {
			break
		}
		i = ve
		s := raw[vs:ve]
		if !isString(s) {
			if s = jsonscan.Lookup(s, "text"); !isString(s) {
				if s = jsonscan.Lookup(raw[vs:ve], "content"); !isString(s) {
					continue
				}
			}
		}
		if len(s) == 2 { // ""
			continue
		}
		if len(b) > 0 {
			b = append(b, '\n')
			if budget--; budget <= 0 {
				break
			}
		}
		var n int
		if jsonscan.IsPlain(s) {
			var t []byte
			t, n = cutPlain(s[1:len(s)-1], budget)
			b = append(b, t...)
		} else {
			b, n = jsonscan.AppendString(b, s, budget)
		}
		budget -= n
	}
	sc.keep(b)
	return b
}

// cutPlain returns the first n characters of the valid UTF-8 text s and
// how many characters that is.
func cutPlain(s []byte, n int) ([]byte, int) {
	if len(s) <= n {
		return s, utf8.RuneCount(s)
	}
	i, count := 0, 0
	for i < len(s) && count < n {
		if s[i] < utf8.RuneSelf {
			i++
		} else {
			_, size := utf8.DecodeRune(s[i:])
			i += size
		}
		count++
	}
	return s[:i], count
}

// usable returns t when it contains a character that is not white space,
// else nil.
func usable(t []byte) []byte {
	for i := 0; i < len(t); {
		c := t[i]
		if c < utf8.RuneSelf {
			switch c {
			case '\t', '\n', '\v', '\f', '\r', ' ':
				i++
				continue
			}
			return t
		}
		r, size := utf8.DecodeRune(t[i:])
		if !unicode.IsSpace(r) {
			return t
		}
		i += size
	}
	return nil
}
