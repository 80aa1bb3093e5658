package affinity

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"unsafe"
)

// connSeeds seeds connHash; drawn per usage table, so the placement of
// connections cannot be predicted from outside the process.
type connSeeds struct{ s0, s1 uint64 }

func newConnSeeds() connSeeds {
	s := maphash.MakeSeed()
	return connSeeds{maphash.Comparable(s, 0), maphash.Comparable(s, 1)}
}

// Odd 64-bit constants with well mixed bits.
const (
	connK0 = 0x9E3779B97F4A7C15
	connK1 = 0xC2B2AE3D27D4EB4F
)

// foldMul multiplies a and b as 128-bit numbers and folds the halves
// together.
func foldMul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// connHash returns a seeded 64-bit hash of the connection id s. It is the
// hash a use of a tracked connection computes, once, for both its shard and
// its index probe; on the short ids of BenchmarkRecordUseAt it costs 47
// instructions where hash/maphash.String cost 67.
func (k connSeeds) connHash(s string) uint64 {
	n := len(s)
	// unsafe: a read-only view of s's bytes, loaded eight bytes at a time
	// without copying s.
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
		// Sixteen bytes a round; the last round reads the final sixteen,
		// overlapping the one before.
		acc := k.s0 ^ uint64(n)*connK1
		for i := 0; i+16 < n; i += 16 {
			acc = foldMul(binary.LittleEndian.Uint64(b[i:])^k.s1^acc, binary.LittleEndian.Uint64(b[i+8:])^connK1)
		}
		x, y = binary.LittleEndian.Uint64(b[n-16:]), binary.LittleEndian.Uint64(b[n-8:])
		return foldMul(uint64(n)^connK0^acc, foldMul(x^k.s0, y^k.s1^connK1))
	}
	return foldMul(uint64(n)^connK0, foldMul(x^k.s0, y^k.s1^connK1))
}
