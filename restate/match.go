package restate

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// followWindow is how far the second part of an "a…b" phrase may follow the
// first.
const followWindow = 80

// matchMode says how a phrase list is compared with the lower-cased text.
type matchMode bool

const (
	// substring: a phrase matches wherever its bytes occur, inside a
	// longer word too ("limit" matches "unlimited").
	substring matchMode = false
	// words: a phrase matches only as whole words. The rune before it and
	// the rune after it must not be letters or digits (in any script), so
	// "invoice" does not match "invoices" and "tpd" does not match "httpd".
	// An edge of the phrase that is itself not a letter or digit needs no
	// boundary.
	words matchMode = true
)

// isWordRune reports whether r is a letter or a digit.
func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// lastRune returns the last rune of s.
func lastRune(s string) rune {
	r, _ := utf8.DecodeLastRuneInString(s)
	return r
}

// bounded reports whether text[i:j] stands as whole words in text.
func bounded(text string, i, j int) bool {
	if i >= j {
		return true
	}
	if i > 0 {
		first, _ := utf8.DecodeRuneInString(text[i:j])
		prev, _ := utf8.DecodeLastRuneInString(text[:i])
		if isWordRune(first) && isWordRune(prev) {
			return false
		}
	}
	if j < len(text) {
		last, _ := utf8.DecodeLastRuneInString(text[i:j])
		next, _ := utf8.DecodeRuneInString(text[j:])
		if isWordRune(last) && isWordRune(next) {
			return false
		}
	}
	return true
}

// find returns the offset in text of the first occurrence of p that lies
// within text[from:hi] and satisfies m, or -1. Boundaries are judged
// against the whole text, not the window, so a window edge never counts as
// one.
func find(text, p string, from, hi int, m matchMode) int {
	for from <= hi-len(p) {
		i := strings.Index(text[from:hi], p)
		if i < 0 {
			return -1
		}
		i += from
		if m == substring || bounded(text, i, i+len(p)) {
			return i
		}
		from = i + 1
	}
	return -1
}

// has reports whether the lower-cased text contains phrase, honouring the
// "a…b" (b within 80 bytes after a) and "a&&b" (both anywhere) operators;
// every part is compared according to m.
func has(text, phrase string, m matchMode) bool {
	if strings.Contains(phrase, "&&") {
		for part := range strings.SplitSeq(phrase, "&&") {
			if part != "" && find(text, part, 0, len(text), m) < 0 {
				return false
			}
		}
		return true
	}
	first, rest, ok := strings.Cut(phrase, "…")
	if !ok {
		return find(text, phrase, 0, len(text), m) >= 0
	}
	return follows(text, 0, first, rest, m)
}

// follows reports whether an occurrence of a at or after from is followed
// by the "…"-chain rest within followWindow bytes.
func follows(text string, from int, a, rest string, m matchMode) bool {
	next, more, chained := strings.Cut(rest, "…")
	for {
		i := find(text, a, from, len(text), m)
		if i < 0 {
			return false
		}
		start := i + len(a)
		end := min(len(text), start+followWindow+len(next))
		if j := find(text, next, start, end, m); j >= 0 {
			if !chained || follows(text, j, next, more, m) {
				return true
			}
		}
		from = i + 1
	}
}

// hasAny reports whether text contains any of phrases, compared according
// to m.
func hasAny(text string, phrases []string, m matchMode) bool {
	for _, p := range phrases {
		if p != "" && has(text, p, m) {
			return true
		}
	}
	return false
}

// near reports whether some phrase of as (compared according to am) occurs
// within window bytes (either side) of some phrase of bs (compared
// according to bm).
func near(text string, as []string, am matchMode, bs []string, bm matchMode, window int) bool {
	for _, a := range as {
		if a == "" {
			continue
		}
		from := 0
		for {
			i := find(text, a, from, len(text), am)
			if i < 0 {
				break
			}
			lo := max(0, i-window)
			hi := min(len(text), i+len(a)+window)
			for _, b := range bs {
				if b != "" && find(text, b, lo, hi, bm) >= 0 {
					return true
				}
			}
			from = i + 1
		}
	}
	return false
}
