package sqlitestate_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo/sqlitestate"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lockout"
)

// BenchmarkSoakWriteBehind drives every efficiency layer on the file with
// a soak-like load: 10 simulated minutes at 2 000 requests per second over
// 20 providers of 10 connections each and 5 000 sessions, 3 % of the
// requests failing (503, 429 or a model 404) and the rest succeeding, with
// the writer's flush every simulated 250 ms (the default interval). It
// reports the changes the layers queued and the rows written per
// simulated second, their ratio (the write amplification), the rows per
// batch and the wall-clock p50 and p99 of one flush. It runs once
// whatever b.N.
func BenchmarkSoakWriteBehind(b *testing.B) {
	for b.Loop() {
		now := t0
		clock := func() time.Time { return now }
		st, _ := open(b, sqlitestate.Options{Clock: clock})
		cd := cooldown.New(cooldown.Config{Store: st.Cooldowns()})
		pins := affinity.New(affinity.Config{TTL: 10 * time.Minute, Store: st.Pins()})
		set := breaker.NewSet(breaker.Config{OnChange: st.OnBreakerChange})
		gate := breaker.NewGate(breaker.GateConfig{Enabled: true, OnChange: st.OnGateChange})
		lk := lockout.New(lockout.Config{Enabled: true, OnChange: st.OnLockoutChange})
		if err := st.Restore(sqlitestate.Layers{Breakers: set, Lockouts: lk, Gate: gate}, now); err != nil {
			b.Fatal(err)
		}
		keys := make([]affinity.Key, 5000)
		for i := range keys {
			keys[i], _ = affinity.NewKey("header", fmt.Sprint("session-", i))
		}
		rng := rand.New(rand.NewPCG(1, 2))
		const (
			rate     = 2000 // requests per simulated second
			seconds  = 600
			interval = 250 * time.Millisecond
		)
		var lat []time.Duration
		step := time.Second / rate
		next := now.Add(interval)
		for i := range rate * seconds {
			now = now.Add(step)
			p := rng.IntN(20)
			provider := fmt.Sprint("p", p)
			conn := fmt.Sprint("p", p, "-c", rng.IntN(10))
			key := keys[rng.IntN(len(keys))]
			pins.PinAt(affinity.Request{Provider: provider, Key: key}, conn, now)
			switch r := rng.IntN(100); {
			case r == 0:
				cd.FailAt(conn, cooldown.Failure{Status: 503}, now)
				set.ReportAt(provider, breaker.Report{Outcome: breaker.Failure, Conn: conn}, now)
				gate.RecordFailureAt(provider, conn, now)
			case r == 1:
				cd.FailAt(conn, cooldown.Failure{Status: 429}, now)
			case r == 2:
				lk.RecordFailureAt(lockout.Failure{Provider: provider, Connection: conn, Model: fmt.Sprint("m", i%7), Status: 404}, now)
			default:
				cd.SucceedAt(conn, now)
				set.ReportAt(provider, breaker.Report{Outcome: breaker.Success, Conn: conn}, now)
				gate.RecordSuccessAt(provider, conn, now)
			}
			if !now.Before(next) {
				start := time.Now()
				if err := st.Flush(bg); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				next = next.Add(interval)
			}
		}
		s := st.Stats()
		b.ReportMetric(float64(s.Queued)/seconds, "queued/s")
		b.ReportMetric(float64(s.Written)/seconds, "rows/s")
		b.ReportMetric(float64(s.Written)/float64(s.Queued), "rows/change")
		b.ReportMetric(float64(s.Written)/float64(s.Batches), "rows/batch")
		b.ReportMetric(float64(s.Batches), "batches")
		percentiles(b, lat)
	}
}
