package promcollector

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// counter is one counter series: an atomic count, exported at collection
// time as a constant metric.
type counter struct {
	v       atomic.Uint64
	desc    *prometheus.Desc
	labels  []string
	created time.Time
}

func newCounter(d *prometheus.Desc, labels ...string) *counter {
	return &counter{desc: d, labels: labels, created: time.Now()}
}

func (c *counter) metric() prometheus.Metric {
	return prometheus.MustNewConstMetricWithCreatedTimestamp(c.desc, prometheus.CounterValue, float64(c.v.Load()), c.created, c.labels...)
}

// histKind is the shape of a histogram family: its boundaries, as
// exported and as integers in the unit the observations come in
// (nanoseconds for durations, 1 for counts), and how many units make one
// exported unit.
type histKind struct {
	buckets []float64
	bounds  []int64
	per     float64 // units per exported unit: 1e9 for seconds
}

func newHistKind(buckets []float64, per float64) *histKind {
	k := &histKind{buckets: buckets, bounds: make([]int64, len(buckets)), per: per}
	for i, b := range buckets {
		k.bounds[i] = int64(math.Round(b * per))
	}
	return k
}

// hist is one histogram series, lock-free: an atomic count per bucket
// and an integer sum, so that an observation is a short search and two
// atomic adds. Its count is the sum of its buckets, read at collection
// time, so the two always agree.
type hist struct {
	kind    *histKind
	counts  []atomic.Uint64 // one per boundary, then +Inf
	sum     atomic.Int64    // in the kind's unit
	desc    *prometheus.Desc
	labels  []string
	created time.Time
}

func newHist(k *histKind, d *prometheus.Desc, labels ...string) *hist {
	return &hist{kind: k, counts: make([]atomic.Uint64, len(k.bounds)+1), desc: d, labels: labels, created: time.Now()}
}

// observe records v, in the kind's unit.
func (h *hist) observe(v int64) {
	b := h.kind.bounds
	i := 0
	for i < len(b) && v > b[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(v)
}

func (h *hist) metric() prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.kind.buckets))
	n := uint64(0)
	for i, le := range h.kind.buckets {
		n += h.counts[i].Load()
		buckets[le] = n
	}
	n += h.counts[len(h.kind.buckets)].Load()
	sum := float64(h.sum.Load()) / h.kind.per
	return prometheus.MustNewConstHistogramWithCreatedTimestamp(h.desc, n, sum, buckets, h.created, h.labels...)
}
