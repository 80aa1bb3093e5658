package seedhash

import (
	"strings"
	"testing"
)

// TestLowerMatchesStringOfLowered checks Lower against String of the
// lowered text for every length up to 40 and upper-case letters at every
// place, the word boundaries included.
func TestLowerMatchesStringOfLowered(t *testing.T) {
	k := New()
	base := "abcdefghijklmnopqrstuvwxyz0123456789-_./"
	for n := 0; n <= len(base); n++ {
		s := base[:n]
		for i := range n {
			mixed := s[:i] + strings.ToUpper(s[i:i+1]) + s[i+1:]
			if k.Lower(mixed) != k.String(s) {
				t.Fatalf("Lower(%q) != String(%q)", mixed, s)
			}
		}
		if k.Lower(strings.ToUpper(s)) != k.String(s) {
			t.Fatalf("Lower(%q) != String(%q)", strings.ToUpper(s), s)
		}
	}
}

// TestStringReadsEveryByte changes each byte of strings of every length up
// to 40 and checks that the hash changes, and that two seeds differ.
func TestStringReadsEveryByte(t *testing.T) {
	k := New()
	for n := 1; n <= 40; n++ {
		b := []byte(strings.Repeat("x", n))
		h := k.String(string(b))
		for i := range n {
			c := append([]byte(nil), b...)
			c[i] = 'y'
			if k.String(string(c)) == h {
				t.Fatalf("length %d: changing byte %d kept the hash", n, i)
			}
		}
	}
	a, b := New(), New()
	if a.String("provider") == b.String("provider") {
		t.Fatal("two seeds gave the same hash")
	}
}

func TestLowerByteAndLower8(t *testing.T) {
	for c := range 128 {
		want := byte(c)
		if 'A' <= c && c <= 'Z' {
			want = byte(c) + 32
		}
		if got := LowerByte(byte(c)); got != want {
			t.Fatalf("LowerByte(%q) = %q", byte(c), got)
		}
		w := uint64(c) * oneBytes
		if got := Lower8(w); got != uint64(want)*oneBytes {
			t.Fatalf("Lower8(%#x) = %#x", w, got)
		}
	}
}
