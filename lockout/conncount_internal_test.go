package lockout

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"
)

// checkConnCounts reports where a connection count of l differs from the
// entries its tables hold for the connections of that count.
func checkConnCounts(t *testing.T, l *Lockout, phase string) {
	t.Helper()
	var want [connBuckets]int32
	for si := range l.shards {
		sh := &l.shards[si]
		sh.mu.Lock()
		sh.each(func(e *entry) { want[connBucket(e.connection)]++ })
		sh.mu.Unlock()
	}
	for b := range want {
		if got := l.conns[b].Load(); got != want[b] {
			t.Errorf("%s: count %d is %d, the tables hold %d such entries", phase, b, got, want[b])
		}
	}
}

// TestConnCountsFollowEntries runs every kind of write (failures, locks,
// decays, clears, sweeps, evictions at the cap, restores, Reset) and checks
// after each step that the per-connection counts the checks consult match
// the entries exactly: a count lower than its entries would hide a lock.
func TestConnCountsFollowEntries(t *testing.T) {
	l := New(Config{Enabled: true, MaxEntries: 40, Families: map[string]FamilyFunc{"p": func(m string) string { return "fam" }}})
	r := rand.New(rand.NewPCG(7, 7))
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	models := []string{"gpt-4o", "GPT-4o", " claude ", "gemini-2.5-pro", "o3"}
	for step := range 3000 {
		now = now.Add(time.Duration(r.IntN(90)) * time.Second)
		conn := "conn-" + strconv.Itoa(r.IntN(60))
		if r.IntN(4) == 0 {
			conn = "c" + strconv.Itoa(r.IntN(9)) // short ids take the other digest
		}
		m := models[r.IntN(len(models))]
		switch op := r.IntN(20); {
		case op < 7:
			l.RecordFailureAt(Failure{Provider: "p", Connection: conn, Model: m, Status: []int{429, 503, 404}[r.IntN(3)]}, now)
		case op < 10:
			l.LockAt(Failure{Provider: "p", Connection: conn, Model: m, Scope: Scope(r.IntN(3) + 1), Cooldown: time.Duration(1+r.IntN(600)) * time.Second}, now)
		case op < 14:
			l.DecayAt("p", conn, m, now)
		case op < 16:
			l.ClearAt("p", conn, m, now)
		case op < 17:
			l.SnapshotAt(now)
		case op < 18:
			recs := []Record{{Provider: "p", Connection: conn, Model: m, Scope: ScopeModel, Until: now.Add(time.Minute), FailureCount: 2, LastFailure: now}}
			l.RestoreAt(recs, now)
		case op < 19:
			now = now.Add(2 * time.Hour) // everything expires; the next write sweeps
		default:
			if step%7 == 0 {
				l.Reset()
			}
		}
		checkConnCounts(t, l, "step "+strconv.Itoa(step))
		if t.Failed() {
			return
		}
	}
}

// TestLockedAtUntrackedConnectionReadsNoTable proves that a check of a
// connection without entries answers from its count, before hashing the
// connection or reading its shard: the shard's table is replaced by one a
// lookup cannot walk (no slots), which a check that probed it would index
// out of range.
func TestLockedAtUntrackedConnectionReadsNoTable(t *testing.T) {
	l := New(Config{Enabled: true})
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	l.LockAt(Failure{Provider: "p", Connection: "tracked", Model: "m", Status: 429, Cooldown: time.Minute}, t0)
	conn := ""
	for i := 0; conn == ""; i++ {
		if c := "other-" + strconv.Itoa(i); connBucket(c) != connBucket("tracked") && l.shard(strhash(c)) != l.shard(strhash("tracked")) {
			conn = c
		}
	}
	sh := l.shard(strhash(conn))
	sh.tab.Store(&table{mask: 7}) // no slots: any probe panics
	defer sh.tab.Store(nil)
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("LockedAt(%q) probed the shard's table: %v", conn, p)
			}
		}()
		if until, reason, locked := l.LockedAt("p", conn, "m", t0); locked || !until.IsZero() || reason != "" {
			t.Fatalf("LockedAt(%q) = %v, %q, %v, want unlocked", conn, until, reason, locked)
		}
		if count, cleared := l.DecayAt("p", conn, "m", t0); count != 0 || cleared {
			t.Fatalf("DecayAt(%q) = %d, %v, want 0, false", conn, count, cleared)
		}
	}()
	if until, _, locked := l.LockedAt("p", "tracked", "m", t0); !locked || !until.Equal(t0.Add(time.Minute)) {
		t.Fatalf("LockedAt(tracked) = %v, %v, want locked until %v", until, locked, t0.Add(time.Minute))
	}
}

// TestLockedAtSharedCount checks connections whose counts coincide with a
// locked connection's: the count lets the check through, and the full
// lookup still answers for the connection itself.
func TestLockedAtSharedCount(t *testing.T) {
	l := New(Config{Enabled: true})
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	l.LockAt(Failure{Provider: "p", Connection: "conn-0", Model: "m", Status: 429, Cooldown: time.Hour}, t0)
	var twins []string
	for i := 1; len(twins) < 3; i++ {
		if c := "conn-" + strconv.Itoa(i); connBucket(c) == connBucket("conn-0") {
			twins = append(twins, c)
		}
	}
	for _, c := range twins {
		if _, _, locked := l.LockedAt("p", c, "m", t0); locked {
			t.Errorf("LockedAt(%q) locked: it shares only a count with conn-0", c)
		}
	}
	l.LockAt(Failure{Provider: "p", Connection: twins[0], Model: "m", Status: 429, Cooldown: time.Minute}, t0)
	if until, _, locked := l.LockedAt("p", twins[0], "m", t0); !locked || !until.Equal(t0.Add(time.Minute)) {
		t.Errorf("LockedAt(%q) = %v, %v, want locked until %v", twins[0], until, locked, t0.Add(time.Minute))
	}
	l.ClearAt("p", "conn-0", "m", t0)
	if got := l.conns[connBucket("conn-0")].Load(); got != 1 {
		t.Errorf("count of conn-0 and %s = %d after clearing conn-0, want 1", twins[0], got)
	}
	if _, _, locked := l.LockedAt("p", twins[0], "m", t0); !locked {
		t.Errorf("LockedAt(%q) unlocked after conn-0 was cleared", twins[0])
	}
}

// TestLockedAtCountsWithWriters runs checks beside writers that lock and
// clear connections sharing counts (run with -race): a check of a locked
// connection that no writer touches never misses its lock, a check of a
// connection that is only ever cleared never sees one, and a check of a
// connection being locked and cleared sees either its lock or none; at the
// end every answer equals the one taken under the shard locks.
func TestLockedAtCountsWithWriters(t *testing.T) {
	l := New(Config{Enabled: true})
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	conns := make([]string, 0, 48)
	for i := 0; len(conns) < cap(conns); i++ {
		conns = append(conns, "conn-"+strconv.Itoa(i))
	}
	steady := conns[0]
	l.LockAt(Failure{Provider: "p", Connection: steady, Model: "m", Status: 429, Cooldown: time.Hour}, t0)
	churn, never := conns[1:len(conns)/2], conns[len(conns)/2:]
	lockUntil := t0.Add(time.Minute)
	stop := make(chan struct{})
	var readers, writers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, _, locked := l.LockedAt("p", steady, "m", t0); !locked {
					t.Error("the steady lock was missed")
					return
				}
				if _, _, locked := l.LockedAt("p", never[i%len(never)], "m", t0); locked {
					t.Errorf("%s read locked; it never was", never[i%len(never)])
					return
				}
				c := churn[i%len(churn)]
				if until, _, locked := l.LockedAt("p", c, "m", t0); locked && !until.Equal(lockUntil) {
					t.Errorf("%s locked until %v, want %v", c, until, lockUntil)
					return
				}
			}
		})
	}
	for w := range 2 {
		writers.Go(func() {
			for i := range 2000 {
				c := churn[(i*2+w)%len(churn)]
				if i%3 == 2 {
					l.ClearAt("p", c, "m", t0)
				} else {
					l.LockAt(Failure{Provider: "p", Connection: c, Model: "m", Status: 429, Cooldown: time.Minute}, t0)
				}
				l.ClearAt("p", never[i%len(never)], "m", t0)
			}
		})
	}
	writers.Wait()
	close(stop)
	readers.Wait()
	checkConnCounts(t, l, "after the writers")
	for _, c := range conns {
		_, _, got := l.LockedAt("p", c, "m", t0)
		sh := l.shard(strhash(c))
		sh.mu.Lock()
		var want bool
		l.visit(l.conf(), sh, strhash(c), "p", c, "m", func(e *entry) { want = want || e.active(t0) })
		sh.mu.Unlock()
		if got != want {
			t.Errorf("LockedAt(%q) = %v, the locked lookup says %v", c, got, want)
		}
	}
}
