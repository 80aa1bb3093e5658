// Package queuetest checks that an implementation of [slotstore.Store]
// keeps the slot contract: a connection never has more live holders than
// its limit, acquisition is idempotent per holder, a release frees the
// slot, an expired slot is reclaimed, renewal extends live slots and
// reports lost ones, and the cap holds under concurrency across several
// clients of one shared store.
//
// A store passes when [RunSlots] reports no failures:
//
//	func TestSlots(t *testing.T) {
//		queuetest.RunSlots(t, func(t *testing.T, n int) []slotstore.Store { return newStores(t, n) })
//	}
package queuetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/routeguard/routeguard/queue/slotstore"
)

// T0 is the reference time of the scenarios.
var T0 = time.Date(2026, 8, 12, 19, 30, 0, 0, time.UTC)

// TTL is the slot lifetime the stores under test must have.
const TTL = 15 * time.Second

// RunSlots runs the slot store conformance suite as subtests of t. newStores returns n
// clients of one new, empty store whose slots live TTL and that follows
// the now it is given; it may register cleanups on the t it is given.
func RunSlots(t *testing.T, newStores func(t *testing.T, n int) []slotstore.Store) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newStores) })
	}
}

var cases = []struct {
	name string
	run  func(t *testing.T, newStores func(t *testing.T, n int) []slotstore.Store)
}{
	{"CapRefusesWithEarliestExpiry", one(testCap)},
	{"AcquireIsIdempotent", one(testIdempotent)},
	{"ReleaseFreesSlot", one(testRelease)},
	{"ExpiredSlotIsReclaimed", one(testExpiry)},
	{"RenewExtendsAndReportsLost", one(testRenew)},
	{"BadLimit", one(testBadLimit)},
	{"CanceledContext", one(testCanceled)},
	{"CapOneAcrossThreeClients", testConcurrency},
}

func one(f func(t *testing.T, s slotstore.Store)) func(*testing.T, func(*testing.T, int) []slotstore.Store) {
	return func(t *testing.T, n func(*testing.T, int) []slotstore.Store) { f(t, n(t, 1)[0]) }
}

var bg = context.Background()

func try(t *testing.T, s slotstore.Store, conn string, limit int, holder string, now time.Time, wantOK bool, wantHeld int) time.Time {
	t.Helper()
	ok, held, retry, err := s.TryAcquire(bg, conn, limit, holder, now)
	if err != nil {
		t.Fatalf("TryAcquire(%s, %d, %s) at %v: %v", conn, limit, holder, now, err)
	}
	if ok != wantOK || held != wantHeld {
		t.Fatalf("TryAcquire(%s, %d, %s) at %v = ok %v held %d, want ok %v held %d", conn, limit, holder, now, ok, held, wantOK, wantHeld)
	}
	if ok && !retry.IsZero() {
		t.Fatalf("TryAcquire(%s, %s) granted with retryAt %v, want zero", conn, holder, retry)
	}
	return retry
}

func testCap(t *testing.T, s slotstore.Store) {
	try(t, s, "c1", 2, "a", T0, true, 1)
	try(t, s, "c1", 2, "b", T0.Add(time.Second), true, 2)
	retry := try(t, s, "c1", 2, "c", T0.Add(2*time.Second), false, 2)
	if !retry.Equal(T0.Add(TTL)) {
		t.Fatalf("retryAt = %v, want the earliest expiry %v", retry, T0.Add(TTL))
	}
	// Another connection has its own cap.
	try(t, s, "c2", 1, "c", T0.Add(2*time.Second), true, 1)
}

func testIdempotent(t *testing.T, s slotstore.Store) {
	try(t, s, "c1", 1, "a", T0, true, 1)
	try(t, s, "c1", 1, "a", T0.Add(time.Second), true, 1)
	// The retry renewed a's slot: it now expires at T0+1s+TTL.
	retry := try(t, s, "c1", 1, "b", T0.Add(TTL), false, 1)
	if !retry.Equal(T0.Add(time.Second + TTL)) {
		t.Fatalf("retryAt = %v, want %v", retry, T0.Add(time.Second+TTL))
	}
}

func testRelease(t *testing.T, s slotstore.Store) {
	try(t, s, "c1", 1, "a", T0, true, 1)
	try(t, s, "c1", 1, "b", T0, false, 1)
	if err := s.Release(bg, "c1", "a", T0); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(bg, "c1", "a", T0); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if err := s.Release(bg, "c9", "z", T0); err != nil {
		t.Fatalf("Release of an unknown slot: %v", err)
	}
	try(t, s, "c1", 1, "b", T0, true, 1)
}

func testExpiry(t *testing.T, s slotstore.Store) {
	try(t, s, "c1", 1, "a", T0, true, 1)
	try(t, s, "c1", 1, "b", T0.Add(TTL-time.Millisecond), false, 1)
	try(t, s, "c1", 1, "b", T0.Add(TTL), true, 1)
}

func testRenew(t *testing.T, s slotstore.Store) {
	try(t, s, "c1", 2, "a", T0, true, 1)
	try(t, s, "c1", 2, "b", T0, true, 2)
	try(t, s, "c2", 1, "a", T0, true, 1)
	lost, err := s.Renew(bg, []slotstore.Slot{{Conn: "c1", Holder: "a"}, {Conn: "c2", Holder: "a"}}, T0.Add(10*time.Second))
	if err != nil || len(lost) != 0 {
		t.Fatalf("Renew at T0+10s = %v, %v; want nothing lost", lost, err)
	}
	if err := s.Release(bg, "c2", "a", T0.Add(11*time.Second)); err != nil {
		t.Fatal(err)
	}
	lost, err = s.Renew(bg, []slotstore.Slot{{Conn: "c1", Holder: "a"}, {Conn: "c1", Holder: "b"}, {Conn: "c2", Holder: "a"}}, T0.Add(16*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(lost) != "[{c1 b} {c2 a}]" {
		t.Fatalf("Renew at T0+16s lost %v, want [{c1 b} {c2 a}] (b expired, c2 released)", lost)
	}
	// a's slot of c1 lives until T0+16s+TTL.
	try(t, s, "c1", 1, "x", T0.Add(16*time.Second+TTL-time.Millisecond), false, 1)
	try(t, s, "c1", 1, "x", T0.Add(16*time.Second+TTL), true, 1)
	if lost, err := s.Renew(bg, nil, T0); err != nil || len(lost) != 0 {
		t.Fatalf("Renew(nil) = %v, %v", lost, err)
	}
}

func testBadLimit(t *testing.T, s slotstore.Store) {
	for _, limit := range []int{0, -1} {
		if _, _, _, err := s.TryAcquire(bg, "c1", limit, "a", T0); !errors.Is(err, slotstore.ErrInvalidLimit) {
			t.Fatalf("TryAcquire with limit %d: %v, want ErrInvalidConfig", limit, err)
		}
	}
}

func testCanceled(t *testing.T, s slotstore.Store) {
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, _, _, err := s.TryAcquire(ctx, "c1", 1, "a", T0); err == nil {
		t.Fatalf("TryAcquire with a canceled context succeeded")
	}
	try(t, s, "c1", 1, "b", T0, true, 1)
}

// testConcurrency runs goroutines on three clients of one store for one
// connection of cap 1: no two ever hold a slot at once, and every
// goroutine gets its turn.
func testConcurrency(t *testing.T, newStores func(t *testing.T, n int) []slotstore.Store) {
	const clients, perClient, rounds = 3, 8, 5
	stores := newStores(t, clients)
	var (
		wg       sync.WaitGroup
		inFlight atomic.Int32
		maxSeen  atomic.Int32
		granted  atomic.Int32
		errs     = make(chan error, clients*perClient)
	)
	for c := range clients {
		for g := range perClient {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := stores[c]
				for r := range rounds {
					holder := fmt.Sprintf("client%d:g%d:r%d", c, g, r)
					for {
						ok, _, _, err := s.TryAcquire(bg, "capped", 1, holder, T0)
						if err != nil {
							errs <- err
							return
						}
						if ok {
							break
						}
						time.Sleep(50 * time.Microsecond)
					}
					n := inFlight.Add(1)
					for {
						m := maxSeen.Load()
						if n <= m || maxSeen.CompareAndSwap(m, n) {
							break
						}
					}
					granted.Add(1)
					time.Sleep(20 * time.Microsecond)
					inFlight.Add(-1)
					if err := s.Release(bg, "capped", holder, T0); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("store error: %v", err)
	}
	if m := maxSeen.Load(); m != 1 {
		t.Fatalf("%d slots in flight at once, want at most 1", m)
	}
	if g := granted.Load(); g != clients*perClient*rounds {
		t.Fatalf("%d grants, want %d", g, clients*perClient*rounds)
	}
}
