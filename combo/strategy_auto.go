package combo

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/routeguard/routeguard/breaker"
)

// autoStrategy ranks targets by a score built from the router's own signals, with a
// little exploration, and sets persistently poor targets aside for a while.
//
// The score of a target is
//
//	breaker × (0.50·success + 0.20·latency + 0.15·cost + 0.15·headroom) / Σweights
//
// where each factor is in 0..1: success is the success rate (0.5 before any
// attempt); latency is 1/log10(average ms + 10), capped at 1 (0.25 while
// unknown); cost is 1 for the cheapest known price among the candidates and
// 0 for the dearest (1 when all are equal, 0.5 when unknown); headroom is
// [Quota.Headroom] (0.5 when unknown) and takes part only when Quota is set.
// The breaker factor is 1 when CLOSED, 0.7 DEGRADED, 0.4 HALF_OPEN and 0
// OPEN.
//
// Targets are sorted by score, best first, ties in declared order. With
// probability Explore a random other target is moved to the front instead.
//
// A target scoring below 0.2 after at least MinSamples attempts is excluded
// (dropped from the order) for 5 minutes; each further exclusion doubles
// the time, up to 30 minutes. When an exclusion ends the target is on
// probation: it is not excluded again before it has been tried again, and
// it is forgiven once it scores 0.2 or more. Auto never excludes every
// target: when all would be, none is.
//
// The zero value works with no quota source and a process-wide random
// source seeded from crypto/rand; newAuto takes a source of its own. Auto
// is safe for concurrent use.
type autoStrategy struct {
	Quota QuotaSource
	// Explore is the probability of trying a random other target first;
	// ≤ 0 means 0.05, values above 1 are clamped to 1.
	Explore float64
	// NoExplore turns exploration off.
	NoExplore bool
	// MinSamples is how many attempts a target needs before it can be
	// excluded; ≤ 0 means 5.
	MinSamples int64

	rnd *lockedRand

	mu   sync.Mutex // guards excl
	excl map[targetKey]*autoExclusion
	// held is len(excl), kept under mu and read without it: with no
	// record and no low score, Order need not take mu.
	held atomic.Int64
	// lat remembers this strategy's recent latency factors; it needs no
	// lock (see latencyMemo).
	lat latencyMemo
}

type autoExclusion struct {
	until    time.Time
	level    int   // exclusions in a row
	requests int64 // the target's attempts when last excluded
}

// Auto defaults and limits.
const (
	defaultAutoExplore    = 0.05
	defaultAutoMinSamples = 5
	autoExcludeBelow      = 0.2
	autoExcludeFor        = 5 * time.Minute
	maxAutoExclusion      = 30 * time.Minute
	// maxAutoEntries bounds the exclusion records.
	maxAutoEntries = 4096
)

// Auto score weights; they sum to 1.
const (
	autoSuccess  = 0.50
	autoLatency  = 0.20
	autoCost     = 0.15
	autoHeadroom = 0.15
)

// newAuto returns an auto strategy reading quotas from quota (nil for none)
// and drawing from src (used under a lock; nil means a source seeded from
// crypto/rand).
func newAuto(quota QuotaSource, src rand.Source) *autoStrategy {
	return &autoStrategy{Quota: quota, rnd: newLockedRand(src)}
}

// autoExcluded is one target the auto strategy has set aside.
type autoExcluded struct {
	Provider, Connection, Model string
	Until                       time.Time
	Level                       int // exclusions in a row, 1 for the first
}

// Excluded lists the targets excluded at now, in no particular order.
func (a *autoStrategy) Excluded(now time.Time) []autoExcluded {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []autoExcluded
	for k, e := range a.excl {
		if now.Before(e.until) {
			out = append(out, autoExcluded{Provider: k.provider, Connection: k.connection, Model: k.model,
				Until: e.until, Level: e.level})
		}
	}
	return out
}

// priceRange is the cheapest and dearest known price among ts.
func priceRange(ts []*Target) (lo, hi float64, ok bool) {
	for _, t := range ts {
		if !t.PriceKnown || math.IsNaN(t.Price) {
			continue
		}
		if !ok {
			lo, hi, ok = t.Price, t.Price, true
			continue
		}
		lo, hi = min(lo, t.Price), max(hi, t.Price)
	}
	return lo, hi, ok
}

// autoScore scores one target; lo and hi are the candidates' price range,
// room its headroom when withRoom (the strategy has a quota source); lat
// remembers latency factors.
func autoScore(lat *latencyMemo, t *Target, s *Stats, lo, hi float64, withRoom bool, room float64) float64 {
	success := 0.5
	if r := s.successRate(); r >= 0 {
		success = r / 100
	}
	latency := 0.25
	if s.AvgLatency > 0 {
		latency = lat.get(s.AvgLatency)
	}
	cost := 0.5
	if t.PriceKnown && !math.IsNaN(t.Price) {
		cost = 1
		if hi > lo {
			cost = 1 - (t.Price-lo)/(hi-lo)
		}
	}
	score := autoSuccess*success + autoLatency*latency + autoCost*cost
	if withRoom {
		// The four weights sum to exactly 1.
		score += autoHeadroom * room
	} else {
		score /= autoSuccess + autoLatency + autoCost
	}
	switch s.Breaker {
	case breaker.Degraded:
		score *= 0.7
	case breaker.HalfOpen:
		score *= 0.4
	case breaker.Open:
		score = 0
	}
	return score
}

// excluded decides, under a.mu, whether the target is excluded at now.
func (a *autoStrategy) excluded(k targetKey, score float64, requests int64, now time.Time) bool {
	e := a.excl[k]
	if e != nil && now.Before(e.until) {
		return true
	}
	if score >= autoExcludeBelow {
		if e != nil {
			delete(a.excl, k) // forgiven
		}
		return false
	}
	minSamples := a.MinSamples
	if minSamples <= 0 {
		minSamples = defaultAutoMinSamples
	}
	if requests < minSamples || (e != nil && requests <= e.requests) {
		return false
	}
	if e == nil {
		if a.excl == nil {
			a.excl = make(map[targetKey]*autoExclusion)
		}
		if len(a.excl) >= maxAutoEntries {
			for key, x := range a.excl {
				if !now.Before(x.until) {
					delete(a.excl, key)
				}
			}
			if len(a.excl) >= maxAutoEntries {
				return false
			}
		}
		e = &autoExclusion{}
		a.excl[k] = e
	}
	e.level++
	d := autoExcludeFor << min(e.level-1, 8)
	e.until = now.Add(min(d, maxAutoExclusion))
	e.requests = requests
	return true
}

// autoOut is added to the sort key of an excluded target, past any score.
const autoOut = 10

// Order sorts p.Targets by score, drops excluded targets and may explore.
func (a *autoStrategy) Order(p *Pick) {
	ts := p.Targets
	n := len(ts)
	if n == 0 {
		return
	}
	lo, hi, _ := priceRange(ts)
	var buf [stackKeys]keyed
	ks, pooled := keysFor(&buf, n)
	defer putKeys(pooled)
	low := false // some target scores below AutoExcludeBelow
	withRoom := a.Quota != nil
	var (
		s Stats
		q Quota
	)
	for i, t := range ts {
		if p.Signals != nil {
			s = p.Signals.Stats(t)
		}
		room := 0.5
		if withRoom {
			var ok bool
			if q, ok = a.Quota.Quota(t, p.Now); ok {
				room = q.headroom()
			}
		}
		score := autoScore(&a.lat, t, &s, lo, hi, withRoom, room)
		low = low || !(score >= autoExcludeBelow)
		ks[i] = keyed{key: -score, n: s.Requests, t: t}
	}
	out := 0
	// With no exclusion record, only a low score can change anything.
	if low || a.held.Load() > 0 {
		a.mu.Lock()
		for i := range ks {
			if a.excluded(keyOf(ks[i].t), -ks[i].key, ks[i].n, p.Now) {
				ks[i].key += autoOut
				out++
			}
		}
		a.held.Store(int64(len(a.excl)))
		a.mu.Unlock()
	}
	if out == n { // never exclude everything
		for i := range ks {
			ks[i].key -= autoOut
		}
		out = 0
	}
	sortKeyed(ts, ks)
	if out > 0 {
		clear(ts[n-out:])
		ts = ts[:n-out]
		p.Targets = ts
	}
	a.explore(ts)
}

// explore moves a random other target to the front with probability
// Explore.
func (a *autoStrategy) explore(ts []*Target) {
	if a.NoExplore || len(ts) < 2 {
		return
	}
	rate := a.Explore
	if !(rate > 0) {
		rate = defaultAutoExplore
	}
	r := a.rnd.orDefault()
	r.mu.Lock()
	j := -1
	if r.r.Float64() < rate {
		j = 1 + r.r.IntN(len(ts)-1)
	}
	r.mu.Unlock()
	toFront(ts, j)
}

// latencyFactor is 1/log10(avg ms + 10), capped at 1, for avg > 0.
func latencyFactor(avg time.Duration) float64 {
	// The average is over 0 ms, so the logarithm is over 1: capping at 1
	// guards only against rounding.
	return min(1, 1/math.Log10(float64(avg)/1e6+10))
}

// latencyMemo remembers recent latency factors by average latency. A
// target's average changes only when one of its attempts ends, so most
// orderings see the averages of the previous one again; the logarithm is
// the costliest part of a score.
//
// Each slot is a small sequence lock over atomics: a reader takes a value
// only when the sequence number is even and unchanged around its reads, and
// a writer that loses the race for a slot simply does not store.
type latencyMemo struct {
	slots [64]latencySlot
}

type latencySlot struct {
	seq    atomic.Uint64 // odd while a writer fills the slot
	avg    atomic.Int64  // the average the factor is for; 0 = empty
	factor atomic.Uint64 // math.Float64bits of the factor
}

// get returns latencyFactor(avg) for avg > 0.
func (m *latencyMemo) get(avg time.Duration) float64 {
	slot := &m.slots[(uint64(avg)*0x9e3779b97f4a7c15)>>58]
	seq := slot.seq.Load()
	if seq&1 == 0 && slot.avg.Load() == int64(avg) {
		f := slot.factor.Load()
		if slot.seq.Load() == seq {
			return math.Float64frombits(f)
		}
	}
	f := latencyFactor(avg)
	if seq&1 == 0 && slot.seq.CompareAndSwap(seq, seq+1) {
		slot.avg.Store(int64(avg))
		slot.factor.Store(math.Float64bits(f))
		slot.seq.Store(seq + 2)
	}
	return f
}
