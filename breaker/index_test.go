package breaker

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// indexEntries returns the breakers a table holds, by name, and fails when
// one is held twice or under a hash other than want's.
func indexEntries(t *testing.T, x *index, want func(string) uint64) map[string]*circuit {
	t.Helper()
	got := map[string]*circuit{}
	for i := range x.slots {
		b := x.slots[i].b.Load()
		if b == nil {
			continue
		}
		require.NotContains(t, got, b.name, "held twice")
		require.Equal(t, want(b.name), x.slots[i].hash.Load(), "hash of %s", b.name)
		got[b.name] = b
	}
	return got
}

// checkIndex asserts that x holds exactly model and that a probe finds each
// of its entries, and is sure that absent isn't there.
func checkIndex(t *testing.T, x *index, model map[string]*circuit, hash func(string) uint64, absent ...string) {
	t.Helper()
	require.Equal(t, model, indexEntries(t, x, hash))
	require.False(t, x.full(len(model)), "more than half full")
	require.Zero(t, x.moves.Load()&1, "a shift left unfinished")
	for name, b := range model {
		got, sure := x.find(hash(name), name)
		require.Same(t, b, got, name)
		require.True(t, sure, name)
	}
	for _, name := range absent {
		got, sure := x.find(hash(name), name)
		require.Nil(t, got, name)
		require.True(t, sure, name)
	}
}

// A table holds exactly what a map model holds through random additions
// and removals whose hashes crowd a few home slots, so that probe runs
// wrap past the end and removals shift entries back across it.
func TestIndexMatchesMapModel(t *testing.T) {
	for seed := range uint64(30) {
		r := rand.New(rand.NewPCG(seed, 3))
		homes := 1 + r.Uint64N(6)
		hash := func(name string) uint64 {
			n, _ := strconv.Atoi(name[1:])
			// The same few homes at every size, a distinct hash per name.
			return uint64(n)<<32 | (uint64(n)%homes)*5 + 3
		}
		x := newIndex(minIndexSlots)
		model := map[string]*circuit{}
		for range 400 {
			name := "k" + strconv.Itoa(r.IntN(40))
			if b, ok := model[name]; ok {
				x.remove(hash(name), b)
				delete(model, name)
			} else {
				b := &circuit{name: name}
				if x.full(len(model) + 1) {
					x = x.grown()
				}
				x.place(hash(name), b)
				model[name] = b
			}
			checkIndex(t, x, model, hash, "k40", "k41", "k"+strconv.Itoa(40+r.IntN(40)))
		}
	}
}

// Removing the head of a run that wraps past the end of the table moves
// back exactly the entries the freed slot would cut off, and no other.
func TestIndexRemoveShiftsAcrossTheEnd(t *testing.T) {
	x := newIndex(8)
	// Distinct hashes; the low bits give the home slot.
	hashes := map[string]uint64{"a": 6 | 1<<32, "b": 6 | 2<<32, "c": 7 | 3<<32, "d": 4 << 32, "e": 6 | 5<<32}
	hash := func(name string) uint64 { return hashes[name] }
	names := []string{"a", "b", "c", "d"}
	model := map[string]*circuit{}
	for _, n := range names {
		model[n] = &circuit{name: n}
		x.place(hashes[n], model[n])
	}
	at := func() []string {
		out := make([]string, len(x.slots))
		for i := range x.slots {
			if b := x.slots[i].b.Load(); b != nil {
				out[i] = b.name
			}
		}
		return out
	}
	require.Equal(t, []string{"c", "d", "", "", "", "", "a", "b"}, at())

	x.remove(hashes["a"], model["a"])
	delete(model, "a")
	assert.Equal(t, []string{"d", "", "", "", "", "", "b", "c"}, at(), "b and c go back, d to its home")
	assert.Equal(t, uint64(2), x.moves.Load(), "one shift")
	checkIndex(t, x, model, hash, "a", "e")

	x.remove(hashes["d"], model["d"])
	delete(model, "d")
	assert.Equal(t, []string{"", "", "", "", "", "", "b", "c"}, at(), "nothing follows d")
	assert.Equal(t, uint64(2), x.moves.Load(), "no shift")
	checkIndex(t, x, model, hash, "a", "d", "e")

	x.remove(hashes["e"], &circuit{name: "e"}) // not held: nothing changes
	checkIndex(t, x, model, hash, "a", "d", "e")
}

// checkSetIndex asserts that the Set's index holds exactly its map.
func checkSetIndex(t *testing.T, s *Set) {
	t.Helper()
	x := s.idx.Load()
	if x == nil {
		require.Empty(t, setBreakers(s), "breakers without an index")
		return
	}
	checkIndex(t, x, setBreakers(s), s.hash, "never-held")
}

// The index follows the map through creation, growth, eviction and
// restoring.
func TestSetIndexFollowsTheMap(t *testing.T) {
	s := NewSet(Config{MaxBreakers: 40})
	checkSetIndex(t, s)
	assert.Nil(t, s.lookup("p0"))
	assert.Nil(t, s.idx.Load(), "no table before the first breaker")
	for i := range 100 {
		s.ReportAt("p"+strconv.Itoa(i), Report{Outcome: Failure}, t0)
		checkSetIndex(t, s)
	}
	assert.Len(t, s.idx.Load().slots, 128, "sized for the cap at most half full")
	require.NoError(t, s.RestoreAt(s.SnapshotAt(t0), t0))
	checkSetIndex(t, s)
	assert.Equal(t, 40, s.Len())
}

// Lookups run beside writers that create, evict and reset breakers, on
// Sets whose index grows meanwhile (run with -race). Open breakers, which
// the Set never evicts while it holds a closed one, are found every time
// as themselves; every other lookup gives nil or the breaker of the
// provider asked for, never one the reader has seen dropped.
func TestSetLookupsDuringChurn(t *testing.T) {
	const (
		pinned = 8
		max    = 24
		pool   = 64
	)
	for round := range 8 {
		s := NewSet(Config{MaxBreakers: max, APIKey: Profile{OpenAt: 1}})
		kept := make([]*circuit, pinned)
		for i := range kept {
			p := "open-" + strconv.Itoa(i)
			s.ReportAt(p, Report{Outcome: Failure}, t0)
			kept[i] = s.lookup(p)
			require.NotNil(t, kept[i])
			st, _ := s.StateAt(p, t0)
			require.Equal(t, Open, st)
		}
		names := make([]string, pool)
		for i := range names {
			names[i] = "p" + strconv.Itoa(i)
		}

		var readers, writers sync.WaitGroup
		stop := make(chan struct{})
		for w := range 2 {
			writers.Go(func() {
				r := rand.New(rand.NewPCG(uint64(round), uint64(w)))
				for range 3000 {
					p := names[r.IntN(pool)]
					switch r.IntN(4) {
					case 0:
						s.ResetAt(p, t0)
					default:
						if done, err := s.AllowReportAt(p, t0); err == nil {
							done(Report{Outcome: Success, At: t0})
						}
					}
				}
			})
		}
		for rd := range 2 {
			readers.Go(func() {
				r := rand.New(rand.NewPCG(uint64(round), 100+uint64(rd)))
				dropped := map[*circuit]bool{} // seen dropped by this reader
				check := func(p string, b *circuit, how string) bool {
					if b == nil {
						return true
					}
					if b.name != p || dropped[b] {
						t.Errorf("%s(%s) = breaker of %s, dropped before: %v", how, p, b.name, dropped[b])
						return false
					}
					b.mu.Lock()
					if b.owner == nil {
						dropped[b] = true
					}
					b.mu.Unlock()
					return true
				}
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					k := r.IntN(pinned)
					if b := s.lookup("open-" + strconv.Itoa(k)); b != kept[k] {
						t.Errorf("lookup(open-%d) = %p, want %p", k, b, kept[k])
						return
					}
					if st, _ := s.StateAt("open-"+strconv.Itoa(k), t0); st != Open {
						t.Errorf("StateAt(open-%d) = %v", k, st)
						return
					}
					p := names[r.IntN(pool)]
					if !check(p, s.lookup(p), "lookup") {
						return
					}
					if i%8 == 0 {
						b := s.getAt(p, t0)
						if b == nil || !check(p, b, "getAt") {
							t.Errorf("getAt(%s) = %v", p, b)
							return
						}
					}
				}
			})
		}
		writers.Wait()
		close(stop)
		readers.Wait()
		if t.Failed() {
			return
		}
		// Idle breakers are dropped all at once when the Set is full.
		assert.LessOrEqual(t, s.Len(), max)
		checkSetIndex(t, s)
		for k, b := range kept {
			assert.Same(t, b, s.lookup("open-"+strconv.Itoa(k)))
		}
	}
}

// A reader probing while a writer shifts a key back across the slots it
// reads finds the key every time it is held throughout, or says that its
// miss is not sure; after the writer stops, every miss is sure again.
func TestIndexFindDuringShifts(t *testing.T) {
	x := newIndex(16)
	ahead := make([]*circuit, 6)
	for i := range ahead {
		ahead[i] = &circuit{name: "ahead-" + strconv.Itoa(i)}
	}
	kept := &circuit{name: "kept"}
	hashes := map[*circuit]uint64{kept: 1 << 32} // home 0, each its own
	for i, a := range ahead {
		hashes[a] = uint64(i+2) << 32
	}
	hash := func(b *circuit) uint64 { return hashes[b] }
	// held is odd while kept is in the table.
	var held atomic.Uint64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		// All share home 0; each turn puts kept behind the others, then
		// frees the head of the run until kept is home, one shift each.
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, a := range ahead {
				x.place(hash(a), a)
			}
			x.place(hash(kept), kept)
			held.Add(1)
			for _, a := range ahead {
				x.remove(hash(a), a)
			}
			held.Add(1)
			x.remove(hash(kept), kept)
		}
	})
	for held.Load() < 100 {
		runtime.Gosched() // until the writer runs beside the reader
	}
	unsure, found := 0, 0
	for range 2_000_000 {
		h := held.Load()
		got, sure := x.find(hash(kept), "kept")
		if h&1 == 0 || held.Load() != h {
			continue // kept was out at some moment of the find
		}
		switch {
		case got == kept:
			found++
		case got == nil && !sure:
			unsure++
		default:
			close(stop)
			wg.Wait()
			t.Fatalf("find(kept) = %v, sure = %v, while kept was held", got, sure)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("found %d, unsure %d", found, unsure)
	x = newIndex(8)
	x.place(hash(ahead[0]), ahead[0])
	x.place(hash(kept), kept)
	x.moves.Add(1) // as in the middle of a shift
	got, sure := x.find(9<<32, "absent")
	assert.Nil(t, got)
	assert.False(t, sure, "a miss during a shift")
	got, sure = x.find(hash(kept), "kept")
	assert.Same(t, kept, got, "a hit is sure")
	assert.True(t, sure)
	x.moves.Add(1)
	got, sure = x.find(9<<32, "absent")
	assert.Nil(t, got)
	assert.True(t, sure)
}

// Two names of the same hash: the second is not found by the probe, which
// leaves the answer to the map; a name whose hash nothing has is surely
// absent.
func TestIndexSameHashIsNotSure(t *testing.T) {
	x := newIndex(8)
	a, b := &circuit{name: "a"}, &circuit{name: "b"}
	x.place(5, a)
	x.place(5, b)
	got, sure := x.find(5, "a")
	assert.Same(t, a, got)
	assert.True(t, sure)
	got, sure = x.find(5, "b")
	assert.Nil(t, got)
	assert.False(t, sure)
	got, sure = x.find(5|1<<32, "b")
	assert.Nil(t, got)
	assert.True(t, sure)
}

// The index's hash reads every byte of a name and its length: changing
// any one byte, or repeating a byte once more, changes it; the same bytes
// elsewhere in memory hash the same.
func TestStrhashReadsEveryByte(t *testing.T) {
	seen := map[uint64]string{}
	for n := range 41 {
		name := []byte(strings.Repeat("a", n))
		for i := range n + 1 {
			if i < n {
				name[i] = 'b'
			}
			s := string(name)
			h := strhash(s)
			if other, ok := seen[h]; ok && other != s {
				t.Fatalf("strhash(%q) = strhash(%q)", s, other)
			}
			seen[h] = s
			require.Equal(t, h, strhash(string([]byte(s))), "%q copied", s)
			if i < n {
				name[i] = 'a'
			}
		}
	}
	assert.Len(t, seen, 41+40*41/2)
}
