// Package seedhash is the seeded 64-bit string hash of the stores' own
// tables (lockout's table, breaker.Set's index, affinity's usage index).
// Those tables hash their keys themselves rather than with hash/maphash
// because this hash costs about half the instructions on the short
// provider, connection and model names they hold (lockout's
// BenchmarkStrhashVsMaphash, breaker's BenchmarkSetStateRouter), and
// because [Seed.Lower] hashes a name as lowered without building the
// lowered string, giving the same hash as [Seed.String] of the lowered
// name. Seeds are drawn at random, so where a key lands cannot be predicted
// from outside the process.
package seedhash

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"unsafe"
)

// Odd 64-bit constants with well mixed bits.
const (
	k0 = 0x9E3779B97F4A7C15
	k1 = 0xC2B2AE3D27D4EB4F
	k2 = 0x165667B19E3779F9
)

// Seed is a drawn seed; its zero value is a valid but unseeded hash.
type Seed struct{ s0, s1 uint64 }

// New returns a seed drawn at random.
func New() Seed {
	s := maphash.MakeSeed()
	return Seed{maphash.Comparable(s, 0), maphash.Comparable(s, 1)}
}

// fold multiplies a and b as 128-bit numbers and folds the halves together.
func fold(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// String returns the hash of s.
func (k Seed) String(s string) uint64 { return k.hash(s, false) }

// Lower returns String of s with its ASCII upper-case letters lowered, for
// s all ASCII, without building the lowered string.
func (k Seed) Lower(s string) uint64 { return k.hash(s, true) }

func (k Seed) hash(s string, lower bool) uint64 {
	n := len(s)
	// unsafe: a read-only view of s's bytes, so that words can be loaded
	// eight bytes at a time without copying s.
	b := unsafe.Slice(unsafe.StringData(s), n)
	var x, y uint64
	switch {
	case n == 0:
	case n < 4:
		b0, b1, b2 := b[0], b[n/2], b[n-1]
		if lower {
			b0, b1, b2 = LowerByte(b0), LowerByte(b1), LowerByte(b2)
		}
		x = uint64(b0)<<16 | uint64(b1)<<8 | uint64(b2)
	case n <= 8:
		x = uint64(binary.LittleEndian.Uint32(b))
		y = uint64(binary.LittleEndian.Uint32(b[n-4:]))
	case n <= 16:
		x = binary.LittleEndian.Uint64(b)
		y = binary.LittleEndian.Uint64(b[n-8:])
	default:
		return k.long(b, lower)
	}
	if lower && n >= 4 {
		x, y = Lower8(x), Lower8(y)
	}
	return fold(uint64(n)^k0, fold(x^k.s0, y^k.s1^k1))
}

// long hashes strings longer than 16 bytes, 16 bytes a round; the last
// round reads the final 16 bytes, overlapping the one before.
func (k Seed) long(b []byte, lower bool) uint64 {
	n := len(b)
	word := func(i int) uint64 {
		w := binary.LittleEndian.Uint64(b[i:])
		if lower {
			w = Lower8(w)
		}
		return w
	}
	acc := k.s0 ^ uint64(n)*k2
	for i := 0; i+16 < n; i += 16 {
		acc = fold(word(i)^k.s1^acc, word(i+8)^k1)
	}
	x, y := word(n-16), word(n-8)
	return fold(uint64(n)^k0^acc, fold(x^k.s0, y^k.s1^k1))
}

// HighBits has the high bit of every byte of a word set.
const HighBits = 0x8080808080808080

const oneBytes = 0x0101010101010101

// Upper8 returns 0x80 in each byte of w that is an ASCII upper-case
// letter, and 0 in the others. Every byte of w must be ASCII: then adding
// to a byte carries into its own high bit only, and byte+0x3F ≥ 0x80 when
// byte ≥ 'A', byte+0x25 ≥ 0x80 when byte > 'Z'.
func Upper8(w uint64) uint64 {
	return (w + 0x3F*oneBytes) &^ (w + 0x25*oneBytes) & HighBits
}

// Lower8 lowers the ASCII upper-case letters among the eight ASCII bytes
// of w.
func Lower8(w uint64) uint64 { return w | Upper8(w)>>2 }

// LowerByte lowers c when it is an ASCII upper-case letter.
func LowerByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		c += 'a' - 'A'
	}
	return c
}
