package lockout

import (
	"hash/maphash"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTableInvariants writes, decays, clears and sweeps many keys and checks
// after each phase that every live entry is found where a lookup probes for
// it, that at most three eighths of the slots are in use, and that the counters agree
// with the tables.
func TestTableInvariants(t *testing.T) {
	l := New(Config{Enabled: true, MaxEntries: 50_000})
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
					e := tb.slots[i].e.Load()
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
					if h := tb.slots[i].hash.Load(); h != e.hash {
						t.Errorf("%s: shard %d: slot %d keeps hash %x for an entry of hash %x", phase, si, i, h, e.hash)
					}
					if got := tb.find(e.hash, e.key); got != e {
						t.Errorf("%s: shard %d: entry %+v not found by its key", phase, si, e.key)
					}
				}
				if 8*used > 3*len(tb.slots) {
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
	// Twins: exact keys for some of the model keys written above.
	for i := 1; i < n; i += 9 {
		l.LockAt(Failure{
			Provider: "p", Connection: "c" + strconv.Itoa(i%37), Model: "m-" + strconv.Itoa(i),
			Scope: ScopeModel, Cooldown: time.Minute,
		}, t0)
		l.LockAt(Failure{
			Provider: "p", Connection: "c" + strconv.Itoa(i%37), Model: "M-" + strconv.Itoa(i),
			Scope: ScopeExact, Cooldown: 20 * time.Minute,
		}, t0)
	}
	check("filled")
	// A model with both keys reads the later of their locks.
	for i := 1; i < n; i += 9 {
		until, _, locked := l.LockedAt("p", "c"+strconv.Itoa(i%37), "m-"+strconv.Itoa(i), t0)
		if !locked || !until.Equal(t0.Add(20*time.Minute)) {
			t.Fatalf("m-%d: locked %v until %v, want the exact key's lock to %v", i, locked, until, t0.Add(20*time.Minute))
		}
	}
	for i := 0; i < n; i += 2 {
		l.ClearAt("p", "c"+strconv.Itoa(i%37), "M-"+strconv.Itoa(i), t0)
	}
	check("half cleared")
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

// TestCheckOfStaleTableWithTwins replays what a check sees when the table
// it loaded is replaced, and the exact key it shares a name with a model
// key is removed, before it probes: the old table still holds the removed
// exact key, in front of the model key. The check must read past it to the
// model key's lock.
func TestCheckOfStaleTableWithTwins(t *testing.T) {
	l := New(Config{Enabled: true})
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const p, c, m = "p", "c", "m"
	// The exact key first: it takes the home slot of the name, the model
	// key the slot after it.
	l.LockAt(Failure{Provider: p, Connection: c, Model: m, Scope: ScopeExact, Cooldown: time.Minute}, t0)
	want := l.LockAt(Failure{Provider: p, Connection: c, Model: m, Scope: ScopeModel, Cooldown: 20 * time.Minute}, t0).Until
	// Another exact key, so that the shard keeps exact keys after the
	// removal.
	l.LockAt(Failure{Provider: p, Connection: c, Model: "other", Scope: ScopeExact, Cooldown: time.Minute}, t0)

	hc := strhash(c)
	sh := l.shard(hc)
	sh.mu.Lock()
	stale := sh.tab.Load()
	sh.rebuild(int(sh.live.Load()))
	x := sh.lookup(keyHash(hc, strhash(m)), key{p, c, m, true})
	if x == nil || !l.removeLocked(sh, x) {
		sh.mu.Unlock()
		t.Fatal("exact key not found")
	}
	current := sh.tab.Load()
	sh.tab.Store(stale) // what a check that loaded the table earlier walks
	sh.mu.Unlock()

	until, _, locked := l.LockedAt(p, c, m, t0.Add(time.Second))
	sh.tab.Store(current)
	if !locked || !until.Equal(want) {
		t.Errorf("LockedAt over the stale table = %v until %v, want locked until %v", locked, until, want)
	}
	if until, _, locked := l.LockedAt(p, c, m, t0.Add(time.Second)); !locked || !until.Equal(want) {
		t.Errorf("LockedAt = %v until %v, want locked until %v", locked, until, want)
	}
}

var sinkHash uint64

// BenchmarkStrhashVsMaphash compares strhash with hash/maphash on the key
// sizes checks hash; it is what keeps strhash (see hash.go).
func BenchmarkStrhashVsMaphash(b *testing.B) {
	seed := maphash.MakeSeed()
	for _, s := range []string{"conn-5", "gpt-4o-mini", "claude-sonnet-4-5-20250929"} {
		b.Run("strhash/"+strconv.Itoa(len(s)), func(b *testing.B) {
			for b.Loop() {
				sinkHash += strhash(s)
			}
		})
		b.Run("maphash/"+strconv.Itoa(len(s)), func(b *testing.B) {
			for b.Loop() {
				sinkHash += maphash.String(seed, s)
			}
		})
	}
}

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

// checkExactForm checks modelForm, and the hashing and comparing of a
// lowered model without building it, against exactName.
func checkExactForm(t *testing.T, s string) {
	t.Helper()
	var buf [maxStackModel]byte
	ex := exactName(s, &buf)
	ascii := true
	for i := 0; i < len(s); i++ {
		ascii = ascii && s[i] < 0x80
	}
	switch form := modelForm(s); {
	case form == formExact:
		if s == "" || ex != s {
			t.Fatalf("modelForm(%q) = exact, but its exact name is %q", s, ex)
		}
	case form == formASCII:
		if !ascii || strings.TrimSpace(s) != s || ex == s {
			t.Fatalf("modelForm(%q) = ascii, exact name %q", s, ex)
		}
		if strhashLower(s) != strhash(ex) {
			t.Fatalf("strhashLower(%q) differs from strhash(%q)", s, ex)
		}
		if !equalLower(ex, s) {
			t.Fatalf("equalLower(%q, %q) = false", ex, s)
		}
	case ascii && s != "" && strings.TrimSpace(s) == s:
		t.Fatalf("modelForm(%q) = other for a trimmed ASCII model", s)
	}
	if ascii {
		lowered := strings.ToLower(s)
		if strhashLower(s) != strhash(lowered) {
			t.Fatalf("strhashLower(%q) differs from strhash(%q)", s, lowered)
		}
		if !equalLower(lowered, s) {
			t.Fatalf("equalLower(%q, %q) = false", lowered, s)
		}
		// One changed byte must be noticed wherever it is.
		for i := 0; i < len(s); i++ {
			b := []byte(lowered)
			b[i] ^= 0x01
			if equalLower(string(b), s) {
				t.Fatalf("equalLower(%q, %q) = true", b, s)
			}
		}
		if equalLower(lowered+"x", s) {
			t.Fatalf("equalLower ignores length")
		}
	}
}

func TestModelForm(t *testing.T) {
	for _, s := range []string{
		"", "a", "A", " a", "a ", "\ta", "gpt-4o", "GPT-4o", "gpt-4O", "model-5",
		"claude-sonnet-4-5-20250929", "claude-sonnet-4-5-2025092Z", "Claude-sonnet-4-5-20250929",
		"abcd", "abcD", "Abcd", "abcdE", "aBcde", "o3-Mini", "abcdefgh", "abcdefgH", "Abcdefgh", "abcdefghi", "abcdefghI", "@[`{", "a@b[c`d{e",
		"modèle", "gpt-4o\u00a0", "ÀB", "az09-_.:/@[]`{}~", "12345678901234567", "GPT-4o", "A", "AB", "Ab", "GEMINI-3.6-PRO-PREVIEW-0914", "Claude-Sonnet-4-5-20250929-Extended",
	} {
		checkExactForm(t, s)
	}
}

func FuzzModelForm(f *testing.F) {
	f.Add("gpt-4o")
	f.Add(" GPT-4o ")
	f.Add("a-long-model-name-with-Upper")
	f.Fuzz(checkExactForm)
}

// Exact locks are found from any casing of the model, by each of the ways a
// check takes to the exact key.
func TestExactLockAnyCase(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, model := range []string{"o3", "GPT-4o", "Gemini-3.6-Pro", "Claude-Sonnet-4-5-20250929-Extended"} {
		l := New(Config{Enabled: true})
		l.LockAt(Failure{Provider: "p", Connection: "c", Model: model, Scope: ScopeExact, Cooldown: time.Minute}, t0)
		lower := strings.ToLower(model)
		upper := strings.ToUpper(model)
		for _, probe := range []string{model, lower, upper, " " + upper + "\t"} {
			if _, _, locked := l.LockedAt("p", "c", probe, t0); !locked {
				t.Errorf("exact lock of %q: %q reads unlocked", model, probe)
			}
		}
		for _, probe := range []string{upper + "X", upper[:len(upper)-1], "x" + lower[1:]} {
			if _, _, locked := l.LockedAt("p", "c", probe, t0); locked {
				t.Errorf("exact lock of %q: %q reads locked", model, probe)
			}
		}
		if _, _, locked := l.LockedAt("p", "other", upper, t0); locked {
			t.Errorf("exact lock of %q leaks to another connection", model)
		}
	}
}
