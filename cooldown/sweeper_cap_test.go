package cooldown

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingStore is another Store with a Sweeper: the in-memory store
// behind a wrapper, so that the Tracker keeps its caps by sweeps, counting
// the entries the sweeps visit.
type countingStore struct {
	Store
	sw      Sweeper
	visited int
}

func newCountingStore() *countingStore {
	m := NewMemoryStore()
	return &countingStore{Store: m, sw: m.(Sweeper)}
}

func (s *countingStore) Len() int { return s.sw.Len() }

func (s *countingStore) Sweep(drop func(conn string, e *Entry) bool) int {
	s.visited += s.sw.Len()
	return s.sw.Sweep(drop)
}

// A Sweeper store full of terminal entries keeps MaxTerminal by sweeps,
// dropping the entries that became terminal first and reporting them with
// causeMaxTerminal, and a stream of new terminal connections does not make
// every few writes sweep the whole store.
func TestSweeperStoreKeepsMaxTerminal(t *testing.T) {
	store := newCountingStore()
	cfg, events := recorder(Config{MaxEntries: 100, MaxTerminal: 50, Store: store})
	tr := New(cfg)
	const writes = 4000
	for i := range writes {
		tr.FailAt(fmt.Sprintf("t%04d", i), Failure{Status: 403, Permanent: true}, t0.Add(time.Duration(i)*time.Second))
		require.LessOrEqual(t, store.Len(), cfg.MaxEntries+cfg.MaxTerminal, "after write %d", i)
	}
	assert.LessOrEqual(t, store.visited/writes, 20, "entries visited by sweeps per write")
	gone := map[int]bool{}
	for _, e := range *events {
		if !e.Removed {
			continue
		}
		require.Equal(t, causeMaxTerminal, e.Cause, "%+v", e)
		require.Equal(t, Banned, e.From)
		var n int
		_, err := fmt.Sscanf(e.Conn, "t%04d", &n)
		require.NoError(t, err)
		gone[n] = true
	}
	for n := range len(gone) {
		require.True(t, gone[n], "t%04d kept while a newer terminal entry went: the oldest go first", n)
	}
	assert.Equal(t, Banned, tr.StatusAt(fmt.Sprintf("t%04d", writes-1), t0).State, "the newest is kept")
	assert.Equal(t, Available, tr.StatusAt("t0000", t0).State, "the oldest is gone")
}

// No store holds more than its caps after twice as many distinct
// connections as they allow, and each eviction names its cause.
func TestCapsHoldAfterTwiceTheCap(t *testing.T) {
	for _, tc := range []struct {
		name    string
		failure Failure
		cause   string
		first   State // the first connection's state at the end
	}{
		{"cooling", Failure{Status: 503, Cooldown: time.Hour}, causeMaxEntries, Available},
		{"terminal", Failure{Status: 403, Permanent: true}, causeMaxTerminal, Available},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, events := recorder(Config{MaxEntries: 64, MaxTerminal: 32})
			tr := New(cfg)
			store := tr.store.(*memoryStore)
			limit := cfg.MaxEntries
			if tc.failure.Permanent {
				limit = cfg.MaxTerminal
			}
			for i := range 2 * limit {
				tr.FailAt(fmt.Sprint("c", i), tc.failure, t0.Add(time.Duration(i)*time.Millisecond))
				require.LessOrEqual(t, store.Len(), limit, "after write %d", i)
			}
			for _, e := range *events {
				if e.Removed {
					require.Equal(t, tc.cause, e.Cause)
				}
			}
			assert.Equal(t, tc.first, tr.StatusAt("c0", t0).State)
			assert.NotEqual(t, Available, tr.StatusAt(fmt.Sprint("c", 2*limit-1), t0).State)
		})
	}
}

// Terminal entries within MaxTerminal that keep a Sweeper store over
// MaxEntries do not make every few writes sweep the whole store: the next
// sweep for the cap waits for a tenth of the store's size more entries, so
// sweeps visit O(1) entries per write, amortised.
func TestSweeperStoreOverMaxEntriesByTerminalsSweepsRarely(t *testing.T) {
	store := newCountingStore()
	tr := New(Config{MaxEntries: 100, MaxTerminal: 1000, Store: store})
	for i := range 500 {
		tr.FailAt(fmt.Sprint("t", i), Failure{Status: 403, Permanent: true}, t0)
	}
	store.visited = 0
	const writes = 2000
	for i := range writes {
		tr.FailAt(fmt.Sprint("c", i), Failure{Status: 503, Cooldown: time.Hour}, t0.Add(time.Duration(i)*time.Millisecond))
		require.LessOrEqual(t, store.Len(), 500+100+60+capSweepInterval, "after write %d", i)
	}
	assert.LessOrEqual(t, store.visited/writes, 45, "entries visited by sweeps per write")
	assert.Equal(t, Banned, tr.StatusAt("t0", t0).State, "terminal entries within MaxTerminal stay")
}
