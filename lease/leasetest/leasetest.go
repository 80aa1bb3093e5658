// Package leasetest checks that an implementation of [lease.Store] keeps
// the lease contract: lease results and generations, lazy expiry,
// idempotent release, transitions that keep the generation, the fence
// verdicts, tolerance of a clock that goes backwards, and global
// uniqueness of active owners and connections under concurrency.
//
// A store passes when [Run] reports no failures:
//
//	func TestStore(t *testing.T) {
//		leasetest.Run(t, func(t *testing.T) lease.Store { return newStore(t) })
//	}
package leasetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/routeguard/routeguard/lease"
)

// T0 is the reference time of the scenarios.
var T0 = time.Date(2026, 8, 12, 19, 30, 0, 0, time.UTC)

// TTL is the lease lifetime the scenarios use.
const TTL = 120 * time.Second

// Owner returns a well-formed owner token made of 43 copies of c (one of
// A–Z, a–z, 0–9, '-' or '_').
func Owner(c byte) string { return lease.OwnerPrefix + strings.Repeat(string(c), 43) }

// Run runs the conformance suite as subtests of t. newStore returns a new,
// empty store for each subtest; it may register cleanups on the t it is
// given.
func Run(t *testing.T, newStore func(t *testing.T) lease.Store) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newStore(t)) })
	}
}

var cases = []struct {
	name string
	run  func(t *testing.T, s lease.Store)
}{
	{"AcquireNew", testAcquireNew},
	{"AcquireReused", testAcquireReused},
	{"OwnerActiveAndConnectionBusy", testOwnerActiveAndBusy},
	{"RenewAndRelease", testRenewAndRelease},
	{"Transition", testTransition},
	{"LazyExpiry", testLazyExpiry},
	{"GenerationsKeepRising", testGenerationsKeepRising},
	{"ExpiredCannotRenew", testExpiredCannotRenew},
	{"Fence", testFence},
	{"Invalidate", testInvalidate},
	{"ClockBackwards", testClockBackwards},
	{"List", testList},
	{"Occupant", testOccupant},
	{"Uniqueness", testUniqueness},
	{"OwnerUniqueness", testOwnerUniqueness},
	{"CanceledContext", testCanceledContext},
}

var bg = context.Background()

func req(owner lease.OwnerHash, key, conn string, ttl time.Duration) lease.Request {
	return lease.Request{Owner: owner, APIKeyID: key, Provider: "p", Connection: conn, TTL: ttl}
}

func acquire(t *testing.T, s lease.Store, r lease.Request, now time.Time, want lease.Result) lease.Outcome {
	t.Helper()
	out, err := s.Acquire(bg, r, now)
	if err != nil {
		t.Fatalf("Acquire(%s, %s) at %v: %v", r.APIKeyID, r.Connection, now, err)
	}
	if out.Result != want {
		t.Fatalf("Acquire(%s, %s) at %v = %s, want %s", r.APIKeyID, r.Connection, now, out.Result, want)
	}
	return out
}

func check(t *testing.T, step string, got lease.Outcome, err error, want lease.Result) lease.Outcome {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	if got.Result != want {
		t.Fatalf("%s = %s, want %s", step, got.Result, want)
	}
	return got
}

func checkLease(t *testing.T, step string, l lease.Lease, gen uint64, conn string, expires time.Time) {
	t.Helper()
	if l.Generation != gen || l.Connection != conn || !l.ExpiresAt.Equal(expires) {
		t.Fatalf("%s: lease gen %d conn %q expires %v, want gen %d conn %q expires %v",
			step, l.Generation, l.Connection, l.ExpiresAt, gen, conn, expires)
	}
}

var ownerA = lease.HashOwner(Owner('A'))
var ownerB = lease.HashOwner(Owner('B'))

func testAcquireNew(t *testing.T, s lease.Store) {
	out := acquire(t, s, req(ownerA, "k1", "c1", TTL), T0, lease.ResultAcquired)
	l := out.Lease
	checkLease(t, "acquire", l, 1, "c1", T0.Add(TTL))
	if l.State != lease.StateActive || !l.AcquiredAt.Equal(T0) || l.APIKeyID != "k1" || l.Provider != "p" || !l.Owner.Equal(ownerA) {
		t.Fatalf("acquire: lease %+v", l)
	}
	got, ok, err := s.Owned(bg, ownerA, T0)
	if err != nil || !ok || got.Generation != 1 || got.Connection != "c1" {
		t.Fatalf("Owned = %+v, %v, %v; want generation 1 on c1", got, ok, err)
	}
	leases, err := s.List(bg, T0)
	if err != nil {
		t.Fatal(err)
	}
	if dump := fmt.Sprintf("%+v %#v", leases, leases); strings.Contains(dump, Owner('A')) {
		t.Fatalf("store output contains the raw owner token")
	}
}

func testAcquireReused(t *testing.T, s lease.Store) {
	acquire(t, s, req(ownerA, "k1", "c1", TTL), T0, lease.ResultAcquired)
	r := req(ownerA, "k1", "c1", TTL)
	r.Provider = "p2"
	out := acquire(t, s, r, T0.Add(time.Second), lease.ResultReused)
	checkLease(t, "reuse", out.Lease, 1, "c1", T0.Add(121*time.Second))
	if out.Lease.Provider != "p2" || !out.Lease.RenewedAt.Equal(T0.Add(time.Second)) || !out.Lease.AcquiredAt.Equal(T0) {
		t.Fatalf("reuse: lease %+v; want provider p2, renewed at T0+1s, acquired at T0", out.Lease)
	}
}

func testOwnerActiveAndBusy(t *testing.T, s lease.Store) {
	first := acquire(t, s, req(ownerA, "k1", "c1", TTL), T0, lease.ResultAcquired)
	acquire(t, s, req(ownerA, "k2", "c2", TTL), T0.Add(time.Second), lease.ResultOwnerAlreadyActive)
	acquire(t, s, req(ownerA, "k1", "c2", TTL), T0.Add(time.Second), lease.ResultOwnerAlreadyActive)
	acquire(t, s, req(ownerA, "k2", "c1", TTL), T0.Add(time.Second), lease.ResultOwnerAlreadyActive)
	busy := acquire(t, s, req(ownerB, "k1", "c1", TTL), T0.Add(2*time.Second), lease.ResultConnectionBusy)
	if !busy.BusyUntil.Equal(first.Lease.ExpiresAt) {
		t.Fatalf("busy until %v, want A's expiry %v", busy.BusyUntil, first.Lease.ExpiresAt)
	}
	got, ok, _ := s.Owned(bg, ownerA, T0.Add(2*time.Second))
	if !ok || got.Connection != "c1" || got.APIKeyID != "k1" || !got.ExpiresAt.Equal(first.Lease.ExpiresAt) {
		t.Fatalf("A's lease changed: %+v", got)
	}
	if _, ok, _ := s.Owned(bg, ownerB, T0.Add(2*time.Second)); ok {
		t.Fatalf("B holds a lease after CONNECTION_BUSY")
	}
}

func testRenewAndRelease(t *testing.T, s lease.Store) {
	g := acquire(t, s, req(ownerA, "k1", "c1", TTL), T0, lease.ResultAcquired).Lease.Generation
	h := lease.Holder{Owner: ownerA, APIKeyID: "k1", Generation: g}
	at := T0.Add(10 * time.Second)
	stale := h
	stale.Generation = g + 1
	out, err := s.Renew(bg, stale, TTL, at)
	check(t, "renew g+1", out, err, lease.ResultStale)
	out, err = s.Renew(bg, h, TTL, at)
	out = check(t, "renew g", out, err, lease.ResultRenewed)
	checkLease(t, "renew g", out.Lease, g, "c1", at.Add(TTL))
	otherKey := h
	otherKey.APIKeyID = "k2"
	out, err = s.Renew(bg, otherKey, TTL, at)
	check(t, "renew other key", out, err, lease.ResultStale)
	older := h
	older.Generation = g - 1
	out, err = s.Release(bg, older, lease.ReasonOwnerExit, at)
	check(t, "release g-1", out, err, lease.ResultStale)
	out, err = s.Release(bg, otherKey, lease.ReasonOwnerExit, at)
	check(t, "release other key", out, err, lease.ResultStale)
	out, err = s.Release(bg, h, lease.ReasonOwnerExit, at)
	out = check(t, "release g", out, err, lease.ResultReleased)
	if out.Lease.State != lease.StateReleased || out.Lease.EndReason != lease.ReasonOwnerExit || !out.Lease.EndedAt.Equal(at) {
		t.Fatalf("release g: lease %+v", out.Lease)
	}
	if out.Repeated {
		t.Fatalf("first release reported Repeated")
	}
	out, err = s.Release(bg, h, lease.ReasonOwnerExit, at.Add(time.Second))
	out = check(t, "release g again", out, err, lease.ResultReleased)
	if !out.Repeated || out.Lease.State != lease.StateReleased || !out.Lease.EndedAt.Equal(at) {
		t.Fatalf("release g again: %+v, want the released lease with Repeated", out)
	}
	out, err = s.Release(bg, otherKey, lease.ReasonOwnerExit, at.Add(time.Second))
	check(t, "release g again, other key", out, err, lease.ResultStale)
	if _, ok, _ := s.Owned(bg, ownerA, at); ok {
		t.Fatalf("released lease still active")
	}
	acquire(t, s, req(ownerB, "k1", "c1", TTL), at.Add(time.Second), lease.ResultAcquired)
}

func testTransition(t *testing.T, s lease.Store) {
	g := acquire(t, s, req(ownerA, "k1", "c-b", TTL), T0, lease.ResultAcquired).Lease.Generation
	h := lease.Holder{Owner: ownerA, APIKeyID: "k1", Generation: g}
	acquire(t, s, req(ownerB, "k1", "c-busy", TTL), T0, lease.ResultAcquired)
	at := T0.Add(5 * time.Second)

	out, err := s.Transition(bg, h, "p", "c-b", lease.ReasonConnectionIneligible, TTL, at)
	out = check(t, "transition to same", out, err, lease.ResultReused)
	checkLease(t, "transition to same", out.Lease, g, "c-b", T0.Add(TTL))
	out, err = s.Transition(bg, h, "p", "c-busy", lease.ReasonConnectionIneligible, TTL, at)
	check(t, "transition to busy", out, err, lease.ResultConnectionBusy)
	stale := h
	stale.Generation++
	out, err = s.Transition(bg, stale, "p", "c-c", lease.ReasonConnectionIneligible, TTL, at)
	check(t, "transition stale", out, err, lease.ResultStale)

	out, err = s.Transition(bg, h, "p2", "c-c", lease.ReasonConnectionIneligible, TTL, at)
	out = check(t, "transition", out, err, lease.ResultTransitioned)
	checkLease(t, "transition", out.Lease, g, "c-c", at.Add(TTL))
	if out.Lease.Provider != "p2" || out.Previous.State != lease.StateInvalidated ||
		out.Previous.EndReason != lease.ReasonConnectionIneligible || out.Previous.Connection != "c-b" {
		t.Fatalf("transition: lease %+v previous %+v", out.Lease, out.Previous)
	}
	fences := []struct {
		key, conn string
		want      lease.Result
	}{
		{"k1", "c-b", lease.ResultConnectionMismatch},
		{"k1", "c-c", lease.ResultValid},
		{"k2", "c-c", lease.ResultAuthorizationMismatch},
	}
	for _, f := range fences {
		got, err := s.Fence(bg, lease.Holder{Owner: ownerA, APIKeyID: f.key, Generation: g}, f.conn, at)
		if err != nil || got != f.want {
			t.Errorf("Fence(%s, g, %s) = %s, %v; want %s", f.key, f.conn, got, err, f.want)
		}
	}
	// The old connection is free again.
	acquire(t, s, req(lease.HashOwner(Owner('C')), "k1", "c-b", TTL), at, lease.ResultAcquired)
}

func testLazyExpiry(t *testing.T, s lease.Store) {
	g := acquire(t, s, req(ownerA, "k1", "c1", time.Second), T0.Add(13*time.Second), lease.ResultAcquired).Lease.Generation
	expired, err := s.Reconcile(bg, T0.Add(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(expired) != 1 || expired[0].State != lease.StateExpired || expired[0].EndReason != lease.ReasonTTLExpired || expired[0].Generation != g {
		t.Fatalf("Reconcile = %+v, want one lease EXPIRED with TTL_EXPIRED", expired)
	}
	if again, _ := s.Reconcile(bg, T0.Add(15*time.Second)); len(again) != 0 {
		t.Fatalf("second Reconcile expired %d leases, want 0", len(again))
	}
	out := acquire(t, s, req(ownerA, "k1", "c1", time.Second), T0.Add(16*time.Second), lease.ResultAcquired)
	if out.Lease.Generation != g+1 {
		t.Fatalf("generation after expiry = %d, want %d", out.Lease.Generation, g+1)
	}
	// Without Reconcile, an expired lease frees its connection on the next
	// operation that touches it.
	acquire(t, s, req(ownerB, "k1", "c1", TTL), T0.Add(17*time.Second), lease.ResultAcquired)
}

func testGenerationsKeepRising(t *testing.T, s lease.Store) {
	g1 := acquire(t, s, req(ownerA, "k1", "c1", TTL), T0, lease.ResultAcquired).Lease.Generation
	if g1 != 1 {
		t.Fatalf("first generation = %d, want 1", g1)
	}
	out, err := s.Release(bg, lease.Holder{Owner: ownerA, APIKeyID: "k1", Generation: 1}, lease.ReasonOwnerExit, T0.Add(time.Second))
	check(t, "release 1", out, err, lease.ResultReleased)
	g2 := acquire(t, s, req(ownerA, "k1", "c1", TTL), T0.Add(2*time.Second), lease.ResultAcquired).Lease.Generation
	if g2 != 2 {
		t.Fatalf("generation after release = %d, want 2", g2)
	}
	out, err = s.Invalidate(bg, lease.Holder{Owner: ownerA, Generation: 2}, lease.ReasonHealthOrCooldown, T0.Add(3*time.Second))
	check(t, "invalidate 2", out, err, lease.ResultInvalidated)
	g3 := acquire(t, s, req(ownerA, "k2", "c2", TTL), T0.Add(4*time.Second), lease.ResultAcquired).Lease.Generation
	if g3 != 3 {
		t.Fatalf("generation after invalidate = %d, want 3", g3)
	}
	// Another owner's generations are its own.
	if g := acquire(t, s, req(ownerB, "k1", "c1", TTL), T0.Add(4*time.Second), lease.ResultAcquired).Lease.Generation; g != 1 {
		t.Fatalf("B's first generation = %d, want 1", g)
	}
}

func testExpiredCannotRenew(t *testing.T, s lease.Store) {
	acquire(t, s, req(ownerA, "k1", "c1", time.Second), T0, lease.ResultAcquired)
	h := lease.Holder{Owner: ownerA, APIKeyID: "k1", Generation: 1}
	out, err := s.Renew(bg, h, time.Second, T0.Add(500*time.Millisecond))
	check(t, "renew before expiry", out, err, lease.ResultRenewed)
	out, err = s.Renew(bg, h, time.Second, T0.Add(1500*time.Millisecond))
	check(t, "renew at expiry", out, err, lease.ResultStale)
	out, err = s.Release(bg, h, lease.ReasonOwnerExit, T0.Add(1600*time.Millisecond))
	check(t, "release after expiry", out, err, lease.ResultStale)
}

func testFence(t *testing.T, s lease.Store) {
	h := lease.Holder{Owner: ownerA, APIKeyID: "k1", Generation: 1}
	fence := func(step string, h lease.Holder, conn string, now time.Time, want lease.Result) {
		t.Helper()
		got, err := s.Fence(bg, h, conn, now)
		if err != nil || got != want {
			t.Fatalf("%s: Fence = %s, %v; want %s", step, got, err, want)
		}
	}
	fence("no lease", h, "c1", T0, lease.ResultRequired)
	acquire(t, s, req(ownerA, "k1", "c1", TTL), T0, lease.ResultAcquired)
	fence("valid", h, "c1", T0.Add(time.Second), lease.ResultValid)
	next := h
	next.Generation = 2
	fence("generation+1", next, "c1", T0.Add(time.Second), lease.ResultStale)
	other := h
	other.APIKeyID = "k2"
	fence("other key", other, "c1", T0.Add(time.Second), lease.ResultAuthorizationMismatch)
	fence("other connection", h, "c2", T0.Add(time.Second), lease.ResultConnectionMismatch)
	fence("other owner", lease.Holder{Owner: ownerB, APIKeyID: "k1", Generation: 1}, "c1", T0.Add(time.Second), lease.ResultRequired)
	fence("at expiry", h, "c1", T0.Add(TTL), lease.ResultRequired)
}

func testInvalidate(t *testing.T, s lease.Store) {
	acquire(t, s, req(ownerA, "k1", "c1", TTL), T0, lease.ResultAcquired)
	out, err := s.Invalidate(bg, lease.Holder{Owner: ownerA, Generation: 2}, lease.ReasonManagedKeyRevoked, T0)
	check(t, "invalidate wrong generation", out, err, lease.ResultStale)
	out, err = s.Invalidate(bg, lease.Holder{Owner: ownerA, Generation: 1}, lease.ReasonManagedKeyRevoked, T0.Add(time.Second))
	out = check(t, "invalidate", out, err, lease.ResultInvalidated)
	if out.Lease.State != lease.StateInvalidated || out.Lease.EndReason != lease.ReasonManagedKeyRevoked {
		t.Fatalf("invalidate: lease %+v", out.Lease)
	}
	out, err = s.Invalidate(bg, lease.Holder{Owner: ownerA, Generation: 1}, lease.ReasonManagedKeyRevoked, T0.Add(time.Second))
	check(t, "invalidate again", out, err, lease.ResultStale)
	out, err = s.Release(bg, lease.Holder{Owner: ownerA, APIKeyID: "k1", Generation: 1}, lease.ReasonOwnerExit, T0.Add(time.Second))
	check(t, "release invalidated", out, err, lease.ResultStale)
}

func testClockBackwards(t *testing.T, s lease.Store) {
	acquire(t, s, req(ownerA, "k1", "c1", TTL), T0.Add(time.Minute), lease.ResultAcquired)
	// A now before the acquisition must not make the lease look younger
	// or let another owner in.
	acquire(t, s, req(ownerB, "k1", "c1", TTL), T0, lease.ResultConnectionBusy)
	out, err := s.Renew(bg, lease.Holder{Owner: ownerA, APIKeyID: "k1", Generation: 1}, TTL, T0)
	out = check(t, "renew in the past", out, err, lease.ResultRenewed)
	if out.Lease.ExpiresAt.Before(T0.Add(time.Minute + TTL)) {
		t.Fatalf("renew in the past shortened the lease to %v", out.Lease.ExpiresAt)
	}
	got, err := s.Fence(bg, lease.Holder{Owner: ownerA, APIKeyID: "k1", Generation: 1}, "c1", T0)
	if err != nil || got != lease.ResultValid {
		t.Fatalf("Fence in the past = %s, %v; want VALID", got, err)
	}
}

func testList(t *testing.T, s lease.Store) {
	acquire(t, s, req(ownerB, "k1", "c2", TTL), T0, lease.ResultAcquired)
	acquire(t, s, req(ownerA, "k1", "c1", time.Second), T0, lease.ResultAcquired)
	acquire(t, s, req(lease.HashOwner(Owner('C')), "k1", "c0", TTL), T0, lease.ResultAcquired)
	got, err := s.List(bg, T0.Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var conns []string
	for _, l := range got {
		conns = append(conns, l.Connection)
	}
	if fmt.Sprint(conns) != "[c0 c2]" {
		t.Fatalf("List connections = %v, want [c0 c2] (c1 expired)", conns)
	}
}

func testOccupant(t *testing.T, s lease.Store) {
	if _, ok, err := s.Occupant(bg, "c1", T0); ok || err != nil {
		t.Fatalf("Occupant of a free connection = %v, %v", ok, err)
	}
	acquire(t, s, req(ownerA, "k1", "c1", TTL), T0, lease.ResultAcquired)
	l, ok, err := s.Occupant(bg, "c1", T0.Add(time.Second))
	if err != nil || !ok || !l.Owner.Equal(ownerA) || !l.ExpiresAt.Equal(T0.Add(TTL)) {
		t.Fatalf("Occupant(c1) = %+v, %v, %v; want A's lease", l, ok, err)
	}
	if _, ok, _ := s.Occupant(bg, "c1", T0.Add(TTL)); ok {
		t.Fatalf("Occupant(c1) at expiry still held")
	}
	if _, ok, _ := s.Occupant(bg, "c2", T0); ok {
		t.Fatalf("Occupant(c2) held")
	}
}

// testUniqueness races 100 owners for 10 connections: exactly 10 win, each
// on its own connection, and no connection is ever held twice.
func testUniqueness(t *testing.T, s lease.Store) {
	const owners, conns = 100, 10
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners = map[string]int{}
		errs    []error
	)
	start := make(chan struct{})
	for i := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := lease.HashOwner(fmt.Sprintf("owner-%d", i))
			<-start
			for c := range conns {
				conn := fmt.Sprintf("c%d", (i+c)%conns)
				out, err := s.Acquire(bg, req(owner, "k1", conn, TTL), T0)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else if out.Result == lease.ResultAcquired {
					winners[conn]++
				}
				mu.Unlock()
				if err != nil || out.Result == lease.ResultAcquired {
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("Acquire errors: %v", errs)
	}
	total := 0
	for conn, n := range winners {
		if n != 1 {
			t.Errorf("connection %s acquired %d times", conn, n)
		}
		total += n
	}
	if total != conns {
		t.Fatalf("%d winners, want %d", total, conns)
	}
	list, err := s.List(bg, T0)
	if err != nil {
		t.Fatal(err)
	}
	seenOwner := map[lease.OwnerHash]bool{}
	seenConn := map[string]bool{}
	for _, l := range list {
		if seenOwner[l.Owner] || seenConn[l.Connection] {
			t.Fatalf("duplicate active lease %+v", l)
		}
		seenOwner[l.Owner], seenConn[l.Connection] = true, true
	}
	if len(list) != conns {
		t.Fatalf("List has %d leases, want %d", len(list), conns)
	}
}

// testOwnerUniqueness races one owner for 10 connections, under one API
// key and under two: exactly one acquisition wins, every other gets
// OWNER_ALREADY_ACTIVE, and the owner ends with one active lease.
func testOwnerUniqueness(t *testing.T, s lease.Store) {
	const conns = 10
	for round, keys := range [][]string{{"k1"}, {"k1", "k2"}} {
		owner := lease.HashOwner(fmt.Sprintf("racer-%d", round))
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			results = map[lease.Result]int{}
			won     lease.Lease
			errs    []error
		)
		start := make(chan struct{})
		for c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				out, err := s.Acquire(bg, req(owner, keys[c%len(keys)], fmt.Sprintf("r%d-c%d", round, c), TTL), T0)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				results[out.Result]++
				if out.Result == lease.ResultAcquired {
					won = out.Lease
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("round %d: Acquire errors: %v", round, errs)
		}
		if results[lease.ResultAcquired] != 1 || results[lease.ResultOwnerAlreadyActive] != conns-1 {
			t.Fatalf("round %d: results %v, want 1 ACQUIRED and %d OWNER_ALREADY_ACTIVE", round, results, conns-1)
		}
		got, ok, err := s.Owned(bg, owner, T0)
		if err != nil || !ok || got.Connection != won.Connection || got.Generation != 1 {
			t.Fatalf("round %d: Owned = %+v, %v, %v; want the winner's lease %+v", round, got, ok, err, won)
		}
		n := 0
		list, err := s.List(bg, T0)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range list {
			if l.Owner.Equal(owner) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("round %d: owner holds %d active leases, want 1", round, n)
		}
	}
}

func testCanceledContext(t *testing.T, s lease.Store) {
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := s.Acquire(ctx, req(ownerA, "k1", "c1", TTL), T0); err == nil {
		t.Fatalf("Acquire with a canceled context succeeded")
	}
	if _, ok, _ := s.Owned(bg, ownerA, T0); ok {
		t.Fatalf("Acquire with a canceled context left a lease")
	}
}
