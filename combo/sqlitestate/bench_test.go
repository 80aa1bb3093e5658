package sqlitestate_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/combo/sqlitestate"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lease"
)

// percentiles reports the p50 and p99 of d as metrics.
func percentiles(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkLease measures each lease operation on the file, one
// transaction each, with the default synchronous=FULL and with
// RelaxedSync, and reports p50 and p99 from the loop.
func BenchmarkLease(b *testing.B) {
	for _, relaxed := range []bool{false, true} {
		name := "full"
		if relaxed {
			name = "relaxed"
		}
		b.Run(name, func(b *testing.B) {
			for _, op := range []string{"acquire", "renew", "release", "fence"} {
				b.Run(op, func(b *testing.B) {
					st, _ := open(b, sqlitestate.Options{RelaxedSync: relaxed})
					s := st.Leases()
					now := t0
					owner := func(i int) lease.OwnerHash { return lease.HashOwner(fmt.Sprint("owner-", i)) }
					acquire := func(i int) lease.Lease {
						l, _, err := s.Acquire(bg, lease.Holder{Owner: owner(i), APIKeyID: "k"}, "p", fmt.Sprint("c", i), time.Minute, now)
						if err != nil {
							b.Fatal(err)
						}
						return l
					}
					var held []lease.Lease
					if op != "acquire" {
						for i := range b.N {
							held = append(held, acquire(i))
						}
					}
					d := make([]time.Duration, 0, b.N)
					b.ResetTimer()
					for i := range b.N {
						start := time.Now()
						switch op {
						case "acquire":
							acquire(i)
						case "renew":
							h := lease.Holder{Owner: held[i].Owner, APIKeyID: "k", Generation: held[i].Generation}
							if _, err := s.Renew(bg, h, time.Minute, now); err != nil {
								b.Fatal(err)
							}
						case "release":
							h := lease.Holder{Owner: held[i].Owner, APIKeyID: "k", Generation: held[i].Generation}
							if _, _, err := s.Release(bg, h, lease.ReasonOwnerExit, now); err != nil {
								b.Fatal(err)
							}
						case "fence":
							h := lease.Holder{Owner: held[i].Owner, APIKeyID: "k", Generation: held[i].Generation}
							if err := s.Fence(bg, h, held[i].Connection, now); err != nil {
								b.Fatal(err)
							}
						}
						d = append(d, time.Since(start))
					}
					b.StopTimer()
					percentiles(b, d)
				})
			}
		})
	}
}

// BenchmarkOutboxFlush measures the writer: rows per second and the
// latency of one batch of MaxBatch (1000) cooldown rows.
func BenchmarkOutboxFlush(b *testing.B) {
	st, _ := open(b, sqlitestate.Options{MaxPending: 10_000_000})
	cd := cooldown.New(cooldown.Config{Store: st.Cooldowns(), MaxEntries: 1 << 22})
	const batch = 1000
	d := make([]time.Duration, 0, b.N)
	rows := 0
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		at := t0.Add(time.Duration(i) * time.Second)
		for c := range batch {
			cd.FailAt(fmt.Sprint("conn-", c), cooldown.Failure{Status: 503, Cooldown: time.Minute}, at)
		}
		b.StartTimer()
		start := time.Now()
		if err := st.Flush(bg); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(start))
		rows += batch
	}
	b.StopTimer()
	var total time.Duration
	for _, x := range d {
		total += x
	}
	b.ReportMetric(float64(rows)/total.Seconds(), "rows/s")
	percentiles(b, d)
}

// BenchmarkEnqueue measures a cooldown transition through the store: the
// change plus its queueing, no SQL.
func BenchmarkEnqueue(b *testing.B) {
	st, _ := open(b, sqlitestate.Options{})
	cd := cooldown.New(cooldown.Config{Store: st.Cooldowns()})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		at := t0.Add(time.Duration(i) * 10 * time.Second)
		cd.FailAt("c1", cooldown.Failure{Status: 503, Cooldown: time.Second}, at)
		cd.SucceedAt("c1", at.Add(2*time.Second))
	}
}

// BenchmarkStatusAt measures the hot-path read through the store (memory
// only).
func BenchmarkStatusAt(b *testing.B) {
	st, _ := open(b, sqlitestate.Options{})
	cd := cooldown.New(cooldown.Config{Store: st.Cooldowns()})
	cd.FailAt("c1", cooldown.Failure{Status: 503, Cooldown: time.Hour}, t0)
	b.ReportAllocs()
	for b.Loop() {
		cd.StatusAt("c1", t0)
	}
}

// BenchmarkRestore100k measures Open of a file holding 100 000 live rows
// (50 000 cooldowns, 50 000 pins), which loads them into memory.
func BenchmarkRestore100k(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "state.db")
	clock := func() time.Time { return t0 }
	st, err := sqlitestate.Open(path, sqlitestate.Options{Clock: clock, MaxPending: 200_000})
	if err != nil {
		b.Fatal(err)
	}
	cd := cooldown.New(cooldown.Config{Store: st.Cooldowns()})
	pins := affinity.New(affinity.Config{TTL: time.Hour, Store: st.Pins(), MaxConnections: 1 << 20})
	for i := range 50_000 {
		cd.FailAt(fmt.Sprint("conn-", i), cooldown.Failure{Status: 403, Permanent: true}, t0)
		key, _ := affinity.NewKey("header", fmt.Sprint("session-", i))
		pins.PinAt(affinity.Request{Provider: "p", Key: key}, fmt.Sprint("conn-", i%100), t0)
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	n := 0
	for b.Loop() {
		start := time.Now()
		st, err := sqlitestate.Open(path, sqlitestate.Options{Clock: clock})
		if err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		n++
		if _, ok := st.Cooldowns().Load("conn-49999"); !ok {
			b.Fatal("not restored")
		}
		st.Close()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(n), "open-ms")
}

// BenchmarkFileSize1M makes 1 000 000 efficiency transitions (cooldowns
// starting and ending on 10 000 connections, pins made and moved for 10 000
// sessions) and 100 000 lease acquire/release cycles over simulated days,
// with the writer's flush every 10 000 changes and the retention sweep
// every simulated hour, and reports the file size at the end. It runs once
// whatever b.N.
func BenchmarkFileSize1M(b *testing.B) {
	for b.Loop() {
		now := t0
		clock := func() time.Time { return now }
		st, path := open(b, sqlitestate.Options{Clock: clock, Retention: time.Hour, RelaxedSync: true})
		cd := cooldown.New(cooldown.Config{Store: st.Cooldowns()})
		pins := affinity.New(affinity.Config{TTL: 10 * time.Minute, Store: st.Pins()})
		s := st.Leases()
		keys := make([]affinity.Key, 10_000)
		for i := range keys {
			keys[i], _ = affinity.NewKey("header", fmt.Sprint("session-", i))
		}
		lastSweep := now
		for i := range 1_000_000 {
			now = now.Add(10 * time.Millisecond)
			c := fmt.Sprint("conn-", i%10_000)
			switch i % 4 {
			case 0:
				cd.FailAt(c, cooldown.Failure{Status: 503, Cooldown: 30 * time.Second}, now)
			case 1:
				cd.SucceedAt(c, now)
			default:
				pins.PinAt(affinity.Request{Provider: "p", Key: keys[(i/4)%len(keys)]}, fmt.Sprint("conn-", i%7), now)
			}
			if i%10 == 0 {
				o := lease.HashOwner(fmt.Sprint("owner-", i%1000))
				l, _, err := s.Acquire(bg, lease.Holder{Owner: o, APIKeyID: "k"}, "p", fmt.Sprint("lc-", i%1000), time.Minute, now)
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := s.Release(bg, lease.Holder{Owner: o, APIKeyID: "k", Generation: l.Generation}, lease.ReasonOwnerExit, now); err != nil {
					b.Fatal(err)
				}
			}
			if i%10_000 == 0 {
				if err := st.Flush(bg); err != nil {
					b.Fatal(err)
				}
			}
			if now.Sub(lastSweep) >= time.Hour {
				if _, err := st.Sweep(bg); err != nil {
					b.Fatal(err)
				}
				lastSweep = now
			}
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		var size int64
		for _, p := range []string{path, path + "-wal"} {
			if fi, err := os.Stat(p); err == nil {
				size += fi.Size()
			}
		}
		b.ReportMetric(float64(size)/(1<<20), "MiB")
		b.ReportMetric(float64(st.Stats().Swept), "swept-rows")
	}
}
