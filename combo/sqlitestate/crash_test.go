package sqlitestate_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/routeguard/routeguard/combo/sqlitestate"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lease/leasetest"
)

const (
	crashEnv     = "SQLITESTATE_CRASH_OP"
	crashPathEnv = "SQLITESTATE_CRASH_PATH"
	crashCode    = 37 // the child's exit status when it died before COMMIT
)

var (
	bg     = context.Background()
	t0     = leasetest.T0
	ownerA = lease.HashOwner(leasetest.Owner('A'))
	ownerB = lease.HashOwner(leasetest.Owner('B'))
	holdA  = lease.Holder{Owner: ownerA, APIKeyID: "k1", Generation: 1}
)

// crashOps are the lease operations the crash test interrupts. Each runs
// after owner A holds c1 with generation 1 (committed).
var crashOps = map[string]func(s lease.Store) error{
	"acquire": func(s lease.Store) error {
		_, _, err := s.Acquire(bg, lease.Holder{Owner: ownerB, APIKeyID: "k1"}, "p", "c2", time.Minute, t0.Add(time.Second))
		return err
	},
	"transition": func(s lease.Store) error {
		_, _, err := s.Transition(bg, holdA, "p", "c2", lease.Reason("CONNECTION_INELIGIBLE"), time.Minute, t0.Add(time.Second))
		return err
	},
	"renew": func(s lease.Store) error {
		_, err := s.Renew(bg, holdA, 10*time.Minute, t0.Add(time.Second))
		return err
	},
	"release": func(s lease.Store) error {
		_, _, err := s.Release(bg, holdA, lease.ReasonOwnerExit, t0.Add(time.Second))
		return err
	},
	"invalidate": func(s lease.Store) error {
		_, err := s.Invalidate(bg, holdA, "HEALTH_OR_COOLDOWN", t0.Add(time.Second))
		return err
	},
	"reconcile": func(s lease.Store) error {
		_, err := s.Reconcile(bg, t0.Add(2*time.Minute))
		return err
	},
}

// crashChild runs in a child process: it grants A's lease, then starts the
// operation op and dies (os.Exit, no deferred code, no COMMIT) after the
// operation's writes and before its COMMIT.
func crashChild(op, path string) {
	st, err := sqlitestate.Open(path, sqlitestate.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s := st.Leases()
	if _, _, err := s.Acquire(bg, lease.Holder{Owner: ownerA, APIKeyID: "k1"}, "p", "c1", time.Minute, t0); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sqlitestate.SetBeforeCommit(st, func(string) error { os.Exit(crashCode); return nil })
	err = crashOps[op](s)
	fmt.Fprintln(os.Stderr, "operation returned without dying:", err)
	os.Exit(1)
}

// TestCrashBeforeCommitLosesNoLeaseAndNeverDoubleGrants kills a process
// between an operation's writes and its COMMIT, for every write operation,
// and checks after reopening that the committed lease is intact, the
// interrupted operation left no trace, and no connection or owner has two
// active leases.
func TestCrashBeforeCommitLosesNoLeaseAndNeverDoubleGrants(t *testing.T) {
	for op := range crashOps {
		t.Run(op, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), crashEnv+"="+op, crashPathEnv+"="+path)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != crashCode {
				t.Fatalf("child: %v, want exit status %d; output:\n%s", err, crashCode, out)
			}
			st, err := sqlitestate.Open(path, sqlitestate.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			s := st.Leases()
			now := t0.Add(2 * time.Second)
			if err := s.Fence(bg, holdA, "c1", now); err != nil {
				t.Fatalf("A's committed lease after the crash: Fence = %v, want valid", err)
			}
			l, ok, err := s.Owned(bg, ownerA, now)
			if err != nil || !ok || l.Connection != "c1" || l.Generation != 1 || !l.ExpiresAt.Equal(t0.Add(time.Minute)) {
				t.Fatalf("A's lease = %+v, %v, %v; want generation 1 on c1 until T0+1m (unchanged)", l, ok, err)
			}
			if _, ok, _ := s.Owned(bg, ownerB, now); ok {
				t.Fatalf("B holds a lease from an uncommitted acquire")
			}
			// c1 is still exclusive; c2 is free.
			_, _, err = s.Acquire(bg, lease.Holder{Owner: ownerB, APIKeyID: "k1"}, "p", "c1", time.Minute, now)
			if !errors.Is(err, lease.ErrCapacityUnavailable) {
				t.Fatalf("B acquiring A's connection after the crash: %v, want capacity refusal", err)
			}
			lb, _, err := s.Acquire(bg, lease.Holder{Owner: ownerB, APIKeyID: "k1"}, "p", "c2", time.Minute, now)
			if err != nil || lb.Generation != 1 {
				t.Fatalf("B acquiring c2 = %+v, %v; want generation 1", lb, err)
			}
			checkUnique(t, path)
		})
	}
}

// checkUnique reads the file directly: at most one ACTIVE row per
// connection and per owner.
func checkUnique(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, col := range []string{"connection_id", "owner_hash"} {
		var n int
		q := `SELECT count(*) FROM (SELECT ` + col + ` FROM leases WHERE state = 'ACTIVE' GROUP BY ` + col + ` HAVING count(*) > 1)`
		if err := db.QueryRow(q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("%d values of %s with more than one ACTIVE lease", n, col)
		}
	}
}

// TestAbortBeforeCommitRollsBack aborts each operation before its COMMIT
// in-process: the operation fails and the store is exactly as before.
func TestAbortBeforeCommitRollsBack(t *testing.T) {
	for op, run := range crashOps {
		t.Run(op, func(t *testing.T) {
			st, path := open(t, sqlitestate.Options{})
			s := st.Leases()
			if _, _, err := s.Acquire(bg, lease.Holder{Owner: ownerA, APIKeyID: "k1"}, "p", "c1", time.Minute, t0); err != nil {
				t.Fatal(err)
			}
			boom := errors.New("boom")
			sqlitestate.SetBeforeCommit(st, func(string) error { return boom })
			if err := run(s); !errors.Is(err, boom) {
				t.Fatalf("%s with an aborted commit = %v, want the abort", op, err)
			}
			sqlitestate.SetBeforeCommit(st, nil)
			l, ok, err := s.Owned(bg, ownerA, t0.Add(2*time.Second))
			if err != nil || !ok || l.Connection != "c1" || !l.ExpiresAt.Equal(t0.Add(time.Minute)) {
				t.Fatalf("A's lease after the abort = %+v, %v, %v; want it unchanged", l, ok, err)
			}
			if _, ok, _ := s.Owned(bg, ownerB, t0.Add(2*time.Second)); ok {
				t.Fatalf("B holds a lease from an aborted acquire")
			}
			checkUnique(t, path)
		})
	}
}
