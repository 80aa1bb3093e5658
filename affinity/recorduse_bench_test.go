package affinity

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkRecordUseAt records uses of eight connections in turn, as a
// router does after each success without a session.
func BenchmarkRecordUseAt(b *testing.B) {
	p := New(Config{TTL: time.Hour})
	conns := make([]string, 8)
	for i := range conns {
		conns[i] = "c" + strconv.Itoa(i)
		p.RecordUseAt(conns[i], t0)
	}
	now := t0
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		now = now.Add(time.Millisecond)
		p.RecordUseAt(conns[i&7], now)
		i++
	}
}
