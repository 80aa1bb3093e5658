package lockout

import (
	"strconv"
	"testing"
	"time"
)

// TestTableInvariants writes, decays, clears and sweeps many keys and checks
// after each phase that every live entry is found where a lookup probes for
// it, that at most half the slots are in use, and that the counters agree
// with the tables.
func TestTableInvariants(t *testing.T) {
	l := New(Config{Settings: Settings{Enabled: true, MaxEntries: 50_000}})
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	check := func(phase string) {
		t.Helper()
		total := 0
		for si := range l.shards {
			sh := &l.shards[si]
			sh.mu.Lock()
			tb := sh.tab.Load()
			live, exact, used := 0, 0, 0
			if tb != nil {
				for i := range tb.slots {
					e := tb.slots[i].Load()
					if e == nil {
						continue
					}
					used++
					if e == tombstone {
						continue
					}
					live++
					if e.exact {
						exact++
					}
					if got := tb.find(e.hash, e.key); got != e {
						t.Errorf("%s: shard %d: entry %+v not found by its key", phase, si, e.key)
					}
				}
				if 2*used > len(tb.slots) {
					t.Errorf("%s: shard %d: %d of %d slots in use", phase, si, used, len(tb.slots))
				}
			}
			if int64(live) != sh.live.Load() || int64(exact) != sh.exact.Load() || used != sh.used {
				t.Errorf("%s: shard %d: counted live %d exact %d used %d, recorded %d %d %d",
					phase, si, live, exact, used, sh.live.Load(), sh.exact.Load(), sh.used)
			}
			total += live
			sh.mu.Unlock()
		}
		if total != l.Len() {
			t.Errorf("%s: %d entries in tables, Len() = %d", phase, total, l.Len())
		}
	}

	const n = 20_000
	for i := range n {
		l.LockAt(Failure{
			Provider: "p", Connection: "c" + strconv.Itoa(i%37), Model: "M-" + strconv.Itoa(i),
			Scope: Scope(1 + i%3), Cooldown: time.Duration(1+i%50) * time.Minute,
		}, t0)
	}
	check("filled")
	if l.Len() != n {
		t.Fatalf("Len() = %d, want %d", l.Len(), n)
	}
	for i := 0; i < n; i += 2 {
		l.ClearAt("p", "c"+strconv.Itoa(i%37), "M-"+strconv.Itoa(i), t0)
	}
	check("half cleared")
	if l.Len() != n/2 {
		t.Fatalf("Len() = %d, want %d", l.Len(), n/2)
	}
	for i := 1; i < n; i += 2 {
		if _, _, locked := l.LockedAt("p", "c"+strconv.Itoa(i%37), "M-"+strconv.Itoa(i), t0); !locked {
			t.Fatalf("M-%d not locked after its neighbours were cleared", i)
		}
	}
	// Refill the tombstones with new keys, then let most locks run out.
	for i := range n / 2 {
		l.LockAt(Failure{Provider: "p", Connection: "d" + strconv.Itoa(i%11), Model: "x" + strconv.Itoa(i), Scope: ScopeModel, Cooldown: time.Minute}, t0)
	}
	check("refilled")
	l.SnapshotAt(t0.Add(24 * time.Hour)) // sweeps everything
	check("swept")
	if l.Len() != 0 {
		t.Fatalf("Len() = %d after every lock ran out", l.Len())
	}
	for si := range l.shards {
		if l.shards[si].tab.Load() != nil {
			t.Errorf("shard %d keeps a table with no entries", si)
		}
	}
}

var sinkHash uint64

func BenchmarkStrhash(b *testing.B) {
	for _, s := range []string{"conn-5", "gpt-4o-mini", "claude-sonnet-4-5-20250929"} {
		b.Run(strconv.Itoa(len(s)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkHash += strhash(s)
			}
		})
	}
}

// TestStrhashSpread checks that similar keys do not crowd the low bits a
// table index is taken from.
func TestStrhashSpread(t *testing.T) {
	const n, buckets = 1 << 16, 1 << 12
	for _, prefix := range []string{"", "m", "model-", "a-rather-long-model-name-"} {
		var counts [buckets]int
		for i := range n {
			counts[keyHash(strhash("conn"), strhash(prefix+strconv.Itoa(i)))&(buckets-1)]++
		}
		worst := 0
		for _, c := range counts {
			worst = max(worst, c)
		}
		// n/buckets = 16 on average; a fair hash stays well under 3×.
		if worst > 48 {
			t.Errorf("prefix %q: fullest of %d buckets holds %d of %d keys", prefix, buckets, worst, n)
		}
	}
}

func checkExactForm(t *testing.T, s string) {
	t.Helper()
	var buf [maxStackModel]byte
	same := s != "" && exactName(s, &buf) == s
	got := isExactForm(s)
	if got && !same {
		t.Fatalf("isExactForm(%q) = true, but its exact name is %q", s, exactName(s, &buf))
	}
	ascii := true
	for i := 0; i < len(s); i++ {
		ascii = ascii && s[i] < 0x80
	}
	if ascii && got != same {
		t.Fatalf("isExactForm(%q) = %v, want %v", s, got, same)
	}
}

func TestIsExactForm(t *testing.T) {
	for _, s := range []string{
		"", "a", "A", " a", "a ", "\ta", "gpt-4o", "GPT-4o", "gpt-4O", "model-5",
		"claude-sonnet-4-5-20250929", "claude-sonnet-4-5-2025092Z", "Claude-sonnet-4-5-20250929",
		"abcd", "abcD", "Abcd", "abcdE", "aBcde", "o3-Mini", "abcdefgh", "abcdefgH", "Abcdefgh", "abcdefghi", "abcdefghI", "@[`{", "a@b[c`d{e",
		"modèle", "gpt-4o\u00a0", "ÀB", "az09-_.:/@[]`{}~", "12345678901234567",
	} {
		checkExactForm(t, s)
	}
}

func FuzzIsExactForm(f *testing.F) {
	f.Add("gpt-4o")
	f.Add(" GPT-4o ")
	f.Add("a-long-model-name-with-Upper")
	f.Fuzz(checkExactForm)
}
