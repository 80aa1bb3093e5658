package breaker

import (
	"math"
	"testing"
	"testing/synctest"
	"time"
)

// FuzzBreaker drives a breaker with a random sequence of asks, reports and
// clock advances, and checks the invariants after every step.
func FuzzBreaker(f *testing.F) {
	f.Add([]byte{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 7, 0, 2})
	f.Add([]byte{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 6, 0, 0, 0, 3, 6, 0, 9})
	f.Add([]byte{0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
	f.Fuzz(func(t *testing.T, ops []byte) {
		synctest.Test(t, func(t *testing.T) {
			p := Profile{OpenAt: 3, Reset: time.Second, MaxMultiplier: 4, EscalationCount: 1, Window: 5 * time.Second}.Normalize()
			if len(ops) > 0 && ops[0]%2 == 1 {
				p.Window = 0
			}
			b := New("p", p, nil)
			var pending []func(Outcome)
			for _, op := range ops {
				switch op % 8 {
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
				}
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
