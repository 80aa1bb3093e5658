package affinity

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A use of a tracked connection takes no shard lock: it is recorded while
// another goroutine holds the lock of the connection's shard.
func TestRecordUseTakesNoShardLock(t *testing.T) {
	p := hourPins(Config{})
	p.RecordUseAt("A", t0)
	_, sh := p.usage.hash("A")
	sh.mu.Lock()
	done := make(chan struct{})
	go func() {
		p.RecordUseAt("A", t0.Add(time.Second))
		close(done)
	}()
	select {
	case <-done:
		sh.mu.Unlock()
	case <-time.After(time.Second):
		sh.mu.Unlock()
		<-done
		t.Fatal("RecordUseAt of a tracked connection waited for its shard's lock")
	}
	want := []ConnectionUse{{Connection: "A", LastUsed: t0.Add(time.Second), Uses: 2}}
	if got := p.SnapshotAt(t0).Connections; !slices.Equal(got, want) {
		t.Fatalf("connections = %+v, want %+v", got, want)
	}
}

// usageModel is the usage table as it was, one map per shard under one
// lock, for comparison: the same shard for each connection, the same cap
// per shard and the same victim (the connection used longest ago).
type usageModel struct {
	t      *usageTable
	shards [usageShards]map[string]usage
}

func (m *usageModel) record(conn string, now time.Time, fresh bool) {
	_, sh := m.t.hash(conn)
	i := -1
	for j := range m.t.shards {
		if &m.t.shards[j] == sh {
			i = j
		}
	}
	if m.shards[i] == nil {
		m.shards[i] = map[string]usage{}
	}
	s := m.shards[i]
	u, ok := s[conn]
	if !ok && len(s) >= m.t.perShard {
		victim, at, found := "", time.Time{}, false
		for c, v := range s {
			if !found || v.last.Before(at) {
				victim, at, found = c, v.last, true
			}
		}
		delete(s, victim)
	}
	u.touch(now, fresh)
	s[conn] = u
}

func (m *usageModel) list() []ConnectionUse {
	var out []ConnectionUse
	for _, s := range m.shards {
		for c, u := range s {
			out = append(out, ConnectionUse{Connection: c, LastUsed: u.last, Uses: u.uses})
		}
	}
	slices.SortFunc(out, func(a, b ConnectionUse) int { return strings.Compare(a.Connection, b.Connection) })
	return out
}

// checkIndex reports where a shard's index and its map disagree: every
// entry of the map must be found through the index, and the index must
// hold nothing else.
func checkIndex(t *testing.T, u *usageTable, phase string) {
	t.Helper()
	for i := range u.shards {
		sh := &u.shards[i]
		sh.mu.Lock()
		for c, e := range sh.m {
			h, _ := u.hash(c)
			if got := sh.find(h, c); got != e || e.gone {
				t.Errorf("%s: shard %d: %q found as %p (gone %v), stored as %p", phase, i, c, got, e.gone, e)
			}
		}
		live, used := 0, 0
		if x := sh.idx.Load(); x != nil {
			for j := range x.slots {
				switch e := x.slots[j].Load(); e {
				case nil:
				case usageGone:
					used++
				default:
					used++
					live++
					if sh.m[e.conn] != e {
						t.Errorf("%s: shard %d: the index holds %q, which the shard does not", phase, i, e.conn)
					}
				}
			}
			if 4*used > 3*len(x.slots) {
				t.Errorf("%s: shard %d: %d of %d index slots in use", phase, i, used, len(x.slots))
			}
		}
		if live != len(sh.m) || used != sh.used {
			t.Errorf("%s: shard %d: index holds %d entries in %d slots, shard %d entries, %d slots counted", phase, i, live, used, len(sh.m), sh.used)
		}
		if len(sh.m) > u.perShard {
			t.Errorf("%s: shard %d holds %d connections, cap %d", phase, i, len(sh.m), u.perShard)
		}
		sh.mu.Unlock()
	}
}

// TestUsageMatchesLockedModel records random uses (fresh and not, times
// going back now and then) over more connections than the cap holds and
// compares the recorded use after every step with the table as it was
// under one lock per shard: the same connections, last uses and counts.
func TestUsageMatchesLockedModel(t *testing.T) {
	p := hourPins(Config{MaxConnections: 48})
	m := &usageModel{t: &p.usage}
	r := rand.New(rand.NewPCG(3, 9))
	now := t0
	for step := range 4000 {
		now = now.Add(time.Duration(r.IntN(2000)-200) * time.Millisecond)
		conn := "conn-" + strconv.Itoa(r.IntN(120))
		fresh := r.IntN(5) == 0
		p.usage.record(conn, now, fresh)
		m.record(conn, now, fresh)
		if got, want := p.usage.list(), m.list(); !slices.Equal(got, want) {
			t.Fatalf("step %d: recorded use\n%+v\nwant\n%+v", step, got, want)
		}
		for _, c := range []string{conn, "conn-" + strconv.Itoa(r.IntN(120))} {
			u, ok := p.usage.get(c)
			var mu usage
			var mok bool
			_, sh := p.usage.hash(c)
			for j := range p.usage.shards {
				if &p.usage.shards[j] == sh {
					mu, mok = m.shards[j][c]
				}
			}
			if u != mu || ok != mok {
				t.Fatalf("step %d: get(%q) = %+v, %v, want %+v, %v", step, c, u, ok, mu, mok)
			}
		}
	}
	checkIndex(t, &p.usage, "end")
}

// Uses recorded from many goroutines (run with -race), beside selections
// that read the recorded use and listings, all count: with room for every
// connection each one ends with every use and the latest time; with the
// cap forcing removals the shards stay within it and their indexes agree
// with them.
func TestRecordUseConcurrent(t *testing.T) {
	const workers, rounds = 4, 500
	conns := []string{"A", "B", "C", "D", "E", "F"}
	t.Run("room", func(t *testing.T) {
		p := hourPins(Config{})
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range rounds {
					p.RecordUseAt(conns[(i+w)%len(conns)], t0.Add(time.Duration(i)*time.Second))
					if i%50 == 0 {
						p.PlanAt(Request{Provider: "p", Key: mustKey(t, "K"+strconv.Itoa(i))}, cands(conns...), t0)
						p.SnapshotAt(t0)
					}
				}
			})
		}
		wg.Wait()
		got := p.SnapshotAt(t0).Connections
		if len(got) != len(conns) {
			t.Fatalf("%d connections recorded, want %d", len(got), len(conns))
		}
		// The locked answer: each connection's uses and latest time as the
		// workers' loops give them.
		want := make([]ConnectionUse, len(conns))
		for ci, c := range conns {
			want[ci].Connection = c
			for w := range workers {
				for i := range rounds {
					if (i+w)%len(conns) == ci {
						want[ci].Uses++
						if at := t0.Add(time.Duration(i) * time.Second); at.After(want[ci].LastUsed) {
							want[ci].LastUsed = at
						}
					}
				}
			}
		}
		total := 0
		for _, c := range got {
			total += c.Uses
		}
		if !slices.Equal(got, want) {
			t.Errorf("connections = %+v, want %+v", got, want)
		}
		if total != workers*rounds {
			t.Errorf("%d uses recorded, want %d", total, workers*rounds)
		}
	})
	t.Run("cap", func(t *testing.T) {
		p := hourPins(Config{MaxConnections: 32})
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(w), 1))
				for i := range rounds {
					p.RecordUseAt("conn-"+strconv.Itoa(r.IntN(80)), t0.Add(time.Duration(r.IntN(600))*time.Second))
					if i%25 == 0 {
						p.usage.get("conn-" + strconv.Itoa(r.IntN(80)))
						p.usage.list()
					}
				}
			})
		}
		wg.Wait()
		checkIndex(t, &p.usage, "after the writers")
	})
}
