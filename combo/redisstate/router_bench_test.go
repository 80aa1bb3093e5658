package redisstate_test

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
	"github.com/routeguard/routeguard/combo/redisstate"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lockout"
)

// BenchmarkRouterDo is one successful request through the router over
// eight targets on four providers (a locked model and a cooling connection
// among them, and a pinned session), with the layers in memory only and
// with the replicator's hooks attached as the gateway attaches them (pins
// through OnPinChange on the memory store). Nothing on the request path
// reaches Redis (TestHotPathNoRemoteCalls); compare the two with
// benchstat -col /layers, or count instructions with callgrind.
func BenchmarkRouterDo(b *testing.B) {
	_, rdb := newMini(b)
	st := newState(b, rdb, redisstate.Config{})
	rep := st.Replicator(redisstate.ReplicatorConfig{})
	now := time.Unix(1_800_000_000, 0)
	for _, name := range []string{"memory", "replicated"} {
		b.Run("layers="+name, func(b *testing.B) {
			var (
				onBreaker func(breaker.Event)
				onCool    func(cooldown.Event)
				onLock    func(lockout.Event)
				onPin     func(affinity.Event)
			)
			if name == "replicated" {
				onBreaker, onCool, onLock, onPin = rep.OnBreakerChange, rep.OnCooldownChange, rep.OnLockoutChange, rep.OnPinChange
			}
			cfg := combo.Config{
				Breakers:  breaker.NewSet(breaker.Config{OnChange: onBreaker}),
				Cooldowns: cooldown.New(cooldown.Config{Store: cooldown.NewMemoryStore(), OnChange: onCool}),
				Lockouts:  lockout.New(lockout.Config{Enabled: true, OnChange: onLock}),
				Pins:      affinity.New(affinity.Config{TTL: time.Hour, Store: affinity.NewMemoryStore(0), OnChange: onPin}),
				Now:       func() time.Time { return now },
			}
			c := &combo.Combo{Name: "bench", Strategy: "priority"}
			for i := range 8 {
				c.Targets = append(c.Targets, combo.Target{
					Provider: fmt.Sprintf("p%d", i%4), Connection: fmt.Sprintf("c%d", i), Model: "m"})
			}
			cfg.Lockouts.LockAt(lockout.Failure{Provider: "p0", Connection: "c0", Model: "m", Status: 429, Cooldown: time.Hour}, now)
			cfg.Cooldowns.FailAt("c1", cooldown.Failure{Status: 429, Cooldown: time.Hour}, now)
			r := combo.New(cfg)
			send := func(context.Context, *combo.Target) (*http.Response, error) {
				return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok"))}, nil
			}
			do := func() {
				res, err := r.Do(context.Background(), combo.Request{Combo: c, Session: "conversation-1"}, send)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, res.Response.Body)
				res.Response.Body.Close()
			}
			do() // pins the session
			b.ReportAllocs()
			for b.Loop() {
				do()
			}
		})
	}
}
