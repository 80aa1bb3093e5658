package affinity

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// naiveShard is one part of the MemoryStore as it was specified, done by
// scans: a new pin in a full part sweeps the dead pins, then evicts the pin
// that expires first; every limit/2 (at least 16) new pins sweep too.
type naiveShard struct {
	m      map[StoreKey]Pin
	writes int
}

type naiveStore struct {
	limit  int
	shards [storeShards]naiveShard
}

func (s *naiveStore) shard(k StoreKey) *naiveShard {
	sh := &s.shards[k.Session[0]%storeShards]
	if sh.m == nil {
		sh.m = map[StoreKey]Pin{}
	}
	return sh
}

func (sh *naiveShard) sweep(now time.Time) {
	sh.writes = 0
	for k, p := range sh.m {
		if !p.Live(now) {
			delete(sh.m, k)
		}
	}
}

func (s *naiveStore) save(k StoreKey, p Pin, now time.Time) {
	sh := s.shard(k)
	if _, ok := sh.m[k]; !ok {
		sh.writes++
		if sh.writes >= max(s.limit/2, 16) {
			sh.sweep(now)
		}
		if len(sh.m) >= s.limit {
			sh.sweep(now)
			if len(sh.m) >= s.limit {
				var victim StoreKey
				first := true
				for vk, vp := range sh.m {
					if first || expiryKey(&vp) < expiryKey(new(sh.m[victim])) {
						victim, first = vk, false
					}
				}
				delete(sh.m, victim)
			}
		}
	}
	sh.m[k] = p
}

func (s *naiveStore) load(k StoreKey, now time.Time) (Pin, bool) {
	sh := s.shard(k)
	p, ok := sh.m[k]
	if ok && !p.Live(now) {
		delete(sh.m, k)
		return Pin{}, false
	}
	return p, ok
}

func (s *naiveStore) list(now time.Time) []Entry {
	var out []Entry
	for i := range s.shards {
		for k, p := range s.shards[i].m {
			if p.Live(now) {
				out = append(out, Entry{Key: k, Pin: p})
			}
		}
	}
	return out
}

func (s *naiveStore) len() int {
	n := 0
	for i := range s.shards {
		n += len(s.shards[i].m)
	}
	return n
}

func sortEntries(es []Entry) []Entry {
	slices.SortFunc(es, func(a, b Entry) int {
		if c := slices.Compare(a.Key.Session[:], b.Key.Session[:]); c != 0 {
			return c
		}
		return 0
	})
	return es
}

// The MemoryStore's expiry heaps keep and evict exactly the pins the naive
// scans would, through random saves (new and existing keys, some pins with
// no connection), loads, deletes and clocks that step back.
func TestMemoryStoreMatchesNaiveModel(t *testing.T) {
	for seed := range uint64(8) {
		r := rand.New(rand.NewPCG(seed, 3))
		s := NewMemoryStore(128) // 4 per part
		m := &naiveStore{limit: s.shardCap()}
		var keys []StoreKey
		for i := range 40 {
			var k StoreKey
			k.Provider = "p"
			k.Session[0] = byte(i % 3) // three parts see every key
			k.Session[1] = byte(i)
			keys = append(keys, k)
		}
		now := t0
		var exp int64
		for step := range 2500 {
			now = now.Add(time.Duration(r.IntN(int(time.Second))))
			if r.IntN(20) == 0 {
				now = now.Add(-time.Duration(r.IntN(int(3 * time.Second))))
			}
			k := keys[r.IntN(len(keys))]
			switch op := r.IntN(10); {
			case op < 5:
				exp++ // distinct expiries: no ties for "expires first"
				p := Pin{Connection: fmt.Sprint("c", r.IntN(3)), Created: now, LastUsed: now,
					Expires: now.Add(time.Duration(r.IntN(int(5*time.Second))) + time.Duration(exp))}
				if r.IntN(15) == 0 {
					p.Connection = ""
				}
				require.NoError(t, s.Save(k, p, now))
				m.save(k, p, now)
			case op < 8:
				got, ok, err := s.Load(k, now)
				require.NoError(t, err)
				want, wok := m.load(k, now)
				require.Equal(t, wok, ok, "seed %d step %d", seed, step)
				require.Equal(t, want, got)
			case op == 8:
				ok, _ := s.Delete(k)
				_, wok := m.shard(k).m[k]
				delete(m.shard(k).m, k)
				require.Equal(t, wok, ok)
			default:
				c := fmt.Sprint("c", r.IntN(3))
				ok, _ := s.DeleteIf(k, c)
				p, wok := m.shard(k).m[k]
				wok = wok && p.Connection == c
				if wok {
					delete(m.shard(k).m, k)
				}
				require.Equal(t, wok, ok)
			}
			require.Equal(t, m.len(), s.Len(), "seed %d step %d", seed, step)
			require.LessOrEqual(t, s.Len(), s.capacity())
			got, _ := s.List(now)
			require.Equal(t, sortEntries(m.list(now)), sortEntries(got), "seed %d step %d", seed, step)
			for i := range s.shards {
				sh := &s.shards[i]
				require.Equal(t, len(sh.m), sh.exp.Len())
				require.LessOrEqual(t, len(sh.m), s.shardCap())
			}
		}
	}
}

// A full part of the store evicts its dead pins first, then the pin that
// expires first, never the pin being saved, and never holds more than its
// share.
func TestMemoryStoreCapEvictsDeadThenSoonest(t *testing.T) {
	key := func(i int) StoreKey { return StoreKey{Provider: "p", Session: [32]byte{0, byte(i)}} }
	pin := func(exp time.Duration) Pin { return Pin{Connection: "A", Expires: t0.Add(exp)} }
	cases := []struct {
		name    string
		expires []time.Duration // of the four pins that fill the part
		now     time.Duration   // of the fifth save
		gone    []int
	}{
		{"the soonest goes", []time.Duration{4, 2, 3, 5}, 0, []int{1}},
		{"every dead pin goes", []time.Duration{1, 2, 9, 8}, 3, []int{0, 1}},
		{"a pin without connection is dead", []time.Duration{-1, 7, 9, 8}, 0, []int{0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewMemoryStore(128)
			for i, e := range c.expires {
				p := pin(e * time.Second)
				if e < 0 {
					p = Pin{Expires: t0.Add(time.Hour)}
				}
				require.NoError(t, s.Save(key(i), p, t0))
			}
			require.NoError(t, s.Save(key(9), pin(time.Second), t0.Add(c.now*time.Second)))
			require.LessOrEqual(t, s.Len(), 4)
			sh := s.shard(new(key(0)))
			for i := range c.expires {
				_, kept := sh.m[key(i)]
				require.Equal(t, !slices.Contains(c.gone, i), kept, "pin %d", i)
			}
			_, kept := sh.m[key(9)]
			require.True(t, kept, "the pin saved is kept")
		})
	}
}
