package sqlitestate_test

import (
	"bytes"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/routeguard/routeguard/combo/sqlitestate"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lease/leasetest"
)

func reopen(t *testing.T, path string, o sqlitestate.Options) *sqlitestate.State {
	t.Helper()
	st, err := sqlitestate.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// cycle gives owner generations 1..n on conn, ending all but the last.
func cycle(t *testing.T, s lease.Store, owner lease.OwnerHash, conn string, n int, at time.Time) time.Time {
	t.Helper()
	for g := 1; g <= n; g++ {
		l, _, err := s.Acquire(bg, lease.Holder{Owner: owner, APIKeyID: "k1"}, "p", conn, time.Minute, at)
		if err != nil || l.Generation != uint64(g) {
			t.Fatalf("acquire %d = %+v, %v", g, l, err)
		}
		at = at.Add(time.Second)
		if g < n {
			if _, _, err := s.Release(bg, lease.Holder{Owner: owner, APIKeyID: "k1", Generation: uint64(g)}, lease.ReasonOwnerExit, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	return at
}

// TestGenerationHeldAcrossReopen: generation 3 held before Close is still
// valid after reopening, 1 and 2 are refused, another owner gets the
// capacity refusal, and the next generation is 4.
func TestGenerationHeldAcrossReopen(t *testing.T) {
	st, path := open(t, sqlitestate.Options{})
	at := cycle(t, st.Leases(), ownerA, "c1", 3, t0)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = reopen(t, path, sqlitestate.Options{})
	s := st.Leases()
	h := lease.Holder{Owner: ownerA, APIKeyID: "k1", Generation: 3}
	if err := s.Fence(bg, h, "c1", at); err != nil {
		t.Fatalf("generation 3 after reopen: %v, want valid", err)
	}
	for g := uint64(1); g <= 2; g++ {
		old := h
		old.Generation = g
		if err := s.Fence(bg, old, "c1", at); !errors.Is(err, lease.ErrFenceStale) {
			t.Fatalf("generation %d after reopen: Fence = %v, want ErrFenceStale", g, err)
		}
		if _, err := s.Renew(bg, old, time.Minute, at); !errors.Is(err, lease.ErrFenceStale) {
			t.Fatalf("generation %d after reopen: Renew = %v, want ErrFenceStale", g, err)
		}
	}
	_, _, err := s.Acquire(bg, lease.Holder{Owner: ownerB, APIKeyID: "k1"}, "p", "c1", time.Minute, at)
	var le *lease.Error
	if !errors.Is(err, lease.ErrCapacityUnavailable) || !errors.As(err, &le) || !le.Until.Equal(t0.Add(2*time.Second+time.Minute)) {
		t.Fatalf("B on c1 after reopen: %v, want a capacity refusal until A's expiry", err)
	}
	// Through the Manager: the busy refusal with Retry-After.
	m := lease.New(lease.Config{Store: s})
	_, err = m.AcquireAt(bg, lease.Holder{Owner: ownerB, APIKeyID: "k1"}, "p", []string{"c1"}, at)
	if !errors.As(err, &le) || le.Code != lease.CodeCapacityUnavailable || le.RetryAfter <= 0 {
		t.Fatalf("Manager.AcquireAt for B = %v, want LEASE_CAPACITY_UNAVAILABLE with Retry-After", err)
	}
	if _, _, err := s.Release(bg, h, lease.ReasonOwnerExit, at); err != nil {
		t.Fatal(err)
	}
	l, _, err := s.Acquire(bg, lease.Holder{Owner: ownerA, APIKeyID: "k1"}, "p", "c1", time.Minute, at)
	if err != nil || l.Generation != 4 {
		t.Fatalf("next acquire after reopen = %+v, %v; want generation 4", l, err)
	}
}

// TestGenerationFloorSurvivesRetentionAndReopen: once the sweep forgets an
// owner, its generations still never come back, across a reopen.
func TestGenerationFloorSurvivesRetentionAndReopen(t *testing.T) {
	st, path := open(t, sqlitestate.Options{Retention: time.Minute})
	s := st.Leases()
	at := cycle(t, s, ownerA, "c1", 3, t0)
	if _, _, err := s.Release(bg, lease.Holder{Owner: ownerA, APIKeyID: "k1", Generation: 3}, lease.ReasonOwnerExit, at); err != nil {
		t.Fatal(err)
	}
	// Advance the store's clock past retention with another owner's
	// operation, then sweep.
	later := at.Add(2 * time.Minute)
	if _, err := s.Reconcile(bg, later); err != nil {
		t.Fatal(err)
	}
	n, err := st.Sweep(bg)
	if err != nil || n < 4 { // 3 ended leases + A's generation counter
		t.Fatalf("Sweep = %d, %v; want at least 4 rows", n, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = reopen(t, path, sqlitestate.Options{Retention: time.Minute})
	s = st.Leases()
	l, _, err := s.Acquire(bg, lease.Holder{Owner: ownerA, APIKeyID: "k1"}, "p", "c1", time.Minute, later)
	if err != nil || l.Generation != 4 {
		t.Fatalf("forgotten owner's next acquire = %+v, %v; want generation 4 (above the floor)", l, err)
	}
	c := lease.HashOwner(leasetest.Owner('C'))
	l, _, err = s.Acquire(bg, lease.Holder{Owner: c, APIKeyID: "k1"}, "p", "c2", time.Minute, later)
	if err != nil || l.Generation != 4 {
		t.Fatalf("new owner after a forget = %+v, %v; want generation 4 (floor 3 + 1)", l, err)
	}
}

// TestSchemaEnforcesOneActivePerConnectionAndOwner writes rows directly:
// the partial unique indexes refuse a second ACTIVE row for a connection
// or an owner, and the CHECK refuses a raw owner token.
func TestSchemaEnforcesOneActivePerConnectionAndOwner(t *testing.T) {
	st, path := open(t, sqlitestate.Options{})
	if _, _, err := st.Leases().Acquire(bg, lease.Holder{Owner: ownerA, APIKeyID: "k1"}, "p", "c1", time.Minute, t0); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ins := `INSERT INTO leases (owner_hash, api_key_id, provider, connection_id, generation, state, acquired_at, renewed_at, expires_at) VALUES (?, 'k1', 'p', ?, 1, ?, 1, 1, 1)`
	for _, c := range []struct {
		name, owner, conn, state string
		ok                       bool
	}{
		{"second active on c1", ownerB.String(), "c1", "ACTIVE", false},
		{"second active for A", ownerA.String(), "c2", "ACTIVE", false},
		{"raw owner token", leasetest.Owner('B'), "c3", "ACTIVE", false},
		{"unknown state", ownerB.String(), "c3", "HELD", false},
		{"ended row on c1", ownerB.String(), "c1", "RELEASED", true},
		{"B active on c2", ownerB.String(), "c2", "ACTIVE", true},
	} {
		_, err := db.Exec(ins, c.owner, c.conn, c.state)
		if (err == nil) != c.ok {
			t.Errorf("%s: insert error %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

// TestFileHoldsOwnerDigestOnly: the raw owner token is nowhere in the file
// or its write-ahead log.
func TestFileHoldsOwnerDigestOnly(t *testing.T) {
	st, path := open(t, sqlitestate.Options{})
	if _, _, err := st.Leases().Acquire(bg, lease.Holder{Owner: ownerA, APIKeyID: "k1"}, "p", "c1", time.Minute, t0); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(leasetest.Owner('A'))) {
			t.Fatalf("%s contains the raw owner token", p)
		}
		if p == path+"-wal" && !bytes.Contains(b, []byte(ownerA.String())) {
			t.Fatalf("%s does not contain the owner digest: the test looks in the wrong place", p)
		}
	}
}

// TestFileCreatedWithMode0600: the file and its WAL are 0600.
func TestFileCreatedWithMode0600(t *testing.T) {
	st, path := open(t, sqlitestate.Options{})
	if _, _, err := st.Leases().Acquire(bg, lease.Holder{Owner: ownerA, APIKeyID: "k1"}, "p", "c1", time.Minute, t0); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s has mode %v, want 0600", p, fi.Mode().Perm())
		}
	}
}

// TestGarbageFileIsStartupError: a file that is not a database makes Open
// fail with an error naming the file, and the file is left as it was;
// Options.Reset replaces it with an empty state.
func TestGarbageFileIsStartupError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	garbage := bytes.Repeat([]byte("not a database, just garbage. "), 400)
	if err := os.WriteFile(path, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := sqlitestate.Open(path, sqlitestate.Options{})
	if err == nil {
		st.Close()
		t.Fatal("Open of a garbage file succeeded")
	}
	if !errors.Is(err, sqlitestate.ErrUnreadable) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open of a garbage file = %v; want ErrUnreadable naming %s", err, path)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, garbage) {
		t.Fatalf("the garbage file was modified")
	}
	st = reopen(t, path, sqlitestate.Options{Reset: true})
	l, _, err := st.Leases().Acquire(bg, lease.Holder{Owner: ownerA, APIKeyID: "k1"}, "p", "c1", time.Minute, t0)
	if err != nil || l.Generation != 1 {
		t.Fatalf("acquire after Reset = %+v, %v", l, err)
	}
}

// TestResetForgetsEverything: Reset on a good file starts empty.
func TestResetForgetsEverything(t *testing.T) {
	st, path := open(t, sqlitestate.Options{})
	cycle(t, st.Leases(), ownerA, "c1", 2, t0)
	st.Close()
	st = reopen(t, path, sqlitestate.Options{Reset: true})
	if _, ok, _ := st.Leases().Owned(bg, ownerA, t0); ok {
		t.Fatal("a lease survived Reset")
	}
}

// TestForeignOrNewerFileRefused: a database of another program, and one
// of a newer schema, are refused and left alone.
func TestForeignOrNewerFileRefused(t *testing.T) {
	for _, c := range []struct {
		name, setup string
		want        error
	}{
		{"foreign", `CREATE TABLE users (id INTEGER PRIMARY KEY)`, sqlitestate.ErrUnreadable},
		{"newer", `PRAGMA user_version = 99`, sqlitestate.ErrNewerSchema},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(c.setup); err != nil {
				t.Fatal(err)
			}
			db.Close()
			st, err := sqlitestate.Open(path, sqlitestate.Options{})
			if err == nil {
				st.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Open = %v; want %v naming the file", err, c.want)
			}
		})
	}
}

// TestSchemaVersionAndWAL: the file records the schema version, is in WAL
// mode, and reopening it applies nothing twice.
func TestSchemaVersionAndWAL(t *testing.T) {
	st, path := open(t, sqlitestate.Options{})
	st.Close()
	reopen(t, path, sqlitestate.Options{}).Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v int
	var mode string
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != sqlitestate.SchemaVersion {
		t.Fatalf("user_version = %d, %v; want %d", v, err, sqlitestate.SchemaVersion)
	}
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
}

// TestBusyTimeoutBoundsTheWait: while another connection holds the write
// lock, a lease write waits about BusyTimeout and then fails; once the
// lock is gone it succeeds.
func TestBusyTimeoutBoundsTheWait(t *testing.T) {
	st, path := open(t, sqlitestate.Options{BusyTimeout: 100 * time.Millisecond})
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(bg, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, err = st.Leases().Acquire(bg, lease.Holder{Owner: ownerA, APIKeyID: "k1"}, "p", "c1", time.Minute, t0)
	waited := time.Since(start)
	if err == nil || errors.Is(err, lease.ErrCapacityUnavailable) {
		t.Fatalf("acquire under a foreign write lock = %v, want a store failure", err)
	}
	if waited < 90*time.Millisecond || waited > 5*time.Second {
		t.Fatalf("acquire failed after %v, want about the 100ms busy timeout", waited)
	}
	if _, err := conn.ExecContext(bg, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Leases().Acquire(bg, lease.Holder{Owner: ownerA, APIKeyID: "k1"}, "p", "c1", time.Minute, t0); err != nil {
		t.Fatalf("acquire after the lock was released: %v", err)
	}
}

// TestClosedStateRefuses: after Close, lease operations fail with
// ErrClosed and Close is idempotent.
func TestClosedStateRefuses(t *testing.T) {
	st, _ := open(t, sqlitestate.Options{})
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if _, _, err := st.Leases().Acquire(bg, lease.Holder{Owner: ownerA, APIKeyID: "k1"}, "p", "c1", time.Minute, t0); !errors.Is(err, sqlitestate.ErrClosed) {
		t.Fatalf("Acquire after Close = %v, want ErrClosed", err)
	}
	if err := st.Leases().Fence(bg, holdA, "c1", t0); !errors.Is(err, sqlitestate.ErrClosed) {
		t.Fatalf("Fence after Close = %v, want ErrClosed", err)
	}
}
