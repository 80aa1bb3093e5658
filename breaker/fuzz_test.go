package breaker

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"testing"
	"testing/synctest"
	"time"
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
			p = p.Normalize()
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
						if st.Admits() {
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
					b.Report(Report{Outcome: Failure, Kind: Kind(op >> 4 % NumKinds),
						Conn: string(rune('a' + op>>6)), Network: op&16 != 0})
				case 10: // a direct success
					b.Report(Report{Outcome: Success, Conn: string(rune('a' + op>>6))})
				case 11: // ask with a detailed report, answered at once
					if done, err := b.AllowReport(); err == nil {
						done(Report{Outcome: Outcome(op >> 4 % 3), Kind: Kind(op >> 6), Conn: "a"})
					}
				case 12, 13: // export and restore: the state survives
					before, wait := b.State()
					probe := b.Status().ProbeInFlight
					rec := b.Export()
					if err := b.Restore(rec); err != nil {
						t.Fatalf("restore of an export: %v", err)
					}
					after, wait2 := b.State()
					if probe {
						wait = 0 // the restored probe slot is free
					}
					if after != before || wait2 != wait {
						t.Fatalf("restore: %v %v → %v %v (%+v)", before, wait, after, wait2, rec)
					}
					if again := b.Export(); again.Failures != rec.Failures || again.OpenCycles != rec.OpenCycles ||
						again.LastKind != rec.LastKind || again.State != rec.State {
						t.Fatalf("export after restore: %+v, want %+v", again, rec)
					}
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
	if wait < 0 || wait > p.MaxOpenDuration() {
		t.Fatalf("wait %v outside [0, %v]", wait, p.MaxOpenDuration())
	}
	if st.Admits() && wait != 0 {
		t.Fatalf("%v with wait %v", st, wait)
	}
	if st == Degraded && (s.Failures < p.DegradedAt || s.Failures >= p.OpenAt) {
		t.Fatalf("degraded with %d failures", s.Failures)
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
// accepted one leaves the breaker inside its invariants, exporting what it
// restores to.
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
			p := Profile{OpenAt: 3, Reset: time.Second, MaxMultiplier: 4, EscalationCount: 1, Hints: true}.Normalize()
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
			rec := b.Export()
			if rec.State != HalfOpen && rec.State != Open && rec.OpenCycles != 0 {
				t.Fatalf("closed with cycles: %+v", rec)
			}
			if rec.LastFailure.After(time.Now()) || rec.OpenedAt.After(time.Now()) {
				t.Fatalf("a time in the future: %+v", rec)
			}
			if err := b.Restore(rec); err != nil {
				t.Fatal(err)
			}
			if again := b.Export(); !reflect.DeepEqual(again, rec) {
				t.Fatalf("export after restore: %+v, want %+v", again, rec)
			}
			for range 4 {
				if done, err := b.Allow(); err == nil {
					done(Failure)
				}
				time.Sleep(time.Second)
				checkInvariants(t, b, p)
			}
		})
	})
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
		for _, n := range []Profile{p.Normalize(), Settings{OAuth: p}.Normalize().OAuth, Settings{Local: p}.Normalize().Local} {
			if n.OpenAt < 1 || n.OpenAt > 1000 || n.DegradedAt < 1 || (n.OpenAt > 1 && n.DegradedAt >= n.OpenAt) ||
				n.Reset < time.Second || n.Reset > 24*time.Hour || n.MaxMultiplier < 1 || n.MaxMultiplier > 1024 ||
				n.EscalationCount < 1 || n.EscalationCount > 100 || n.Window < 0 || n.Window > 720*time.Hour ||
				(n.Window > 0 && n.Window < time.Second) {
				t.Fatalf("out of range: %+v from %+v", n, p)
			}
			if n.Normalize() != n {
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
					if d := n.OpenDurationFor(Kind(k), c); d < n.Reset || d > n.MaxOpenDuration() {
						t.Fatalf("OpenDurationFor(%v, %d) = %v", Kind(k), c, d)
					}
				}
			}
			if d := n.OpenDuration(int(esc)); d < n.Reset || d > n.MaxOpenDuration() || n.MaxOpenDuration() <= 0 {
				t.Fatalf("open duration %v", d)
			}
		}
		g := GateSettings{MinRetryCooldown: time.Duration(minRetry), MaxRetryCooldown: time.Duration(window),
			OAuth: WindowProfile{Threshold: int(open), Window: time.Duration(reset), Cooldown: time.Duration(window)}}.Normalize()
		if g.MinRetryCooldown < time.Millisecond || g.MinRetryCooldown > time.Hour ||
			g.MaxRetryCooldown < g.MinRetryCooldown || g.MaxRetryCooldown > 24*time.Hour ||
			g.OAuth.Threshold < 1 || g.OAuth.Window < time.Second || g.OAuth.Cooldown < time.Second {
			t.Fatalf("gate out of range: %+v", g)
		}
		if g.Normalize() != g {
			t.Fatalf("gate not idempotent: %+v", g)
		}
		gate := NewGate(GateConfig{Settings: g})
		for n := range 10 {
			if d := gate.ConnCooldown(n); d < 0 || d > g.MaxRetryCooldown {
				t.Fatalf("ConnCooldown(%d) = %v", n, d)
			}
		}
	})
}

// FuzzFromEnv feeds arbitrary values to every variable; it must never
// panic, and the result must normalize into range.
func FuzzFromEnv(f *testing.F) {
	for _, s := range []string{"", "12", " 90000 ", "6.2", "abc", "-1", "Inf", "NaN", "1e400", "0x10", "0", "true", " ON "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		lookup := func(string) (string, bool) { return v, true }
		s, err := FromEnv(lookup)
		n, ok, perr := ParseNumber(v)
		if (err == nil) != (perr == nil) {
			t.Fatalf("FromEnv error %v, ParseNumber error %v", err, perr)
		}
		if ok && (n < 0 || math.IsNaN(n) || math.IsInf(n, 0)) {
			t.Fatalf("ParseNumber(%q) = %v", v, n)
		}
		if err != nil && s != (Settings{}) {
			t.Fatalf("a bad value changed the settings: %+v", s)
		}
		_ = s.Normalize()
		g, gerr := GateFromEnv(lookup)
		if (gerr == nil) != (perr == nil) {
			t.Fatalf("GateFromEnv error %v", gerr)
		}
		if g.Enabled != ParseSwitch(v) {
			t.Fatalf("Enabled = %v for %q", g.Enabled, v)
		}
		_ = g.Normalize()
	})
}
