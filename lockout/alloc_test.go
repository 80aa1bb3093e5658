package lockout_test

import (
	"strings"
	"testing"
	"time"
)

func TestLockedAtAllocatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("alloc counts are unreliable in short mode runs with -race")
	}
	l := populated(t, 3000)
	now := t0.Add(time.Minute)
	for _, m := range []string{"model-5", "gpt-4o", " GPT-4O ", "model-6", "model-7"} {
		allocs := testing.AllocsPerRun(200, func() { l.LockedAt("openai", "conn-5", m, now) })
		if allocs != 0 {
			t.Errorf("LockedAt(%q) allocates %v times, want 0", m, allocs)
		}
	}
	allocs := testing.AllocsPerRun(200, func() { l.LockedAt("cx", "conn-5", "gpt-5.6-sol", now) })
	if allocs != 0 {
		t.Errorf("LockedAt(codex family) allocates %v times, want 0", allocs)
	}
	allocs = testing.AllocsPerRun(200, func() { l.DecayAt("openai", "nobody", "gpt-4o", now) })
	if allocs != 0 {
		t.Errorf("DecayAt with nothing to decay allocates %v times, want 0", allocs)
	}
}

func TestLockedAtLongUpperCaseAllocatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("alloc counts are unreliable in short mode runs with -race")
	}
	l := populated(t, 300)
	long := "Model-" + strings.Repeat("X", 200)
	allocs := testing.AllocsPerRun(200, func() { l.LockedAt("openai", "conn-5", long, t0) })
	if allocs != 0 {
		t.Errorf("LockedAt of a long upper-case model allocates %v times, want 0", allocs)
	}
}
