package lockout_test

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/routeguard/routeguard/lockout"
)

// FuzzSequence drives a Lockout through random sequences of failures,
// manual locks, decays, clears, listings and clock moves (forwards and
// backwards), checking its invariants after every step.
func FuzzSequence(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{0, 0, 0, 0, 2, 2, 2, 3, 4})
	f.Add([]byte{0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87, 0x98, 0xa9, 0xff, 0x05})

	models := []string{"gpt-5.6-luna", "gpt-5.6-sol", "A:B", "a:b", " Gemini-3.6 ", "o3"}
	providers := []string{"codex", "cx", "openai"}
	statuses := []int{429, 403, 402, 404, 500, 502, 503, 504, 400, 0}
	reasons := []lockout.Reason{"", lockout.ReasonQuotaExhausted, lockout.ReasonRateLimited}

	f.Fuzz(func(t *testing.T, data []byte) {
		l := lockout.New(lockout.Config{
			Enabled: true, BaseCooldown: 5 * time.Second, MaxEntries: 16, MaxBackoffSteps: new(6),
			Location: time.UTC,
		})
		maxCooldown := l.Config().MaxCooldown
		now := t0
		next := func() byte {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return b
		}
		for len(data) > 0 {
			op, arg := next(), next()
			p := providers[int(arg)%len(providers)]
			c := []string{"c1", "c2"}[int(arg>>2)%2]
			m := models[int(arg>>3)%len(models)]
			switch op % 7 {
			case 0, 1:
				fail := lockout.Failure{
					Provider: p, Connection: c, Model: m,
					Status:     statuses[int(op>>3)%len(statuses)],
					Reason:     reasons[int(op>>5)%len(reasons)],
					Scope:      lockout.Scope(int(arg>>5) % 5),
					ResetAfter: time.Duration(op) * time.Second,
				}
				if op&4 != 0 {
					fail.Cooldown = time.Duration(int(next())*1000) * time.Second
					fail.UpstreamReset = op&0x80 != 0
				}
				res := l.RecordFailureAt(fail, now)
				if res.Locked {
					if res.FailureCount < 1 {
						t.Fatalf("failure count %d < 1", res.FailureCount)
					}
					if res.Cooldown <= 0 || (!fail.UpstreamReset && res.Cooldown > maxCooldown) {
						t.Fatalf("cooldown %v out of (0, %v]", res.Cooldown, maxCooldown)
					}
					if res.Until.Before(now.Add(res.Cooldown)) {
						t.Fatalf("until %v before now+cooldown %v", res.Until, now.Add(res.Cooldown))
					}
					if _, _, locked := l.LockedAt(p, c, m, now); !locked {
						t.Fatalf("just-locked %s/%s/%q reads unlocked", p, c, m)
					}
				}
			case 2:
				l.LockAt(lockout.Failure{Provider: p, Connection: c, Model: m, Scope: lockout.Scope(op >> 4 % 4),
					Cooldown: time.Duration(arg) * time.Second}, now)
			case 3:
				n, _ := l.DecayAt(p, c, m, now)
				if n < 0 {
					t.Fatalf("decay count %d < 0", n)
				}
			case 4:
				l.ClearAt(p, c, m, now)
				if until, _, locked := l.LockedAt(p, c, m, now); locked {
					t.Fatalf("%s/%s/%q still locked until %v after clear", p, c, m, until)
				}
			case 5:
				now = now.Add(time.Duration(arg) * 7 * time.Second)
			case 6:
				now = now.Add(-time.Duration(arg) * time.Second)
			}
			if n := l.Len(); n < 0 || n > 16 {
				t.Fatalf("Len() = %d, want [0, 16]", n)
			}
			for _, in := range l.SnapshotAt(now) {
				if in.Until.Before(now) || in.Remaining < 0 || in.Remaining != in.Until.Sub(now) {
					t.Fatalf("listed lock not in the future: %+v at %v", in, now)
				}
				if in.FailureCount < 0 {
					t.Fatalf("negative count: %+v", in)
				}
				if in.LockedAt.After(in.Until) {
					t.Fatalf("locked after its end: %+v", in)
				}
			}
		}
	})
}

// FuzzNormalize checks that normalized settings are in range and that
// Normalize is idempotent.
func FuzzNormalize(f *testing.F) {
	f.Add(int64(0), int64(0), 0, int64(0), 0, []byte{})
	f.Add(int64(1000), int64(10000), 50, int64(-1), 3, []byte{99, 1, 0xac, 2, 0xbc})
	f.Add(int64(200000), int64(100000), -2, int64(1)<<62, -1, []byte{0xff, 0xff})
	f.Fuzz(func(t *testing.T, baseMs, maxMs int64, steps int, windowMs int64, entries int, codes []byte) {
		in := lockout.Config{
			BaseCooldown:     time.Duration(baseMs) * time.Millisecond,
			MaxCooldown:      time.Duration(maxMs) * time.Millisecond,
			MaxBackoffSteps:  &steps,
			EscalationWindow: time.Duration(windowMs) * time.Millisecond,
			MaxEntries:       entries,
		}
		for i := 0; i+1 < len(codes); i += 2 {
			in.ErrorCodes = append(in.ErrorCodes, int(codes[i])<<8|int(codes[i+1]))
		}
		s := in.Normalize()
		checkSettings(t, s)
		if again := s.Normalize(); !equalSettings(again, s) {
			t.Fatalf("Normalize not idempotent: %+v then %+v", s, again)
		}
	})
}

// FuzzFromEnv feeds arbitrary text to every variable FromEnv reads.
func FuzzFromEnv(f *testing.F) {
	f.Add("true", "99, 429, 700", "1000", "10000", "50", "1", "0", "")
	f.Add("", "", "", "", "", "", "", "")
	f.Add("NaN", "1e3,-5,abc", "-Inf", "1e309", "-7", "maybe", "1e400", "0x10")
	f.Fuzz(func(t *testing.T, enabled, codes, base, maxv, steps, exp, window, cap string) {
		vals := map[string]string{
			"MODEL_LOCKOUT_ENABLED": enabled, "MODEL_LOCKOUT_ERROR_CODES": codes, "MODEL_LOCKOUT_BASE_COOLDOWN_MS": base,
			"MODEL_LOCKOUT_MAX_COOLDOWN_MS": maxv, "MODEL_LOCKOUT_MAX_BACKOFF_STEPS": steps, "MODEL_LOCKOUT_USE_EXPONENTIAL_BACKOFF": exp,
			"MODEL_LOCKOUT_ESCALATION_WINDOW_MS": window, "MODEL_LOCKOUT_EVICTION_CAP": cap,
		}
		c, err := lockout.FromEnv(env(vals))
		if err != nil && !errors.Is(err, lockout.ErrInvalidConfig) {
			t.Fatalf("FromEnv error %v does not match ErrInvalidConfig", err)
		}
		for _, code := range c.ErrorCodes {
			if code < 100 || code > 599 {
				t.Fatalf("FromEnv kept code %d", code)
			}
		}
		s := c.Normalize()
		checkSettings(t, s)
		if again := s.Normalize(); !equalSettings(again, s) {
			t.Fatalf("Normalize of the FromEnv result not idempotent: %+v", s)
		}
	})
}

func checkSettings(t *testing.T, s lockout.Config) {
	t.Helper()
	if s.BaseCooldown < 5*time.Second || s.BaseCooldown > 10*time.Minute {
		t.Fatalf("base %v out of range", s.BaseCooldown)
	}
	if s.MaxCooldown < s.BaseCooldown || s.MaxCooldown > time.Hour {
		t.Fatalf("max %v out of [base %v, 1h]", s.MaxCooldown, s.BaseCooldown)
	}
	if s.MaxBackoffSteps == nil || *s.MaxBackoffSteps < 0 || *s.MaxBackoffSteps > 20 {
		t.Fatalf("steps %v out of range", s.MaxBackoffSteps)
	}
	if s.EscalationWindow < 0 || s.EscalationWindow > 24*time.Hour {
		t.Fatalf("window %v out of range", s.EscalationWindow)
	}
	if s.MaxEntries < 16 || s.MaxEntries > 10_000_000 {
		t.Fatalf("entries %d out of range", s.MaxEntries)
	}
	if len(s.ErrorCodes) == 0 {
		t.Fatal("no error codes")
	}
	for _, c := range s.ErrorCodes {
		if c < 100 || c > 599 {
			t.Fatalf("code %d out of range", c)
		}
	}
	// The largest escalation must not overflow.
	if d := s.BaseCooldown << *s.MaxBackoffSteps; d <= 0 || float64(d) > math.MaxInt64/2 {
		t.Fatalf("escalation overflows: %v", d)
	}
}

func equalSettings(a, b lockout.Config) bool { return reflect.DeepEqual(a, b) }
