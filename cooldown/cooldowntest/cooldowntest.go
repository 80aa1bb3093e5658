// Package cooldowntest checks that an implementation of [cooldown.Store]
// behaves as a [cooldown.Tracker] expects.
package cooldowntest

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/routeguard/routeguard"
	"github.com/routeguard/routeguard/cooldown"
)

// Run checks the store returned by newStore (a fresh, empty store on every
// call) against the [cooldown.Store] contract: missing entries, creation,
// deletion, a round trip of every field of [cooldown.Entry], ranging with
// updates inside the callback, atomic updates under concurrency, and, when
// the store implements [cooldown.Sweeper], sweeping.
func Run(t *testing.T, newStore func() cooldown.Store) {
	t.Helper()
	t.Run("Missing", func(t *testing.T) {
		s := newStore()
		if e, ok := s.Load("nope"); ok || e != (cooldown.Entry{}) {
			t.Fatalf("Load(nope) = %+v, %v; want zero, false", e, ok)
		}
		s.Update("nope", func(e *cooldown.Entry, found bool) bool {
			if found {
				t.Errorf("Update(nope) found an entry")
			}
			return false
		})
		if _, ok := s.Load("nope"); ok {
			t.Fatalf("Update returning false created an entry")
		}
	})
	t.Run("CreateModifyDelete", func(t *testing.T) {
		s := newStore()
		until := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		s.Update("k", func(e *cooldown.Entry, found bool) bool {
			e.Until, e.Level, e.Reason = until, 2, "rate_limit_exceeded"
			e.Options.Provider = "openai"
			return true
		})
		e, ok := s.Load("k")
		if !ok || !e.Until.Equal(until) || e.Level != 2 || e.Reason != "rate_limit_exceeded" || e.Options.Provider != "openai" {
			t.Fatalf("Load(k) = %+v, %v after create", e, ok)
		}
		s.Update("k", func(e *cooldown.Entry, found bool) bool {
			if !found || e.Level != 2 {
				t.Errorf("Update(k) saw %+v, %v", *e, found)
			}
			e.Level = 3
			return true
		})
		if e, _ := s.Load("k"); e.Level != 3 {
			t.Fatalf("Level = %d after update, want 3", e.Level)
		}
		s.Update("k", func(*cooldown.Entry, bool) bool { return false })
		if _, ok := s.Load("k"); ok {
			t.Fatalf("entry survived a delete")
		}
	})
	t.Run("RoundTrip", func(t *testing.T) {
		s := newStore()
		at := func(sec int) time.Time { return time.Date(2026, 1, 2, 3, 4, sec, 0, time.UTC) }
		want := cooldown.Entry{
			Options: cooldown.Options{Provider: "opencode-go", Class: routeguard.OAuth, DisableCooling: true, ExtraKeys: true},
			State:   cooldown.CreditsExhausted, Until: at(1), Level: 4, TerminalAt: at(2),
			Reason: "quota_exhausted", ErrorStatus: 402, ErrorCode: "insufficient_quota", LastError: "out of credits", LastErrorAt: at(3),
			Streak: 2, StreakLast: at(4), StreakUntil: at(5),
			Rechecks: 1, LastRecheck: at(6),
			EgressIP: "1.2.3.4", EgressSeen: at(7),
		}
		s.Update("k", func(e *cooldown.Entry, _ bool) bool { *e = want; return true })
		got, ok := s.Load("k")
		if !ok || !sameEntry(got, want) {
			t.Fatalf("Load(k) = %+v, %v; want %+v", got, ok, want)
		}
		s.Update("k", func(e *cooldown.Entry, found bool) bool {
			if !found || !sameEntry(*e, want) {
				t.Errorf("Update(k) saw %+v, %v; want %+v", *e, found, want)
			}
			return true
		})
		s.Range(func(k string, e cooldown.Entry) bool {
			if k != "k" || !sameEntry(e, want) {
				t.Errorf("Range gave %q: %+v; want k: %+v", k, e, want)
			}
			return true
		})
	})
	t.Run("Range", func(t *testing.T) {
		s := newStore()
		want := []string{"a", "b", "c", "d"}
		for _, k := range want {
			s.Update(k, func(e *cooldown.Entry, _ bool) bool { e.LastError = k; return true })
		}
		var got []string
		s.Range(func(k string, e cooldown.Entry) bool {
			if e.LastError != k {
				t.Errorf("Range gave %q with entry of %q", k, e.LastError)
			}
			got = append(got, k)
			// Updating inside the callback must not deadlock.
			s.Update(k, func(e *cooldown.Entry, _ bool) bool { e.Level++; return true })
			return true
		})
		sort.Strings(got)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("Range visited %v, want %v", got, want)
		}
		n := 0
		s.Range(func(string, cooldown.Entry) bool { n++; return false })
		if n != 1 {
			t.Fatalf("Range went on after false: %d calls", n)
		}
	})
	t.Run("AtomicUpdate", func(t *testing.T) {
		s := newStore()
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				for range 20 {
					s.Update("k", func(e *cooldown.Entry, _ bool) bool { e.Level++; return true })
				}
			})
		}
		wg.Wait()
		if e, _ := s.Load("k"); e.Level != 1000 {
			t.Fatalf("Level = %d after 1000 concurrent increments", e.Level)
		}
	})
	t.Run("Sweep", func(t *testing.T) {
		s := newStore()
		sw, ok := s.(cooldown.Sweeper)
		if !ok {
			t.Skip("store does not implement cooldown.Sweeper")
		}
		for i := range 10 {
			s.Update(fmt.Sprint(i), func(e *cooldown.Entry, _ bool) bool { e.Level = i; return true })
		}
		if sw.Len() != 10 {
			t.Fatalf("Len = %d, want 10", sw.Len())
		}
		if n := sw.Sweep(func(_ string, e *cooldown.Entry) bool { return e.Level%2 == 0 }); n != 5 {
			t.Fatalf("Sweep dropped %d, want 5", n)
		}
		if sw.Len() != 5 {
			t.Fatalf("Len = %d after sweep, want 5", sw.Len())
		}
		if _, ok := s.Load("4"); ok {
			t.Fatalf("swept entry still loads")
		}
	})
}

// sameEntry reports whether a and b are equal, comparing times as instants.
func sameEntry(a, b cooldown.Entry) bool {
	for _, p := range [][2]*time.Time{
		{&a.Until, &b.Until}, {&a.TerminalAt, &b.TerminalAt}, {&a.LastErrorAt, &b.LastErrorAt},
		{&a.StreakLast, &b.StreakLast}, {&a.StreakUntil, &b.StreakUntil}, {&a.LastRecheck, &b.LastRecheck},
		{&a.EgressSeen, &b.EgressSeen},
	} {
		if !p[0].Equal(*p[1]) {
			return false
		}
		*p[0], *p[1] = time.Time{}, time.Time{}
	}
	return a == b
}
