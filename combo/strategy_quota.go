package combo

import (
	"math"
	"sync"
	"time"
)

// QuotaSource reports the quota of the connection behind a target, for the
// quota-aware strategies. Quota is called once per target on every request
// (under no lock of the router), so it should answer from memory, be safe
// for concurrent use and not allocate; fetching and caching quotas is the
// source's business.
type QuotaSource interface {
	// Quota returns t's quota as of now; ok is false when it is not known
	// (not fetched yet, or fetching failed).
	Quota(t *Target, now time.Time) (q Quota, ok bool)
}

// quotaFunc adapts a function to [QuotaSource].
type quotaFunc func(t *Target, now time.Time) (Quota, bool)

// Quota calls f(t, now).
func (f quotaFunc) Quota(t *Target, now time.Time) (Quota, bool) { return f(t, now) }

// Quota is what a provider reports about one connection's usage limits, as
// they apply to the target's model: where a provider keeps a per-model
// window too, the source reports the tighter of the two.
type Quota struct {
	// LimitReached says the connection cannot serve the model until a
	// window resets.
	LimitReached bool
	Session      Window // the short window, 5 hours by default
	Weekly       Window // the 7-day window
	Monthly      Window // a monthly window, where the provider has one
}

// Window is one usage window of a quota. The zero value is a window the
// provider does not report.
type Window struct {
	// Known says the provider reports this window.
	Known bool
	// Remaining is the fraction of the window's allowance left, 0..1
	// (values outside are clamped; NaN makes the window unknown).
	Remaining float64
	// ResetAt is when the window resets; zero when not reported.
	ResetAt time.Time
	// Length is the window's span; 0 means 5 h for Session, 7 days for
	// Weekly and 30 days for Monthly.
	Length time.Duration
}

// Default window lengths.
const (
	sessionWindow = 5 * time.Hour
	weeklyWindow  = 7 * 24 * time.Hour
	monthlyWindow = 30 * 24 * time.Hour
)

func (w *Window) known() bool { return w.Known && !math.IsNaN(w.Remaining) }

// remaining is Remaining clamped to 0..1 (for a known window).
func (w *Window) remaining() float64 {
	r := w.Remaining
	if !(r > 0) {
		return 0
	}
	return min(r, 1)
}

// Headroom is the share of the quota still free: 0 when the limit is
// reached, otherwise 1 − the larger utilisation of the session and weekly
// windows (an unreported window counts as unused).
func (q Quota) Headroom() float64 { return q.headroom() }

func (q *Quota) headroom() float64 {
	if q.LimitReached {
		return 0
	}
	used := 0.0
	if q.Session.known() {
		used = 1 - q.Session.remaining()
	}
	if q.Weekly.known() {
		if u := 1 - q.Weekly.remaining(); u > used { // both in 0..1
			used = u
		}
	}
	return 1 - used
}

// saturated reports whether the connection is out of quota: the limit is
// reached, or the session or weekly window has nothing left.
func (q *Quota) saturated() bool {
	return q.LimitReached ||
		(q.Session.known() && q.Session.remaining() <= 0) ||
		(q.Weekly.known() && q.Weekly.remaining() <= 0)
}

func quotaOf(src QuotaSource, t *Target, now time.Time) (Quota, bool) {
	if src == nil {
		return Quota{}, false
	}
	return src.Quota(t, now)
}

// resetAware ranks targets by how much quota they have and how soon it would
// be wasted: quota that resets soon is worth spending first.
//
// Each reported window scores r·remaining + u·urgency·(1 − remaining), where
// urgency is 1 − time-to-reset/length (0.5 when the reset time is unknown,
// 1 once it has passed): the session window with r 0.45, u 0.55, the weekly
// one with r 0.25, u 0.75. A target scores SessionWeight·session +
// WeeklyWeight·weekly (the weights of the reported windows, normalised); a
// monthly window, when reported, is blended in at 25 % (monthly r 0.25, u
// 0.75). With less than 10 % of the session left the score is scaled by
// max(0.05, remaining/0.10). An unknown quota scores 0.5 and a reached
// limit −∞.
//
// Targets are sorted by score, best first; those within TieBand of the best
// take turns at the front, one step per request per combo.
//
// The zero value works with no quota source (every target scores 0.5, so
// they all take turns). ResetAware is safe for concurrent use.
type resetAware struct {
	Quota QuotaSource
	// SessionWeight and WeeklyWeight blend the two windows; both ≤ 0 means
	// 0.35 and 0.65. They are normalised to sum to 1.
	SessionWeight, WeeklyWeight float64
	// TieBand is the score distance from the best within which targets
	// rotate; ≤ 0 means 0.05.
	TieBand float64

	mu    sync.Mutex // guards turns
	turns comboStates[uint64]
}

// Window scoring parameters of ResetAware.
const (
	sessionR, sessionU = 0.45, 0.55
	weeklyR, weeklyU   = 0.25, 0.75
	monthlyBlend       = 0.25
	exhaustionGuard    = 0.10
)

// windowScore is r·remaining + u·urgency·(1 − remaining).
func windowScore(w *Window, length time.Duration, r, u float64, now *instant) float64 {
	if w.Length > 0 {
		length = w.Length
	}
	urgency := 0.5
	if !w.ResetAt.IsZero() {
		left := now.until(w.ResetAt)
		if left <= 0 {
			urgency = 1
		} else if urgency = 1 - float64(left)/float64(length); urgency < 0 {
			urgency = 0 // below 1 already: left and length are positive
		}
	}
	rem := w.remaining()
	return r*rem + u*urgency*(1-rem)
}

// Score is the reset-aware score of a known quota as of now (see
// resetAware).
func (s *resetAware) Score(q Quota, now time.Time) float64 {
	sw, ww := s.weights()
	at := newInstant(now)
	return resetScore(&q, sw, ww, &at)
}

// weights resolves SessionWeight and WeeklyWeight.
func (s *resetAware) weights() (sw, ww float64) {
	sw, ww = s.SessionWeight, s.WeeklyWeight
	if sw <= 0 && ww <= 0 || math.IsNaN(sw) || math.IsNaN(ww) {
		sw, ww = 0.35, 0.65
	}
	return max(sw, 0), max(ww, 0)
}

// resetScore is resetAware.Score with the weights resolved.
func resetScore(q *Quota, sw, ww float64, now *instant) float64 {
	if q.LimitReached {
		return math.Inf(-1)
	}
	score, weight := 0.0, 0.0
	if q.Session.known() && sw > 0 {
		score += sw * windowScore(&q.Session, sessionWindow, sessionR, sessionU, now)
		weight += sw
	}
	if q.Weekly.known() && ww > 0 {
		score += ww * windowScore(&q.Weekly, weeklyWindow, weeklyR, weeklyU, now)
		weight += ww
	}
	monthly := q.Monthly.known()
	switch {
	case weight > 0:
		score /= weight
		if monthly {
			score = (1-monthlyBlend)*score + monthlyBlend*windowScore(&q.Monthly, monthlyWindow, weeklyR, weeklyU, now)
		}
	case monthly:
		score = windowScore(&q.Monthly, monthlyWindow, weeklyR, weeklyU, now)
	default:
		return 0.5 // nothing reported
	}
	if q.Session.known() {
		if rem := q.Session.remaining(); rem < exhaustionGuard {
			score *= max(0.05, rem/exhaustionGuard)
		}
	}
	return score
}

// Order sorts p.Targets by score and rotates the leaders.
func (s *resetAware) Order(p *Pick) {
	ts := p.Targets
	if len(ts) < 2 {
		return
	}
	band := s.TieBand
	if !(band > 0) {
		band = 0.05
	}
	sw, ww := s.weights()
	now := newInstant(p.Now)
	var buf [stackKeys]keyed
	ks, pooled := keysFor(&buf, len(ts))
	for i, t := range ts {
		score := 0.5
		if s.Quota != nil {
			if q, ok := s.Quota.Quota(t, p.Now); ok {
				score = resetScore(&q, sw, ww, &now)
			}
		}
		ks[i] = keyed{key: -score, t: t} // best first
	}
	sortKeyed(ts, ks)
	leaders := 0
	if best := -ks[0].key; !math.IsInf(best, 0) {
		for _, k := range ks {
			if -k.key < best-band {
				break
			}
			leaders++
		}
	}
	putKeys(pooled)
	rotateTurn(&s.mu, &s.turns, p, leaders)
}

// rotateTurn turns the first n targets of p by one step per call per combo.
func rotateTurn(mu *sync.Mutex, turns *comboStates[uint64], p *Pick, n int) {
	if n < 2 {
		return
	}
	mu.Lock()
	turn := turns.get(comboName(p), maxStrategyCombos)
	k := int(*turn % uint64(n))
	*turn++
	mu.Unlock()
	rotate(p.Targets[:n], k)
}

// resetWindow orders targets by how soon their quota resets, soonest first:
// the earliest reset among the weekly window and, with IncludeSession, the
// session window. A target with no known reset time goes last, in declared
// order. Targets whose reset is within TieBand of the soonest take turns at
// the front, one step per request per combo.
//
// The zero value works with no quota source (declared order). ResetWindow is
// safe for concurrent use.
type resetWindow struct {
	Quota QuotaSource
	// IncludeSession also counts the session window's reset.
	IncludeSession bool
	// TieBand is the distance from the soonest reset within which targets
	// rotate; ≤ 0 means 60 s.
	TieBand time.Duration

	mu    sync.Mutex // guards turns
	turns comboStates[uint64]
}

// untilReset is the time from now to the earliest configured reset, 0 when
// it has passed, +∞ when unknown.
func (s *resetWindow) untilReset(q *Quota, now *instant) float64 {
	best := math.Inf(1)
	if w := &q.Weekly; w.Known && !w.ResetAt.IsZero() {
		best = float64(max(now.until(w.ResetAt), 0))
	}
	if w := &q.Session; s.IncludeSession && w.Known && !w.ResetAt.IsZero() {
		best = min(best, float64(max(now.until(w.ResetAt), 0)))
	}
	return best
}

// Order sorts p.Targets by time to reset and rotates the leaders.
func (s *resetWindow) Order(p *Pick) {
	ts := p.Targets
	if len(ts) < 2 {
		return
	}
	band := s.TieBand
	if band <= 0 {
		band = time.Minute
	}
	now := newInstant(p.Now)
	var buf [stackKeys]keyed
	ks, pooled := keysFor(&buf, len(ts))
	for i, t := range ts {
		k := math.Inf(1)
		if s.Quota != nil {
			if q, ok := s.Quota.Quota(t, p.Now); ok {
				k = s.untilReset(&q, &now)
			}
		}
		ks[i] = keyed{key: k, t: t}
	}
	sortKeyed(ts, ks)
	leaders := 0
	if best := ks[0].key; !math.IsInf(best, 0) {
		for _, k := range ks {
			if k.key > best+float64(band) {
				break
			}
			leaders++
		}
	}
	putKeys(pooled)
	rotateTurn(&s.mu, &s.turns, p, leaders)
}

// headroomOrder orders targets by free quota ([Quota.Headroom]), most first;
// equal headroom keeps the declared order. An unknown quota counts as full
// headroom, so without a source the declared order stands.
type headroomOrder struct {
	Quota QuotaSource
}

// Order sorts p.Targets by headroom.
func (h headroomOrder) Order(p *Pick) {
	ts := p.Targets
	if len(ts) < 2 || h.Quota == nil {
		return
	}
	var buf [stackKeys]keyed
	ks, pooled := keysFor(&buf, len(ts))
	for i, t := range ts {
		room := 1.0
		if q, ok := h.Quota.Quota(t, p.Now); ok {
			room = q.headroom()
		}
		ks[i] = keyed{key: -room, t: t}
	}
	sortKeyed(ts, ks)
	putKeys(pooled)
}
