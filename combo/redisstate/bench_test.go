package redisstate_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/routeguard/routeguard/combo/redisstate"
	"github.com/routeguard/routeguard/lease"
)

// latency records per-operation times and reports p50 and p99.
type latency []time.Duration

func (l *latency) time(f func()) {
	start := time.Now()
	f()
	*l = append(*l, time.Since(start))
}

func (l latency) report(b *testing.B, name string) {
	if len(l) == 0 {
		return
	}
	slices.Sort(l)
	b.ReportMetric(float64(l[len(l)/2].Microseconds()), name+"-p50-µs")
	b.ReportMetric(float64(l[len(l)*99/100].Microseconds()), name+"-p99-µs")
}

// BenchmarkLeaseLifecycle measures acquire, renew and release on the real
// server, one round trip each.
func BenchmarkLeaseLifecycle(b *testing.B) {
	st := newState(b, newReal(b), redisstate.Config{}).Leases()
	ctx := bg
	var acq, ren, rel latency
	for i := 0; b.Loop(); i++ {
		h := lease.Holder{Owner: lease.HashOwner("bench-" + strconv.Itoa(i)), APIKeyID: "k"}
		var l lease.Lease
		var err error
		acq.time(func() { l, _, err = st.Acquire(ctx, h, "p", "c"+strconv.Itoa(i%64), time.Minute, time.Now()) })
		if err != nil {
			b.Fatal(err)
		}
		h.Generation = l.Generation
		ren.time(func() { _, err = st.Renew(ctx, h, time.Minute, time.Now()) })
		if err != nil {
			b.Fatal(err)
		}
		rel.time(func() { _, _, err = st.Release(ctx, h, lease.ReasonOwnerExit, time.Now()) })
		if err != nil {
			b.Fatal(err)
		}
	}
	acq.report(b, "acquire")
	ren.report(b, "renew")
	rel.report(b, "release")
}

// BenchmarkSlotAcquireRelease measures a slot acquire and its release on
// the real server.
func BenchmarkSlotAcquireRelease(b *testing.B) {
	st := newState(b, newReal(b), redisstate.Config{})
	sl := st.Slots()
	var acq, rel latency
	for i := 0; b.Loop(); i++ {
		holder := st.Holder(strconv.Itoa(i))
		var ok bool
		var err error
		acq.time(func() { ok, _, _, err = sl.TryAcquire(bg, "conn", 3, holder, time.Time{}) })
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
		rel.time(func() { err = sl.Release(bg, "conn", holder, time.Time{}) })
		if err != nil {
			b.Fatal(err)
		}
	}
	acq.report(b, "acquire")
	rel.report(b, "release")
}

// BenchmarkFenceMirror measures a fence answered by the mirror.
func BenchmarkFenceMirror(b *testing.B) {
	st := newState(b, newReal(b), redisstate.Config{FenceStaleness: time.Hour, ReleaseQuarantine: time.Minute}).Leases()
	h := lease.Holder{Owner: lease.HashOwner("bench-fence"), APIKeyID: "k", Generation: 1}
	now := time.Now()
	if _, _, err := st.Acquire(bg, h, "p", "c1", 30*time.Minute, now); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := st.Fence(bg, h, "c1", now); err != nil {
			b.Fatal(err)
		}
	}
}
