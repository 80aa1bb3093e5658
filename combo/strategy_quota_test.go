package combo_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo"
)

// Combo scenario 9: a reached limit ranks after an unknown quota (0.5).
func TestResetAwareLimitReachedLast(t *testing.T) {
	ts := mk("a", "b")
	s := &combo.ResetAware{Quota: quotas{"a": {LimitReached: true}}}
	assert.True(t, math.IsInf(s.Score(combo.Quota{LimitReached: true}, t0), -1))
	assert.Equal(t, []string{"b", "a"}, order(s, &combo.Combo{Name: "ra"}, ts, nil))
}

func TestResetAwareScore(t *testing.T) {
	s := &combo.ResetAware{}
	half := func(length time.Duration) time.Time { return t0.Add(length / 2) } // urgency 0.5
	tests := []struct {
		name string
		q    combo.Quota
		want float64
	}{
		{"nothing reported", combo.Quota{}, 0.5},
		{"session only", combo.Quota{Session: combo.Window{Known: true, Remaining: 0.5, ResetAt: half(combo.SessionWindow)}},
			0.45*0.5 + 0.55*0.5*0.5},
		{"weekly only, reset unknown", combo.Quota{Weekly: combo.Window{Known: true, Remaining: 0.8}},
			0.25*0.8 + 0.75*0.5*0.2},
		{"both", combo.Quota{
			Session: combo.Window{Known: true, Remaining: 0.5, ResetAt: half(combo.SessionWindow)},
			Weekly:  combo.Window{Known: true, Remaining: 0.8, ResetAt: half(combo.WeeklyWindow)}},
			0.35*(0.45*0.5+0.55*0.5*0.5) + 0.65*(0.25*0.8+0.75*0.5*0.2)},
		{"reset passed: urgency 1", combo.Quota{Weekly: combo.Window{Known: true, Remaining: 0.4, ResetAt: t0.Add(-time.Second)}},
			0.25*0.4 + 0.75*1*0.6},
		{"reset a full window away: urgency 0", combo.Quota{Weekly: combo.Window{Known: true, Remaining: 0.4, ResetAt: t0.Add(combo.WeeklyWindow)}},
			0.25 * 0.4},
		{"custom length", combo.Quota{Weekly: combo.Window{Known: true, Remaining: 0, ResetAt: t0.Add(time.Hour), Length: 4 * time.Hour}},
			0.75 * 0.75},
		{"monthly blended 25 %", combo.Quota{
			Weekly:  combo.Window{Known: true, Remaining: 1},
			Monthly: combo.Window{Known: true, Remaining: 0, ResetAt: t0}},
			0.75*0.25 + 0.25*0.75},
		{"session nearly spent: guard", combo.Quota{Session: combo.Window{Known: true, Remaining: 0.05, ResetAt: half(combo.SessionWindow)}},
			(0.45*0.05 + 0.55*0.5*0.95) * 0.5},
		{"session spent: floor 0.05", combo.Quota{Session: combo.Window{Known: true, Remaining: 0, ResetAt: half(combo.SessionWindow)}},
			(0.55 * 0.5) * 0.05},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.InDelta(t, tt.want, s.Score(tt.q, t0), 1e-12)
		})
	}

	custom := &combo.ResetAware{SessionWeight: 1, WeeklyWeight: 1}
	q := combo.Quota{Session: combo.Window{Known: true, Remaining: 1}, Weekly: combo.Window{Known: true, Remaining: 1}}
	assert.InDelta(t, 0.5*0.45+0.5*0.25, custom.Score(q, t0), 1e-12, "weights normalised")
}

func TestResetAwareRotatesWithinTieBand(t *testing.T) {
	ts := mk("a", "b", "c", "d")
	w := func(rem float64) combo.Quota { return combo.Quota{Weekly: combo.Window{Known: true, Remaining: rem}} }
	// Weekly scores: 0.25·r + 0.375·(1−r): a 0.3125, b 0.3, c 0.3125, d 0.25.
	s := &combo.ResetAware{Quota: quotas{"a": w(0.5), "b": w(0.6), "c": w(0.5), "d": w(1)}}
	c := &combo.Combo{Name: "band"}
	assert.Equal(t, []string{"a", "c", "b", "d"}, order(s, c, ts, nil))
	assert.Equal(t, []string{"c", "b", "a", "d"}, order(s, c, ts, nil))
	assert.Equal(t, []string{"b", "a", "c", "d"}, order(s, c, ts, nil))
	assert.Equal(t, []string{"a", "c", "b", "d"}, order(s, c, ts, nil))

	narrow := &combo.ResetAware{Quota: s.Quota, TieBand: 0.001}
	assert.Equal(t, []string{"a", "c", "b", "d"}, order(narrow, c, ts, nil))
	assert.Equal(t, []string{"c", "a", "b", "d"}, order(narrow, c, ts, nil))
}

// Combo scenario 8: A resets in 10 min, B in 10.5 min, C unknown; A and B
// take turns at the front, C is always last.
func TestResetWindowRotation(t *testing.T) {
	ts := mk("c", "b", "a")
	weekly := func(d time.Duration) combo.Quota {
		return combo.Quota{Weekly: combo.Window{Known: true, Remaining: 0.5, ResetAt: t0.Add(d)}}
	}
	s := &combo.ResetWindow{Quota: quotas{"a": weekly(10 * time.Minute), "b": weekly(10*time.Minute + 30*time.Second)},
		TieBand: time.Minute}
	c := &combo.Combo{Name: "rw"}
	for i := range 6 {
		want := []string{"a", "b", "c"}
		if i%2 == 1 {
			want = []string{"b", "a", "c"}
		}
		assert.Equal(t, want, order(s, c, ts, nil), "request %d", i)
	}
}

func TestResetWindowOrder(t *testing.T) {
	ts := mk("u1", "far", "session", "near", "u2")
	q := quotas{
		"far":     {Weekly: combo.Window{Known: true, ResetAt: t0.Add(48 * time.Hour)}},
		"session": {Session: combo.Window{Known: true, ResetAt: t0.Add(time.Hour)}, Weekly: combo.Window{Known: true, ResetAt: t0.Add(72 * time.Hour)}},
		"near":    {Weekly: combo.Window{Known: true, ResetAt: t0.Add(24 * time.Hour)}},
		"u2":      {Weekly: combo.Window{Known: true}}, // no reset time
	}
	assert.Equal(t, []string{"near", "far", "session", "u1", "u2"},
		order(&combo.ResetWindow{Quota: q}, &combo.Combo{Name: "x"}, ts, nil))
	assert.Equal(t, []string{"session", "near", "far", "u1", "u2"},
		order(&combo.ResetWindow{Quota: q, IncludeSession: true}, &combo.Combo{Name: "x"}, ts, nil))
	assert.Equal(t, []string{"u1", "far", "session", "near", "u2"},
		order(&combo.ResetWindow{}, &combo.Combo{Name: "x"}, ts, nil), "no source: declared order")
}

func TestHeadroom(t *testing.T) {
	ts := mk("a", "b", "c", "d", "e")
	q := quotas{
		"a": {Session: combo.Window{Known: true, Remaining: 0.2}, Weekly: combo.Window{Known: true, Remaining: 0.9}}, // 0.2
		"c": {Weekly: combo.Window{Known: true, Remaining: 0.6}},                                                     // 0.6
		"d": {LimitReached: true, Weekly: combo.Window{Known: true, Remaining: 1}},                                   // 0
		"e": {Session: combo.Window{Known: true, Remaining: 0.6}},                                                    // 0.6
	}
	assert.Equal(t, []string{"b", "c", "e", "a", "d"}, order(combo.Headroom{Quota: q}, nil, ts, nil))
	assert.Equal(t, []string{"a", "b", "c", "d", "e"}, order(combo.Headroom{}, nil, ts, nil))
	assert.InDelta(t, 0.2, q["a"].Headroom(), 1e-12)
	assert.InDelta(t, 1.0, combo.Quota{Session: combo.Window{Known: true, Remaining: math.NaN()}}.Headroom(), 0)
}

// Queue scenario 6: equal weights, A in flight 2, B 0: DRR picks A, P2C
// hands the lead to B.
func TestQuotaShareP2CBeatsDRRWinner(t *testing.T) {
	ts := mk("a", "b")
	s := &combo.QuotaShare{}
	sig := signals{ts[0]: {InFlight: 2}}
	assert.Equal(t, []string{"b", "a"}, order(s, &combo.Combo{Name: "qs"}, ts, sig))
}

// Queue scenario 7: A at its cap goes to the at-cap tail; when both are at
// cap both count as having room and DRR decides.
func TestQuotaShareAtCap(t *testing.T) {
	ts := mk("a", "b")
	ts[0].MaxConcurrent, ts[1].MaxConcurrent = 1, 1
	s := &combo.QuotaShare{}
	c := &combo.Combo{Name: "cap"}
	assert.Equal(t, []string{"b", "a"}, order(s, c, ts, signals{ts[0]: {InFlight: 1}}))

	s = &combo.QuotaShare{}
	both := signals{ts[0]: {InFlight: 1}, ts[1]: {InFlight: 1}}
	// DRR: a wins the first round (tie, first in order), b the second.
	assert.Equal(t, []string{"a", "b"}, order(s, c, ts, both))
	assert.Equal(t, []string{"b", "a"}, order(s, c, ts, both))
	assert.Equal(t, []string{"a", "b"}, order(s, c, ts, both))
}

// Queue scenario 8: every target saturated on the session window: none is
// set aside, DRR runs over all of them.
func TestQuotaShareAllSaturated(t *testing.T) {
	ts := mk("a", "b", "c")
	spent := combo.Quota{Session: combo.Window{Known: true, Remaining: 0}}
	s := &combo.QuotaShare{Quota: quotas{"a": spent, "b": spent, "c": spent}}
	c := &combo.Combo{Name: "sat"}
	var firsts []string
	for range 6 {
		firsts = append(firsts, order(s, c, ts, nil)[0])
	}
	assert.Equal(t, []string{"a", "b", "c", "a", "b", "c"}, firsts)
}

func TestQuotaShareTails(t *testing.T) {
	ts := mk("s1", "cap1", "r1", "s2", "r2", "cap2")
	ts[1].MaxConcurrent, ts[5].MaxConcurrent = 2, 1
	sig := signals{ts[1]: {InFlight: 2}, ts[5]: {InFlight: 3}, ts[2]: {InFlight: 1}, ts[4]: {InFlight: 1}}
	q := quotas{"s1": {LimitReached: true}, "s2": {Weekly: combo.Window{Known: true, Remaining: 0}},
		"r1": {Weekly: combo.Window{Known: true, Remaining: 0.01}}}
	s := &combo.QuotaShare{Quota: q}
	c := &combo.Combo{Name: "tails"}
	assert.Equal(t, []string{"r1", "r2", "cap1", "cap2", "s1", "s2"}, order(s, c, ts, sig))
	assert.Equal(t, []string{"r2", "r1", "cap1", "cap2", "s1", "s2"}, order(s, c, ts, sig))
}

// DRR over weights 2:1 serves a, b, a, a, b, a, …; with one target no
// deficit changes.
func TestQuotaShareDRRWeights(t *testing.T) {
	ts := mk("a", "b")
	ts[0].Weight, ts[1].Weight = 2, 1
	s := &combo.QuotaShare{}
	c := &combo.Combo{Name: "drr"}
	var firsts []string
	for range 9 {
		firsts = append(firsts, order(s, c, ts, nil)[0])
	}
	assert.Equal(t, []string{"a", "b", "a", "a", "b", "a", "a", "b", "a"}, firsts)

	// Another combo has deficits of its own.
	assert.Equal(t, "a", order(s, &combo.Combo{Name: "drr2"}, ts, nil)[0])
	// One target: no state change, so the sequence of c resumes unchanged.
	order(s, c, ts[:1], nil)
	assert.Equal(t, "a", order(s, c, ts, nil)[0])
	assert.Equal(t, "b", order(s, c, ts, nil)[0])
}

func TestQuotaShareP2CRunnerUpWhenLaterWins(t *testing.T) {
	ts := mk("a", "b", "c")
	s := &combo.QuotaShare{}
	c := &combo.Combo{Name: "ru"}
	order(s, c, ts, nil) // a wins round 1
	// Round 2: b wins DRR; the runner-up is a (next in declared order),
	// which has fewer in flight.
	sig := signals{ts[1]: {InFlight: 3}, ts[0]: {InFlight: 1}}
	assert.Equal(t, []string{"a", "b", "c"}, order(s, c, ts, sig))
}

// The quota-share selection over weights 3:2:1, first by DRR alone, then
// with P2C on in-flight counts and with an at-cap and a saturated target
// in the tails. DRR serves a, b, a, c, b, a per cycle of 6 (a wins the tie
// of the third round, being first); a target without room takes no part.
func TestQuotaShareWorkedExample(t *testing.T) {
	fleet := func() []*combo.Target {
		ts := mk("a", "b", "c", "d", "e")
		ts[0].Weight, ts[1].Weight, ts[2].Weight, ts[3].Weight = 3, 2, 1, 5
		ts[3].MaxConcurrent = 1
		return ts
	}
	drr := [][]string{{"a", "b", "c"}, {"b", "a", "c"}, {"a", "b", "c"}, {"c", "a", "b"}, {"b", "a", "c"}, {"a", "b", "c"}}

	ts := fleet()
	s := &combo.QuotaShare{}
	c := &combo.Combo{Name: "drr"}
	for cycle := range 3 {
		for i, want := range drr {
			assert.Equal(t, want, order(s, c, ts[:3], nil), "cycle %d, round %d", cycle, i+1)
		}
	}

	// P2C: a has 2 in flight, b 1, c 0. The runner-up (second after the
	// DRR winner moved to the front) leads when it has strictly fewer.
	// d is at its cap and e's limit is reached: they trail, in that order.
	ts = fleet()
	sig := signals{ts[0]: {InFlight: 2}, ts[1]: {InFlight: 1}, ts[3]: {InFlight: 1}}
	s = &combo.QuotaShare{Quota: quotas{"e": {LimitReached: true}}}
	p2c := [][]string{
		{"b", "a", "c", "d", "e"}, // DRR a; b has fewer in flight
		{"b", "a", "c", "d", "e"}, // DRR b; a has more
		{"b", "a", "c", "d", "e"}, // DRR a
		{"c", "a", "b", "d", "e"}, // DRR c; a has more
		{"b", "a", "c", "d", "e"}, // DRR b
		{"b", "a", "c", "d", "e"}, // DRR a
	}
	for cycle := range 2 {
		for i, want := range p2c {
			assert.Equal(t, want, order(s, c, ts, sig), "cycle %d, round %d", cycle, i+1)
		}
	}
}

// Deficits are kept for at most 200 combos; the 201st evicts the one
// created first.
func TestQuotaShareEvictsOldestCombo(t *testing.T) {
	ts := mk("a", "b")
	ts[0].Weight, ts[1].Weight = 2, 1 // DRR: a, b, a, a, b, a, …
	s := &combo.QuotaShare{}
	first := func(name string) string { return order(s, &combo.Combo{Name: name}, ts, nil)[0] }
	require.Equal(t, "a", first("c0"))
	for i := 1; i < 199; i++ {
		first(fmt.Sprint("o", i))
	}
	assert.Equal(t, "b", first("c0"), "199 combos: c0 keeps its deficits")
	first("o199")
	assert.Equal(t, "a", first("c0"), "200 combos: c0 keeps its deficits")
	assert.Equal(t, "a", first("c0"))
	first("o200") // the 201st combo
	assert.Equal(t, "a", first("c0"), "c0 was evicted and starts over (it would have served b)")
	assert.Equal(t, "b", first("c0"))
}

// The tie band of reset-window is inclusive: a reset exactly 60 s after the
// soonest takes turns at the front, one a nanosecond later does not.
func TestResetWindowTieBandEdge(t *testing.T) {
	ts := mk("late", "edge", "soon")
	weekly := func(d time.Duration) combo.Quota {
		return combo.Quota{Weekly: combo.Window{Known: true, ResetAt: t0.Add(d)}}
	}
	s := &combo.ResetWindow{Quota: quotas{
		"soon": weekly(10 * time.Minute),
		"edge": weekly(11 * time.Minute),
		"late": weekly(11*time.Minute + time.Nanosecond),
	}}
	c := &combo.Combo{Name: "edge"}
	assert.Equal(t, []string{"soon", "edge", "late"}, order(s, c, ts, nil))
	assert.Equal(t, []string{"edge", "soon", "late"}, order(s, c, ts, nil))
	assert.Equal(t, []string{"soon", "edge", "late"}, order(s, c, ts, nil))

	// A reset that has passed counts as due now, ahead of any future one;
	// the session window counts only with IncludeSession.
	q := quotas{
		"soon": weekly(10 * time.Minute),
		"edge": {Weekly: combo.Window{Known: true, ResetAt: t0.Add(-time.Hour)}},
		"late": {Session: combo.Window{Known: true, ResetAt: t0.Add(time.Minute)}},
	}
	assert.Equal(t, []string{"edge", "soon", "late"}, order(&combo.ResetWindow{Quota: q, TieBand: time.Second}, c, ts, nil))
	assert.Equal(t, []string{"edge", "late", "soon"},
		order(&combo.ResetWindow{Quota: q, TieBand: time.Second, IncludeSession: true}, c, ts, nil))
}
