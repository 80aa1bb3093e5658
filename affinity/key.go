package affinity

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strings"
	"unicode/utf8"
)

const (
	// maxKeyInput is the longest session value, in characters (Unicode code
	// points), that is accepted at all. Longer values yield no key.
	maxKeyInput = 4096

	// maxKeptValue is the longest session value, in characters, that is kept
	// verbatim in a Key. Longer values, and values with characters outside
	// A-Z, a-z, 0-9 and ".", "_", ":", "-", are replaced by their SHA-256.
	maxKeptValue = 180
)

// Key identifies one client session. It is derived by [KeyFrom] or [NewKey]
// and is comparable with ==.
//
// The zero Key means "no session"; [Pins] never pins it. A Key never prints
// its value: [Key.String] and [Key.LogValue] show only where it came from and
// the first hex digits of its digest, and stores see only the digest.
type Key struct {
	name string   // normalised form "<source>:<value>" or "<source>:sha256:<hex>"
	sum  [32]byte // SHA-256 of name
}

// NewKey builds a Key from a session value found under the given source
// label (for example "header" or "metadata"). The value is trimmed; an empty
// value, or one longer than 4096 characters (Unicode code points, counted
// before trimming), yields false. A trimmed value of at most 180 safe
// characters (A-Z, a-z, 0-9, ".", "_", ":", "-") is kept; any other value is
// replaced by "sha256:" and the lowercase hex SHA-256 of the trimmed value.
//
// The source should itself be a short label of safe characters; it is used
// as given.
func NewKey(source, value string) (Key, bool) {
	if len(value) > maxKeyInput && (len(value) > utf8.UTFMax*maxKeyInput || utf8.RuneCountInString(value) > maxKeyInput) {
		return Key{}, false
	}
	value = strings.TrimSpace(value)
	if value == "" {
		return Key{}, false
	}
	if len(value) <= maxKeptValue && isSafe(value) {
		return makeKey(source + ":" + value), true
	}
	return hashedKey(source, value), true
}

// hashedKey returns the Key "<source>:sha256:<hex sha256(text)>".
func hashedKey(source, text string) Key {
	sum := sha256.Sum256([]byte(text))
	var b strings.Builder
	b.Grow(len(source) + len(":sha256:") + hex.EncodedLen(len(sum)))
	b.WriteString(source)
	b.WriteString(":sha256:")
	var h [64]byte
	hex.Encode(h[:], sum[:])
	b.Write(h[:])
	return makeKey(b.String())
}

func makeKey(name string) Key {
	return Key{name: name, sum: sha256.Sum256([]byte(name))}
}

// isSafe reports whether s consists only of A-Z, a-z, 0-9 and ".", "_", ":",
// "-".
func isSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// IsZero reports whether k is the zero Key (no session).
func (k Key) IsZero() bool { return k.name == "" }

// Source returns the label of where the key came from: "header", "metadata",
// "claude-code", "conversation", "session", "prompt-cache", "input", or the
// source given to [NewKey]. It returns "" for the zero Key.
func (k Key) Source() string {
	src, _, _ := strings.Cut(k.name, ":")
	return src
}

// Digest returns the SHA-256 of the normalised key. Stores key pins on it so
// that the session value itself is never stored.
func (k Key) Digest() [32]byte { return k.sum }

// String returns a redacted form safe for logs: the source, "~", and the
// first 8 hex digits of the digest, for example "header~1a2b3c4d". The zero
// Key prints as "".
func (k Key) String() string {
	if k.IsZero() {
		return ""
	}
	var h [8]byte
	hex.Encode(h[:], k.sum[:4])
	return k.Source() + "~" + string(h[:])
}

// GoString returns the same redacted form as [Key.String], so %#v does not
// reveal the value either.
func (k Key) GoString() string { return "affinity.Key(" + k.String() + ")" }

// LogValue implements [slog.LogValuer] with the redacted form.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.String()) }
