package promcollector

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/routeguard/routeguard/internal/metricscore"
)

// TestHistMatchesClientLibrary: the lock-free histogram exports the same
// buckets and count as the client library's for the same durations (on
// and around every boundary, and at random), and a sum equal to theirs
// but for float rounding.
func TestHistMatchesClientLibrary(t *testing.T) {
	for _, buckets := range [][]float64{metricscore.OperationBuckets, metricscore.OverheadBuckets,
		metricscore.FirstChunkBuckets, metricscore.QueueWaitBuckets} {
		desc := prometheus.NewDesc("x_seconds", "x", nil, nil)
		mine := newHist(newHistKind(buckets, float64(time.Second)), desc)
		theirs := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x_seconds", Help: "x", Buckets: buckets})
		observe := func(d time.Duration) {
			mine.observe(int64(d))
			theirs.Observe(d.Seconds())
		}
		for _, b := range buckets {
			d := time.Duration(math.Round(b * 1e9))
			observe(d - 1)
			observe(d)
			observe(d + 1)
		}
		observe(0)
		observe(time.Hour)
		r := rand.New(rand.NewPCG(1, 2))
		for range 1000 {
			observe(time.Duration(r.Int64N(int64(2 * buckets[len(buckets)-1] * 1e9))))
		}
		var a, b dto.Metric
		if err := mine.metric().Write(&a); err != nil {
			t.Fatal(err)
		}
		if err := theirs.Write(&b); err != nil {
			t.Fatal(err)
		}
		ha, hb := a.GetHistogram(), b.GetHistogram()
		if ha.GetSampleCount() != hb.GetSampleCount() {
			t.Errorf("%v: count %d, want %d", buckets, ha.GetSampleCount(), hb.GetSampleCount())
		}
		if d := math.Abs(ha.GetSampleSum() - hb.GetSampleSum()); d > 1e-9*hb.GetSampleSum() {
			t.Errorf("%v: sum %v, want %v", buckets, ha.GetSampleSum(), hb.GetSampleSum())
		}
		if len(ha.GetBucket()) != len(hb.GetBucket()) {
			t.Fatalf("%v: %d buckets, want %d", buckets, len(ha.GetBucket()), len(hb.GetBucket()))
		}
		for i, x := range ha.GetBucket() {
			y := hb.GetBucket()[i]
			if x.GetUpperBound() != y.GetUpperBound() || x.GetCumulativeCount() != y.GetCumulativeCount() {
				t.Errorf("%v: bucket le=%v count %d, want le=%v count %d", buckets, x.GetUpperBound(), x.GetCumulativeCount(),
					y.GetUpperBound(), y.GetCumulativeCount())
			}
		}
	}
}

// TestHistCounts: a count histogram takes whole values as they are.
func TestHistCounts(t *testing.T) {
	desc := prometheus.NewDesc("x", "x", nil, nil)
	h := newHist(newHistKind(metricscore.TokenBuckets, 1), desc)
	for _, v := range []int64{1, 2, 4, 5, 67108864, 67108865} {
		h.observe(v)
	}
	var m dto.Metric
	if err := h.metric().Write(&m); err != nil {
		t.Fatal(err)
	}
	got := m.GetHistogram()
	want := map[float64]uint64{1: 1, 4: 3, 16: 4, 67108864: 5}
	for _, b := range got.GetBucket() {
		if w, ok := want[b.GetUpperBound()]; ok && b.GetCumulativeCount() != w {
			t.Errorf("le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), w)
		}
	}
	if got.GetSampleCount() != 6 || got.GetSampleSum() != 1+2+4+5+67108864+67108865 {
		t.Errorf("count %d sum %v", got.GetSampleCount(), got.GetSampleSum())
	}
}
