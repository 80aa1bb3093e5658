package sqlitestate_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/routeguard/routeguard/combo/sqlitestate"
	"github.com/routeguard/routeguard/lease"
)

// TestOccupantMatchesTheFile: after acquires, renewals, moves, releases,
// invalidations and expiries, and after a reopen, Occupant (read from
// memory) answers for every connection what the file's active rows (List,
// one query) say.
func TestOccupantMatchesTheFile(t *testing.T) {
	st, path := open(t, sqlitestate.Options{})
	s := st.Leases()
	now := t0
	holders := make([]lease.Holder, 6)
	for i := range holders {
		l, _, err := s.Acquire(bg, lease.Holder{Owner: lease.HashOwner(fmt.Sprint("o", i)), APIKeyID: "k"}, "p", fmt.Sprint("c", i), time.Minute, now)
		if err != nil {
			t.Fatal(err)
		}
		holders[i] = lease.Holder{Owner: l.Owner, APIKeyID: "k", Generation: l.Generation}
	}
	now = now.Add(10 * time.Second)
	if _, err := s.Renew(bg, holders[0], 5*time.Minute, now); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Transition(bg, holders[1], "p", "c9", lease.Reason("CONNECTION_INELIGIBLE"), time.Minute, now); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Release(bg, holders[2], lease.ReasonOwnerExit, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Invalidate(bg, holders[3], lease.Reason("MANAGED_KEY_REVOKED"), now); err != nil {
		t.Fatal(err)
	}
	// c4 and c5 expire at t0+1m; c0 holds until t0+5m10s.
	check := func(st *sqlitestate.State, at time.Time, want map[string]bool) {
		t.Helper()
		list, err := st.Leases().List(bg, at)
		if err != nil {
			t.Fatal(err)
		}
		inFile := map[string]lease.Lease{}
		for _, l := range list {
			inFile[l.Connection] = l
		}
		for i := range 10 {
			c := fmt.Sprint("c", i)
			got, ok, err := st.Leases().Occupant(bg, c, at)
			if err != nil {
				t.Fatal(err)
			}
			f, held := inFile[c]
			until, ok2 := st.Leases().(interface {
				HeldUntil(string, time.Time) (time.Time, bool)
			}).HeldUntil(c, at)
			if ok2 != ok || (ok && !until.Equal(got.ExpiresAt)) {
				t.Errorf("HeldUntil(%s) = %v %v, Occupant %v %v", c, until, ok2, got.ExpiresAt, ok)
			}
			if ok != held || ok != want[c] || (ok && got != f) {
				t.Errorf("at %v: Occupant(%s) = %v %+v; file %v %+v; want held %v", at.Sub(t0), c, ok, got, held, f, want[c])
			}
		}
	}
	check(st, now, map[string]bool{"c0": true, "c4": true, "c5": true, "c9": true})
	check(st, t0.Add(2*time.Minute), map[string]bool{"c0": true})
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = reopen(t, path, sqlitestate.Options{})
	check(st, now, map[string]bool{"c0": true, "c4": true, "c5": true, "c9": true})
	if _, err := st.Leases().Reconcile(bg, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	check(st, t0.Add(2*time.Minute), map[string]bool{"c0": true})
	// The store's clock: a read at an earlier now still sees what expired
	// by the latest write's now.
	check(st, now, map[string]bool{"c0": true})
}
