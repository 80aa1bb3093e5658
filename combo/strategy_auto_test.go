package combo_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/routeguard/routeguard/combo"
)

// autoFleet: a is fast, reliable and cheap; b is half failing and dear; c
// is new with an unknown price; d keeps failing.
func autoFleet() ([]*combo.Target, signals) {
	ts := mk("a", "b", "c", "d")
	ts[0].Price, ts[0].PriceKnown = 1, true
	ts[1].Price, ts[1].PriceKnown = 3, true
	sig := signals{
		ts[0]: {Requests: 10, Successes: 10, AvgLatency: 90 * time.Millisecond}, // (0.5 + 0.1 + 0.15)/0.85
		ts[1]: {Requests: 10, Successes: 5, Failures: 5},                        // (0.25 + 0.05 + 0)/0.85
		// c: (0.25 + 0.05 + 0.075)/0.85 = 0.441
		ts[3]: {Requests: 10, Failures: 10}, // (0 + 0.05 + 0.075)/0.85 = 0.147
	}
	return ts, sig
}

func orderAt(s combo.Strategy, ts []*combo.Target, sig combo.Signals, now time.Time) []string {
	p := pick(&combo.Combo{Name: "auto"}, ts, sig)
	p.Now = now
	s.Order(p)
	return names(p.Targets)
}

func TestAutoRanksAndExcludes(t *testing.T) {
	ts, sig := autoFleet()
	a := &combo.Auto{NoExplore: true}
	assert.Equal(t, []string{"a", "c", "b"}, orderAt(a, ts, sig, t0), "d scores under 0.2: excluded")
	assert.Equal(t, []combo.AutoExcluded{{Provider: "p", Connection: "d", Model: "m", Until: t0.Add(5 * time.Minute), Level: 1}},
		a.Excluded(t0))

	d := ts[3]
	steps := []struct {
		at       time.Duration
		requests int64
		want     []string
		until    time.Duration // 0: not listed as excluded
	}{
		{4 * time.Minute, 10, []string{"a", "c", "b"}, 5 * time.Minute},
		{5 * time.Minute, 10, []string{"a", "c", "b", "d"}, 0},            // probation: not tried since
		{6 * time.Minute, 11, []string{"a", "c", "b"}, 16 * time.Minute},  // tried and failed: 10 min
		{16 * time.Minute, 12, []string{"a", "c", "b"}, 36 * time.Minute}, // 20 min
		{36 * time.Minute, 13, []string{"a", "c", "b"}, 66 * time.Minute}, // 40 min capped at 30
		{66 * time.Minute, 14, []string{"a", "c", "b"}, 96 * time.Minute}, // still 30
		{95 * time.Minute, 14, []string{"a", "c", "b"}, 96 * time.Minute},
	}
	for i, st := range steps {
		sig[d] = combo.Stats{Requests: st.requests, Failures: st.requests}
		now := t0.Add(st.at)
		assert.Equal(t, st.want, orderAt(a, ts, sig, now), "step %d", i)
		ex := a.Excluded(now)
		if st.until == 0 {
			assert.Empty(t, ex, "step %d", i)
			continue
		}
		if assert.Len(t, ex, 1, "step %d", i) {
			assert.Equal(t, now.Add(0).Add(st.until-st.at), ex[0].Until, "step %d", i)
		}
	}

	// Recovered: once its exclusion ends and it scores 0.2 or more, d is
	// forgiven and ranked normally.
	sig[d] = combo.Stats{Requests: 30, Successes: 15, Failures: 15}
	assert.Equal(t, []string{"a", "c", "d", "b"}, orderAt(a, ts, sig, t0.Add(96*time.Minute)), "d ties with c")
	assert.Empty(t, a.Excluded(t0.Add(96*time.Minute)))
	sig[d] = combo.Stats{Requests: 40, Failures: 40}
	orderAt(a, ts, sig, t0.Add(97*time.Minute))
	ex := a.Excluded(t0.Add(97 * time.Minute))
	if assert.Len(t, ex, 1) {
		assert.Equal(t, 1, ex[0].Level, "escalation starts over after forgiveness")
	}
}

func TestAutoNeedsSamplesAndNeverExcludesAll(t *testing.T) {
	ts := mk("x", "y")
	sig := signals{ts[0]: {Requests: 4, Failures: 4}, ts[1]: {Requests: 9, Failures: 9}}
	a := &combo.Auto{NoExplore: true}
	assert.Equal(t, []string{"x"}, orderAt(a, ts, sig, t0), "x has too few samples to be excluded")
	a = &combo.Auto{NoExplore: true, MinSamples: 2}
	assert.Equal(t, []string{"x", "y"}, orderAt(a, ts, sig, t0), "both excluded: none is")
	assert.Len(t, a.Excluded(t0), 2)
}

func TestAutoBreakerAndHeadroom(t *testing.T) {
	ts, sig := autoFleet()
	ts = ts[:3]
	s := sig[ts[0]]
	s.Breaker = combo.BreakerHalfOpen // 0.882 × 0.4 = 0.353
	sig[ts[0]] = s
	sig[ts[1]] = combo.Stats{Requests: 10, Successes: 4, Failures: 6} // (0.2 + 0.05 + 0)/0.85 = 0.294
	a := &combo.Auto{NoExplore: true}
	assert.Equal(t, []string{"c", "a", "b"}, orderAt(a, ts, sig, t0))

	// With a quota source, headroom counts: c's reached limit costs it the
	// lead over b.
	_, sig = autoFleet()
	a = &combo.Auto{NoExplore: true, Quota: quotas{"c": {LimitReached: true}, "b": {Weekly: combo.Window{Known: true, Remaining: 1}}}}
	// a: (0.75 + 0.075)/1, b: (0.3 + 0.15)/1 = 0.45, c: (0.375 + 0)/1.
	assert.Equal(t, []string{"a", "b", "c"}, orderAt(a, ts, sig, t0))
}

func TestAutoExploration(t *testing.T) {
	ts, sig := autoFleet()
	ts = ts[:3]
	a := combo.NewAuto(nil, seeded(11))
	counts := map[string]int{}
	const draws = 40000
	for range draws {
		got := orderAt(a, ts, sig, t0)
		counts[got[0]]++
		if got[0] == "a" {
			assert.Equal(t, []string{"a", "c", "b"}, got)
		}
	}
	assert.InDelta(t, 0.025, float64(counts["c"])/draws, 0.005)
	assert.InDelta(t, 0.025, float64(counts["b"])/draws, 0.005)

	a = combo.NewAuto(nil, seeded(12))
	a.Explore = 0.5
	counts = map[string]int{}
	for range draws {
		counts[orderAt(a, ts, sig, t0)[0]]++
	}
	assert.InDelta(t, 0.5, float64(counts["a"])/draws, 0.02)
}
