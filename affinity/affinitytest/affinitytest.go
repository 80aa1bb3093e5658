// Package affinitytest checks that an implementation of [affinity.Store]
// behaves as the affinity package expects, in the manner of
// testing/fstest.
//
// A store implementation calls [Run] from its own tests:
//
//	func TestStore(t *testing.T) {
//		affinitytest.Run(t, func() affinity.Store { return newRedisStore(t) })
//	}
package affinitytest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/routeguard/routeguard/affinity"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func key(provider string, b byte) affinity.StoreKey {
	var d [32]byte
	for i := range d {
		d[i] = b + byte(i)
	}
	return affinity.StoreKey{Provider: provider, Session: d}
}

func pin(conn string, ttl time.Duration) affinity.Pin {
	return affinity.Pin{Connection: conn, Created: t0, LastUsed: t0, Expires: t0.Add(ttl)}
}

// Run runs the conformance tests as subtests of t. newStore must return an
// empty store each time it is called. Pins are written with times in 2026;
// a store must honour the now it is given rather than the wall clock.
func Run(t *testing.T, newStore func() affinity.Store) {
	t.Run("RoundTrip", func(t *testing.T) {
		s := newStore()
		k := key("p", 1)
		want := pin("A", time.Minute)
		must(t, s.Save(k, want, t0))
		got, ok, err := s.Load(k, t0.Add(time.Second))
		must(t, err)
		if !ok || !samePin(got, want) {
			t.Fatalf("Load = %+v, %v; want %+v, true", got, ok, want)
		}
		if _, ok, _ := s.Load(key("p", 2), t0); ok {
			t.Fatal("Load of a key never saved reported a pin")
		}
	})
	t.Run("KeysAreDistinct", func(t *testing.T) {
		s := newStore()
		must(t, s.Save(key("p", 1), pin("A", time.Minute), t0))
		must(t, s.Save(key("q", 1), pin("B", time.Minute), t0))
		must(t, s.Save(key("p", 3), pin("C", time.Minute), t0))
		for k, want := range map[affinity.StoreKey]string{key("p", 1): "A", key("q", 1): "B", key("p", 3): "C"} {
			got, ok, err := s.Load(k, t0)
			must(t, err)
			if !ok || got.Connection != want {
				t.Fatalf("Load(%v) = %q, %v; want %q", k, got.Connection, ok, want)
			}
		}
	})
	t.Run("SaveReplaces", func(t *testing.T) {
		s := newStore()
		k := key("p", 1)
		must(t, s.Save(k, pin("A", time.Minute), t0))
		must(t, s.Save(k, pin("B", time.Hour), t0))
		got, ok, err := s.Load(k, t0.Add(30*time.Minute))
		must(t, err)
		if !ok || got.Connection != "B" {
			t.Fatalf("Load after replace = %+v, %v; want B", got, ok)
		}
	})
	t.Run("ExpiryIsExclusive", func(t *testing.T) {
		s := newStore()
		k := key("p", 1)
		must(t, s.Save(k, pin("A", time.Minute), t0))
		if _, ok, _ := s.Load(k, t0.Add(time.Minute-time.Nanosecond)); !ok {
			t.Fatal("pin dead before its expiry")
		}
		if _, ok, _ := s.Load(k, t0.Add(time.Minute)); ok {
			t.Fatal("pin returned at its expiry instant")
		}
		if _, ok, _ := s.Load(k, t0.Add(time.Hour)); ok {
			t.Fatal("expired pin returned")
		}
	})
	t.Run("Delete", func(t *testing.T) {
		s := newStore()
		k := key("p", 1)
		must(t, s.Save(k, pin("A", time.Minute), t0))
		if ok, err := s.Delete(k); err != nil || !ok {
			t.Fatalf("Delete = %v, %v; want true", ok, err)
		}
		if ok, err := s.Delete(k); err != nil || ok {
			t.Fatalf("second Delete = %v, %v; want false", ok, err)
		}
		if _, ok, _ := s.Load(k, t0); ok {
			t.Fatal("pin still there after Delete")
		}
	})
	t.Run("DeleteIf", func(t *testing.T) {
		s := newStore()
		k := key("p", 1)
		must(t, s.Save(k, pin("B", time.Minute), t0))
		if ok, err := s.DeleteIf(k, "A"); err != nil || ok {
			t.Fatalf("DeleteIf(other) = %v, %v; want false", ok, err)
		}
		if got, ok, _ := s.Load(k, t0); !ok || got.Connection != "B" {
			t.Fatal("DeleteIf removed a pin to another connection")
		}
		if ok, err := s.DeleteIf(k, "B"); err != nil || !ok {
			t.Fatalf("DeleteIf(same) = %v, %v; want true", ok, err)
		}
		if _, ok, _ := s.Load(k, t0); ok {
			t.Fatal("pin still there after DeleteIf")
		}
		if ok, _ := s.DeleteIf(key("p", 9), "B"); ok {
			t.Fatal("DeleteIf of a missing key reported true")
		}
	})
	t.Run("ListLiveOnly", func(t *testing.T) {
		s := newStore()
		must(t, s.Save(key("p", 1), pin("A", time.Minute), t0))
		must(t, s.Save(key("p", 2), pin("B", time.Hour), t0))
		must(t, s.Save(key("q", 3), pin("C", 2*time.Hour), t0))
		l, err := s.List(t0.Add(30 * time.Minute))
		must(t, err)
		var conns []string
		for _, e := range l {
			conns = append(conns, e.Pin.Connection)
		}
		slices.Sort(conns)
		if !slices.Equal(conns, []string{"B", "C"}) {
			t.Fatalf("List = %v; want [B C]", conns)
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		s := newStore()
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 200 {
					k := key(fmt.Sprint("p", i%3), byte(i%16))
					conn := fmt.Sprint("c", g)
					switch i % 4 {
					case 0:
						_ = s.Save(k, pin(conn, time.Minute), t0)
					case 1:
						if p, ok, err := s.Load(k, t0); err == nil && ok && p.Connection == "" {
							t.Error("live pin without a connection")
						}
					case 2:
						_, _ = s.DeleteIf(k, conn)
					default:
						_, _ = s.List(t0)
					}
				}
			})
		}
		wg.Wait()
	})
}

func samePin(a, b affinity.Pin) bool {
	return a.Connection == b.Connection && a.Created.Equal(b.Created) &&
		a.LastUsed.Equal(b.LastUsed) && a.Expires.Equal(b.Expires)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
