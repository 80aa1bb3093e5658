package lockout

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"unsafe"
)

// The keys of lookups are hashed by strhash rather than hash/maphash
// because of strhashLower: a check of an upper-case model hashes the model
// as lowered without building the lowered string, and both must give the
// same hash. On plain keys the two cost about the same
// (BenchmarkStrhashVsMaphash). The constants are odd 64-bit numbers with
// well mixed bits; the seeds are drawn at start-up, so the placement of keys
// cannot be predicted from outside the process.
const (
	hashK0 = 0x9E3779B97F4A7C15
	hashK1 = 0xC2B2AE3D27D4EB4F
	hashK2 = 0x165667B19E3779F9
)

var hashSeed0, hashSeed1 = newHashSeeds()

func newHashSeeds() (uint64, uint64) {
	s := maphash.MakeSeed()
	return maphash.Comparable(s, 0), maphash.Comparable(s, 1)
}

// fold multiplies a and b as 128-bit numbers and folds the halves together.
func fold(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// strhash returns a seeded 64-bit hash of s.
func strhash(s string) uint64 { return hashString(s, false) }

// strhashLower returns strhash of s with its ASCII upper-case letters
// lowered, for s all ASCII, without building the lowered string.
func strhashLower(s string) uint64 { return hashString(s, true) }

func hashString(s string, lower bool) uint64 {
	n := len(s)
	// unsafe: a read-only view of s's bytes, so that words can be loaded
	// eight bytes at a time without copying s (BenchmarkLockedAt).
	b := unsafe.Slice(unsafe.StringData(s), n)
	var x, y uint64
	switch {
	case n == 0:
	case n < 4:
		b0, b1, b2 := b[0], b[n/2], b[n-1]
		if lower {
			b0, b1, b2 = lowerByte(b0), lowerByte(b1), lowerByte(b2)
		}
		x = uint64(b0)<<16 | uint64(b1)<<8 | uint64(b2)
	case n <= 8:
		x = uint64(binary.LittleEndian.Uint32(b))
		y = uint64(binary.LittleEndian.Uint32(b[n-4:]))
	case n <= 16:
		x = binary.LittleEndian.Uint64(b)
		y = binary.LittleEndian.Uint64(b[n-8:])
	default:
		return longhash(b, lower)
	}
	if lower && n >= 4 {
		x, y = lower8(x), lower8(y)
	}
	return fold(uint64(n)^hashK0, fold(x^hashSeed0, y^hashSeed1^hashK1))
}

// longhash hashes strings longer than 16 bytes, 16 bytes a round; the
// last round reads the final 16 bytes, overlapping the one before.
func longhash(b []byte, lower bool) uint64 {
	n := len(b)
	word := func(i int) uint64 {
		w := binary.LittleEndian.Uint64(b[i:])
		if lower {
			w = lower8(w)
		}
		return w
	}
	acc := hashSeed0 ^ uint64(n)*hashK2
	for i := 0; i+16 < n; i += 16 {
		acc = fold(word(i)^hashSeed1^acc, word(i+8)^hashK1)
	}
	x, y := word(n-16), word(n-8)
	return fold(uint64(n)^hashK0^acc, fold(x^hashSeed0, y^hashSeed1^hashK1))
}

const (
	highBits = 0x8080808080808080
	oneBytes = 0x0101010101010101
)

// upper8 returns 0x80 in each byte of w that is an ASCII upper-case
// letter, and 0 in the others. Every byte of w must be ASCII: then adding
// to a byte carries into its own high bit only, and byte+0x3F ≥ 0x80 when
// byte ≥ 'A', byte+0x25 ≥ 0x80 when byte > 'Z'.
func upper8(w uint64) uint64 {
	return (w + 0x3F*oneBytes) &^ (w + 0x25*oneBytes) & highBits
}

// lower8 lowers the ASCII upper-case letters among the eight ASCII bytes
// of w.
func lower8(w uint64) uint64 { return w | upper8(w)>>2 }

func lowerByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		c += 'a' - 'A'
	}
	return c
}

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
