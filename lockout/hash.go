package lockout

import (
	"encoding/binary"
	"unsafe"

	"github.com/routeguard/routeguard/internal/seedhash"
)

// The keys of lookups are hashed by internal/seedhash: a check of an
// upper-case model hashes the model as lowered without building the
// lowered string, and both give the same hash (BenchmarkStrhashVsMaphash
// compares it with hash/maphash).
var hashSeed = seedhash.New()

// strhash returns the seeded 64-bit hash of s.
func strhash(s string) uint64 { return hashSeed.String(s) }

// strhashLower returns strhash of s with its ASCII upper-case letters
// lowered, for s all ASCII, without building the lowered string.
func strhashLower(s string) uint64 { return hashSeed.Lower(s) }

// upper8, lower8 and lowerByte find and lower ASCII upper-case letters,
// eight bytes of a word or one byte (see internal/seedhash).
const highBits = seedhash.HighBits

func upper8(w uint64) uint64 { return seedhash.Upper8(w) }

func lower8(w uint64) uint64 { return seedhash.Lower8(w) }

func lowerByte(c byte) byte { return seedhash.LowerByte(c) }

// equalLower reports whether lower equals s with its ASCII upper-case
// letters lowered; s must be all ASCII.
func equalLower(lower, s string) bool {
	n := len(s)
	if len(lower) != n {
		return false
	}
	// unsafe: read-only views of the strings' bytes, compared a word at a
	// time without copying (BenchmarkLockedAt/upper-case-miss).
	a := unsafe.Slice(unsafe.StringData(lower), n)
	b := unsafe.Slice(unsafe.StringData(s), n)
	switch {
	case n < 4:
		for i, c := range b {
			if a[i] != lowerByte(c) {
				return false
			}
		}
		return true
	case n < 8:
		le := binary.LittleEndian
		return le.Uint32(a) == uint32(lower8(uint64(le.Uint32(b)))) &&
			le.Uint32(a[n-4:]) == uint32(lower8(uint64(le.Uint32(b[n-4:]))))
	}
	// Eight bytes at a time; the last word may overlap the one before.
	for i := 0; ; i += 8 {
		i = min(i, n-8)
		if binary.LittleEndian.Uint64(a[i:]) != lower8(binary.LittleEndian.Uint64(b[i:])) {
			return false
		}
		if i == n-8 {
			return true
		}
	}
}
