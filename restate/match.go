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
	return hay{s: text}.find(p, from, hi, m)
}

// has reports whether the lower-cased text contains phrase, honouring the
// "a…b" (b within 80 bytes after a) and "a&&b" (both anywhere) operators;
// every part is compared according to m.
func has(text, phrase string, m matchMode) bool { return hay{s: text}.has(phrase, m) }

// hasAny reports whether text contains any of phrases, compared according
// to m.
func hasAny(text string, phrases []string, m matchMode) bool { return hay{s: text}.any(phrases, m) }

// near reports whether some phrase of as (compared according to am) occurs
// within window bytes (either side) of some phrase of bs (compared
// according to bm).
func near(text string, as []string, am matchMode, bs []string, bm matchMode, window int) bool {
	return hay{s: text}.near(as, am, bs, bm, window)
}

// hay is a lower-cased text to search, with the set of byte pairs it
// holds when that is known. A phrase with a pair the text lacks cannot
// occur in it, so the search for it ends before it reads the text; the
// other phrases are looked for as in the text alone.
type hay struct {
	s string
	p *pairs // nil: unknown, every phrase is looked for
}

// pairs is a set of the adjacent byte pairs of a text, hashed into 4096
// bits: a pair that is not in the set is not in the text.
type pairs [64]uint64

func pairBit(a, b byte) uint { return (uint(a)<<4 ^ uint(b)) & 4095 }

// add puts the pairs of s in the set.
func (p *pairs) add(s string) {
	last := ^uint(0)
	for i := 1; i < len(s); i++ {
		if k := pairBit(s[i-1], s[i]); k != last { // a run sets its bit once
			p[k>>6] |= 1 << (k & 63)
			last = k
		}
	}
}

// mayHold reports whether s may occur in the text of the set, which holds
// at least the pairs that start at even offsets of the text: false means
// that s occurs nowhere in it. An occurrence at an even offset has the
// pairs that start at even offsets of s in the set, one at an odd offset
// those that start at odd offsets.
func (p *pairs) mayHold(s string) bool {
	return p.holdsFrom(s, 0) || p.holdsFrom(s, 1)
}

// holdsFrom reports whether the pairs of s that start at from, from+2, …
// are all in the set.
func (p *pairs) holdsFrom(s string, from int) bool {
	for i := from + 1; i < len(s); i += 2 {
		if k := pairBit(s[i-1], s[i]); p[k>>6]&(1<<(k&63)) == 0 {
			return false
		}
	}
	return true
}

func (h hay) find(p string, from, hi int, m matchMode) int {
	text := h.s
	if h.p != nil && from <= hi-len(p) && !h.p.mayHold(p) {
		return -1
	}
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

func (h hay) has(phrase string, m matchMode) bool {
	if strings.Contains(phrase, "&&") {
		for part := range strings.SplitSeq(phrase, "&&") {
			if part != "" && h.find(part, 0, len(h.s), m) < 0 {
				return false
			}
		}
		return true
	}
	first, rest, ok := strings.Cut(phrase, "…")
	if !ok {
		return h.find(phrase, 0, len(h.s), m) >= 0
	}
	return h.follows(0, first, rest, m)
}

// follows reports whether an occurrence of a at or after from is followed
// by the "…"-chain rest within followWindow bytes.
func (h hay) follows(from int, a, rest string, m matchMode) bool {
	next, more, chained := strings.Cut(rest, "…")
	for {
		i := h.find(a, from, len(h.s), m)
		if i < 0 {
			return false
		}
		start := i + len(a)
		end := min(len(h.s), start+followWindow+len(next))
		if j := h.find(next, start, end, m); j >= 0 {
			if !chained || h.follows(j, next, more, m) {
				return true
			}
		}
		from = i + 1
	}
}

func (h hay) any(phrases []string, m matchMode) bool {
	for _, p := range phrases {
		if p != "" && h.has(p, m) {
			return true
		}
	}
	return false
}

func (h hay) near(as []string, am matchMode, bs []string, bm matchMode, window int) bool {
	for _, a := range as {
		if a == "" {
			continue
		}
		from := 0
		for {
			i := h.find(a, from, len(h.s), am)
			if i < 0 {
				break
			}
			lo := max(0, i-window)
			hi := min(len(h.s), i+len(a)+window)
			for _, b := range bs {
				if b != "" && h.find(b, lo, hi, bm) >= 0 {
					return true
				}
			}
			from = i + 1
		}
	}
	return false
}
