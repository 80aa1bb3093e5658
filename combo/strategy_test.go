package combo_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo"
)

// signals is a fake router view: statistics by target.
type signals map[*combo.Target]combo.Stats

func (s signals) Stats(t *combo.Target) combo.Stats { return s[t] }

// quotas is a fake quota source by connection name.
type quotas map[string]combo.Quota

func (q quotas) Quota(t *combo.Target, _ time.Time) (combo.Quota, bool) {
	v, ok := q[t.Connection]
	return v, ok
}

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// mk returns targets named by connection, with provider "p" and model "m".
func mk(names ...string) []*combo.Target {
	ts := make([]*combo.Target, len(names))
	for i, n := range names {
		ts[i] = &combo.Target{Provider: "p", Connection: n, Model: "m"}
	}
	return ts
}

func names(ts []*combo.Target) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Connection
	}
	return out
}

// pick builds a pick over a fresh copy of ts.
func pick(c *combo.Combo, ts []*combo.Target, sig combo.Signals) *combo.Pick {
	return &combo.Pick{Combo: c, Targets: slices.Clone(ts), Now: t0, Request: &combo.Request{Combo: c}, Signals: sig}
}

// order runs s over a copy of ts and returns the resulting names.
func order(s combo.Strategy, c *combo.Combo, ts []*combo.Target, sig combo.Signals) []string {
	p := pick(c, ts, sig)
	s.Order(p)
	return names(p.Targets)
}

func seeded(seed uint64) rand.Source { return rand.NewPCG(seed, seed^0x9e3779b97f4a7c15) }

func TestUnknownStrategyListsEveryName(t *testing.T) {
	r := combo.New(combo.Config{})
	_, err := r.Do(context.Background(), combo.Request{Combo: &combo.Combo{Name: "c", Strategy: "fastest",
		Targets: []combo.Target{{Provider: "p", Model: "m"}}}}, nil)
	var se *combo.Error
	require.True(t, errors.As(err, &se))
	assert.Equal(t, []string{"auto", "cache-optimized", "context-optimized", "context-relay", "cost-optimized", "fill-first",
		"headroom", "least-used", "lkgp", "p2c", "priority", "quota-share", "random", "reset-aware",
		"reset-window", "round-robin", "strict-random", "weighted"}, se.Valid)
	assert.Contains(t, err.Error(), `"fastest"`)
	_, err = r.Strategy("fastest")
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "fastest", se.Strategy)
	st, err := r.Strategy("")
	require.NoError(t, err)
	assert.Equal(t, combo.Priority{}, st, `"" is priority`)
}

func TestPriorityAndFillFirstKeepDeclaredOrder(t *testing.T) {
	ts := mk("a", "b", "c")
	assert.Equal(t, []string{"a", "b", "c"}, order(combo.Priority{}, nil, ts, nil))
}

func TestWeightedDistribution(t *testing.T) {
	ts := mk("a", "b")
	ts[0].Weight, ts[1].Weight = 1, 3
	w := combo.NewWeighted(seeded(1))
	c := &combo.Combo{Name: "w"}
	const draws = 40000
	first := 0
	for range draws {
		if order(w, c, ts, nil)[0] == "a" {
			first++
		}
	}
	assert.InDelta(t, 0.25, float64(first)/draws, 0.02)
}

func TestWeightedZeroWeightsAreUniform(t *testing.T) {
	ts := mk("a", "b", "c", "d")
	w := combo.NewWeighted(seeded(2))
	counts := map[string]int{}
	const draws = 40000
	for range draws {
		counts[order(w, nil, ts, nil)[0]]++
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		assert.InDelta(t, 0.25, float64(counts[n])/draws, 0.02, n)
	}
}

func TestWeightedFallbackOrderByWeight(t *testing.T) {
	ts := mk("a", "b", "c", "d")
	ts[0].Weight, ts[1].Weight, ts[2].Weight, ts[3].Weight = 10, 30, 0, 20 // c counts as 1
	w := combo.NewWeighted(seeded(3))
	want := map[string][]string{
		"a": {"a", "b", "d", "c"},
		"b": {"b", "d", "a", "c"},
		"c": {"c", "b", "d", "a"},
		"d": {"d", "b", "a", "c"},
	}
	seen := map[string]bool{}
	for range 2000 {
		got := order(w, nil, ts, nil)
		assert.Equal(t, want[got[0]], got)
		seen[got[0]] = true
	}
	assert.Len(t, seen, 4)
}

func TestWeightedStickyLimit(t *testing.T) {
	ts := mk("a", "b", "c")
	w := combo.NewWeighted(seeded(4))
	c := &combo.Combo{Name: "sticky", Settings: combo.Settings{StickyLimit: 3}}
	var firsts []string
	for range 30 {
		firsts = append(firsts, order(w, c, ts, nil)[0])
	}
	for i := 0; i < len(firsts); i += 3 {
		assert.Equal(t, firsts[i], firsts[i+1], "batch %d", i/3)
		assert.Equal(t, firsts[i], firsts[i+2], "batch %d", i/3)
	}

	// A pinned target that is not eligible is dropped: the next request
	// draws among the others and starts a new batch.
	w = combo.NewWeighted(seeded(5))
	pinned := order(w, c, ts, nil)[0]
	var others []*combo.Target
	for _, x := range ts {
		if x.Connection != pinned {
			others = append(others, x)
		}
	}
	next := order(w, c, others, nil)[0]
	assert.NotEqual(t, pinned, next)
	assert.Equal(t, next, order(w, c, ts, nil)[0], "the new draw is pinned")
}

func TestP2CScore(t *testing.T) {
	tests := []struct {
		name string
		s    combo.Stats
		want float64
	}{
		{"no history", combo.Stats{}, 0.5 + 0.25},
		{"90% at 990ms", combo.Stats{Successes: 9, Failures: 1, AvgLatency: 990 * time.Millisecond}, 0.9 + 1.0/3},
		{"100% at 90ms", combo.Stats{Successes: 4, AvgLatency: 90 * time.Millisecond}, 1 + 0.5},
		{"half-open", combo.Stats{Successes: 1, Failures: 1, Breaker: combo.BreakerHalfOpen}, 0.5 + 0.25 - 0.25},
		{"degraded counts as closed", combo.Stats{Breaker: combo.BreakerDegraded}, 0.75},
		{"open", combo.Stats{Successes: 100, AvgLatency: time.Millisecond, Breaker: combo.BreakerOpen}, math.Inf(-1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := combo.P2CScore(tt.s)
			if math.IsInf(tt.want, -1) {
				assert.True(t, math.IsInf(got, -1), "got %v", got)
				return
			}
			assert.InDelta(t, tt.want, got, 1e-12)
		})
	}
}

func TestP2COrder(t *testing.T) {
	ts := mk("a", "b")
	// Two targets: both are always drawn, so the better one is always first.
	cases := []struct {
		name string
		sig  signals
		want []string
	}{
		{"b open", signals{ts[1]: {Breaker: combo.BreakerOpen}}, []string{"a", "b"}},
		{"a open", signals{ts[0]: {Breaker: combo.BreakerOpen}}, []string{"b", "a"}},
		{"b faster", signals{ts[0]: {Successes: 9, Failures: 1, AvgLatency: 990 * time.Millisecond},
			ts[1]: {Successes: 9, Failures: 1, AvgLatency: 90 * time.Millisecond}}, []string{"b", "a"}},
		{"a half-open", signals{ts[0]: {Breaker: combo.BreakerHalfOpen}}, []string{"b", "a"}},
	}
	s := combo.NewP2C(seeded(6))
	for _, tc := range cases {
		for i := range 50 {
			assert.Equal(t, tc.want, order(s, nil, ts, tc.sig), "%s, draw %d", tc.name, i)
		}
	}

	// Three targets, c the best: c leads whenever it is drawn (2 pairs in 3);
	// otherwise the first draw of a tie leads. The rest keep their order.
	ts = mk("a", "b", "c")
	sig := signals{ts[2]: {Successes: 1, AvgLatency: time.Millisecond}}
	valid := map[string][]string{"a": {"a", "b", "c"}, "b": {"b", "a", "c"}, "c": {"c", "a", "b"}}
	counts := map[string]int{}
	const draws = 30000
	for range draws {
		got := order(s, nil, ts, sig)
		require.Equal(t, valid[got[0]], got)
		counts[got[0]]++
	}
	assert.InDelta(t, 2.0/3, float64(counts["c"])/draws, 0.02)
	assert.InDelta(t, 1.0/6, float64(counts["a"])/draws, 0.02)
}

func TestRandomShuffleIsUniform(t *testing.T) {
	ts := mk("a", "b", "c")
	s := combo.NewRandom(seeded(7))
	counts := map[string]int{}
	const draws = 60000
	for range draws {
		got := order(s, nil, ts, nil)
		key := got[0] + got[1] + got[2]
		counts[key]++
	}
	require.Len(t, counts, 6)
	for perm, n := range counts {
		assert.InDelta(t, 1.0/6, float64(n)/draws, 0.01, perm)
	}

	// The same seed gives the same sequence.
	a, b := combo.NewRandom(seeded(8)), combo.NewRandom(seeded(8))
	for range 20 {
		assert.Equal(t, order(a, nil, mk("a", "b", "c", "d", "e"), nil), order(b, nil, mk("a", "b", "c", "d", "e"), nil))
	}
}

func TestStrictRandomDealsEachOncePerCycle(t *testing.T) {
	ts := mk("a", "b", "c", "d")
	s := combo.NewStrictRandom(seeded(9))
	c := &combo.Combo{Name: "deck"}
	other := &combo.Combo{Name: "other"}
	for cycle := range 50 {
		var firsts []string
		for range 4 {
			got := order(s, c, ts, nil)
			firsts = append(firsts, got[0])
			assert.ElementsMatch(t, []string{"a", "b", "c", "d"}, got)
			order(s, other, ts, nil) // another combo's deck is its own
		}
		assert.ElementsMatch(t, []string{"a", "b", "c", "d"}, firsts, "cycle %d", cycle)
	}
}

func TestStrictRandomRestIsShuffled(t *testing.T) {
	ts := mk("a", "b", "c")
	s := combo.NewStrictRandom(seeded(10))
	counts := map[string]int{}
	const draws = 30000
	for range draws {
		got := order(s, &combo.Combo{Name: "x"}, ts, nil)
		counts[got[0]+got[1]+got[2]]++
	}
	require.Len(t, counts, 6)
	for perm, n := range counts {
		assert.InDelta(t, 1.0/6, float64(n)/draws, 0.015, perm)
	}
}

func TestLeastUsed(t *testing.T) {
	ts := mk("a", "b", "c", "d")
	sig := signals{ts[0]: {Requests: 5}, ts[1]: {Requests: 1}, ts[2]: {Requests: 5}}
	assert.Equal(t, []string{"d", "b", "a", "c"}, order(combo.LeastUsed{}, nil, ts, sig))
	assert.Equal(t, []string{"a", "b", "c", "d"}, order(combo.LeastUsed{}, nil, ts, nil), "unknown = 0, stable")
}

// Combo scenario 10: prices a=0.5, b unknown, c=0.1 → c, a, b.
func TestCostOptimized(t *testing.T) {
	ts := mk("a", "b", "c")
	ts[0].Price, ts[0].PriceKnown = 0.5, true
	ts[1].Price = 0.01 // not known: ignored
	ts[2].Price, ts[2].PriceKnown = 0.1, true
	assert.Equal(t, []string{"c", "a", "b"}, order(combo.CostOptimized{}, nil, ts, nil))

	ts = mk("x", "y", "z")
	for _, t := range ts {
		t.Price, t.PriceKnown = 1, true
	}
	assert.Equal(t, []string{"x", "y", "z"}, order(combo.CostOptimized{}, nil, ts, nil), "ties stable")
}

func TestContextOptimized(t *testing.T) {
	ts := mk("a", "b", "c", "d")
	ts[0].ContextWindow, ts[1].ContextWindow, ts[3].ContextWindow = 8000, 128000, 32000
	run := func(prompt int) []string {
		p := pick(nil, ts, nil)
		p.Request.PromptTokens = prompt
		combo.ContextOptimized{}.Order(p)
		return names(p.Targets)
	}
	assert.Equal(t, []string{"b", "d", "a", "c"}, run(0), "largest first, unknown last")
	assert.Equal(t, []string{"b", "d", "c"}, run(16000), "too small dropped, unknown kept")
	assert.Equal(t, []string{"b", "d", "a", "c"}, run(8000), "an exact fit stays")
	assert.Equal(t, []string{"b", "c"}, run(64000))

	small := mk("x", "y")
	small[0].ContextWindow, small[1].ContextWindow = 4000, 8000
	p := pick(nil, small, nil)
	p.Request.PromptTokens = 100000
	combo.ContextOptimized{}.Order(p)
	assert.Equal(t, []string{"y", "x"}, names(p.Targets), "none fits: none dropped")
}

func TestLastKnownGood(t *testing.T) {
	ts := mk("a", "b", "c", "d")
	sig := signals{ts[0]: {LastSuccess: t0.Add(-time.Hour)}, ts[2]: {LastSuccess: t0.Add(-time.Minute)}}
	assert.Equal(t, []string{"c", "a", "b", "d"}, order(combo.LastKnownGood{}, nil, ts, sig))
	assert.Equal(t, []string{"a", "b", "c", "d"}, order(combo.LastKnownGood{}, nil, ts, nil))
}

// When the last known good target is not eligible now, lkgp falls back to
// its connection, then its provider, then a model under "<provider>/".
func TestLastKnownGoodFallsBack(t *testing.T) {
	c := &combo.Combo{Name: "lkgp", Targets: []combo.Target{
		{Provider: "openai", Connection: "k1", Model: "gpt-4o"},        // last good, locked now
		{Provider: "anthropic", Connection: "a1", Model: "claude"},     // 0
		{Provider: "router", Connection: "r1", Model: "openai/gpt-4o"}, // 1: model prefix
		{Provider: "openai", Connection: "k2", Model: "gpt-4o"},        // 2: same provider
		{Provider: "openai", Connection: "k1", Model: "gpt-4o-mini"},   // 3: same connection
	}}
	all := make([]*combo.Target, len(c.Targets))
	for i := range c.Targets {
		all[i] = &c.Targets[i]
	}
	sig := signals{all[0]: {LastSuccess: t0}, all[1]: {LastSuccess: t0.Add(-time.Hour)}}
	names := func(ts []*combo.Target) []string {
		out := make([]string, len(ts))
		for i, t := range ts {
			out[i] = t.Provider + "/" + t.Connection + "/" + t.Model
		}
		return out
	}
	for _, tc := range []struct {
		eligible []int
		first    string
	}{
		{[]int{1, 2, 3, 4, 0}, "openai/k1/gpt-4o"},
		{[]int{1, 2, 3, 4}, "openai/k1/gpt-4o-mini"},
		{[]int{1, 2, 3}, "openai/k2/gpt-4o"},
		{[]int{1, 2}, "router/r1/openai/gpt-4o"},
		{[]int{1}, "anthropic/a1/claude"},
	} {
		var ts []*combo.Target
		for _, i := range tc.eligible {
			ts = append(ts, all[i])
		}
		p := pick(c, ts, sig)
		combo.LastKnownGood{}.Order(p)
		assert.Equal(t, tc.first, names(p.Targets)[0], "eligible %v", tc.eligible)
	}
}

func TestCacheOptimized(t *testing.T) {
	ts := mk("a", "b", "c")
	hint := func(req *combo.Request, t *combo.Target) float64 {
		if req.Session == "s1" && t.Connection == "c" {
			return 0.9
		}
		if t.Connection == "b" {
			return 0.1
		}
		return 0
	}
	s := combo.CacheOptimized{Hint: hint}
	p := pick(nil, ts, nil)
	p.Request.Session = "s1"
	s.Order(p)
	assert.Equal(t, []string{"c", "a", "b"}, names(p.Targets))
	assert.Equal(t, []string{"b", "a", "c"}, order(s, nil, ts, nil))
	assert.Equal(t, []string{"a", "b", "c"}, order(combo.CacheOptimized{}, nil, ts, nil))
}
