package combo

import (
	"context"
	"testing"
	"time"
)

// BenchmarkToolLimitAllows measures the tool-limit check of one target.
func BenchmarkToolLimitAllows(b *testing.B) {
	l := NewToolLimits(ToolLimitConfig{})
	now := time.Now()
	for i := range 1000 {
		l.LearnAt("p", string(rune('a'+i%26))+string(rune('a'+i/26)), 64, now)
	}
	b.ReportAllocs()
	for b.Loop() {
		if l.Allows("p", "ab", 100, now) {
			b.Fatal("allowed")
		}
	}
}

// BenchmarkEligibilityWithToolLimits screens eight targets through every
// layer, tool limits included, with one target too small for the tools.
func BenchmarkEligibilityWithToolLimits(b *testing.B) {
	r, c, _, st, now := toolLimitRouter(b)
	b.ReportAllocs()
	for b.Loop() {
		r.screen(st, now)
	}
	if len(st.eligible) != 4 {
		b.Fatalf("eligible = %d, want 4", len(st.eligible))
	}
	_ = c
}

func toolLimitRouter(tb testing.TB) (*Router, *Combo, Request, *reqState, time.Time) {
	r, c := benchRouter(tb, strategyPriority)
	r.cfg.ToolLimits = NewToolLimits(ToolLimitConfig{})
	now := time.Now()
	r.cfg.ToolLimits.LearnAt("p3", "m", 10, now) // c3 and c7
	req := Request{Combo: c, Tools: 20}
	strat, _ := r.strategies.get(strategyPriority)
	st := r.getState(context.Background(), &req, c.Settings.norm(), strat, nil)
	for i := range c.Targets {
		st.all = append(st.all, &c.Targets[i])
	}
	return r, c, req, st, now
}

func TestToolLimitCheckAllocatesNothing(t *testing.T) {
	r, _, _, st, now := toolLimitRouter(t)
	r.screen(st, now)
	allocs := testing.AllocsPerRun(200, func() { r.screen(st, now) })
	if allocs != 0 {
		t.Fatalf("screen with tool limits allocates %v times, want 0", allocs)
	}
	if len(st.eligible) != 4 || len(st.excluded) != 4 {
		t.Fatalf("eligible %d excluded %d, want 4 and 4", len(st.eligible), len(st.excluded))
	}
	for _, x := range st.excluded {
		if x.Provider == "p3" && x.Reason != ReasonToolLimit {
			t.Fatalf("p3 excluded for %s", x.Reason)
		}
	}
	l := r.cfg.ToolLimits
	if a := testing.AllocsPerRun(200, func() { l.Allows("p3", "m", 20, now) }); a != 0 {
		t.Fatalf("Allows allocates %v times", a)
	}
}
