package restate

import (
	"reflect"
	"strings"
	"testing"
)

// signalPhrases returns every phrase of the default signal lists.
func signalPhrases() []string {
	var out []string
	v := reflect.ValueOf(DefaultTables().Signals)
	for i := range v.NumField() {
		if f, ok := v.Field(i).Interface().([]string); ok {
			out = append(out, f...)
		}
	}
	return out
}

// checkHay checks that the text haystackInto builds is the one haystack
// builds, and that every search through its pairs finds what a search of
// the text alone finds.
func checkHay(t *testing.T, message string, body []byte, phrases []string) {
	t.Helper()
	st := std.load()
	sc := new(scratch)
	h := st.haystackInto(sc, message, body)
	if want := st.haystack(message, body); h.s != want {
		t.Fatalf("haystackInto(%q, %q) = %q, want %q", message, body, h.s, want)
	}
	plain := hay{s: h.s}
	for _, p := range phrases {
		p = lower(p)
		for _, m := range []matchMode{substring, words} {
			if got, want := h.has(p, m), plain.has(p, m); got != want {
				t.Fatalf("has(%q, %q, words=%v) = %v through the pairs, %v without", h.s, p, m, got, want)
			}
			if got, want := h.find(p, 0, len(h.s), m), plain.find(p, 0, len(h.s), m); got != want {
				t.Fatalf("find(%q, %q, words=%v) = %d through the pairs, %d without", h.s, p, m, got, want)
			}
		}
	}
	as, bs := []string{"suspended", "billing"}, []string{"billing", "account"}
	if got, want := h.near(as, words, bs, words, 40), plain.near(as, words, bs, words, 40); got != want {
		t.Fatalf("near(%q) = %v through the pairs, %v without", h.s, got, want)
	}
}

// TestHaystackPairsFindWhatTheTextHolds drives the pair filter with the
// default signals over texts that hold them at every offset parity, in
// mixed case, and next to non-ASCII text.
func TestHaystackPairsFindWhatTheTextHolds(t *testing.T) {
	phrases := append(signalPhrases(), "a", "ab", "rate limit…reached", "quota&&exceeded", "")
	bodies := []string{"", "x", "Ab", "ABCDEFGH", "ABCDEFGHI", strings.Repeat("x", 2047)}
	for _, p := range phrases {
		for _, pad := range []string{"", "y", "yy", "yyy", "Q-7 "} {
			bodies = append(bodies, pad+strings.ToUpper(p)+" tail", pad+p, "über "+pad+p, pad+p+"\xff")
		}
	}
	for _, b := range bodies {
		checkHay(t, "", []byte(b), phrases)
		checkHay(t, "Upstream Said", []byte(b), phrases)
	}
	checkHay(t, strings.Repeat("M", 9), nil, phrases)
}

// TestLowerEven checks the eight-byte lower-casing against strings.ToLower
// at every length around the word size, and that non-ASCII text is
// refused.
func TestLowerEven(t *testing.T) {
	const src = "The Quick BROWN fox @[`{ JUMPS over 0123456789 Lazy DOGS"
	for n := range len(src) + 1 {
		b := []byte(src[:n])
		var p pairs
		if !lowerEven(b, &p) || string(b) != strings.ToLower(src[:n]) {
			t.Fatalf("lowerEven(%q) = %q, want %q", src[:n], b, strings.ToLower(src[:n]))
		}
		for i := 0; i+1 < n; i += 2 {
			if !p.holdsFrom(string(b[i:i+2]), 0) {
				t.Fatalf("lowerEven(%q) lacks the pair at %d", src[:n], i)
			}
		}
	}
	for _, s := range []string{"ÄBCDEFGH", "ABCDEFG\x80", "abcdefgh\xc3\xa4"} {
		var p pairs
		if lowerEven([]byte(s), &p) {
			t.Errorf("lowerEven(%q) took non-ASCII text", s)
		}
	}
}

// TestClassifyTypical429Allocations pins the allocations of classifying a
// typical 2 KB 429 answer: none.
func TestClassifyTypical429Allocations(t *testing.T) {
	c := &Classifier{}
	r := typical429()
	c.ClassifyAt(r, t0)
	if n := testing.AllocsPerRun(100, func() { c.ClassifyAt(r, t0) }); n > 0 {
		t.Errorf("ClassifyAt of a typical 429 allocates %v times, want 0", n)
	}
}

// FuzzHaystack checks that the text and pair filter of the classification
// search find exactly what a search of the lower-cased text alone finds.
func FuzzHaystack(f *testing.F) {
	f.Add("", []byte("Rate limit reached for gpt-4o. Please try again in 2.4s."), "rate limit")
	f.Add("Quota", []byte("Your QUOTA has been exceeded"), "quota&&exceeded")
	f.Add("", []byte("用户额度不足 Insufficient Balance"), "insufficient balance")
	f.Add("x", []byte("aXbXcXdXeXfXgXhX"), "xb")
	f.Add("", []byte("account suspended: billing"), "suspended…billing")
	f.Fuzz(func(t *testing.T, message string, body []byte, phrase string) {
		checkHay(t, message, body, []string{phrase})
	})
}
