package sqlitestate_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync/atomic"
	"testing"
	"time"

	"modernc.org/sqlite"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo/sqlitestate"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lockout"
)

// statements counts every statement prepared, executed or queried through
// the "sqlite-counting" driver.
var statements atomic.Int64

type countingDriver struct{ sqlite.Driver }

func (d *countingDriver) Open(name string) (driver.Conn, error) {
	c, err := d.Driver.Open(name)
	if err != nil {
		return nil, err
	}
	return countingConn{c.(sqliteConn)}, nil
}

type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
}

type countingConn struct{ sqliteConn }

func (c countingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	statements.Add(1)
	s, err := c.sqliteConn.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	return countingStmt{s.(sqliteStmt)}, nil
}

func (c countingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	statements.Add(1)
	return c.sqliteConn.ExecContext(ctx, q, args)
}

func (c countingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	statements.Add(1)
	return c.sqliteConn.QueryContext(ctx, q, args)
}

type sqliteStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

type countingStmt struct{ sqliteStmt }

func (s countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	statements.Add(1)
	return s.sqliteStmt.ExecContext(ctx, args)
}

func (s countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	statements.Add(1)
	return s.sqliteStmt.QueryContext(ctx, args)
}

func init() { sql.Register("sqlite-counting", &countingDriver{}) }

// TestHotPathRunsNoSQL: with every efficiency layer on the state file,
// status checks, pin lookups and hits, breaker and lockout checks run no
// SQL statement at all, and neither do the changes themselves (they only
// queue); the writer's flush does.
func TestHotPathRunsNoSQL(t *testing.T) {
	restore := sqlitestate.SetDriver("sqlite-counting")
	defer restore()
	st, _ := open(t, sqlitestate.Options{})
	cd := cooldown.New(cooldown.Config{Store: st.Cooldowns()})
	pins := affinity.New(affinity.Config{TTL: time.Hour, Store: st.Pins()})
	set := breaker.NewSet(breaker.Config{APIKey: breaker.Profile{OpenAt: 2}, OnChange: st.OnBreakerChange})
	lk := lockout.New(lockout.Config{Enabled: true, OnChange: st.OnLockoutChange})
	key, _ := affinity.NewKey("header", "s")
	cands := []affinity.Candidate{{Connection: "c1"}, {Connection: "c2"}}

	base := statements.Load()
	if base == 0 {
		t.Fatal("the counting driver saw no statement: it is not in use")
	}
	cd.FailAt("c1", cooldown.Failure{Status: 503, Cooldown: time.Minute}, t0)
	cd.FailAt("c2", cooldown.Failure{Status: 403, Permanent: true}, t0)
	pins.SelectAt("p", key, cands, t0)
	set.ReportAt("p", breaker.Report{Outcome: breaker.Failure}, t0)
	set.ReportAt("p", breaker.Report{Outcome: breaker.Failure}, t0)
	lk.RecordFailureAt(lockout.Failure{Provider: "p", Connection: "c1", Model: "m", Status: 404}, t0)
	for i := range 1000 {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		if s := cd.StatusAt("c1", now); s.State != cooldown.Cooling {
			t.Fatalf("c1 status %v", s)
		}
		_ = cd.CheckAt("c2", now)
		if _, ok := pins.LookupAt("p", key, now); !ok {
			t.Fatal("pin lost")
		}
		pins.SelectAt("p", key, cands, now)
		if s, _ := set.StateAt("p", now); s != breaker.Open {
			t.Fatalf("breaker %v", s)
		}
		if _, _, locked := lk.LockedAt("p", "c1", "m", now); !locked {
			t.Fatal("lock lost")
		}
	}
	if n := statements.Load() - base; n != 0 {
		t.Fatalf("the hot path ran %d SQL statements, want 0", n)
	}
	if st.Stats().Pending == 0 {
		t.Fatal("the changes were not queued")
	}
	if err := st.Flush(bg); err != nil {
		t.Fatal(err)
	}
	if statements.Load() == base {
		t.Fatal("the flush ran no statement: the count proves nothing")
	}
}
