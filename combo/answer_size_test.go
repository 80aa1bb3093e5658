package combo

import (
	"testing"
	"unsafe"
)

// The answer is allocated once per request. Objects with pointers larger
// than 512 bytes carry an 8-byte header, so the answer must stay 8 bytes
// under the 1,792-byte size class it is meant for; the next class is
// 2,048 bytes.
func TestAnswerFitsItsSizeClass(t *testing.T) {
	const class, header = 1792, 8
	if got := unsafe.Sizeof(answer{}); got+header > class {
		t.Fatalf("answer is %d bytes, +%d header > the %d-byte size class: shrink smallBody", got, header, class)
	}
}
