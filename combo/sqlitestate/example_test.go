package sqlitestate_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo/sqlitestate"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lockout"
)

// A gateway attaches the state file to its layers, runs the writer, and
// finds its state again after a restart.
func Example() {
	dir, _ := os.MkdirTemp("", "sqlitestate")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "state.db")
	now := time.Date(2026, 8, 12, 19, 30, 0, 0, time.UTC)
	owner := lease.HashOwner("vlo_" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")

	// First process.
	st, err := sqlitestate.Open(path, sqlitestate.Options{Clock: func() time.Time { return now }})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- st.Run(ctx) }()

	leases := lease.New(lease.Config{Store: st.Leases()})
	cd := cooldown.New(cooldown.Config{Store: st.Cooldowns()})
	pins := affinity.New(affinity.Config{TTL: time.Hour, Store: st.Pins()})
	set := breaker.NewSet(breaker.Config{OnChange: st.OnBreakerChange})
	lk := lockout.New(lockout.Config{Enabled: true, OnChange: st.OnLockoutChange})
	if err := st.Restore(sqlitestate.Layers{Breakers: set, Lockouts: lk}, now); err != nil {
		fmt.Println(err)
		return
	}

	l, _ := leases.AcquireAt(ctx, lease.Holder{Owner: owner, APIKeyID: "k1"}, "openai", []string{"conn-1"}, now)
	cd.FailAt("conn-2", cooldown.Failure{Status: 429, RetryAfter: 5 * time.Minute}, now)
	session, _ := affinity.NewKey("header", "session-1")
	pinned, _ := pins.SelectAt("openai", session, []affinity.Candidate{{Connection: "conn-1"}}, now)
	fmt.Println("lease generation", l.Generation, "on", l.Connection, "; session pinned to", pinned)

	cancel() // or st.Close(): Run writes what is pending before it returns
	<-done
	st.Close()

	// After a restart, one minute later.
	now = now.Add(time.Minute)
	st, err = sqlitestate.Open(path, sqlitestate.Options{Clock: func() time.Time { return now }})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	leases = lease.New(lease.Config{Store: st.Leases()})
	cd = cooldown.New(cooldown.Config{Store: st.Cooldowns()})
	pins = affinity.New(affinity.Config{TTL: time.Hour, Store: st.Pins()})
	err = leases.FenceAt(context.Background(), lease.Holder{Owner: owner, APIKeyID: "k1", Generation: 1}, "conn-1", now)
	fmt.Println("fence after restart:", err)
	s := cd.StatusAt("conn-2", now)
	fmt.Println("conn-2 after restart:", s.State, "for", s.Wait(now))
	pin, _ := pins.LookupAt("openai", session, now)
	fmt.Println("session pinned to", pin.Connection)
	// Output:
	// lease generation 1 on conn-1 ; session pinned to conn-1
	// fence after restart: <nil>
	// conn-2 after restart: cooling for 4m0s
	// session pinned to conn-1
}
