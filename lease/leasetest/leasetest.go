// Package leasetest checks that an implementation of [lease.Store] keeps
// the lease contract: acquisition, renewal and refusals (the package's
// sentinels), generations, lazy expiry, idempotent release, transitions
// that keep the generation, the fence refusals, tolerance of a clock that
// goes backwards, and global uniqueness of active owners and connections
// under concurrency.
//
// A store passes when [Run] reports no failures:
//
//	func TestStore(t *testing.T) {
//		leasetest.Run(t, func(t *testing.T) lease.Store { return newStore(t) })
//	}
package leasetest

import (
	"context"
	"errors"
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
func Owner(c byte) string { return "vlo_" + strings.Repeat(string(c), 43) }

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

// outcome is what a test expects of Acquire.
type outcome int

const (
	acquired    outcome = iota // a new lease
	reused                     // the owner's lease renewed in place
	ownerActive                // ErrOwnerAlreadyActive
	busy                       // the capacity refusal, with the occupant's expiry
)

func (o outcome) String() string {
	return [...]string{"ACQUIRED", "REUSED", "OWNER_ALREADY_ACTIVE", "CONNECTION_BUSY"}[o]
}

type req struct {
	owner          lease.OwnerHash
	key, conn, pro string
	ttl            time.Duration
}

func request(owner lease.OwnerHash, key, conn string, ttl time.Duration) req {
	return req{owner: owner, key: key, conn: conn, pro: "p", ttl: ttl}
}

// acquire runs Acquire and checks its outcome. For busy it returns the
// occupant's expiry as the lease's ExpiresAt.
func acquire(t *testing.T, s lease.Store, r req, now time.Time, want outcome) lease.Lease {
	t.Helper()
	l, renewed, err := s.Acquire(bg, lease.Holder{Owner: r.owner, APIKeyID: r.key}, r.pro, r.conn, r.ttl, now)
	got := acquired
	switch {
	case err == nil && renewed:
		got = reused
	case err == nil:
	case errors.Is(err, lease.ErrOwnerAlreadyActive):
		got = ownerActive
	case errors.Is(err, lease.ErrCapacityUnavailable):
		got = busy
		var le *lease.Error
		if !errors.As(err, &le) {
			t.Fatalf("Acquire(%s, %s) at %v: capacity refusal %v is not a *lease.Error", r.key, r.conn, now, err)
		}
		l = lease.Lease{ExpiresAt: le.Until}
	default:
		t.Fatalf("Acquire(%s, %s) at %v: %v", r.key, r.conn, now, err)
	}
	if got != want {
		t.Fatalf("Acquire(%s, %s) at %v = %s (%v), want %s", r.key, r.conn, now, got, err, want)
	}
	return l
}

// errAuthMismatch stands, as a wanted refusal, for the contract's
// authorization mismatch: a *lease.Error with CodeFenceStale and the
// Detail the lease package documents for it.
var errAuthMismatch = errors.New(`a LEASE_FENCE_STALE *lease.Error with Detail "` + authMismatchDetail + `"`)

const authMismatchDetail = "lease held under another api key"

// connectionIneligible is the end reason of a move.
const connectionIneligible = lease.Reason("CONNECTION_INELIGIBLE")

// isAuthMismatch reports whether err is the authorization mismatch.
func isAuthMismatch(err error) bool {
	var le *lease.Error
	return errors.As(err, &le) && le.Code == lease.CodeFenceStale && le.Detail == authMismatchDetail
}

// same reports whether got is the refusal want (nil for success). A
// plain ErrFenceStale is not an authorization mismatch, nor the other way
// round.
func same(got, want error) bool {
	if want == nil || got == nil {
		return got == want
	}
	if want == errAuthMismatch {
		return isAuthMismatch(got)
	}
	if want == lease.ErrFenceStale && isAuthMismatch(got) {
		return false
	}
	return errors.Is(got, want)
}

func check(t *testing.T, step string, err, want error) {
	t.Helper()
	if !same(err, want) {
		t.Fatalf("%s: error %v, want %v", step, err, want)
	}
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
	l := acquire(t, s, request(ownerA, "k1", "c1", TTL), T0, acquired)
	checkLease(t, "acquire", l, 1, "c1", T0.Add(TTL))
	if l.State != lease.StateActive || !l.AcquiredAt.Equal(T0) || l.APIKeyID != "k1" || l.Provider != "p" || l.Owner != ownerA {
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
	acquire(t, s, request(ownerA, "k1", "c1", TTL), T0, acquired)
	r := request(ownerA, "k1", "c1", TTL)
	r.pro = "p2"
	l := acquire(t, s, r, T0.Add(time.Second), reused)
	checkLease(t, "reuse", l, 1, "c1", T0.Add(121*time.Second))
	if l.Provider != "p2" || !l.RenewedAt.Equal(T0.Add(time.Second)) || !l.AcquiredAt.Equal(T0) {
		t.Fatalf("reuse: lease %+v; want provider p2, renewed at T0+1s, acquired at T0", l)
	}
}

func testOwnerActiveAndBusy(t *testing.T, s lease.Store) {
	first := acquire(t, s, request(ownerA, "k1", "c1", TTL), T0, acquired)
	acquire(t, s, request(ownerA, "k2", "c2", TTL), T0.Add(time.Second), ownerActive)
	acquire(t, s, request(ownerA, "k1", "c2", TTL), T0.Add(time.Second), ownerActive)
	acquire(t, s, request(ownerA, "k2", "c1", TTL), T0.Add(time.Second), ownerActive)
	occupied := acquire(t, s, request(ownerB, "k1", "c1", TTL), T0.Add(2*time.Second), busy)
	if !occupied.ExpiresAt.Equal(first.ExpiresAt) {
		t.Fatalf("busy until %v, want A's expiry %v", occupied.ExpiresAt, first.ExpiresAt)
	}
	got, ok, _ := s.Owned(bg, ownerA, T0.Add(2*time.Second))
	if !ok || got.Connection != "c1" || got.APIKeyID != "k1" || !got.ExpiresAt.Equal(first.ExpiresAt) {
		t.Fatalf("A's lease changed: %+v", got)
	}
	if _, ok, _ := s.Owned(bg, ownerB, T0.Add(2*time.Second)); ok {
		t.Fatalf("B holds a lease after CONNECTION_BUSY")
	}
}

func testRenewAndRelease(t *testing.T, s lease.Store) {
	g := acquire(t, s, request(ownerA, "k1", "c1", TTL), T0, acquired).Generation
	h := lease.Holder{Owner: ownerA, APIKeyID: "k1", Generation: g}
	at := T0.Add(10 * time.Second)
	stale := h
	stale.Generation = g + 1
	_, err := s.Renew(bg, stale, TTL, at)
	check(t, "renew g+1", err, lease.ErrFenceStale)
	l, err := s.Renew(bg, h, TTL, at)
	check(t, "renew g", err, nil)
	checkLease(t, "renew g", l, g, "c1", at.Add(TTL))
	otherKey := h
	otherKey.APIKeyID = "k2"
	_, err = s.Renew(bg, otherKey, TTL, at)
	check(t, "renew other key", err, lease.ErrFenceStale)
	older := h
	older.Generation = g - 1
	_, _, err = s.Release(bg, older, lease.ReasonOwnerExit, at)
	check(t, "release g-1", err, lease.ErrFenceStale)
	_, _, err = s.Release(bg, otherKey, lease.ReasonOwnerExit, at)
	check(t, "release other key", err, lease.ErrFenceStale)
	l, again, err := s.Release(bg, h, lease.ReasonOwnerExit, at)
	check(t, "release g", err, nil)
	if l.State != lease.StateReleased || l.EndReason != lease.ReasonOwnerExit || !l.EndedAt.Equal(at) {
		t.Fatalf("release g: lease %+v", l)
	}
	if again {
		t.Fatalf("first release reported again")
	}
	l, again, err = s.Release(bg, h, lease.ReasonOwnerExit, at.Add(time.Second))
	check(t, "release g again", err, nil)
	if !again || l.State != lease.StateReleased || !l.EndedAt.Equal(at) {
		t.Fatalf("release g again: %+v, %v; want the released lease with again", l, again)
	}
	_, _, err = s.Release(bg, otherKey, lease.ReasonOwnerExit, at.Add(time.Second))
	check(t, "release g again, other key", err, lease.ErrFenceStale)
	if _, ok, _ := s.Owned(bg, ownerA, at); ok {
		t.Fatalf("released lease still active")
	}
	acquire(t, s, request(ownerB, "k1", "c1", TTL), at.Add(time.Second), acquired)
}

func testTransition(t *testing.T, s lease.Store) {
	g := acquire(t, s, request(ownerA, "k1", "c-b", TTL), T0, acquired).Generation
	h := lease.Holder{Owner: ownerA, APIKeyID: "k1", Generation: g}
	acquire(t, s, request(ownerB, "k1", "c-busy", TTL), T0, acquired)
	at := T0.Add(5 * time.Second)

	l, prev, err := s.Transition(bg, h, "p", "c-b", connectionIneligible, TTL, at)
	check(t, "transition to same", err, nil)
	checkLease(t, "transition to same", l, g, "c-b", T0.Add(TTL))
	if prev != (lease.Lease{}) {
		t.Fatalf("transition to same: previous %+v, want none", prev)
	}
	_, _, err = s.Transition(bg, h, "p", "c-busy", connectionIneligible, TTL, at)
	var le *lease.Error
	if !errors.Is(err, lease.ErrCapacityUnavailable) || !errors.As(err, &le) || !le.Until.Equal(T0.Add(TTL)) {
		t.Fatalf("transition to busy: %v, want a capacity refusal until %v", err, T0.Add(TTL))
	}
	stale := h
	stale.Generation++
	_, _, err = s.Transition(bg, stale, "p", "c-c", connectionIneligible, TTL, at)
	check(t, "transition stale", err, lease.ErrFenceStale)

	l, prev, err = s.Transition(bg, h, "p2", "c-c", connectionIneligible, TTL, at)
	check(t, "transition", err, nil)
	checkLease(t, "transition", l, g, "c-c", at.Add(TTL))
	if l.Provider != "p2" || prev.State != lease.StateInvalidated ||
		prev.EndReason != connectionIneligible || prev.Connection != "c-b" {
		t.Fatalf("transition: lease %+v previous %+v", l, prev)
	}
	fences := []struct {
		key, conn string
		want      error
	}{
		{"k1", "c-b", lease.ErrConnectionMismatch},
		{"k1", "c-c", nil},
		{"k2", "c-c", errAuthMismatch},
	}
	for _, f := range fences {
		err := s.Fence(bg, lease.Holder{Owner: ownerA, APIKeyID: f.key, Generation: g}, f.conn, at)
		if !same(err, f.want) {
			t.Errorf("Fence(%s, g, %s) = %v; want %v", f.key, f.conn, err, f.want)
		}
	}
	// The old connection is free again.
	acquire(t, s, request(lease.HashOwner(Owner('C')), "k1", "c-b", TTL), at, acquired)
}

func testLazyExpiry(t *testing.T, s lease.Store) {
	g := acquire(t, s, request(ownerA, "k1", "c1", time.Second), T0.Add(13*time.Second), acquired).Generation
	expired, err := s.Reconcile(bg, T0.Add(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(expired) != 1 || expired[0].State != lease.StateExpired || expired[0].EndReason != lease.Reason("TTL_EXPIRED") || expired[0].Generation != g {
		t.Fatalf("Reconcile = %+v, want one lease EXPIRED with TTL_EXPIRED", expired)
	}
	if again, _ := s.Reconcile(bg, T0.Add(15*time.Second)); len(again) != 0 {
		t.Fatalf("second Reconcile expired %d leases, want 0", len(again))
	}
	l := acquire(t, s, request(ownerA, "k1", "c1", time.Second), T0.Add(16*time.Second), acquired)
	if l.Generation != g+1 {
		t.Fatalf("generation after expiry = %d, want %d", l.Generation, g+1)
	}
	// Without Reconcile, an expired lease frees its connection on the next
	// operation that touches it.
	acquire(t, s, request(ownerB, "k1", "c1", TTL), T0.Add(17*time.Second), acquired)
}

func testGenerationsKeepRising(t *testing.T, s lease.Store) {
	g1 := acquire(t, s, request(ownerA, "k1", "c1", TTL), T0, acquired).Generation
	if g1 != 1 {
		t.Fatalf("first generation = %d, want 1", g1)
	}
	_, _, err := s.Release(bg, lease.Holder{Owner: ownerA, APIKeyID: "k1", Generation: 1}, lease.ReasonOwnerExit, T0.Add(time.Second))
	check(t, "release 1", err, nil)
	g2 := acquire(t, s, request(ownerA, "k1", "c1", TTL), T0.Add(2*time.Second), acquired).Generation
	if g2 != 2 {
		t.Fatalf("generation after release = %d, want 2", g2)
	}
	_, err = s.Invalidate(bg, lease.Holder{Owner: ownerA, Generation: 2}, "HEALTH_OR_COOLDOWN", T0.Add(3*time.Second))
	check(t, "invalidate 2", err, nil)
	g3 := acquire(t, s, request(ownerA, "k2", "c2", TTL), T0.Add(4*time.Second), acquired).Generation
	if g3 != 3 {
		t.Fatalf("generation after invalidate = %d, want 3", g3)
	}
	// Another owner's generations are its own.
	if g := acquire(t, s, request(ownerB, "k1", "c1", TTL), T0.Add(4*time.Second), acquired).Generation; g != 1 {
		t.Fatalf("B's first generation = %d, want 1", g)
	}
}

func testExpiredCannotRenew(t *testing.T, s lease.Store) {
	acquire(t, s, request(ownerA, "k1", "c1", time.Second), T0, acquired)
	h := lease.Holder{Owner: ownerA, APIKeyID: "k1", Generation: 1}
	_, err := s.Renew(bg, h, time.Second, T0.Add(500*time.Millisecond))
	check(t, "renew before expiry", err, nil)
	_, err = s.Renew(bg, h, time.Second, T0.Add(1500*time.Millisecond))
	check(t, "renew at expiry", err, lease.ErrFenceStale)
	_, _, err = s.Release(bg, h, lease.ReasonOwnerExit, T0.Add(1600*time.Millisecond))
	check(t, "release after expiry", err, lease.ErrFenceStale)
}

func testFence(t *testing.T, s lease.Store) {
	h := lease.Holder{Owner: ownerA, APIKeyID: "k1", Generation: 1}
	fence := func(step string, h lease.Holder, conn string, now time.Time, want error) {
		t.Helper()
		if err := s.Fence(bg, h, conn, now); !same(err, want) {
			t.Fatalf("%s: Fence = %v; want %v", step, err, want)
		}
	}
	fence("no lease", h, "c1", T0, lease.ErrRequired)
	acquire(t, s, request(ownerA, "k1", "c1", TTL), T0, acquired)
	fence("valid", h, "c1", T0.Add(time.Second), nil)
	next := h
	next.Generation = 2
	fence("generation+1", next, "c1", T0.Add(time.Second), lease.ErrFenceStale)
	other := h
	other.APIKeyID = "k2"
	fence("other key", other, "c1", T0.Add(time.Second), errAuthMismatch)
	fence("other connection", h, "c2", T0.Add(time.Second), lease.ErrConnectionMismatch)
	fence("other owner", lease.Holder{Owner: ownerB, APIKeyID: "k1", Generation: 1}, "c1", T0.Add(time.Second), lease.ErrRequired)
	fence("at expiry", h, "c1", T0.Add(TTL), lease.ErrRequired)
}

func testInvalidate(t *testing.T, s lease.Store) {
	acquire(t, s, request(ownerA, "k1", "c1", TTL), T0, acquired)
	_, err := s.Invalidate(bg, lease.Holder{Owner: ownerA, Generation: 2}, "MANAGED_KEY_REVOKED", T0)
	check(t, "invalidate wrong generation", err, lease.ErrFenceStale)
	l, err := s.Invalidate(bg, lease.Holder{Owner: ownerA, Generation: 1}, "MANAGED_KEY_REVOKED", T0.Add(time.Second))
	check(t, "invalidate", err, nil)
	if l.State != lease.StateInvalidated || l.EndReason != "MANAGED_KEY_REVOKED" {
		t.Fatalf("invalidate: lease %+v", l)
	}
	_, err = s.Invalidate(bg, lease.Holder{Owner: ownerA, Generation: 1}, "MANAGED_KEY_REVOKED", T0.Add(time.Second))
	check(t, "invalidate again", err, lease.ErrFenceStale)
	_, _, err = s.Release(bg, lease.Holder{Owner: ownerA, APIKeyID: "k1", Generation: 1}, lease.ReasonOwnerExit, T0.Add(time.Second))
	check(t, "release invalidated", err, lease.ErrFenceStale)
}

func testClockBackwards(t *testing.T, s lease.Store) {
	acquire(t, s, request(ownerA, "k1", "c1", TTL), T0.Add(time.Minute), acquired)
	// A now before the acquisition must not make the lease look younger
	// or let another owner in.
	acquire(t, s, request(ownerB, "k1", "c1", TTL), T0, busy)
	l, err := s.Renew(bg, lease.Holder{Owner: ownerA, APIKeyID: "k1", Generation: 1}, TTL, T0)
	check(t, "renew in the past", err, nil)
	if l.ExpiresAt.Before(T0.Add(time.Minute + TTL)) {
		t.Fatalf("renew in the past shortened the lease to %v", l.ExpiresAt)
	}
	if err := s.Fence(bg, lease.Holder{Owner: ownerA, APIKeyID: "k1", Generation: 1}, "c1", T0); err != nil {
		t.Fatalf("Fence in the past = %v; want nil", err)
	}
}

func testList(t *testing.T, s lease.Store) {
	acquire(t, s, request(ownerB, "k1", "c2", TTL), T0, acquired)
	acquire(t, s, request(ownerA, "k1", "c1", time.Second), T0, acquired)
	acquire(t, s, request(lease.HashOwner(Owner('C')), "k1", "c0", TTL), T0, acquired)
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
	acquire(t, s, request(ownerA, "k1", "c1", TTL), T0, acquired)
	l, ok, err := s.Occupant(bg, "c1", T0.Add(time.Second))
	if err != nil || !ok || l.Owner != ownerA || !l.ExpiresAt.Equal(T0.Add(TTL)) {
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
				_, renewed, err := s.Acquire(bg, lease.Holder{Owner: owner, APIKeyID: "k1"}, "p", conn, TTL, T0)
				won := err == nil && !renewed
				if errors.Is(err, lease.ErrCapacityUnavailable) {
					err = nil
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else if won {
					winners[conn]++
				}
				mu.Unlock()
				if err != nil || won {
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
// ErrOwnerAlreadyActive, and the owner ends with one active lease.
func testOwnerUniqueness(t *testing.T, s lease.Store) {
	const conns = 10
	for round, keys := range [][]string{{"k1"}, {"k1", "k2"}} {
		owner := lease.HashOwner(fmt.Sprintf("racer-%d", round))
		var (
			wg             sync.WaitGroup
			mu             sync.Mutex
			wins, refusals int
			won            lease.Lease
			errs           []error
		)
		start := make(chan struct{})
		for c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				l, renewed, err := s.Acquire(bg, lease.Holder{Owner: owner, APIKeyID: keys[c%len(keys)]}, "p", fmt.Sprintf("r%d-c%d", round, c), TTL, T0)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errors.Is(err, lease.ErrOwnerAlreadyActive):
					refusals++
				case err != nil:
					errs = append(errs, err)
				case renewed:
					errs = append(errs, fmt.Errorf("connection %d renewed a lease it never had", c))
				default:
					wins++
					won = l
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("round %d: Acquire errors: %v", round, errs)
		}
		if wins != 1 || refusals != conns-1 {
			t.Fatalf("round %d: %d acquired and %d refused, want 1 and %d OWNER_ALREADY_ACTIVE", round, wins, refusals, conns-1)
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
			if l.Owner == owner {
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
	if _, _, err := s.Acquire(ctx, lease.Holder{Owner: ownerA, APIKeyID: "k1"}, "p", "c1", TTL, T0); err == nil {
		t.Fatalf("Acquire with a canceled context succeeded")
	}
	if _, ok, _ := s.Owned(bg, ownerA, T0); ok {
		t.Fatalf("Acquire with a canceled context left a lease")
	}
}
