package promcollector

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// counter is one counter series: an atomic count of its own plus the
// observations of the histogram data it is shared with (an attempt label
// set's durations, a kind of request's overheads), exported at collection
// time as a constant metric. Sharing spares the recording path one atomic
// add per counted event: the histogram's add counts it.
type counter struct {
	v       atomic.Uint64
	desc    *prometheus.Desc
	labels  []string
	created time.Time

	mu     sync.Mutex
	shares []*histData // guarded by mu; each observation counts one
}

func newCounter(d *prometheus.Desc, labels ...string) *counter {
	return &counter{desc: d, labels: labels, created: time.Now()}
}

// share has every later observation of h count one on c.
func (c *counter) share(h *histData) {
	c.mu.Lock()
	c.shares = append(c.shares, h)
	c.mu.Unlock()
}

func (c *counter) value() uint64 {
	n := c.v.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.shares {
		n += h.count()
	}
	return n
}

func (c *counter) metric() prometheus.Metric {
	return prometheus.MustNewConstMetricWithCreatedTimestamp(c.desc, prometheus.CounterValue, float64(c.value()), c.created, c.labels...)
}

// histKind is the shape of a histogram family: its boundaries, as
// exported and as integers in the unit the observations come in
// (nanoseconds for durations, 1 for counts), and how many units make one
// exported unit.
type histKind struct {
	buckets []float64
	bounds  []int64
	// lower holds the least whole value of each bucket (0 for the first
	// one, whose values are usually at least 0), then of +Inf.
	lower []int64
	per   float64 // units per exported unit: 1e9 for seconds
}

func newHistKind(buckets []float64, per float64) *histKind {
	k := &histKind{buckets: buckets, bounds: make([]int64, len(buckets)), lower: make([]int64, len(buckets)+1), per: per}
	for i, b := range buckets {
		k.bounds[i] = int64(math.Round(b * per))
		if k.bounds[i] < math.MaxInt64 {
			k.lower[i+1] = k.bounds[i] + 1
		}
	}
	return k
}

// bucket is the index of v's bucket: the first boundary v does not exceed,
// else len(bounds) (+Inf).
func (k *histKind) bucket(v int64) int {
	b := k.bounds
	i := 0
	for i < len(b) && v > b[i] {
		i++
	}
	return i
}

// histData is the lock-free state of histogram observations: an atomic
// count per bucket and rest, the sum of each observation's excess over
// its bucket's lower value. The sum is rest plus each bucket's count times
// its lower value, exact in integer arithmetic, so that an observation
// equal to its bucket's lower value (a wait of 0, a request of one
// attempt) costs one atomic add, and any other two.
type histData struct {
	counts []atomic.Uint64 // one per boundary, then +Inf
	rest   atomic.Int64    // in the kind's unit
}

func newHistData(k *histKind) histData {
	return histData{counts: make([]atomic.Uint64, len(k.bounds)+1)}
}

// observe records v, in k's unit. The excess is added before the count,
// and read after it (see read), so that the exported sum of observations
// that are never negative never decreases.
func (h *histData) observe(k *histKind, v int64) {
	i := k.bucket(v)
	if r := v - k.lower[i]; r != 0 {
		h.rest.Add(r)
	}
	h.counts[i].Add(1)
}

// count is the number of observations.
func (h *histData) count() uint64 {
	n := uint64(0)
	for i := range h.counts {
		n += h.counts[i].Load()
	}
	return n
}

// read adds h's counts to counts and returns its sum, in k's unit.
func (h *histData) read(k *histKind, counts []uint64) int64 {
	sum := int64(0)
	for i := range h.counts {
		n := h.counts[i].Load()
		counts[i] += n
		sum += int64(n) * k.lower[i]
	}
	return sum + h.rest.Load()
}

// hist is one histogram series: the observations of its own data, of
// the data of its parts (the series it sums: the durations of each
// attempt label set of its labels, the overheads of each kind of request)
// and, for each observation of its zeros, one of 0 (the queue waits of
// the attempts that did not wait).
type hist struct {
	histData
	kind    *histKind
	desc    *prometheus.Desc
	labels  []string
	created time.Time

	mu    sync.Mutex
	parts []*histData // guarded by mu
	zeros []*histData // guarded by mu
}

func newHist(k *histKind, d *prometheus.Desc, labels ...string) *hist {
	return &hist{histData: newHistData(k), kind: k, desc: d, labels: labels, created: time.Now()}
}

// observe records v, in the kind's unit.
func (h *hist) observe(v int64) { h.histData.observe(h.kind, v) }

// add has h sum p's observations too.
func (h *hist) add(p *histData) {
	h.mu.Lock()
	h.parts = append(h.parts, p)
	h.mu.Unlock()
}

// addZeros has h count an observation of 0 for each of z's.
func (h *hist) addZeros(z *histData) {
	h.mu.Lock()
	h.zeros = append(h.zeros, z)
	h.mu.Unlock()
}

func (h *hist) metric() prometheus.Metric {
	counts := make([]uint64, len(h.kind.bounds)+1)
	sum := h.read(h.kind, counts)
	h.mu.Lock()
	for _, p := range h.parts {
		sum += p.read(h.kind, counts)
	}
	for _, z := range h.zeros {
		counts[h.kind.bucket(0)] += z.count()
	}
	h.mu.Unlock()
	return constHist(h.kind, h.desc, counts, float64(sum)/h.kind.per, h.created, h.labels)
}

// constHist is the constant metric of a histogram with counts per bucket
// (not cumulative) and sum.
func constHist(k *histKind, d *prometheus.Desc, counts []uint64, sum float64, created time.Time, labels []string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(k.buckets))
	n := uint64(0)
	for i, le := range k.buckets {
		n += counts[i]
		buckets[le] = n
	}
	n += counts[len(k.buckets)]
	return prometheus.MustNewConstHistogramWithCreatedTimestamp(d, n, sum, buckets, created, labels...)
}

// requestSeries is one kind of request: a combo's requests that made the
// same number of attempts and count the same exclusions with them. Its
// overhead observations count the requests (see comboSeries) and their
// exclusions, so that recording one is the overhead's adds alone.
type requestSeries struct {
	overhead histData // a part of the router overhead series
	made     int
}

// comboSeries is a combo's routeguard_request_attempts: the requests of
// each of its requestSeries, each with its attempts made.
type comboSeries struct {
	desc    *prometheus.Desc
	labels  []string
	created time.Time

	mu    sync.Mutex
	kinds []*requestSeries // guarded by mu
}

func (c *comboSeries) add(r *requestSeries) {
	c.mu.Lock()
	c.kinds = append(c.kinds, r)
	c.mu.Unlock()
}

func (c *comboSeries) metric(k *histKind) prometheus.Metric {
	counts := make([]uint64, len(k.bounds)+1)
	sum := uint64(0)
	c.mu.Lock()
	for _, r := range c.kinds {
		n := r.overhead.count()
		counts[k.bucket(int64(r.made))] += n
		sum += n * uint64(r.made)
	}
	c.mu.Unlock()
	return constHist(k, c.desc, counts, float64(sum)/k.per, c.created, c.labels)
}
