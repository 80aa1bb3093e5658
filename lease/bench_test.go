package lease_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lease/leasetest"
)

func acquireAt(m *lease.Manager, c claimT, now time.Time) (lease.Lease, error) {
	return m.AcquireAt(ctx, c.h, c.provider, c.cands, now)
}

// fencedManager returns a Manager holding n leases and the holder of the
// first one, on connection "c0".
func fencedManager(b *testing.B, n int) (*lease.Manager, lease.Holder) {
	b.Helper()
	m := lease.New(lease.Config{})
	for i := range n {
		_, err := acquireAt(m, claim(lease.HashOwner(fmt.Sprint("bench", i)), "k1", fmt.Sprint("c", i)), T0)
		if err != nil {
			b.Fatal(err)
		}
	}
	return m, lease.Holder{Owner: lease.HashOwner("bench0"), APIKeyID: "k1", Generation: 1}
}

func BenchmarkFenceAt(b *testing.B) {
	m, h := fencedManager(b, 1000)
	at := T0.Add(1)
	b.ReportAllocs()
	for b.Loop() {
		if err := m.FenceAt(ctx, h, "c0", at); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFenceAtStale(b *testing.B) {
	m, h := fencedManager(b, 1000)
	h.Generation = 2
	at := T0.Add(1)
	b.ReportAllocs()
	for b.Loop() {
		if err := m.FenceAt(ctx, h, "c0", at); err == nil {
			b.Fatal("stale generation passed")
		}
	}
}

func BenchmarkFenceAtParallel(b *testing.B) {
	const n = 64
	m, _ := fencedManager(b, n)
	holders := make([]lease.Holder, n)
	conns := make([]string, n)
	for i := range n {
		holders[i] = lease.Holder{Owner: lease.HashOwner(fmt.Sprint("bench", i)), APIKeyID: "k1", Generation: 1}
		conns[i] = fmt.Sprint("c", i)
	}
	at := T0.Add(1)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if err := m.FenceAt(ctx, holders[i%n], conns[i%n], at); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

// BenchmarkRequestPath is the whole per-request lease work of a router:
// parse the headers, fence, strip the headers.
func BenchmarkRequestPath(b *testing.B) {
	m := lease.New(lease.Config{})
	owner := leasetest.Owner('A')
	if _, err := acquireAt(m, claim(lease.HashOwner(owner), "k1", "c1"), T0); err != nil {
		b.Fatal(err)
	}
	at := T0.Add(1)
	h := http.Header{}
	ownerVal, genVal := []string{owner}, []string{"1"}
	b.ReportAllocs()
	for b.Loop() {
		h[lease.HeaderOwner] = ownerVal
		h[lease.HeaderGeneration] = genVal
		owner, gen, err := lease.ParseHeader(h)
		if err != nil {
			b.Fatal(err)
		}
		if err := m.FenceAt(ctx, lease.Holder{Owner: owner, APIKeyID: "k1", Generation: gen}, "c1", at); err != nil {
			b.Fatal(err)
		}
		lease.StripHeaders(h)
	}
}

func BenchmarkHeldAt(b *testing.B) {
	m, _ := fencedManager(b, 1000)
	at := T0.Add(1)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, _ := m.HeldAt(ctx, "c0", at); !ok {
			b.Fatal("not held")
		}
	}
}

func BenchmarkParseHeader(b *testing.B) {
	h := header(lease.HeaderOwner, leasetest.Owner('A'), lease.HeaderGeneration, "12")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := lease.ParseHeader(h); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	m := lease.New(lease.Config{})
	owner := lease.HashOwner(leasetest.Owner('A'))
	c := claim(owner, "k1", "c1", "c2")
	b.ReportAllocs()
	for b.Loop() {
		l, err := acquireAt(m, c, T0)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.ReleaseAt(ctx, lease.Holder{Owner: owner, APIKeyID: "k1", Generation: l.Generation}, "", T0); err != nil {
			b.Fatal(err)
		}
	}
}
