package sqlitestate_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/sqlitestate"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lockout"
)

// routerOn returns a router with every state-bearing layer on (breakers,
// gate, cooldowns, lockouts, pins, leases), on st when st is not nil and
// in memory otherwise, and a combo of eight targets over four providers,
// two of them excluded (a locked model, a cooling connection) and one held
// by a lease.
func routerOn(t testing.TB, st *sqlitestate.State, now time.Time) (*combo.Router, *combo.Combo) {
	t.Helper()
	var (
		onBreaker func(breaker.Event)
		onGate    func(breaker.Event)
		onLock    func(lockout.Event)
		cdStore   cooldown.Store
		pinStore  affinity.Store
		lsStore   lease.Store
	)
	if st != nil {
		onBreaker, onGate, onLock = st.OnBreakerChange, st.OnGateChange, st.OnLockoutChange
		cdStore, pinStore, lsStore = st.Cooldowns(), st.Pins(), st.Leases()
	}
	cfg := combo.Config{
		Breakers:  breaker.NewSet(breaker.Config{OnChange: onBreaker}),
		Gate:      breaker.NewGate(breaker.GateConfig{Enabled: true, OnChange: onGate}),
		Cooldowns: cooldown.New(cooldown.Config{Store: cdStore}),
		Lockouts:  lockout.New(lockout.Config{Enabled: true, OnChange: onLock}),
		Pins:      affinity.New(affinity.Config{TTL: time.Hour, Store: pinStore}),
		Leases:    lease.New(lease.Config{Store: lsStore}),
		Now:       func() time.Time { return now },
	}
	if st != nil {
		if err := st.Restore(sqlitestate.Layers{Breakers: cfg.Breakers, Lockouts: cfg.Lockouts, Gate: cfg.Gate}, now); err != nil {
			t.Fatal(err)
		}
	}
	c := &combo.Combo{Name: "bench", Strategy: "priority"}
	for i := range 8 {
		c.Targets = append(c.Targets, combo.Target{
			Provider: fmt.Sprintf("p%d", i%4), Connection: fmt.Sprintf("c%d", i), Model: "m",
		})
	}
	cfg.Lockouts.LockAt(lockout.Failure{Provider: "p1", Connection: "c1", Model: "m", Status: 429, Cooldown: time.Hour}, now)
	cfg.Cooldowns.FailAt("c2", cooldown.Failure{Status: 429, Cooldown: time.Hour}, now)
	cfg.Gate.RecordFailureAt("p3", "c3", now)
	if _, err := cfg.Leases.AcquireAt(context.Background(), lease.Holder{Owner: lease.HashOwner("holder"), APIKeyID: "k"}, "p0", []string{"c4"}, now); err != nil {
		t.Fatal(err)
	}
	return combo.New(cfg), c
}

type staticBody struct{ *strings.Reader }

func (staticBody) Close() error { return nil }

func okSend(context.Context, *combo.Target) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: staticBody{strings.NewReader("ok")}}, nil
}

func doOnce(t testing.TB, r *combo.Router, c *combo.Combo, session string) *combo.Result {
	res, err := r.Do(context.Background(), combo.Request{Combo: c, Session: session}, okSend)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Response.Body)
	res.Response.Body.Close()
	return res
}

// TestRouterDoRunsNoSQL: with every layer's state on the file, a request
// through the router (screening every target against breakers, gate,
// lockouts, cooldowns and leases; ordering; the session pin's lookup and
// hit; the success reports) runs no SQL statement; the writer's flush
// does.
func TestRouterDoRunsNoSQL(t *testing.T) {
	restore := sqlitestate.SetDriver("sqlite-counting")
	defer restore()
	st, _ := open(t, sqlitestate.Options{Clock: func() time.Time { return t0 }})
	r, c := routerOn(t, st, t0)
	doOnce(t, r, c, "session-1") // pins the session
	base := statements.Load()
	for i := range 200 {
		res := doOnce(t, r, c, fmt.Sprint("session-", i%2))
		if len(res.Excluded) != 4 {
			t.Fatalf("excluded %v, want the locked, cooling, gated and leased connections", res.Excluded)
		}
	}
	if n := statements.Load() - base; n != 0 {
		t.Fatalf("200 requests ran %d SQL statements, want 0", n)
	}
	if err := st.Flush(bg); err != nil {
		t.Fatal(err)
	}
	if statements.Load() == base {
		t.Fatal("the flush ran no statement: the count proves nothing")
	}
}

// BenchmarkRouterDo is one request through the router with every layer on,
// its state in memory only and on a state file (with the writer's read of
// the layers and its flushes running between the requests, as Run does).
// Compare the two with benchstat -col /state.
func BenchmarkRouterDo(b *testing.B) {
	for _, name := range []string{"memory", "sqlite"} {
		b.Run("state="+name, func(b *testing.B) {
			var st *sqlitestate.State
			if name == "sqlite" {
				st, _ = open(b, sqlitestate.Options{Clock: func() time.Time { return t0 }})
			}
			r, c := routerOn(b, st, t0)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				doOnce(b, r, c, "")
				if i++; st != nil && i%4096 == 0 {
					b.StopTimer()
					if err := st.Flush(bg); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			}
		})
	}
}
