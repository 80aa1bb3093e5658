package breaker

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// connKeys lists the gate's connection entries, sorted.
func connKeys(g *Gate) []string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	var out []string
	for k := range g.conns {
		out = append(out, k.provider+"/"+k.conn)
	}
	slices.Sort(out)
	return out
}

func provKeys(g *Gate) []string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	var out []string
	for k := range g.prov {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// A full gate drops the entry whose last failure is oldest, never the one
// being written, and never holds more than MaxEntries of either kind.
func TestGateCapEvictsOldestLastFailure(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	cases := []struct {
		name   string
		writes []struct {
			conn string
			at   int
		}
		want []string
	}{
		{"in order", []struct {
			conn string
			at   int
		}{{"a", 1}, {"b", 2}, {"c", 3}, {"d", 4}}, []string{"b/c", "c/c", "d/c"}},
		{"a rewrite refreshes", []struct {
			conn string
			at   int
		}{{"a", 1}, {"b", 2}, {"c", 3}, {"a", 4}, {"d", 5}}, []string{"a/c", "c/c", "d/c"}},
		{"out of order times", []struct {
			conn string
			at   int
		}{{"a", 5}, {"b", 2}, {"c", 9}, {"d", 10}}, []string{"a/c", "c/c", "d/c"}},
		{"the written one survives though oldest", []struct {
			conn string
			at   int
		}{{"a", 5}, {"b", 6}, {"c", 7}, {"d", 8}, {"e", 9}}, []string{"c/c", "d/c", "e/c"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewGate(GateConfig{Enabled: true, MaxEntries: 3})
			for _, w := range c.writes {
				// One provider per connection, so that no provider clock
				// clamps a connection's time.
				g.RecordFailureAt(w.conn, "c", at(w.at))
				assert.LessOrEqual(t, len(connKeys(g)), 3)
				assert.Contains(t, connKeys(g), w.conn+"/c", "the entry just written is kept")
			}
			assert.Equal(t, c.want, connKeys(g))
		})
	}
	g := NewGate(GateConfig{Enabled: true, MaxEntries: 2})
	for i, p := range []string{"a", "b", "c", "b", "d"} {
		g.RecordFailureAt(p, "", at(i))
	}
	assert.Equal(t, []string{"b", "d"}, provKeys(g))
}

// gateModel is the gate's bookkeeping done the naive way: every entry in a
// map, the oldest found by a scan, pruning by a scan.
type gateModel struct {
	max       int
	retention time.Duration
	prov      map[string]time.Time
	conns     map[string]time.Time
}

// oldest returns the entry of e whose time is the oldest. Entries that tie
// (a connection written at its provider's clamped time) may go in any
// order: of the tied ones it returns the one kept lacks, if any.
func (m *gateModel) oldest(e map[string]time.Time, kept []string) string {
	var least time.Time
	var tied []string
	for k, t := range e {
		switch {
		case len(tied) == 0 || t.Before(least):
			least, tied = t, []string{k}
		case t.Equal(least):
			tied = append(tied, k)
		}
	}
	slices.Sort(tied)
	for _, k := range tied {
		if !slices.Contains(kept, k) {
			return k
		}
	}
	return tied[0]
}

func (m *gateModel) fail(p, c string, now time.Time, g *Gate) {
	if _, ok := m.prov[p]; !ok && len(m.prov) >= m.max {
		delete(m.prov, m.oldest(m.prov, provKeys(g)))
	}
	if last, ok := m.prov[p]; ok && now.Before(last) {
		now = last
	}
	m.prov[p] = now
	if c == "" {
		return
	}
	k := p + "/" + c
	if _, ok := m.conns[k]; !ok && len(m.conns) >= m.max {
		delete(m.conns, m.oldest(m.conns, connKeys(g)))
	}
	m.conns[k] = now
}

func (m *gateModel) prune(now time.Time) {
	cut := now.Add(-m.retention)
	for _, e := range []map[string]time.Time{m.prov, m.conns} {
		for k, t := range e {
			if t.Before(cut) {
				delete(e, k)
			}
		}
	}
}

func keysOfModel(e map[string]time.Time) []string {
	var out []string
	for k := range e {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// The gate's heaps keep the entries a naive scan would keep, through random
// failures (with clocks that step back), successes and prunes.
func TestGateHeapsMatchScanModel(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		var evs int
		g := NewGate(GateConfig{Enabled: true, MaxEntries: 1 + int(seed%5), ClassOf: classOf,
			OnChange: func(Event) { evs++ }})
		m := &gateModel{max: g.cfg.MaxEntries, retention: g.retention, prov: map[string]time.Time{}, conns: map[string]time.Time{}}
		used := map[int64]bool{}
		var clock int64
		writes := 0
		for step := range 3000 {
			// Distinct times, so that entries tie on their last failure only
			// through the provider's clamp.
			clock += int64(r.IntN(int(time.Minute))) + 1
			now := clock
			if r.IntN(10) == 0 {
				now -= int64(r.IntN(int(10 * time.Minute)))
			}
			for used[now] {
				now++
			}
			used[now] = true
			at := t0.Add(time.Duration(now))
			p := []string{"claude", "openai", "ollama", "codex", "x"}[r.IntN(5)]
			c := ""
			if r.IntN(4) > 0 {
				c = fmt.Sprint("c", r.IntN(8))
			}
			switch op := r.IntN(20); {
			case op == 0:
				at = at.Add(time.Duration(r.IntN(3)) * time.Hour)
				g.pruneAt(at)
				m.prune(at)
			case op < 4:
				g.RecordSuccessAt(p, c, at)
				if writes++; writes%pruneEvery == 0 {
					m.prune(at)
				}
			default:
				g.RecordFailureAt(p, c, at)
				if writes++; writes%pruneEvery == 0 {
					m.prune(at)
				}
				m.fail(p, c, at, g)
			}
			require.Equal(t, keysOfModel(m.prov), provKeys(g), "seed %d step %d", seed, step)
			require.Equal(t, keysOfModel(m.conns), connKeys(g), "seed %d step %d", seed, step)
			require.LessOrEqual(t, len(g.prov), g.cfg.MaxEntries)
			require.LessOrEqual(t, len(g.conns), g.cfg.MaxEntries)
			require.Equal(t, len(g.prov), g.provOld.Len())
			require.Equal(t, len(g.conns), g.connOld.Len())
		}
	}
}

// naiveSetEvict is the Set's eviction done by a scan, as it was specified:
// every idle breaker whose last failure is IdleTTL old goes; then, if the
// Set is still full, one of the breakers with the least (rank, last
// failure). It returns the breakers that must go and the candidates for
// the last one (ties).
func naiveSetEvict(s *Set, now time.Time) (expired []string, candidates []string) {
	cut := now.Add(-s.cfg.IdleTTL)
	left := 0
	bestRank := 3
	var bestLast time.Time
	for name, b := range setBreakers(s) {
		b.mu.Lock()
		rank, last := b.evictKeyLocked()
		b.mu.Unlock()
		if rank == 0 && !last.After(cut) {
			expired = append(expired, name)
			continue
		}
		left++
		switch {
		case rank < bestRank || (rank == bestRank && last.Before(bestLast)):
			bestRank, bestLast, candidates = rank, last, []string{name}
		case rank == bestRank && last.Equal(bestLast):
			candidates = append(candidates, name)
		}
	}
	if left < s.cfg.MaxBreakers {
		candidates = nil
	}
	return expired, candidates
}

func setNames(s *Set) []string {
	var out []string
	for k := range setBreakers(s) {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// setBreakers returns the Set's breakers by provider.
func setBreakers(s *Set) map[string]*circuit {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := make(map[string]*circuit, len(s.m))
	for k, b := range s.m {
		m[k] = b
	}
	return m
}

// The Set's eviction order (kept up to date from the breakers' changes)
// drops exactly what a scan of every breaker would, through random
// admissions, reports, resets and state reads.
func TestSetEvictionMatchesScanModel(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 11))
		var removed []string
		s := NewSet(Config{MaxBreakers: 1 + int(seed%6), ClassOf: classOf,
			OnChange: func(e Event) {
				if e.Removed {
					removed = append(removed, e.Provider)
				}
			}})
		now := t0
		var pending []func(Report)
		for step := range 2000 {
			now = now.Add(time.Duration(r.IntN(int(2*time.Minute))) + 1)
			if r.IntN(30) == 0 {
				now = now.Add(time.Hour) // past IdleTTL
			}
			p := fmt.Sprint("p", r.IntN(12))
			before := setNames(s)
			var expired, candidates []string
			if !slices.Contains(before, p) && len(before) >= s.cfg.MaxBreakers {
				expired, candidates = naiveSetEvict(s, now)
			}
			removed = removed[:0]
			created := true
			switch op := r.IntN(10); {
			case op < 3:
				if done, err := s.AllowReportAt(p, now); err == nil {
					pending = append(pending, done)
				}
			case op < 6:
				s.ReportAt(p, Report{Outcome: Failure, Kind: Kind(r.IntN(3))}, now)
			case op == 6:
				created = s.ReportAt(p, Report{Outcome: Success}, now) || slices.Contains(before, p)
			case op == 7 && len(pending) > 0:
				i := r.IntN(len(pending))
				o := []Outcome{Success, Failure, Ignored}[r.IntN(3)]
				pending[i](Report{Outcome: o, At: now})
				pending = slices.Delete(pending, i, i+1)
				created = false
			case op == 8:
				s.ResetAt(p, now)
				created = false
			default:
				s.StateAt(p, now)
				created = false
			}
			after := setNames(s)
			require.LessOrEqual(t, len(after), s.cfg.MaxBreakers, "seed %d step %d", seed, step)
			if !created || slices.Contains(before, p) || !slices.Contains(after, p) {
				require.Equal(t, before, slices.DeleteFunc(after, func(n string) bool { return n == p && !slices.Contains(before, p) }),
					"seed %d step %d: nothing dropped", seed, step)
				continue
			}
			var gone []string
			for _, n := range before {
				if !slices.Contains(after, n) {
					gone = append(gone, n)
				}
			}
			slices.Sort(expired)
			want := len(expired)
			if len(candidates) > 0 {
				want++
			}
			require.Len(t, gone, want, "seed %d step %d: %v, expired %v, candidates %v", seed, step, gone, expired, candidates)
			for _, n := range gone {
				require.True(t, slices.Contains(expired, n) || slices.Contains(candidates, n), "seed %d step %d: %s dropped", seed, step, n)
			}
			for _, n := range expired {
				require.Contains(t, gone, n, "seed %d step %d", seed, step)
			}
			slices.Sort(removed)
			require.Equal(t, len(gone), len(removed), "the hook hears of every breaker dropped")
			require.Subset(t, gone, removed)
		}
	}
}
