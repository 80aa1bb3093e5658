package cooldown

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Lapsed cooldowns of entries that carry nothing else are pruned lazily.
func TestPruneIdle(t *testing.T) {
	tr := New(Config{})
	store := tr.store.(*memoryStore)
	f := Failure{Status: 503, Reason: "server_error", Cooldown: time.Second}
	for i := range 1000 {
		tr.FailAt(fmt.Sprint("c", i), f, t0)
	}
	assert.Equal(t, 1000, store.Len())
	// Enough later writes trigger a sweep that drops the lapsed entries.
	later := t0.Add(time.Minute)
	for i := range minSweepInterval {
		tr.FailAt(fmt.Sprint("d", i), f, later)
	}
	assert.LessOrEqual(t, store.Len(), minSweepInterval)
	for _, i := range tr.SnapshotAt(later) {
		assert.Equal(t, "d", i.Conn[:1])
	}
}

// The cap evicts available entries first, then the cooling entries that end
// first; terminal entries stay.
func TestMaxEntries(t *testing.T) {
	tr := New(Config{MaxEntries: 20})
	store := tr.store.(*memoryStore)
	for i := range 5 {
		tr.FailAt(fmt.Sprint("t", i), Failure{Status: 403, Permanent: true}, t0)
	}
	for i := range 40 {
		tr.FailAt(fmt.Sprintf("c%02d", i), Failure{Status: 503, Cooldown: time.Duration(i+1) * time.Minute}, t0)
		assert.LessOrEqual(t, store.Len(), 20+capSweepInterval)
	}
	for i := range 5 {
		assert.Equal(t, Banned, tr.StatusAt(fmt.Sprint("t", i), t0).State)
	}
	assert.Equal(t, Cooling, tr.StatusAt("c39", t0).State, "the latest-ending cooldown survives")
	assert.True(t, tr.StatusAt("c00", t0).State == Available, "the earliest-ending cooldown was evicted")
}

func TestIdle(t *testing.T) {
	tr := New(Config{})
	assert.True(t, tr.idle(&Entry{}, t0))
	assert.True(t, tr.idle(&Entry{Until: t0, LastError: "x"}, t0))
	assert.False(t, tr.idle(&Entry{Until: t0.Add(time.Second)}, t0))
	assert.False(t, tr.idle(&Entry{Level: 1}, t0))
	assert.False(t, tr.idle(&Entry{State: Expired}, t0))
	assert.False(t, tr.idle(&Entry{Options: Options{Provider: "p"}}, t0))
	assert.False(t, tr.idle(&Entry{Streak: 1, StreakLast: t0.Add(-time.Hour)}, t0))
	assert.True(t, tr.idle(&Entry{Streak: 1, StreakLast: t0.Add(-25 * time.Hour)}, t0))
	assert.False(t, tr.idle(&Entry{EgressIP: "1.2.3.4", EgressSeen: t0}, t0))
	assert.True(t, tr.idle(&Entry{EgressIP: "1.2.3.4", EgressSeen: t0.Add(-25 * time.Hour)}, t0))
}

// The hot paths allocate nothing.
func TestHotPathAllocs(t *testing.T) {
	tr := New(Config{})
	cands := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for _, c := range cands[:4] {
		tr.FailAt(c, rateLimit, t0)
	}
	tr.RegisterAt("e", Options{Provider: "openai"}, t0)
	var st Status
	if n := testing.AllocsPerRun(200, func() { st = tr.StatusAt("a", t0) }); n != 0 {
		t.Errorf("StatusAt allocates %v times", n)
	}
	if n := testing.AllocsPerRun(200, func() { st = tr.StatusAt("zz", t0) }); n != 0 {
		t.Errorf("StatusAt of an unknown connection allocates %v times", n)
	}
	if n := testing.AllocsPerRun(200, func() { _ = tr.FailAt("a", rateLimit, t0) }); n != 0 {
		t.Errorf("FailAt absorbed by a running episode allocates %v times", n)
	}
	if n := testing.AllocsPerRun(200, func() { tr.SucceedAt("e", t0) }); n != 0 {
		t.Errorf("SucceedAt of a clean connection allocates %v times", n)
	}
	if n := testing.AllocsPerRun(200, func() { _ = tr.CheckAt("e", t0) }); n != 0 {
		t.Errorf("CheckAt of an available connection allocates %v times", n)
	}
	_ = st
}

// Terminal entries are never evicted, even over the cap, and a store kept
// over the cap by them is swept only every few writes.
func TestMaxEntriesTerminal(t *testing.T) {
	tr := New(Config{MaxEntries: 16})
	for i := range 40 {
		tr.FailAt(fmt.Sprint("t", i), Failure{Status: 401}, t0)
	}
	for i := range 40 {
		assert.Equal(t, Expired, tr.StatusAt(fmt.Sprint("t", i), t0).State)
	}
	assert.Equal(t, 40, tr.store.(*memoryStore).Len())
}

// Over the cap, a write never evicts the connection it wrote, even when
// that connection's cooldown ends first, and entries that end at the same
// time as the last one evicted are evicted only as far as needed.
func TestMaxEntriesSparesTheWrittenConnection(t *testing.T) {
	tr := New(Config{MaxEntries: 16})
	for i := range 20 {
		tr.FailAt(fmt.Sprint("c", i), Failure{Status: 429, Reason: "quota_exhausted", Cooldown: time.Hour}, t0)
	}
	for j := range 2 * capSweepInterval {
		c := fmt.Sprint("new", j)
		r := tr.FailAt(c, Failure{Status: 429, Reason: "quota_exhausted", Cooldown: time.Second}, t0)
		require.Equal(t, Episode, r.Action)
		assert.Equal(t, Status{State: Cooling, Until: t0.Add(time.Second), Reason: "quota_exhausted"}, tr.StatusAt(c, t0), c)
		assert.LessOrEqual(t, tr.store.(*memoryStore).Len(), 16, "never over the cap")
	}
	// Every write that went over the cap (the 17th, then every third)
	// left 14 entries (nine tenths of the cap), the written one among
	// them: 17 entries tie at the first cut, and only 3 of them went. One
	// write followed the last eviction.
	assert.Equal(t, 15, tr.store.(*memoryStore).Len())
	for j := range 4 {
		assert.True(t, tr.StatusAt(fmt.Sprint("new", j), t0).State == Available, "new%d evicted first", j)
	}
}
