package cooldown

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/routeguard/routeguard"
)

// fuzzFailures are the failures the operation fuzzer draws from.
var fuzzFailures = []Failure{
	rateLimit,
	{Status: 503, Reason: "server_error", Backoff: true},
	{Status: 429, Reason: "rate_limit_exceeded", RetryAfter: 17 * time.Second, Backoff: true},
	{Status: 429, Reason: "quota_exhausted", Cooldown: time.Hour},
	{Status: 429, Reason: "quota_exhausted"},
	{Status: 400, Reason: "model_capacity"},
	{Status: 401, Reason: "auth_error"},
	{Status: 402, Reason: "quota_exhausted"},
	{Status: 400, Reason: "quota_exhausted", CreditsExhausted: true, RecoverAt: t0.Add(10 * time.Minute)},
	{Status: 403, Reason: "auth_error", Permanent: true},
	{Status: 403, Reason: "request_rejected", RequestRejected: true},
	{Status: 429, Reason: "rate_limit_exceeded", RetryAfter: 1 << 62},
	{Status: 409, Reason: "unknown", Base: true},
}

// FuzzOperations runs random operation sequences and checks the invariants:
// a terminal connection never becomes cooling (only a reset lifts it); a
// cooling connection's end is after its last failure; the level stays within
// [0, steps]; CheckAt refuses exactly the connections that are not
// available; and the last event of a connection carries its status, so that
// a store following the events agrees with the Tracker.
func FuzzOperations(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 5, 0, 10, 0, 0, 0})
	f.Add([]byte{0, 1, 10, 5, 1, 3, 0, 1, 10, 5, 1, 200, 0, 1, 10, 5, 1, 250, 0, 1, 10})
	f.Add([]byte{6, 0, 0, 7, 0, 1, 6, 1, 0, 0, 0, 0, 0, 1, 1, 0, 2, 3, 4, 3, 0})
	f.Add([]byte{0, 2, 6, 8, 2, 0, 5, 2, 100, 8, 2, 0, 9, 2, 0, 0, 2, 9})
	f.Fuzz(func(t *testing.T, ops []byte) {
		conns := []string{"a", "b", "c", "d"}
		last := map[string]Event{}
		tr := New(Config{MaxEntries: 16, OnChange: func(e Event) { last[e.Conn] = e }})
		tr.RegisterAt("c", Options{Provider: "opencode-go", Class: routeguard.OAuth}, t0)
		tr.RegisterAt("d", Options{Provider: "opencode-go", DisableCooling: true}, t0)
		now := t0
		for i := 0; i+2 < len(ops); i += 3 {
			op, conn, arg := ops[i]%10, conns[int(ops[i+1])%len(conns)], ops[i+2]
			clear(last) // only this step's events are checked
			before := make(map[string]Status, len(conns))
			for _, c := range conns {
				before[c] = tr.StatusAt(c, now)
			}
			reset := false
			switch op {
			case 0, 1, 2:
				f := fuzzFailures[int(arg)%len(fuzzFailures)]
				r := tr.FailAt(conn, f, now)
				if before[conn].State.Terminal() && r.Action != Absorbed {
					t.Fatalf("step %d: terminal %s not absorbed: %+v", i, conn, r)
				}
				if r.Action == Episode && r.Cooldown <= 0 {
					t.Fatalf("step %d: empty episode %+v", i, r)
				}
			case 3:
				tr.SucceedAt(conn, now)
			case 4:
				tr.ClearAt(Selector{All: arg%2 == 0, IDs: conns[:int(arg)%3]}, now)
			case 5:
				// Advance, or occasionally go back.
				d := time.Duration(arg) * 7 * time.Second
				if arg%17 == 0 {
					d = -d
				}
				now = now.Add(d)
				for _, c := range conns {
					before[c] = tr.StatusAt(c, now)
				}
			case 6:
				tr.SeenEgressAt(conn, []string{"1.1.1.1", "2.2.2.2"}[arg%2], now)
			case 7:
				tr.RecheckedAt(conn, now)
				tr.RecheckDueAt(conn, now)
			case 8:
				reset = true
				tr.ResetAt(Selector{IDs: []string{conn}}, now)
			case 9:
				if arg%4 == 0 {
					reset = true
					tr.ForgetAt(conn, now)
				} else {
					tr.RegisterAt(conn, Options{Provider: "opencode-go", Class: routeguard.Class(arg % 4)}, now)
				}
			}
			for _, c := range conns {
				s := tr.StatusAt(c, now)
				err := tr.CheckAt(c, now)
				var ce *Error
				if (err == nil) != (s.State == Available) || (err != nil && (!errors.As(err, &ce) || ce.State != s.State || !ce.Until.Equal(s.Until))) {
					t.Fatalf("step %d: CheckAt(%s) = %v with status %v", i, c, err, s)
				}
				if ev, ok := last[c]; ok {
					got := Status{State: ev.State, Until: ev.Until, Reason: ev.Reason, Level: ev.Level}
					if got != s {
						t.Fatalf("step %d: last event of %s says %v, status is %v", i, c, got, s)
					}
				}
				if before[c].State.Terminal() && !(reset && c == conn) && s != before[c] {
					t.Fatalf("step %d: terminal %s changed from %+v to %+v", i, c, before[c], s)
				}
				e, _ := tr.store.Load(c)
				steps := tr.profile(e.Options.Class).steps
				if s.Level < 0 || s.Level > steps {
					t.Fatalf("step %d: %s level %d outside [0, %d]", i, c, s.Level, steps)
				}
				if s.State == Cooling && !e.Until.After(e.LastErrorAt) {
					t.Fatalf("step %d: %s cools until %v, not after its failure at %v", i, c, e.Until, e.LastErrorAt)
				}
				if s.State == Cooling && e.Options.DisableCooling {
					t.Fatalf("step %d: %s cools with cooling disabled", i, c)
				}
			}
		}
	})
}

// FuzzFormatWait checks that every duration renders as "[Nh][ Nm][ Ns]"
// with at least one part and seconds rounded up.
func FuzzFormatWait(f *testing.F) {
	for _, d := range []int64{0, -1, 1, int64(time.Second), int64(125 * time.Second), int64(time.Hour), 1<<63 - 1, -1 << 63} {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		d := time.Duration(n)
		s := formatWait(d)
		var h, m, sec int64
		parts := strings.Fields(s)
		if len(parts) == 0 || len(parts) > 3 {
			t.Fatalf("formatWait(%v) = %q", d, s)
		}
		for _, p := range parts {
			var v int64
			var unit byte
			if _, err := fmt.Sscanf(p, "%d%c", &v, &unit); err != nil || v < 0 {
				t.Fatalf("formatWait(%v) = %q: bad part %q", d, s, p)
			}
			switch unit {
			case 'h':
				h = v
			case 'm':
				m = v
			case 's':
				sec = v
			default:
				t.Fatalf("formatWait(%v) = %q: bad unit", d, s)
			}
		}
		total := h*3600 + m*60 + sec
		if d <= 0 {
			if s != "0s" {
				t.Fatalf("formatWait(%v) = %q, want 0s", d, s)
			}
			return
		}
		if time.Duration(total-1)*time.Second >= d || (total < 1<<33 && time.Duration(total)*time.Second < d) {
			t.Fatalf("formatWait(%v) = %q (%d s) does not round up", d, s, total)
		}
	})
}
