package breaker

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/routeguard/routeguard/internal/config"
)

// FuzzBreaker drives a breaker with a random sequence of asks, reports,
// direct reports, export/restore round trips and clock advances, and checks
// the invariants after every step.
func FuzzBreaker(f *testing.F) {
	f.Add([]byte{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 7, 0, 2})
	f.Add([]byte{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 6, 0, 0, 0, 3, 6, 0, 9})
	f.Add([]byte{0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
	f.Add([]byte{1, 8, 8, 24, 56, 120, 15, 10, 0, 11, 11, 8, 10, 9, 13, 12, 14})
	f.Fuzz(func(t *testing.T, ops []byte) {
		synctest.Test(t, func(t *testing.T) {
			p := Profile{OpenAt: 3, Reset: time.Second, MaxMultiplier: 4, EscalationCount: 1, Window: 5 * time.Second}
			p.Hints = true
			p.Kinds[KindQuotaExhausted].Cooldown = 3 * time.Second
			p.Kinds[KindRateLimit].OpenAt = 2
			p = p.normalize()
			if len(ops) > 0 && ops[0]%2 == 1 {
				p.Window = 0
			}
			b := New("p", p, nil)
			var pending []func(Outcome)
			for _, op := range ops {
				switch op % 16 {
				case 0, 1: // ask
					done, err := b.Allow()
					st, _ := b.State()
					if err != nil {
						if done != nil {
							t.Fatal("refusal with a done func")
						}
						if st.admits() {
							t.Fatalf("refused while %v", st)
						}
					} else {
						pending = append(pending, done)
					}
				case 2, 3, 4: // report the oldest pending request
					if len(pending) > 0 {
						pending[0](Outcome(op % 3))
						pending = pending[1:]
					}
				case 5: // report the newest pending request as a failure
					if n := len(pending); n > 0 {
						pending[n-1](Failure)
						pending = pending[:n-1]
					}
				case 6: // advance by a fraction of the reset time
					time.Sleep(time.Duration(op) * 10 * time.Millisecond)
				case 7: // advance by whole reset times
					time.Sleep(time.Duration(op>>3) * p.Reset)
				case 8, 9: // a direct failure with a kind, a connection, maybe a network error
					b.Report(Report{Outcome: Failure, Kind: Kind(op >> 4 % numKinds),
						Conn: string(rune('a' + op>>6)), Network: op&16 != 0})
				case 10: // a direct success
					b.Report(Report{Outcome: Success, Conn: string(rune('a' + op>>6))})
				case 11: // ask with a detailed report, answered at once
					if done, err := b.AllowReport(); err == nil {
						done(Report{Outcome: Outcome(op >> 4 % 3), Kind: Kind(op >> 6), Conn: "a"})
					}
				case 12, 13: // export and restore: the record and the state survive
					roundTrip(t, b)
				default: // advance by a kind cooldown
					time.Sleep(3 * time.Second)
				}
				checkInvariants(t, b, p)
			}
		})
	})
}

func checkInvariants(t *testing.T, b *Breaker, p Profile) {
	t.Helper()
	st, wait := b.State()
	s := b.Status()
	if st > HalfOpen {
		t.Fatalf("state %d", st)
	}
	if wait < 0 || wait > p.maxOpenDuration() {
		t.Fatalf("wait %v outside [0, %v]", wait, p.maxOpenDuration())
	}
	if st.admits() && wait != 0 {
		t.Fatalf("%v with wait %v", st, wait)
	}
	if st == Degraded && (s.Failures < p.DegradedAt || s.Failures >= p.OpenAt) {
		t.Fatalf("degraded with %d failures", s.Failures)
	}
	if st == Closed && s.Failures > p.DegradedAt {
		t.Fatalf("closed with %d failures, above the degraded level %d", s.Failures, p.DegradedAt)
	}
	if s.Failures < 0 || s.Failures > p.OpenAt {
		t.Fatalf("failures %d", s.Failures)
	}
	if n := b.dedupLen(); n > p.maxConns() {
		t.Fatalf("%d dedup entries", n)
	}
}

// FuzzRestore decodes arbitrary JSON as a Record and restores it: decoding
// and restoring never panic, a refused record changes nothing, and an
// accepted one leaves the breaker inside its invariants. Save and restore
// round-trip: after the first restore and after every later step, Export →
// Restore → Export gives the same record (also through JSON) and keeps the
// state and its wait.
func FuzzRestore(f *testing.F) {
	for _, s := range []string{
		`{"provider":"p","state":"OPEN","failures":8,"lastFailure":"2000-01-01T00:00:00Z","openCycles":2}`,
		`{"state":"half-open","failures":3,"openedAt":"1999-12-31T23:59:50Z","lastKind":"quota_exhausted"}`,
		`{"state":"degraded","failures":-4,"kindFailures":{"rate_limit":7,"none":3}}`,
		`{"state":"closed","failures":9999999999,"openCycles":-1,"lastFailure":"9999-12-31T23:59:59Z"}`,
		`{"provider":"q","state":"open"}`,
		`{"state":"opening"}`,
		`{"state":"open","lastKind":"rate-limit","openCycles":1e3}`,
		`[]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		var r Record
		if json.Unmarshal([]byte(data), &r) != nil {
			return
		}
		synctest.Test(t, func(t *testing.T) {
			p := Profile{OpenAt: 3, Reset: time.Second, MaxMultiplier: 4, EscalationCount: 1, Hints: true}.normalize()
			b := New("p", p, nil)
			b.Report(Report{Outcome: Failure})
			if err := b.Restore(r); err != nil {
				if !errors.Is(err, ErrInvalidRecord) {
					t.Fatalf("error %v does not match ErrInvalidRecord", err)
				}
				if s := b.Status(); s.Failures != 1 || s.State != Closed {
					t.Fatalf("a refused record changed the breaker: %+v", s)
				}
				return
			}
			checkInvariants(t, b, p)
			rec := roundTrip(t, b)
			if rec.State != HalfOpen && rec.State != Open && rec.OpenCycles != 0 {
				t.Fatalf("closed with cycles: %+v", rec)
			}
			if rec.LastFailure.After(time.Now()) || rec.OpenedAt.After(time.Now()) {
				t.Fatalf("a time in the future: %+v", rec)
			}
			for i := range 6 {
				if done, err := b.Allow(); err == nil {
					done(Outcome(i % 3))
				}
				roundTrip(t, b)
				time.Sleep(time.Duration(i) * 700 * time.Millisecond)
				checkInvariants(t, b, p)
				roundTrip(t, b)
			}
		})
	})
}

// roundTrip exports b, restores the record and exports again: the two
// records must be the same, the state and its wait unchanged (a probe in
// flight is not saved, so its slot comes back free and the second record
// has no probe and no wait), and a restore from the record's JSON must
// export the same record too. It returns the record as restored.
func roundTrip(t *testing.T, b *Breaker) Record {
	t.Helper()
	before, wait := b.State()
	if b.Status().ProbeInFlight {
		wait = 0
	}
	rec := b.Export()
	if err := b.Restore(rec); err != nil {
		t.Fatalf("restore of an export: %v", err)
	}
	if rec.ProbeInFlight {
		// Not saved: the restored breaker has its probe slot free.
		rec.ProbeInFlight, rec.RetryAfter = false, 0
	}
	if again := b.Export(); !reflect.DeepEqual(again, rec) {
		t.Fatalf("export after restore: %+v, want %+v", again, rec)
	}
	if after, wait2 := b.State(); after != before || wait2 != wait {
		t.Fatalf("restore: %v %v → %v %v (%+v)", before, wait, after, wait2, rec)
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		t.Fatalf("marshal %+v: %v", rec, err)
	}
	var back Record
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatalf("unmarshal %s: %v", raw, err)
	}
	if err := b.Restore(back); err != nil {
		t.Fatalf("restore of %s: %v", raw, err)
	}
	if again := b.Export(); !sameRecord(again, rec) {
		t.Fatalf("export after a JSON round trip: %+v, want %+v", again, rec)
	}
	return rec
}

// FuzzNormalize checks that normalized settings are inside their ranges and
// that normalizing twice changes nothing.
func FuzzNormalize(f *testing.F) {
	f.Add(int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0))
	f.Add(int64(3), int64(10), int64(500e6), int64(-1), int64(0), int64(-5), int64(1))
	f.Add(int64(math.MaxInt64), int64(math.MinInt64), int64(math.MaxInt64), int64(1<<40), int64(1<<40), int64(math.MaxInt64), int64(math.MinInt64))
	f.Fuzz(func(t *testing.T, open, degraded, reset, mult, esc, window, minRetry int64) {
		p := Profile{OpenAt: int(open), DegradedAt: int(degraded), Reset: time.Duration(reset),
			MaxMultiplier: int(mult), EscalationCount: int(esc), Window: time.Duration(window)}
		p.Hints = mult%2 == 0
		p.Kinds[KindQuotaExhausted] = KindPolicy{Cooldown: time.Duration(window), OpenAt: int(degraded)}
		p.Kinds[KindRateLimit] = KindPolicy{Cooldown: time.Duration(minRetry), OpenAt: int(esc)}
		p.Kinds[KindNone] = KindPolicy{Cooldown: time.Duration(reset), OpenAt: int(open)}
		p.ConnDedup, p.NetworkDedup, p.MaxConns = time.Duration(minRetry), time.Duration(reset), int(mult)
		cfg := Config{OAuth: p, Local: p, Profiles: map[string]Profile{"x": p}}
		cn := cfg.Normalize()
		if cfg.OAuth != p || cfg.Profiles["x"] != p {
			t.Fatalf("Normalize changed its receiver")
		}
		if cn.Normalize().OAuth != cn.OAuth || cn.Normalize().Profiles["x"] != cn.Profiles["x"] {
			t.Fatalf("config not idempotent: %+v", cn)
		}
		for _, n := range []Profile{p.normalize(), cn.OAuth, cn.Local, cn.Profiles["x"]} {
			if n.OpenAt < 1 || n.OpenAt > 1000 || n.DegradedAt < 1 || (n.OpenAt > 1 && n.DegradedAt >= n.OpenAt) ||
				n.Reset < time.Second || n.Reset > 24*time.Hour || n.MaxMultiplier < 1 || n.MaxMultiplier > 1024 ||
				n.EscalationCount < 1 || n.EscalationCount > 100 || n.Window < 0 || n.Window > 720*time.Hour ||
				(n.Window > 0 && n.Window < time.Second) {
				t.Fatalf("out of range: %+v from %+v", n, p)
			}
			if n.normalize() != n {
				t.Fatalf("not idempotent: %+v", n)
			}
			if n.Kinds[KindNone] != (KindPolicy{}) || n.ConnDedup < 0 || n.ConnDedup > time.Hour ||
				n.NetworkDedup < 0 || n.NetworkDedup > time.Hour || n.MaxConns < 0 || n.MaxConns > 100_000 {
				t.Fatalf("out of range: %+v from %+v", n, p)
			}
			for k, kp := range n.Kinds {
				if kp.OpenAt < 0 || kp.OpenAt > 1000 || kp.Cooldown != 0 && (kp.Cooldown < n.Reset || kp.Cooldown > 24*time.Hour) {
					t.Fatalf("kind %v out of range: %+v", Kind(k), kp)
				}
				for _, c := range []int{0, int(esc), 200} {
					if d := n.openDurationFor(Kind(k), c); d < n.Reset || d > n.maxOpenDuration() {
						t.Fatalf("OpenDurationFor(%v, %d) = %v", Kind(k), c, d)
					}
				}
			}
			if d := n.openDuration(int(esc)); d < n.Reset || d > n.maxOpenDuration() || n.maxOpenDuration() <= 0 {
				t.Fatalf("open duration %v", d)
			}
		}
		gs := GateConfig{MaxRetry: time.Duration(window), MaxEntries: int(esc),
			OAuth: WindowProfile{Threshold: int(open), Window: time.Duration(reset), Cooldown: time.Duration(window)}}
		if minRetry%2 == 0 {
			gs.MinRetry = new(time.Duration(minRetry))
		}
		g := gs.Normalize()
		if g.MinRetry == nil || *g.MinRetry < 0 || *g.MinRetry > time.Hour ||
			g.MaxRetry < *g.MinRetry || g.MaxRetry > 24*time.Hour || g.MaxRetry < time.Millisecond ||
			g.MaxEntries < 1 || g.MaxEntries > 1_000_000 ||
			g.OAuth.Threshold < 1 || g.OAuth.Window < time.Second || g.OAuth.Cooldown < time.Second {
			t.Fatalf("gate out of range: %+v", g)
		}
		if gs.MinRetry != nil && *gs.MinRetry != time.Duration(minRetry) {
			t.Fatalf("Normalize wrote through the caller's pointer")
		}
		if gs.MinRetry != nil && minRetry >= 0 && minRetry <= int64(time.Hour) && *g.MinRetry != time.Duration(minRetry) {
			t.Fatalf("MinRetry %v in range became %v", minRetry, *g.MinRetry)
		}
		if g2 := g.Normalize(); *g2.MinRetry != *g.MinRetry || g2.MaxRetry != g.MaxRetry || g2.OAuth != g.OAuth ||
			g2.MaxEntries != g.MaxEntries || g2.MinRetry == g.MinRetry {
			t.Fatalf("gate not idempotent (or sharing its pointer): %+v", g2)
		}
		gate := NewGate(g)
		for n := range 10 {
			if d := gate.ConnCooldown(n); d < 0 || d > g.MaxRetry {
				t.Fatalf("ConnCooldown(%d) = %v", n, d)
			}
		}
	})
}

// FuzzFromEnv feeds arbitrary values to every variable; it must never
// panic, a value is accepted exactly when internal/config accepts it, a
// refused value changes nothing, and the result must normalize into range.
func FuzzFromEnv(f *testing.F) {
	for _, s := range []string{"", "12", " 90000 ", "6.2", "abc", "-1", "Inf", "NaN", "1e400", "0x10", "0", "true", " ON ", "yes"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		lookup := func(string) (string, bool) { return v, true }
		blank := strings.TrimSpace(v) == ""
		c, err := FromEnv(lookup)
		_, perr := config.ParseInt(v)
		if !blank && (err == nil) != (perr == nil) {
			t.Fatalf("FromEnv error %v, ParseInt error %v", err, perr)
		}
		if blank && err != nil {
			t.Fatalf("a blank value refused: %v", err)
		}
		if err != nil {
			if c.OAuth != (Profile{}) || c.APIKey != (Profile{}) || c.Local != (Profile{}) {
				t.Fatalf("a bad value changed the settings: %+v", c)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not match ErrInvalidConfig", err)
			}
		}
		_ = c.Normalize()
		g, gerr := GateFromEnv(lookup)
		on, serr := config.ParseSwitch(v)
		if !blank && gerr == nil && (perr != nil || serr != nil) {
			t.Fatalf("GateFromEnv accepted %q", v)
		}
		if !blank && serr == nil && g.Enabled != on {
			t.Fatalf("Enabled = %v for %q", g.Enabled, v)
		}
		if serr != nil && g.Enabled {
			t.Fatalf("a bad switch %q turned the gate on", v)
		}
		_ = g.Normalize()
	})
}
