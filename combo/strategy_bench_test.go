package combo_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/routeguard/routeguard/combo"
)

// namedStrategy is a built-in strategy under its name.
type namedStrategy struct {
	name string
	s    combo.Strategy
}

// builtins returns one of each built-in strategy, seeded, with quota and
// cache hint sources.
func builtins(q combo.QuotaSource, hint combo.CacheHint) []namedStrategy {
	return []namedStrategy{
		{combo.StrategyPriority, combo.Priority{}},
		{combo.StrategyWeighted, combo.NewWeighted(seeded(20))},
		{combo.StrategyRoundRobin, combo.NewRoundRobin()},
		{combo.StrategyP2C, combo.NewP2C(seeded(21))},
		{combo.StrategyRandom, combo.NewRandom(seeded(22))},
		{combo.StrategyStrictRandom, combo.NewStrictRandom(seeded(23))},
		{combo.StrategyLeastUsed, combo.LeastUsed{}},
		{combo.StrategyCostOptimized, combo.CostOptimized{}},
		{combo.StrategyResetAware, &combo.ResetAware{Quota: q}},
		{combo.StrategyResetWindow, &combo.ResetWindow{Quota: q}},
		{combo.StrategyHeadroom, combo.Headroom{Quota: q}},
		{combo.StrategyLKGP, combo.LastKnownGood{}},
		{combo.StrategyContextOptimized, combo.ContextOptimized{}},
		{combo.StrategyCacheOptimized, combo.CacheOptimized{Hint: hint}},
		{combo.StrategyQuotaShare, &combo.QuotaShare{Quota: q}},
		{combo.StrategyAuto, combo.NewAuto(q, seeded(24))},
	}
}

// quotaTable is a quota source keyed by target, like signals.
type quotaTable map[*combo.Target]combo.Quota

func (q quotaTable) Quota(t *combo.Target, _ time.Time) (combo.Quota, bool) {
	v, ok := q[t]
	return v, ok
}

// benchFleet is 8 targets with varied prices, windows, weights, quotas and
// statistics.
func benchFleet() ([]*combo.Target, signals, quotaTable, combo.CacheHint) {
	ts := mk("a", "b", "c", "d", "e", "f", "g", "h")
	sig := signals{}
	q := quotaTable{}
	for i, t := range ts {
		t.Weight = float64(i%3 + 1)
		t.Price, t.PriceKnown = float64(8-i)/10, i%4 != 0
		t.ContextWindow = (i%4 + 1) * 32000
		t.MaxConcurrent = 4
		sig[t] = combo.Stats{Requests: int64(100 - 7*i), Successes: int64(90 - 5*i), Failures: int64(10 + i),
			InFlight: int64(i % 5), AvgLatency: time.Duration(100+50*i) * time.Millisecond,
			LastSuccess: t0.Add(-time.Duration(i*13%8) * time.Minute)}
		if i%3 != 0 {
			q[t] = combo.Quota{
				Session: combo.Window{Known: true, Remaining: float64(i) / 8, ResetAt: t0.Add(time.Duration(i) * time.Hour / 2)},
				Weekly:  combo.Window{Known: true, Remaining: float64(8-i) / 8, ResetAt: t0.Add(time.Duration(i) * 24 * time.Hour)},
			}
		}
	}
	hint := func(_ *combo.Request, t *combo.Target) float64 {
		if t.Connection == "f" {
			return 1
		}
		return 0
	}
	return ts, sig, q, hint
}

// BenchmarkStrategy orders 8 targets with each built-in strategy, reading
// statistics from a fake view (map lookups) and quotas from memory.
func BenchmarkStrategy(b *testing.B) {
	ts, sig, q, hint := benchFleet()
	c := &combo.Combo{Name: "bench", Settings: combo.Settings{StickyLimit: 3}}
	for _, ns := range builtins(q, hint) {
		b.Run(ns.name, func(b *testing.B) {
			work := slices.Clone(ts)
			p := &combo.Pick{Combo: c, Now: t0, Request: &combo.Request{Combo: c, PromptTokens: 40000}, Signals: sig}
			b.ReportAllocs()
			for b.Loop() {
				copy(work, ts)
				p.Targets = work
				ns.s.Order(p)
			}
		})
	}
}

// BenchmarkStrategyRouterSignals is BenchmarkStrategy with a Router as the
// statistics view, as in production.
func BenchmarkStrategyRouterSignals(b *testing.B) {
	ts, _, q, hint := benchFleet()
	r := combo.New(combo.Config{})
	c := &combo.Combo{Name: "bench"}
	for _, ns := range builtins(q, hint) {
		b.Run(ns.name, func(b *testing.B) {
			work := slices.Clone(ts)
			p := &combo.Pick{Combo: c, Now: t0, Request: &combo.Request{Combo: c}, Signals: r}
			b.ReportAllocs()
			for b.Loop() {
				copy(work, ts)
				p.Targets = work
				ns.s.Order(p)
			}
		})
	}
}

// BenchmarkStrategyParallel orders 8 targets from every CPU at once.
func BenchmarkStrategyParallel(b *testing.B) {
	ts, sig, q, hint := benchFleet()
	for _, ns := range builtins(q, hint) {
		b.Run(ns.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				c := &combo.Combo{Name: fmt.Sprint("bench-", ns.name)}
				work := slices.Clone(ts)
				p := &combo.Pick{Combo: c, Now: t0, Request: &combo.Request{Combo: c}, Signals: sig}
				for pb.Next() {
					copy(work, ts)
					p.Targets = work
					ns.s.Order(p)
				}
			})
		})
	}
}

func TestStrategiesDoNotAllocate(t *testing.T) {
	ts, sig, q, hint := benchFleet()
	c := &combo.Combo{Name: "allocs", Settings: combo.Settings{StickyLimit: 3}}
	r := combo.New(combo.Config{})
	for _, ns := range builtins(q, hint) {
		for _, view := range []combo.Signals{sig, r} {
			work := slices.Clone(ts)
			p := &combo.Pick{Combo: c, Now: t0, Request: &combo.Request{Combo: c, PromptTokens: 40000}, Signals: view}
			ns.s.Order(p) // first use creates per-combo state
			allocs := testing.AllocsPerRun(200, func() {
				copy(work, ts)
				p.Targets = work
				ns.s.Order(p)
			})
			if allocs != 0 {
				t.Errorf("%s: %v allocations per Order, want 0", ns.name, allocs)
			}
		}
	}
}

func TestEveryNameIsBenchmarked(t *testing.T) {
	got := map[string]bool{combo.StrategyFillFirst: true}
	for _, ns := range builtins(nil, nil) {
		got[ns.name] = true
	}
	if len(got) != 17 {
		t.Errorf("benchmarks cover %d strategies, want 17", len(got))
	}
}
