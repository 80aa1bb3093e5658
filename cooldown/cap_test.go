package cooldown

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/routeguard/routeguard/internal/heap"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func storeConns(tr *Tracker) []string {
	var out []string
	tr.store.Range(func(c string, _ Entry) bool { out = append(out, c); return true })
	slices.Sort(out)
	return out
}

// Terminal entries count against MaxTerminal: a write that would keep
// more drops the connection that became terminal first, never the one
// written, and tells OnChange.
func TestMaxTerminalDropsOldestTerminal(t *testing.T) {
	cfg, events := recorder(Config{MaxEntries: 16, MaxTerminal: 16})
	tr := New(cfg)
	store := tr.store.(*memoryStore)
	for i := range 20 {
		tr.FailAt(fmt.Sprintf("t%02d", i), Failure{Status: 403, Permanent: true}, t0.Add(time.Duration(i)*time.Second))
		assert.LessOrEqual(t, store.term.Len(), 16)
		assert.LessOrEqual(t, store.Len(), 16)
	}
	var gone []Event
	for _, e := range *events {
		if e.Removed {
			gone = append(gone, e)
		}
	}
	require.Len(t, gone, 4)
	for i, e := range gone {
		assert.Equal(t, Event{Conn: fmt.Sprintf("t%02d", i), At: t0.Add(time.Duration(16+i) * time.Second),
			Action: Dropped, State: Available, From: Banned, Removed: true, Cause: causeMaxTerminal}, e)
		assert.Equal(t, Available, tr.StatusAt(e.Conn, t0).State)
	}
	for i := 4; i < 20; i++ {
		assert.Equal(t, Banned, tr.StatusAt(fmt.Sprintf("t%02d", i), t0).State)
	}
	// A connection written with an older time is spared though it is the
	// oldest terminal entry now.
	tr.FailAt("late", Failure{Status: 401}, t0)
	assert.Equal(t, Expired, tr.StatusAt("late", t0).State)
	assert.Equal(t, Available, tr.StatusAt("t04", t0).State, "the next oldest went instead")
	assert.Equal(t, 16, store.term.Len())
	// Terminal entries do not count against MaxEntries.
	for i := range 16 {
		tr.FailAt(fmt.Sprint("c", i), Failure{Status: 503, Cooldown: time.Hour}, t0)
	}
	assert.Equal(t, 32, store.Len())
	assert.Equal(t, defaultMaxTerminal, Config{}.Normalize().MaxTerminal)
}

// A write over MaxEntries drops, never the connection written, the idle
// entries, then those whose cooldown has ended, then those ending first,
// down to nine tenths of the cap.
func TestMaxEntriesEvictionOrder(t *testing.T) {
	cases := []struct {
		name  string
		fill  func(tr *Tracker) // 16 entries at t0
		write string
		gone  []string
	}{
		{"cooling, soonest first", func(tr *Tracker) {
			for i := range 16 {
				tr.FailAt(fmt.Sprintf("c%02d", i), Failure{Status: 503, Cooldown: time.Duration(16-i) * time.Minute}, t0)
			}
		}, "new", []string{"c13", "c14", "c15"}},
		{"lapsed ones all go first", func(tr *Tracker) {
			for i := range 16 {
				d := time.Duration(i+1) * time.Minute
				if i%4 == 0 {
					d = time.Second // lapsed by the write
				}
				tr.FailAt(fmt.Sprintf("c%02d", i), Failure{Status: 503, Cooldown: d}, t0)
			}
		}, "new", []string{"c00", "c04", "c08", "c12"}},
		{"tagged lapsed before cooling", func(tr *Tracker) {
			for i := range 16 {
				tr.RegisterAt(fmt.Sprintf("c%02d", i), Options{Provider: "p"}, t0)
				tr.FailAt(fmt.Sprintf("c%02d", i), Failure{Status: 503, Cooldown: time.Duration(i+1) * time.Minute}, t0)
			}
			tr.SucceedAt("c07", t0)
		}, "new", []string{"c00", "c01", "c07"}}, // c07 first, then the two ending first
		{"the written one survives", func(tr *Tracker) {
			for i := range 16 {
				tr.FailAt(fmt.Sprintf("c%02d", i), Failure{Status: 503, Cooldown: time.Hour}, t0)
			}
		}, "new", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := New(Config{MaxEntries: 16})
			c.fill(tr)
			before := storeConns(tr)
			now := t0.Add(30 * time.Second)
			tr.FailAt(c.write, Failure{Status: 503, Cooldown: time.Second}, now)
			after := storeConns(tr)
			assert.Contains(t, after, c.write)
			assert.LessOrEqual(t, len(after), 16)
			var gone []string
			for _, b := range before {
				if !slices.Contains(after, b) {
					gone = append(gone, b)
				}
			}
			if c.gone == nil {
				assert.Len(t, gone, 3, "down to nine tenths, ties as far as needed")
				return
			}
			assert.Equal(t, c.gone, gone)
		})
	}
}

// naiveCap is the caps' policy done by scans over every entry.
func naiveCap(tr *Tracker, es map[string]Entry, keep string, now time.Time) {
	live := func() int {
		n := 0
		for _, e := range es {
			if !e.State.Terminal() {
				n++
			}
		}
		return n
	}
	if live() > tr.cfg.MaxEntries {
		for c, e := range es {
			if tr.idle(&e, now) {
				delete(es, c)
			}
		}
	}
	if live() > tr.cfg.MaxEntries {
		for c, e := range es {
			if c != keep && e.State == Available && !now.Before(e.Until) {
				delete(es, c)
			}
		}
		for live() > tr.cfg.MaxEntries*9/10 {
			victim := ""
			for c, e := range es {
				if c != keep && e.State == Available && (victim == "" || e.Until.Before(es[victim].Until)) {
					victim = c
				}
			}
			if victim == "" {
				break
			}
			delete(es, victim)
		}
	}
	for {
		n, victim := 0, ""
		for c, e := range es {
			if e.State.Terminal() {
				n++
				if c != keep && (victim == "" || e.TerminalAt.Before(es[victim].TerminalAt)) {
					victim = c
				}
			}
		}
		if n <= tr.cfg.MaxTerminal || victim == "" {
			break
		}
		delete(es, victim)
	}
}

func storeEntries(tr *Tracker) map[string]Entry {
	out := map[string]Entry{}
	tr.store.Range(func(c string, e Entry) bool { out[c] = e; return true })
	return out
}

// The store's heaps drop exactly the entries a scan of every entry would,
// through random failures of every kind, successes, registrations, resets
// and forgets, with clocks that step back; and the idle heap agrees with
// the idle rule.
func TestCapsMatchScanModel(t *testing.T) {
	failures := []Failure{
		{Status: 503, Reason: "server_error"},
		{Status: 429, Reason: "rate_limit_exceeded", Backoff: true},
		{Status: 401}, {Status: 403, Permanent: true}, {Status: 402},
		{Status: 400, Reason: "request_rejected", RequestRejected: true},
		{Status: 500},
	}
	for seed := range uint64(8) {
		r := rand.New(rand.NewPCG(seed, 9))
		tr := New(Config{MaxEntries: 16 + int(seed%3), MaxTerminal: 16})
		store := tr.store.(*memoryStore)
		now := t0
		used := map[time.Time]bool{}
		for step := range 1500 {
			now = now.Add(time.Duration(r.IntN(int(20*time.Second))) + 1)
			at := now
			if r.IntN(10) == 0 {
				at = at.Add(-time.Duration(r.IntN(int(time.Minute))))
			}
			for used[at] {
				at = at.Add(1)
			}
			used[at] = true
			conn := fmt.Sprint("c", r.IntN(60))
			es := storeEntries(tr)
			switch op := r.IntN(12); {
			case op < 7:
				f := failures[r.IntN(len(failures))]
				f.Cooldown = time.Duration(r.IntN(int(10 * time.Minute)))
				tr.FailAt(conn, f, at)
			case op == 7:
				tr.SucceedAt(conn, at)
			case op == 8:
				o := Options{}
				if r.IntN(2) == 0 {
					o.Provider = "p"
				}
				tr.RegisterAt(conn, o, at)
			case op == 9:
				tr.ResetAt(Selector{IDs: []string{conn}}, at)
			case op == 10:
				tr.ForgetAt(conn, at)
			default:
				tr.RecheckedAt(conn, at)
			}
			got := storeEntries(tr)
			if e, ok := got[conn]; ok {
				es[conn] = e
			} else {
				delete(es, conn)
			}
			naiveCap(tr, es, conn, at)
			if tr.sinceSweep.Load() == 0 {
				for c, e := range es {
					if tr.idle(&e, at) {
						delete(es, c)
					}
				}
			}
			want := slices.Sorted(func(yield func(string) bool) {
				for c := range es {
					if !yield(c) {
						return
					}
				}
			})
			require.Equal(t, want, storeConns(tr), "seed %d step %d", seed, step)
			require.Equal(t, store.Len(), store.avail.Len()+store.term.Len(), "every entry in one of avail and term")
			require.LessOrEqual(t, store.Len()-store.term.Len(), tr.cfg.MaxEntries)
			require.LessOrEqual(t, store.term.Len(), tr.cfg.MaxTerminal)
			for c, e := range got {
				at, ok := tr.idleAt(&e)
				for _, d := range []time.Duration{-time.Hour, -1, 0, 1, time.Hour} {
					probe := now.Add(d)
					require.Equal(t, tr.idle(&e, probe), ok && at <= heap.Stamp(probe), "idleAt of %s at %v", c, d)
				}
			}
		}
	}
}
