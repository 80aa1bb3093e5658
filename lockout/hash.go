package lockout

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"unsafe"
)

// The keys of lookups are hashed by strhash rather than hash/maphash: most
// are short strings, and for those a multiply-and-fold hash that the
// compiler can inline costs a fraction of a call into the runtime. The
// constants are odd 64-bit numbers with well mixed bits; the seeds are
// drawn at start-up, so the placement of keys cannot be predicted from
// outside the process.
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
func strhash(s string) uint64 {
	n := len(s)
	b := unsafe.Slice(unsafe.StringData(s), n)
	var x, y uint64
	switch {
	case n == 0:
	case n < 4:
		x = uint64(b[0])<<16 | uint64(b[n/2])<<8 | uint64(b[n-1])
	case n <= 8:
		x = uint64(binary.LittleEndian.Uint32(b))
		y = uint64(binary.LittleEndian.Uint32(b[n-4:]))
	case n <= 16:
		x = binary.LittleEndian.Uint64(b)
		y = binary.LittleEndian.Uint64(b[n-8:])
	default:
		return longhash(b)
	}
	return fold(uint64(n)^hashK0, fold(x^hashSeed0, y^hashSeed1^hashK1))
}

// longhash hashes strings longer than 16 bytes, 16 bytes a round; the
// last round reads the final 16 bytes, overlapping the one before.
func longhash(b []byte) uint64 {
	n := len(b)
	acc := hashSeed0 ^ uint64(n)*hashK2
	for i := 0; i+16 < n; i += 16 {
		acc = fold(binary.LittleEndian.Uint64(b[i:])^hashSeed1^acc, binary.LittleEndian.Uint64(b[i+8:])^hashK1)
	}
	x := binary.LittleEndian.Uint64(b[n-16:])
	y := binary.LittleEndian.Uint64(b[n-8:])
	return fold(uint64(n)^hashK0^acc, fold(x^hashSeed0, y^hashSeed1^hashK1))
}
