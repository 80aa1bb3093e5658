// Package jsonscan reads JSON documents in place: a validator that accepts
// exactly what encoding/json accepts, and allocation-free walks over the
// members of objects and the items of arrays of a document that passed it.
//
// The walking functions assume valid JSON (check it with [Valid] first);
// given anything else they return garbage but never index out of range.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth is the deepest nesting encoding/json accepts.
const maxDepth = 10000

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// stringEnd returns the index just past the closing quote of the string
// whose opening quote is at b[i], or -1 when it is not a valid JSON string.
// It finds the quotes and backslashes with bytes.IndexByte and checks the
// plain runs between them for control characters a word at a time.
func stringEnd(b []byte, i int) int {
	i++
	q := -1 // the next quote at or after i, once known
	for {
		if q < i {
			if q = bytes.IndexByte(b[i:], '"'); q < 0 {
				return -1
			}
			q += i
		}
		bs := bytes.IndexByte(b[i:q], '\\')
		if bs < 0 {
			if hasControl(b[i:q]) {
				return -1
			}
			return q + 1
		}
		bs += i
		if hasControl(b[i:bs]) || bs+1 >= len(b) {
			return -1
		}
		switch b[bs+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i = bs + 2
		case 'u':
			if bs+6 > len(b) || !isHex(b[bs+2]) || !isHex(b[bs+3]) || !isHex(b[bs+4]) || !isHex(b[bs+5]) {
				return -1
			}
			i = bs + 6
		default:
			return -1
		}
	}
}

// hasControl reports whether b holds a byte below 0x20.
func hasControl(b []byte) bool {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		if (x-lsb*0x20)&^x&msb != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if b[i] < 0x20 {
			return true
		}
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// Space returns the index of the first byte at or after i that is not JSON
// white space (or len(b)).
func Space(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// Valid reports whether b is one valid JSON value with optional white
// space around it, as encoding/json's Valid does.
func Valid(b []byte) bool {
	i := Space(b, 0)
	end := valueEnd(b, i, 0)
	return end >= 0 && Space(b, end) == len(b)
}

// valueEnd validates the value at b[i] (no leading white space) and
// returns the index just past it, or -1.
func valueEnd(b []byte, i, depth int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; c {
	case '"':
		return stringEnd(b, i)
	case '{':
		if depth++; depth > maxDepth {
			return -1
		}
		i = Space(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return -1
			}
			if i = stringEnd(b, i); i < 0 {
				return -1
			}
			i = Space(b, i)
			if i >= len(b) || b[i] != ':' {
				return -1
			}
			if i = valueEnd(b, Space(b, i+1), depth); i < 0 {
				return -1
			}
			i = Space(b, i)
			if i >= len(b) {
				return -1
			}
			switch b[i] {
			case ',':
				i = Space(b, i+1)
			case '}':
				return i + 1
			default:
				return -1
			}
		}
	case '[':
		if depth++; depth > maxDepth {
			return -1
		}
		i = Space(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1
		}
		for {
			if i = valueEnd(b, i, depth); i < 0 {
				return -1
			}
			i = Space(b, i)
			if i >= len(b) {
				return -1
			}
			switch b[i] {
			case ',':
				i = Space(b, i+1)
			case ']':
				return i + 1
			default:
				return -1
			}
		}
	case 't':
		return literalEnd(b, i, "true")
	case 'f':
		return literalEnd(b, i, "false")
	case 'n':
		return literalEnd(b, i, "null")
	default:
		return numberEnd(b, i)
	}
}

func literalEnd(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// numberEnd validates -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func numberEnd(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	return i
}

// End returns the index just past the value that starts at b[i] in a
// valid document.
func End(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	default: // a number or a literal
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// skipString returns the index past the string starting at b[i] of a
// valid document: the first quote after it that an odd run of
// backslashes does not escape.
func skipString(b []byte, i int) int {
	i++
	for {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return len(b)
		}
		q += i
		n := 0
		for k := q - 1; k >= i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
}

// Member reads the next member of an object of a valid document. Start
// with i just past the object's opening brace; then pass the ve returned.
// It returns the member's key (with its quotes) as b[ks:ke] and its value
// as b[vs:ve], or ok false after the last member.
func Member(b []byte, i int) (ks, ke, vs, ve int, ok bool) {
	i = Space(b, i)
	if i < len(b) && b[i] == ',' {
		i = Space(b, i+1)
	}
	if i >= len(b) || b[i] != '"' {
		return 0, 0, 0, 0, false
	}
	ks = i
	ke = skipString(b, i)
	vs = Space(b, ke)
	if vs < len(b) && b[vs] == ':' {
		vs = Space(b, vs+1)
	}
	ve = End(b, vs)
	return ks, ke, vs, ve, true
}

// Item reads the next item of an array of a valid document, as Member
// does for objects: start with i just past the opening bracket.
func Item(b []byte, i int) (vs, ve int, ok bool) {
	i = Space(b, i)
	if i < len(b) && b[i] == ',' {
		i = Space(b, i+1)
	}
	if i >= len(b) || b[i] == ']' {
		return 0, 0, false
	}
	return i, End(b, i), true
}

// Lookup returns the value of the last member of the object obj (a valid
// object, from its opening brace) whose key decodes to name, as
// encoding/json keeps the last of duplicate keys; nil when there is none
// or obj is not an object.
func Lookup(obj []byte, name string) []byte {
	if len(obj) == 0 || obj[0] != '{' {
		return nil
	}
	var found []byte
	for i := 1; ; {
		ks, ke, vs, ve, ok := Member(obj, i)
		if !ok {
			return found
		}
		if KeyIs(obj[ks:ke], name) {
			found = obj[vs:ve]
		}
		i = ve
	}
}

// KeyIs reports whether the JSON string raw (with its quotes) decodes to
// name.
func KeyIs(raw []byte, name string) bool {
	if len(raw) < 2 {
		return false
	}
	in := raw[1 : len(raw)-1]
	if !hasBackslash(in) {
		// Without escapes a string decodes to itself when it is valid
		// UTF-8, and otherwise to something with U+FFFD in it, which a
		// valid name cannot equal unless it holds U+FFFD itself.
		if string(in) == name {
			return true
		}
		if utf8.Valid(in) {
			return false
		}
	}
	var buf [64]byte
	dec, _ := AppendString(buf[:0], raw, len(name)+1)
	return string(dec) == name
}

func hasBackslash(b []byte) bool {
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
}

// IsPlain reports whether the JSON string raw (with its quotes) decodes to
// its own bytes: no escapes, valid UTF-8.
func IsPlain(raw []byte) bool {
	if len(raw) < 2 {
		return false
	}
	in := raw[1 : len(raw)-1]
	return !hasBackslash(in) && utf8.Valid(in)
}

// AppendString appends the decoded JSON string raw (with its quotes) to
// dst, as encoding/json decodes it (invalid UTF-8 and unpaired surrogates
// become U+FFFD), stopping after max characters when max ≥ 0. It returns
// the extended slice and the number of characters appended.
func AppendString(dst, raw []byte, max int) ([]byte, int) {
	if len(raw) < 2 {
		return dst, 0
	}
	s := raw[1 : len(raw)-1]
	n := 0
	for r := 0; r < len(s) && (max < 0 || n < max); n++ {
		c := s[r]
		if c != '\\' {
			// A run up to the next escape that is valid UTF-8 decodes to
			// itself: copy it whole when it fits.
			run := s[r:]
			if k := bytes.IndexByte(run, '\\'); k >= 0 {
				run = run[:k]
			}
			if utf8.Valid(run) {
				if rc := utf8.RuneCount(run); max < 0 || n+rc <= max {
					dst = append(dst, run...)
					r += len(run)
					n += rc - 1
					continue
				}
			}
			// Character by character to the end of the run (or max).
			for k := 0; k < len(run); n++ {
				if max >= 0 && n >= max {
					return dst, n
				}
				rr, size := utf8.DecodeRune(run[k:])
				k += size
				dst = utf8.AppendRune(dst, rr)
			}
			r += len(run)
			n--
			continue
		}
		switch {
		case c == '\\' && r+1 < len(s):
			switch s[r+1] {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				rr := u4(s[r:])
				r += 6
				if utf16.IsSurrogate(rr) {
					if dec := utf16.DecodeRune(rr, u4(s[r:])); dec != unicode.ReplacementChar {
						r += 6
						dst = utf8.AppendRune(dst, dec)
						continue
					}
					rr = unicode.ReplacementChar
				}
				dst = utf8.AppendRune(dst, rr)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, s[r+1])
			}
			r += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			r += size
			dst = utf8.AppendRune(dst, rr)
		}
	}
	return dst, n
}

// u4 decodes the \uXXXX escape at the start of s, or returns -1.
func u4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
