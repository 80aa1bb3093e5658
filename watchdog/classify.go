package watchdog

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// eventInfo is the verdict on one SSE event.
type eventInfo struct {
	useful    int64 // UTF-8 bytes of useful text
	protected bool  // tool call, function call or reasoning in progress
	ping      bool  // heartbeat (event name or type "ping" or "heartbeat")
	isError   bool  // an error event
}

// maxDepth bounds JSON nesting; deeper documents count as non-JSON.
const maxDepth = 128

// Words whose presence in an event type (case-insensitive) marks a protected
// event, and the narrower list for an Anthropic content block type.
var (
	protectedTypeWords  = [...]string{"reasoning", "thinking", "tool", "function_call"}
	protectedBlockWords = [...]string{"reasoning", "thinking", "tool_use"}
)

// classify judges one event from its joined data and its event name. It
// allocates nothing.
func classify(data, name []byte) eventInfo {
	var info eventInfo
	trimmed := bytes.TrimSpace(data)
	typeName := name
	var r rootFields
	valid := false
	if len(trimmed) > 0 && !bytes.Equal(trimmed, []byte("[DONE]")) {
		s := jscan{b: trimmed}
		r, valid = s.root()
	}
	if valid && len(r.typ) > 0 {
		typeName = r.typ
		if bytes.IndexByte(r.typ, '\\') >= 0 {
			var buf [256]byte
			typeName = decodeInto(buf[:0], r.typ)
		}
	}
	info.ping = asciiEqualFold(typeName, "ping") || asciiEqualFold(typeName, "heartbeat")
	info.isError = (valid && r.hasError) || asciiEqualFold(typeName, "error") ||
		asciiEqualFold(typeName, "response.failed")
	if !valid {
		return info
	}
	if containsAnyFold(typeName, protectedTypeWords[:]) || r.protected {
		info.protected = true
		return info
	}
	info.useful = r.useful
	return info
}

// rootFields is what classify needs from a JSON document.
type rootFields struct {
	typ       []byte // raw string value of the root "type", nil when absent
	useful    int64
	protected bool
	hasError  bool
}

// jscan is a small validating JSON scanner over one document.
type jscan struct {
	b     []byte
	i     int
	depth int
	kbuf  [32]byte
}

// Byte classes for the scanner's tight loops.
var (
	isSpace   [256]bool // JSON whitespace
	plainByte [256]bool // string bytes that need no attention
)

func init() {
	for _, c := range []byte(" \t\n\r") {
		isSpace[c] = true
	}
	for c := 0x20; c < 256; c++ {
		plainByte[c] = c != '"' && c != '\\'
	}
}

func (s *jscan) ws() {
	b, i := s.b, s.i
	for i < len(b) && isSpace[b[i]] {
		i++
	}
	s.i = i
}

func (s *jscan) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// root parses the whole document and extracts the fields classify needs.
// Duplicate keys follow JSON.parse: the last one wins.
func (s *jscan) root() (rootFields, bool) {
	var r rootFields
	s.ws()
	if s.peek() != '{' {
		if !s.value() {
			return r, false
		}
		s.ws()
		return r, s.i == len(s.b)
	}
	var choicesUseful, deltaUseful int64
	var choicesProt, deltaProt, blockProt bool
	if !s.enter('{') {
		return r, false
	}
	for first := true; ; first = false {
		key, more, ok := s.member(first)
		if !ok {
			return r, false
		}
		if !more {
			break
		}
		switch string(key) {
		case "type":
			r.typ = nil
			if s.peek() == '"' {
				raw, ok := s.str()
				if !ok {
					return r, false
				}
				r.typ = raw
				continue
			}
		case "choices":
			choicesUseful, choicesProt = 0, false
			if s.peek() == '[' {
				if !s.choices(&choicesUseful, &choicesProt) {
					return r, false
				}
				continue
			}
		case "delta":
			deltaUseful, deltaProt = 0, false
			switch s.peek() {
			case '"':
				raw, ok := s.str()
				if !ok {
					return r, false
				}
				deltaUseful = decodedLen(raw)
				continue
			case '{':
				if !s.rootDelta(&deltaUseful, &deltaProt) {
					return r, false
				}
				continue
			}
		case "content_block":
			blockProt = false
			if s.peek() == '{' {
				if !s.contentBlock(&blockProt) {
					return r, false
				}
				continue
			}
		case "error":
			r.hasError = s.peek() != 'n'
		}
		if !s.value() {
			return r, false
		}
	}
	s.ws()
	if s.i != len(s.b) {
		return r, false
	}
	r.useful = choicesUseful + deltaUseful
	r.protected = choicesProt || deltaProt || blockProt
	return r, true
}

// choices parses the Chat Completions choices array.
func (s *jscan) choices(useful *int64, prot *bool) bool {
	if !s.enter('[') {
		return false
	}
	for first := true; ; first = false {
		more, ok := s.elem(first)
		if !ok {
			return false
		}
		if !more {
			return true
		}
		if s.peek() != '{' {
			if !s.value() {
				return false
			}
			continue
		}
		var deltaUseful, textUseful int64
		var deltaProt bool
		if !s.enter('{') {
			return false
		}
		for f := true; ; f = false {
			key, more, ok := s.member(f)
			if !ok {
				return false
			}
			if !more {
				break
			}
			switch string(key) {
			case "delta":
				deltaUseful, deltaProt = 0, false
				if s.peek() == '{' {
					if !s.choiceDelta(&deltaUseful, &deltaProt) {
						return false
					}
					continue
				}
			case "text":
				textUseful = 0
				if s.peek() == '"' {
					raw, ok := s.str()
					if !ok {
						return false
					}
					textUseful = decodedLen(raw)
					continue
				}
			}
			if !s.value() {
				return false
			}
		}
		*useful += deltaUseful + textUseful
		*prot = *prot || deltaProt
	}
}

// choiceDelta parses choices[].delta.
func (s *jscan) choiceDelta(useful *int64, prot *bool) bool {
	if !s.enter('{') {
		return false
	}
	var content, text int64
	var tools, fn, reasoning, reasoningContent bool
	for first := true; ; first = false {
		key, more, ok := s.member(first)
		if !ok {
			return false
		}
		if !more {
			break
		}
		var sp *int64
		var bp *bool
		switch string(key) {
		case "content":
			sp = &content
		case "text":
			sp = &text
		case "reasoning":
			bp = &reasoning
		case "reasoning_content":
			bp = &reasoningContent
		case "tool_calls":
			tools = false
			if s.peek() == '[' {
				start := s.i
				if !s.value() {
					return false
				}
				tools = !isEmptyArray(s.b[start:s.i])
				continue
			}
		case "function_call":
			fn = s.peek() != 'n'
		}
		if sp != nil || bp != nil {
			if sp != nil {
				*sp = 0
			} else {
				*bp = false
			}
			if s.peek() == '"' {
				raw, ok := s.str()
				if !ok {
					return false
				}
				if sp != nil {
					*sp = decodedLen(raw)
				} else {
					*bp = len(raw) > 0
				}
				continue
			}
		}
		if !s.value() {
			return false
		}
	}
	*useful = content + text
	*prot = tools || fn || reasoning || reasoningContent
	return true
}

// rootDelta parses a root delta object (Anthropic content_block_delta).
func (s *jscan) rootDelta(useful *int64, prot *bool) bool {
	if !s.enter('{') {
		return false
	}
	var text int64
	var typProt bool
	for first := true; ; first = false {
		key, more, ok := s.member(first)
		if !ok {
			return false
		}
		if !more {
			break
		}
		switch string(key) {
		case "text":
			text = 0
			if s.peek() == '"' {
				raw, ok := s.str()
				if !ok {
					return false
				}
				text = decodedLen(raw)
				continue
			}
		case "type":
			typProt = false
			if s.peek() == '"' {
				raw, ok := s.str()
				if !ok {
					return false
				}
				typProt = rawContainsAnyFold(raw, protectedTypeWords[:])
				continue
			}
		}
		if !s.value() {
			return false
		}
	}
	*useful, *prot = text, typProt
	return true
}

// contentBlock parses an Anthropic content_block object.
func (s *jscan) contentBlock(prot *bool) bool {
	if !s.enter('{') {
		return false
	}
	for first := true; ; first = false {
		key, more, ok := s.member(first)
		if !ok {
			return false
		}
		if !more {
			return true
		}
		if string(key) == "type" {
			*prot = false
			if s.peek() == '"' {
				raw, ok := s.str()
				if !ok {
					return false
				}
				*prot = rawContainsAnyFold(raw, protectedBlockWords[:])
				continue
			}
		}
		if !s.value() {
			return false
		}
	}
}

// enter consumes the opening bracket c and increases the depth.
func (s *jscan) enter(c byte) bool {
	if s.peek() != c || s.depth >= maxDepth {
		return false
	}
	s.i++
	s.depth++
	return true
}

// member advances to the next key of an object and past its colon. It
// returns more=false after consuming the closing brace.
func (s *jscan) member(first bool) (key []byte, more, ok bool) {
	s.ws()
	if s.peek() == '}' {
		s.i++
		s.depth--
		return nil, false, true
	}
	if !first {
		if s.peek() != ',' {
			return nil, false, false
		}
		s.i++
		s.ws()
	}
	raw, ok := s.str()
	if !ok {
		return nil, false, false
	}
	s.ws()
	if s.peek() != ':' {
		return nil, false, false
	}
	s.i++
	s.ws()
	if bytes.IndexByte(raw, '\\') >= 0 {
		raw = decodeInto(s.kbuf[:0], raw)
	}
	return raw, true, true
}

// elem advances to the next element of an array. It returns more=false
// after consuming the closing bracket.
func (s *jscan) elem(first bool) (more, ok bool) {
	s.ws()
	if s.peek() == ']' {
		s.i++
		s.depth--
		return false, true
	}
	if !first {
		if s.peek() != ',' {
			return false, false
		}
		s.i++
		s.ws()
	}
	return true, true
}

// value validates and skips any JSON value.
func (s *jscan) value() bool {
	s.ws()
	switch c := s.peek(); {
	case c == '"':
		_, ok := s.str()
		return ok
	case c == '{':
		if !s.enter('{') {
			return false
		}
		for first := true; ; first = false {
			_, more, ok := s.member(first)
			if !ok {
				return false
			}
			if !more {
				return true
			}
			if !s.value() {
				return false
			}
		}
	case c == '[':
		if !s.enter('[') {
			return false
		}
		for first := true; ; first = false {
			more, ok := s.elem(first)
			if !ok {
				return false
			}
			if !more {
				return true
			}
			if !s.value() {
				return false
			}
		}
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	}
	return false
}

func (s *jscan) lit(w string) bool {
	if len(s.b)-s.i < len(w) || string(s.b[s.i:s.i+len(w)]) != w {
		return false
	}
	s.i += len(w)
	return true
}

func (s *jscan) digits() int {
	b, i := s.b, s.i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	n := i - s.i
	s.i = i
	return n
}

func (s *jscan) number() bool {
	if s.peek() == '-' {
		s.i++
	}
	switch c := s.peek(); {
	case c == '0':
		s.i++
	case c >= '1' && c <= '9':
		s.digits()
	default:
		return false
	}
	if s.peek() == '.' {
		s.i++
		if s.digits() == 0 {
			return false
		}
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if s.digits() == 0 {
			return false
		}
	}
	return true
}

// str validates a string and returns its raw contents (escapes kept).
func (s *jscan) str() ([]byte, bool) {
	if s.peek() != '"' {
		return nil, false
	}
	s.i++
	start := s.i
	for s.i < len(s.b) {
		b, i := s.b, s.i
		for i < len(b) && plainByte[b[i]] {
			i++
		}
		s.i = i
		if s.i == len(s.b) {
			break
		}
		c := s.b[s.i]
		switch {
		case c == '"':
			raw := s.b[start:s.i]
			s.i++
			return raw, true
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return nil, false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) {
					return nil, false
				}
				for _, h := range s.b[s.i+2 : s.i+6] {
					if unhex(h) < 0 {
						return nil, false
					}
				}
				s.i += 6
			default:
				return nil, false
			}
		case c < 0x20:
			return nil, false
		default:
			s.i++
		}
	}
	return nil, false
}

func unhex(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10)
	case c >= 'A' && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

func hex4(b []byte) rune {
	return unhex(b[0])<<12 | unhex(b[1])<<8 | unhex(b[2])<<4 | unhex(b[3])
}

// nextRune decodes one escape of a validated raw string at raw[i] == '\\'
// and returns the rune and the number of raw bytes consumed. A lone
// surrogate decodes to utf8.RuneError.
func nextEscape(raw []byte, i int) (rune, int) {
	switch raw[i+1] {
	case 'u':
		r := hex4(raw[i+2 : i+6])
		if utf16.IsSurrogate(r) {
			if r < 0xdc00 && i+12 <= len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
				if r2 := hex4(raw[i+8 : i+12]); r2 >= 0xdc00 && r2 <= 0xdfff {
					return utf16.DecodeRune(r, r2), 12
				}
			}
			return utf8.RuneError, 6
		}
		return r, 6
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	}
	return rune(raw[i+1]), 2
}

// decodedLen returns the UTF-8 length of a validated raw JSON string once
// its escapes are decoded. Bytes outside escapes count as they are, so the
// result never exceeds len(raw).
func decodedLen(raw []byte) int64 {
	var n int64
	for i := 0; i < len(raw); {
		if raw[i] != '\\' {
			n++
			i++
			continue
		}
		r, w := nextEscape(raw, i)
		n += int64(utf8.RuneLen(r))
		i += w
	}
	return n
}

// decodeInto appends the decoded raw string to dst without growing it past
// its capacity; longer strings are truncated.
func decodeInto(dst, raw []byte) []byte {
	if bytes.IndexByte(raw, '\\') < 0 {
		if len(raw) > cap(dst)-len(dst) {
			raw = raw[:cap(dst)-len(dst)]
		}
		return append(dst, raw...)
	}
	for i := 0; i < len(raw); {
		if raw[i] != '\\' {
			if len(dst) == cap(dst) {
				break
			}
			dst = append(dst, raw[i])
			i++
			continue
		}
		r, w := nextEscape(raw, i)
		i += w
		if cap(dst)-len(dst) < utf8.RuneLen(r) {
			break
		}
		dst = utf8.AppendRune(dst, r)
	}
	return dst
}

// isEmptyArray reports whether a validated array holds no element.
func isEmptyArray(b []byte) bool {
	return len(bytes.TrimSpace(b[1:len(b)-1])) == 0
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// asciiEqualFold compares s with the lower-case ASCII word w, ignoring case.
func asciiEqualFold(s []byte, w string) bool {
	if len(s) != len(w) {
		return false
	}
	for i := range len(s) {
		if lowerASCII(s[i]) != w[i] {
			return false
		}
	}
	return true
}

// containsAnyFold reports whether s contains any of the lower-case ASCII
// words, ignoring ASCII case.
func containsAnyFold(s []byte, words []string) bool {
	for i := range s {
		c := lowerASCII(s[i])
		for _, w := range words {
			if c == w[0] && len(s)-i >= len(w) && asciiEqualFold(s[i:i+len(w)], w) {
				return true
			}
		}
	}
	return false
}

// rawContainsAnyFold is containsAnyFold on a raw JSON string, decoding its
// escapes (up to 256 bytes) only when it has any.
func rawContainsAnyFold(raw []byte, words []string) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return containsAnyFold(raw, words)
	}
	var buf [256]byte
	return containsAnyFold(decodeInto(buf[:0], raw), words)
}
