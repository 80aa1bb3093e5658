package lockout

import (
	"fmt"
	"hash/maphash"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The lock-free table stays because of this benchmark: it runs LockedAt
// beside the same check over the standard structures that could replace
// the table, a sync.Map keyed by the entry's key and string-keyed maps
// under sharded sync.RWMutex (hash/maphash for the shard), filled with the
// same entries, in one run. Each does the work LockedAt does: the model
// key, the exact key, the family key, and the lowered exact key of an
// upper-case model.

// stdIndex is a standard structure over a Lockout's entries: one of the
// two is set. (Concrete types, so that a key does not escape through an
// interface call.)
type stdIndex struct {
	sm *syncMapIndex
	sx *shardedIndex
}

func (x stdIndex) find(k key) *entry {
	if x.sm != nil {
		return x.sm.find(k)
	}
	return x.sx.find(k)
}

type syncMapIndex struct{ m sync.Map }

func (x *syncMapIndex) find(k key) *entry {
	if v, ok := x.m.Load(k); ok {
		return v.(*entry)
	}
	return nil
}

type rwShard struct {
	mu sync.RWMutex
	m  map[key]*entry
	_  [32]byte
}

type shardedIndex struct {
	seed   maphash.Seed
	shards [numShards]rwShard
}

func (x *shardedIndex) find(k key) *entry {
	sh := &x.shards[maphash.String(x.seed, k.connection)&(numShards-1)]
	sh.mu.RLock()
	e := sh.m[k]
	sh.mu.RUnlock()
	return e
}

// indexes copies l's entries into each standard structure.
func indexes(l *Lockout) map[string]stdIndex {
	sm := &syncMapIndex{}
	sx := &shardedIndex{seed: maphash.MakeSeed()}
	for i := range sx.shards {
		sx.shards[i].m = make(map[key]*entry)
	}
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		sh.each(func(e *entry) {
			sm.m.Store(e.key, e)
			s := &sx.shards[maphash.String(sx.seed, e.connection)&(numShards-1)]
			s.m[e.key] = e
		})
		sh.mu.Unlock()
	}
	return map[string]stdIndex{"sync.Map": {sm: sm}, "sharded-rwmutex-map": {sx: sx}}
}

// stdLockedAt is LockedAt over x.
func stdLockedAt(l *Lockout, x stdIndex, provider, connection, model string, now time.Time) (time.Time, Reason, bool) {
	c := l.cfg.Load()
	if c == nil || !c.Enabled || model == "" {
		return time.Time{}, "", false
	}
	provider = c.canonical(provider)
	var best *lockView
	if e := x.find(key{provider, connection, model, false}); e != nil {
		best = later(best, e.view.Load(), now)
	}
	if fn := c.familyFunc(provider); fn != nil {
		if fam := fn(model); fam != model {
			if e := x.find(key{provider, connection, fam, false}); e != nil {
				best = later(best, e.view.Load(), now)
			}
		}
	}
	var buf [maxStackModel]byte
	if e := x.find(key{provider, connection, exactName(model, &buf), true}); e != nil {
		best = later(best, e.view.Load(), now)
	}
	if best == nil {
		return time.Time{}, "", false
	}
	return best.until, best.reason, true
}

func BenchmarkLockedAtStandard(b *testing.B) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const n = 1000
	l := New(Config{Enabled: true, MaxEntries: 2 * n})
	scopes := []Scope{ScopeFamily, ScopeModel, ScopeExact}
	for i := range n {
		l.LockAt(Failure{Provider: "openai", Connection: "conn-" + strconv.Itoa(i%100),
			Model: "model-" + strconv.Itoa(i), Scope: scopes[i%3], Cooldown: time.Hour}, t0)
	}
	now := t0.Add(time.Minute)
	cases := []struct {
		name, provider, conn, model string
		want                        bool
	}{
		{"hit", "openai", "conn-5", "model-5", true},
		{"miss", "openai", "conn-5", "gpt-4o", false},
		{"upper-case-miss", "openai", "conn-5", "GPT-4o", false},
		{"no-connection", "openai", "other", "gpt-4o", false},
		{"codex-family", "cx", "conn-5", "gpt-5.6-sol", false},
	}
	idx := indexes(l)
	for _, c := range cases {
		b.Run(fmt.Sprintf("table/%s", c.name), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, got := l.LockedAt(c.provider, c.conn, c.model, now); got != c.want {
					b.Fatalf("locked = %v, want %v", got, c.want)
				}
			}
		})
		for _, name := range []string{"sync.Map", "sharded-rwmutex-map"} {
			x := idx[name]
			b.Run(fmt.Sprintf("%s/%s", name, c.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, _, got := stdLockedAt(l, x, c.provider, c.conn, c.model, now); got != c.want {
						b.Fatalf("locked = %v, want %v", got, c.want)
					}
				}
			})
		}
	}
}
