package combo

import "sync"

// quotaShare shares a combo's load across connections in proportion to
// their weights while steering away from busy and exhausted ones:
//
//  1. Saturation gate: a target whose quota ([QuotaSource]) has its limit
//     reached, or nothing left in its session or weekly window, goes to the
//     saturated tail; targets with no known quota, and targets that name no
//     connection, always pass. When every target is saturated, none is set
//     aside.
//  2. Concurrency gate: of the others, a target that names a connection,
//     with MaxConcurrent > 0 and at least that many requests in flight, goes
//     to the at-cap tail. When none has room, all count as having room.
//  3. Deficit round robin over the targets with room: each adds
//     weight/Σweight to its deficit (a weight that is not positive and
//     finite counts as 1); the largest deficit wins (the first on a tie,
//     with rounding errors below 1e-9 ignored) and pays 1. With one target no deficit changes.
//  4. Power of two choices: the runner-up (the next target with room in
//     declared order) goes first instead when it has strictly fewer
//     requests in flight.
//
// The order is [winner, the rest with room, at-cap, saturated], each group
// in declared order. Deficits are kept per combo name, for at most 200
// combos (a new combo evicts the oldest).
//
// In-flight counts are the router's own (Stats.InFlight), which rise when an
// attempt starts. A hard per-connection cap with queueing (the fail-open
// concurrency slot acquired around the whole dispatch) is the router's
// admission layer, not part of the ordering.
//
// The zero value works with no quota source. QuotaShare is safe for
// concurrent use.
type quotaShare struct {
	Quota QuotaSource

	mu  sync.Mutex // guards drr
	drr comboStates[deficits]
}

// deficits are one combo's DRR deficits by target.
type deficits struct {
	entries []deficit
}

type deficit struct {
	key targetKey
	d   float64
}

const (
	// deficitTie absorbs rounding: deficits this close count as equal.
	deficitTie          = 1e-9
	maxQuotaShareCombos = 200
	// maxDeficits bounds a combo's entries; a combo whose targets keep
	// changing starts over when it is reached.
	maxDeficits = 256
)

// Target classes of QuotaShare, in output order.
const (
	shareRoom = iota
	shareAtCap
	shareSaturated
)

// ConnectionSlot names the slot of t's connection that a quota-share
// request holds for its whole duration (see [ConnectionSlotter]).
func (s *quotaShare) ConnectionSlot(t *Target) string { return "qsconn:" + t.Connection }

// Order orders p.Targets for quota sharing.
func (s *quotaShare) Order(p *Pick) {
	ts := p.Targets
	n := len(ts)
	if n < 2 {
		return
	}
	var buf [stackKeys]keyed
	ks, pooled := keysFor(&buf, n)
	defer putKeys(pooled)

	// Classify in one pass; the fail-open cases are rare and fixed up
	// after it.
	saturated, atCap := 0, 0
	for i, t := range ts {
		class := shareRoom
		if t.Connection != "" { // no connection, no bucket to saturate
			if q, ok := quotaOf(s.Quota, t, p.Now); ok && q.saturated() {
				class = shareSaturated
				saturated++
			}
		}
		inFlight := statsOf(p, t).InFlight
		if class == shareRoom && atItsCap(t, inFlight) {
			class = shareAtCap
			atCap++
		}
		ks[i] = keyed{key: float64(class), n: inFlight, t: t}
	}
	if saturated == n { // fail open: none is set aside as saturated
		atCap = 0
		for i := range ks {
			ks[i].key = shareRoom
			if atItsCap(ks[i].t, ks[i].n) {
				ks[i].key = shareAtCap
				atCap++
			}
		}
		saturated = 0
	}
	room := n - saturated - atCap
	if room == 0 { // fail open: every target with a cap counts as having room
		for i := range ks {
			if ks[i].key == shareAtCap {
				ks[i].key = shareRoom
			}
		}
		room = atCap
	}
	if room < n {
		sortKeyed(ts, ks) // stable: each class keeps its declared order
	}
	if room < 2 {
		return
	}
	win := s.round(comboName(p), ks[:room])
	toFront(ts, win)
	runnerUp := 0 // the ks index of the target now second in ts
	if win == 0 {
		runnerUp = 1
	}
	if ks[runnerUp].n < ks[win].n {
		ts[0], ts[1] = ts[1], ts[0]
	}
}

// atItsCap reports whether t names a connection with a cap that inFlight
// requests reach.
func atItsCap(t *Target, inFlight int64) bool {
	return t.MaxConcurrent > 0 && t.Connection != "" && inFlight >= int64(t.MaxConcurrent)
}

// round runs one DRR round over the targets with room and returns the
// index of the winner. It overwrites the keys of room (their class) with
// the targets' weights.
func (s *quotaShare) round(name string, room []keyed) int {
	total := 0.0
	for i := range room {
		w := targetWeight(room[i].t)
		room[i].key = w
		total += w
	}
	s.mu.Lock()
	st := s.drr.get(name, maxQuotaShareCombos)
	if len(st.entries) > max(maxDeficits, 2*len(room)) {
		st.entries = st.entries[:0]
	}
	win, winEntry := -1, -1
	for i := range room {
		e := st.find(room[i].t, i)
		st.entries[e].d += room[i].key / total
		if win < 0 || st.entries[e].d > st.entries[winEntry].d+deficitTie {
			win, winEntry = i, e
		}
	}
	st.entries[winEntry].d--
	s.mu.Unlock()
	return win
}

// find returns the index of t's entry, adding it with a zero deficit. The
// entry is looked for at index guess first: the targets of a combo usually
// come in the same order.
func (d *deficits) find(t *Target, guess int) int {
	if guess < len(d.entries) && d.entries[guess].key.is(t) {
		return guess
	}
	for i := range d.entries {
		if d.entries[i].key.is(t) {
			return i
		}
	}
	d.entries = append(d.entries, deficit{key: keyOf(t)})
	return len(d.entries) - 1
}
