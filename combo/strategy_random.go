package combo

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/routeguard/routeguard/breaker"
)

// weightedOrder draws the first target with probability weight/Σweight (a weight
// ≤ 0, NaN or infinite counts as 1) and orders the rest by weight,
// descending, ties in declared order. With the combo's StickyLimit > 1 the
// drawn target stays first for that many requests while it stays eligible;
// a pinned target that is not eligible is dropped and a new one is drawn.
//
// The zero value draws from a process-wide source seeded from crypto/rand;
// newWeighted takes a source of its own. Weighted is safe for concurrent
// use.
type weightedOrder struct {
	rnd *lockedRand

	mu     sync.Mutex // guards sticky
	sticky comboStates[weightedPin]
}

type weightedPin struct {
	key  targetKey
	used int // requests served in the current batch
}

// newWeighted returns a weighted strategy drawing from src (used under a
// lock); nil means a source seeded from crypto/rand.
func newWeighted(src rand.Source) *weightedOrder { return &weightedOrder{rnd: newLockedRand(src)} }

// targetWeight is t's weight in draws: Weight, or 1 when it is not a
// positive finite number.
func targetWeight(t *Target) float64 {
	w := t.Weight
	if !(w > 0) || math.IsInf(w, 1) {
		return 1
	}
	return w
}

func byWeightDesc(a, b *Target) int { return cmp.Compare(targetWeight(b), targetWeight(a)) }

// Order puts the drawn (or pinned) target first and the rest by weight.
func (w *weightedOrder) Order(p *Pick) {
	ts := p.Targets
	if len(ts) < 2 {
		return
	}
	limit := 0
	if p.Combo != nil {
		limit = p.Combo.Settings.StickyLimit
	}
	drawn := -1
	var pin *weightedPin
	if limit > 1 {
		w.mu.Lock()
		defer w.mu.Unlock()
		pin = w.sticky.get(comboName(p), maxStrategyCombos)
		if pin.used > 0 && pin.used < limit {
			for i, t := range ts {
				if pin.key.is(t) {
					drawn = i
					pin.used++
					break
				}
			}
		}
	}
	if drawn < 0 {
		drawn = w.draw(ts)
		if pin != nil {
			*pin = weightedPin{key: keyOf(ts[drawn]), used: 1}
		}
	}
	toFront(ts, drawn)
	slices.SortStableFunc(ts[1:], byWeightDesc)
}

// draw picks an index of ts with probability proportional to its weight.
func (w *weightedOrder) draw(ts []*Target) int {
	total := 0.0
	for _, t := range ts {
		total += targetWeight(t)
	}
	r := w.rnd.orDefault()
	r.mu.Lock()
	x := r.r.Float64() * total
	r.mu.Unlock()
	for i, t := range ts {
		x -= targetWeight(t)
		if x < 0 {
			return i
		}
	}
	return len(ts) - 1 // rounding left x at 0
}

// p2cOrder is the power of two choices: it draws two distinct targets at random,
// scores each with p2cScore and puts the better one first (the first draw
// on a tie); the others keep their declared order.
//
// The zero value draws from a process-wide source seeded from crypto/rand;
// [newP2C] takes a source of its own. P2C is safe for concurrent use.
type p2cOrder struct {
	rnd *lockedRand
}

// newP2C returns a p2c strategy drawing from src (used under a lock); nil
// means a source seeded from crypto/rand.
func newP2C(src rand.Source) *p2cOrder { return &p2cOrder{rnd: newLockedRand(src)} }

// p2cScore is the p2c score of a target: −∞ when its breaker is OPEN;
// otherwise the success rate as a fraction (0.5 before any attempt) plus
// 1/log10(average latency in ms + 10) (0.25 while the latency is unknown),
// minus 0.25 when its breaker is HALF_OPEN.
func p2cScore(s Stats) float64 {
	if s.Breaker == breaker.Open {
		return math.Inf(-1)
	}
	score := 0.5
	if r := s.successRate(); r >= 0 {
		score = r / 100
	}
	if s.AvgLatency > 0 {
		score += 1 / math.Log10(float64(s.AvgLatency)/1e6+10)
	} else {
		score += 0.25
	}
	if s.Breaker == breaker.HalfOpen {
		score -= 0.25
	}
	return score
}

// Order puts the better of two random targets first.
func (s *p2cOrder) Order(p *Pick) {
	ts := p.Targets
	n := len(ts)
	if n < 2 {
		return
	}
	r := s.rnd.orDefault()
	r.mu.Lock()
	i := r.r.IntN(n)
	j := r.r.IntN(n - 1)
	r.mu.Unlock()
	if j >= i {
		j++
	}
	win := i
	if p2cScore(statsOf(p, ts[j])) > p2cScore(statsOf(p, ts[i])) {
		win = j
	}
	toFront(ts, win)
}

// randomOrder shuffles the targets (Fisher–Yates) for every request.
//
// The zero value draws from a process-wide source seeded from crypto/rand;
// newRandom takes a source of its own. Random is safe for concurrent use.
type randomOrder struct {
	rnd *lockedRand
}

// newRandom returns a random strategy drawing from src (used under a lock);
// nil means a source seeded from crypto/rand.
func newRandom(src rand.Source) *randomOrder { return &randomOrder{rnd: newLockedRand(src)} }

// Order shuffles p.Targets.
func (s *randomOrder) Order(p *Pick) {
	if len(p.Targets) < 2 {
		return
	}
	r := s.rnd.orDefault()
	r.mu.Lock()
	r.shuffle(p.Targets)
	r.mu.Unlock()
}

// strictRandom deals the first target from a per-combo deck: every target is
// dealt once before any is dealt again (a new cycle starts when every
// eligible target has been dealt). The rest are shuffled.
//
// The zero value draws from a process-wide source seeded from crypto/rand;
// newStrictRandom takes a source of its own. StrictRandom is safe for
// concurrent use.
type strictRandom struct {
	rnd *lockedRand

	mu    sync.Mutex // guards decks
	decks comboStates[deck]
}

// deck holds the targets dealt in the current cycle.
type deck struct {
	dealt []targetKey
}

// maxDeck bounds a deck's memory; a combo whose targets keep changing starts
// a new cycle when it is reached.
const maxDeck = 1024

// newStrictRandom returns a strict-random strategy drawing from src (used
// under a lock); nil means a source seeded from crypto/rand.
func newStrictRandom(src rand.Source) *strictRandom {
	return &strictRandom{rnd: newLockedRand(src)}
}

func (d *deck) has(t *Target) bool {
	for i := range d.dealt {
		if d.dealt[i].is(t) {
			return true
		}
	}
	return false
}

// Order deals the first target and shuffles the rest.
func (s *strictRandom) Order(p *Pick) {
	ts := p.Targets
	n := len(ts)
	if n == 0 {
		return
	}
	r := s.rnd.orDefault()
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.decks.get(comboName(p), maxStrategyCombos)
	// dealt marks the first 64 targets already dealt in this cycle; later
	// ones are looked up again when needed.
	var dealt uint64
	left := 0
	for i, t := range ts {
		if d.has(t) {
			if i < 64 {
				dealt |= 1 << i
			}
		} else {
			left++
		}
	}
	if left == 0 || len(d.dealt) >= maxDeck {
		d.dealt = d.dealt[:0]
		dealt = 0
		left = n
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.r.IntN(left)
	for i, t := range ts {
		if i < 64 && dealt&(1<<i) != 0 || i >= 64 && d.has(t) {
			continue
		}
		if k == 0 {
			d.dealt = append(d.dealt, keyOf(t))
			toFront(ts, i)
			break
		}
		k--
	}
	r.shuffle(ts[1:])
}
