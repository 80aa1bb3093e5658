package restate

import "strings"

// followWindow is how far the second part of an "a…b" phrase may follow the
// first.
const followWindow = 80

// has reports whether the lower-cased text contains phrase, honouring the
// "a…b" (b within 80 bytes after a) and "a&&b" (both anywhere) operators.
func has(text, phrase string) bool {
	if strings.Contains(phrase, "&&") {
		for part := range strings.SplitSeq(phrase, "&&") {
			if part != "" && !strings.Contains(text, part) {
				return false
			}
		}
		return true
	}
	first, rest, ok := strings.Cut(phrase, "…")
	if !ok {
		return strings.Contains(text, phrase)
	}
	return follows(text, first, rest)
}

// follows reports whether an occurrence of a is followed by the "…"-chain
// rest within followWindow bytes.
func follows(text, a, rest string) bool {
	next, more, chained := strings.Cut(rest, "…")
	from := 0
	for from <= len(text) {
		i := strings.Index(text[from:], a)
		if i < 0 {
			return false
		}
		start := from + i + len(a)
		end := min(len(text), start+followWindow+len(next))
		win := text[start:end]
		if j := strings.Index(win, next); j >= 0 {
			if !chained || follows(text[start+j:], next, more) {
				return true
			}
		}
		from = from + i + 1
	}
	return false
}

// hasAny reports whether text contains any of phrases.
func hasAny(text string, phrases []string) bool {
	for _, p := range phrases {
		if p != "" && has(text, p) {
			return true
		}
	}
	return false
}

// near reports whether some word of as occurs within window bytes (either
// side) of some word of bs.
func near(text string, as, bs []string, window int) bool {
	for _, a := range as {
		if a == "" {
			continue
		}
		from := 0
		for {
			i := strings.Index(text[from:], a)
			if i < 0 {
				break
			}
			i += from
			lo := max(0, i-window)
			hi := min(len(text), i+len(a)+window)
			win := text[lo:hi]
			for _, b := range bs {
				if b != "" && strings.Contains(win, b) {
					return true
				}
			}
			from = i + 1
		}
	}
	return false
}
