package lockout

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/routeguard/routeguard/internal/heap"
)

type modelEntry struct {
	e      *entry
	sh     *shard
	retain time.Time
}

func keyString(e *entry) string {
	return fmt.Sprintf("%s|%s|%s|%v", e.provider, e.connection, e.name, e.exact)
}

func allEntries(l *Lockout, c *conf) map[*entry]modelEntry {
	out := map[*entry]modelEntry{}
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		sh.each(func(e *entry) { out[e] = modelEntry{e, sh, e.retainUntil(c)} })
		sh.mu.Unlock()
	}
	return out
}

// The shards' orders sweep and evict exactly the entries a scan would:
// every expired entry of a swept shard, and over the cap every expired
// entry, then the entries closest to expiry in key order down to seven
// eighths of the cap, never the one written.
func TestEvictionMatchesScanModel(t *testing.T) {
	scopes := []Scope{ScopeFamily, ScopeModel, ScopeExact}
	for seed := range uint64(12) {
		r := rand.New(rand.NewPCG(seed, 13))
		cfg := Config{Enabled: true, MaxEntries: 16 + int(seed%4)*8}
		l := New(cfg)
		now := t0m
		for step := range 1500 {
			now = now.Add(time.Duration(r.IntN(int(5 * time.Second))))
			if r.IntN(200) == 0 {
				l.SetConfig(Config{Enabled: true, MaxEntries: cfg.MaxEntries, EscalationWindow: time.Duration(r.IntN(3)) * time.Minute})
			}
			c := l.conf()
			at := now
			if r.IntN(10) == 0 {
				at = at.Add(-time.Duration(r.IntN(int(time.Minute))))
			}
			f := Failure{Provider: "p", Connection: fmt.Sprint("c", r.IntN(6)), Model: fmt.Sprint("m", r.IntN(20)),
				Scope: scopes[r.IntN(3)], Cooldown: time.Duration(1+r.IntN(120)) * time.Second}
			if r.IntN(20) == 0 {
				l.ClearAt(f.Provider, f.Connection, f.Model, at)
				continue
			}
			pre := allEntries(l, c)
			sh := l.shard(strhash(f.Connection))
			sh.mu.Lock()
			swept := !at.Before(sh.nextSweep) || at.Add(defaultSweepInterval).Before(sh.nextSweep)
			sh.mu.Unlock()
			if swept {
				for e, m := range pre {
					if m.sh == sh && at.After(m.retain) {
						delete(pre, e)
					}
				}
			}
			l.LockAt(f, at)
			post := allEntries(l, c)
			var keep *entry
			k, _ := keyFor(c, "p", f.Connection, ResolveScope(f.Scope, f.Status), f.Model, new([maxStackModel]byte))
			for e := range post {
				if e.key == k {
					keep = e
				}
			}
			if keep == nil {
				t.Fatalf("seed %d step %d: written entry missing", seed, step)
			}
			pre[keep] = modelEntry{keep, sh, keep.retainUntil(c)}
			if int64(len(pre)) > int64(cfg.MaxEntries) {
				for e, m := range pre {
					if at.After(m.retain) {
						delete(pre, e)
					}
				}
				if int64(len(pre)) > int64(cfg.MaxEntries) {
					var vs []modelEntry
					for e, m := range pre {
						if e != keep {
							vs = append(vs, m)
						}
					}
					slices.SortFunc(vs, func(a, b modelEntry) int {
						return cmp.Or(cmp.Compare(heap.Stamp(a.retain), heap.Stamp(b.retain)),
							cmp.Compare(a.e.provider, b.e.provider), cmp.Compare(a.e.connection, b.e.connection),
							cmp.Compare(a.e.name, b.e.name), cmpBool(a.e.exact, b.e.exact))
					})
					excess := len(pre) - (cfg.MaxEntries - cfg.MaxEntries/evictLowWaterFraction)
					for _, v := range vs[:min(excess, len(vs))] {
						delete(pre, v.e)
					}
				}
			}
			var want, got []string
			for e := range pre {
				want = append(want, keyString(e))
			}
			for e := range post {
				got = append(got, keyString(e))
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(want, got) {
				t.Fatalf("seed %d step %d:\nwant %v\n got %v", seed, step, want, got)
			}
			if l.Len() > cfg.MaxEntries {
				t.Fatalf("seed %d step %d: %d entries over the cap", seed, step, l.Len())
			}
			for i := range l.shards {
				s := &l.shards[i]
				if int(s.live.Load()) != s.order.Len() {
					t.Fatalf("seed %d step %d: shard %d has %d entries, %d ordered", seed, step, i, s.live.Load(), s.order.Len())
				}
			}
		}
	}
}

var t0m = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
