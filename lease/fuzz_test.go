package lease_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lease/leasetest"
)

func FuzzParseOwner(f *testing.F) {
	f.Add(leasetest.Owner('A'))
	f.Add(" " + leasetest.Owner('_') + "\n")
	f.Add("vlo_short")
	f.Add("")
	f.Add("vlo_" + strings.Repeat("+", 43))
	f.Fuzz(func(t *testing.T, s string) {
		h, err := lease.ParseOwner(s)
		trimmed := strings.TrimSpace(s)
		if err != nil {
			if !errors.Is(err, lease.ErrContextRequired) && !errors.Is(err, lease.ErrContextInvalid) {
				t.Fatalf("ParseOwner(%q): unexpected error %v", s, err)
			}
			if !lease.IsZero(h) {
				t.Fatalf("ParseOwner(%q) returned a digest with an error", s)
			}
			if lease.ValidOwner(trimmed) {
				t.Fatalf("ParseOwner(%q) refused a valid token", s)
			}
			return
		}
		if len(trimmed) != lease.OwnerLen || !lease.ValidOwner(trimmed) {
			t.Fatalf("ParseOwner(%q) accepted an invalid token", s)
		}
		if h != lease.HashOwner(trimmed) || h.String() == trimmed || len(h.String()) != 64 {
			t.Fatalf("ParseOwner(%q): wrong digest", s)
		}
	})
}

func FuzzParseGeneration(f *testing.F) {
	for _, s := range []string{"1", "42", " 7 ", "0", "01", "-1", "1e3", "9007199254740991", "9007199254740992", "18446744073709551616", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := lease.ParseGeneration(s)
		if err != nil {
			if !errors.Is(err, lease.ErrContextInvalid) || g != 0 {
				t.Fatalf("ParseGeneration(%q) = %d, %v", s, g, err)
			}
			return
		}
		if g < 1 || g > lease.MaxGeneration {
			t.Fatalf("ParseGeneration(%q) = %d out of range", s, g)
		}
		if strconv.FormatUint(g, 10) != strings.TrimSpace(s) {
			t.Fatalf("ParseGeneration(%q) = %d does not round-trip", s, g)
		}
	})
}

func FuzzParseHeader(f *testing.F) {
	f.Add(leasetest.Owner('A'), "1")
	f.Add(leasetest.Owner('A'), "")
	f.Add("", "1")
	f.Add("vlo_short", "x")
	f.Fuzz(func(t *testing.T, owner, gen string) {
		h := http.Header{}
		if owner != "" {
			h.Set(lease.HeaderOwner, owner)
		}
		if gen != "" {
			h.Set(lease.HeaderGeneration, gen)
		}
		o, g, err := lease.ParseHeader(h)
		if err != nil {
			var le *lease.Error
			if !errors.As(err, &le) || le.Status != http.StatusBadRequest || !lease.IsZero(o) || g != 0 {
				t.Fatalf("ParseHeader(%q, %q) = %v, %d, %v", owner, gen, o, g, err)
			}
			return
		}
		if o != lease.HashOwner(strings.TrimSpace(owner)) || g < 1 || g > lease.MaxGeneration {
			t.Fatalf("ParseHeader(%q, %q) = %v, %d", owner, gen, o, g)
		}
		lease.StripHeaders(h)
		if len(h) != 0 {
			t.Fatalf("StripHeaders left %v", h)
		}
	})
}

func FuzzConfigNormalize(f *testing.F) {
	f.Add(int64(0), int64(0), int64(0))
	f.Add(int64(-1), int64(-1), int64(-1))
	f.Add(int64(time.Hour), int64(1<<40), int64(1<<62))
	f.Add(int64(1), int64(1), int64(1))
	f.Fuzz(func(t *testing.T, ttl, owners, retention int64) {
		c := lease.Config{TTL: time.Duration(ttl), MaxOwners: int(owners), Retention: time.Duration(retention)}.Normalize()
		if c.TTL < lease.MinTTL || c.TTL > lease.MaxTTL ||
			c.MaxOwners < lease.MinMaxOwners || c.MaxOwners > lease.MaxMaxOwners ||
			c.Retention < lease.MinRetention || c.Retention > lease.MaxRetention {
			t.Fatalf("Normalize(%d, %d, %d) = %+v out of range", ttl, owners, retention, c)
		}
		if c2 := c.Normalize(); c2.TTL != c.TTL || c2.MaxOwners != c.MaxOwners || c2.Retention != c.Retention {
			t.Fatalf("Normalize is not idempotent: %+v then %+v", c, c2)
		}
		env := map[string]string{
			lease.EnvTTL:       strconv.FormatInt(ttl, 10),
			lease.EnvMaxOwners: strconv.FormatInt(owners, 10),
			lease.EnvRetention: strconv.FormatInt(retention, 10),
		}
		fromEnv, err := lease.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if err == nil && (fromEnv.TTL < 0 || fromEnv.MaxOwners < 0 || fromEnv.Retention < 0) {
			t.Fatalf("FromEnv(%v) = %+v without error", env, fromEnv)
		}
		if (ttl < 0 || owners < 0 || retention < 0) && !errors.Is(err, lease.ErrInvalidConfig) {
			t.Fatalf("FromEnv(%v) accepted a negative value: %+v, %v", env, fromEnv, err)
		}
		if n := fromEnv.Normalize(); n.TTL < lease.MinTTL || n.TTL > lease.MaxTTL || n.MaxOwners < lease.MinMaxOwners {
			t.Fatalf("Normalize(FromEnv(%v)) = %+v out of range", env, n)
		}
	})
}

// FuzzMemoryStore runs random operation sequences over three owners, two
// keys and three connections and checks the store's invariants after each
// step.
func FuzzMemoryStore(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte{0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x07, 0x18, 0x29})
	f.Add([]byte{0, 0, 0, 0x80, 0x81, 0x82, 0x83})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 512 {
			return
		}
		s := lease.NewMemoryStore(lease.Config{MaxOwners: lease.MinMaxOwners})
		owners := []lease.OwnerHash{lease.HashOwner("o0"), lease.HashOwner("o1"), lease.HashOwner("o2")}
		keys := []string{"k0", "k1"}
		conns := []string{"c0", "c1", "c2"}
		maxGen := map[lease.OwnerHash]uint64{}
		now := T0
		for i, op := range ops {
			owner := owners[int(op>>2)%3]
			key := keys[int(op>>4)%2]
			conn := conns[int(op>>5)%3]
			ttl := time.Duration(1+op%5) * time.Second
			cur, has, _ := s.Owned(ctx, owner, now)
			gen := cur.Generation
			if op&0x40 != 0 {
				gen++
			}
			h := lease.Holder{Owner: owner, APIKeyID: key, Generation: gen}
			var err error
			switch op % 8 {
			case 0, 1:
				var l lease.Lease
				var renewed bool
				l, renewed, err = s.Acquire(ctx, lease.Holder{Owner: owner, APIKeyID: key}, "p", conn, ttl, now)
				if err == nil && !renewed && l.Generation != maxGen[owner]+1 {
					t.Fatalf("step %d: acquired generation %d after %d", i, l.Generation, maxGen[owner])
				}
				if err == nil && renewed && (!has || l.Generation != cur.Generation) {
					t.Fatalf("step %d: a renewal changed the generation", i)
				}
			case 2:
				_, err = s.Renew(ctx, h, ttl, now)
			case 3:
				_, _, err = s.Release(ctx, h, lease.ReasonOwnerExit, now)
			case 4:
				_, err = s.Invalidate(ctx, h, "HEALTH_OR_COOLDOWN", now)
			case 5:
				var l, prev lease.Lease
				l, prev, err = s.Transition(ctx, h, "p", conn, lease.Reason("CONNECTION_INELIGIBLE"), ttl, now)
				if err == nil && prev.State != "" && (!has || l.Generation != cur.Generation) {
					t.Fatalf("step %d: transition changed the generation", i)
				}
			case 6:
				_, err = s.Reconcile(ctx, now)
			case 7:
				now = now.Add(time.Duration(op) * 20 * time.Millisecond)
			}
			if refused(err) {
				err = nil
			}
			if op == 0xff {
				now = now.Add(-3 * time.Second) // the clock jumps back
			}
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			list, err := s.List(ctx, now)
			if err != nil {
				t.Fatal(err)
			}
			seenO := map[lease.OwnerHash]bool{}
			seenC := map[string]bool{}
			for _, l := range list {
				if seenO[l.Owner] || seenC[l.Connection] {
					t.Fatalf("step %d: duplicate active lease %+v in %+v", i, l, list)
				}
				seenO[l.Owner], seenC[l.Connection] = true, true
				if l.Generation < maxGen[l.Owner] {
					t.Fatalf("step %d: generation fell from %d to %d", i, maxGen[l.Owner], l.Generation)
				}
				maxGen[l.Owner] = l.Generation
				if err := s.Fence(ctx, lease.Holder{Owner: l.Owner, APIKeyID: l.APIKeyID, Generation: l.Generation}, l.Connection, now); err != nil {
					t.Fatalf("step %d: fence of a listed lease = %v", i, err)
				}
			}
			for _, o := range owners {
				if _, ok, _ := s.Owned(ctx, o, now); ok != seenO[o] {
					t.Fatalf("step %d: Owned and List disagree", i)
				}
			}
		}
	})
}

// refused reports the store's refusals, which a random sequence hits all the
// time; anything else is a failure.
func refused(err error) bool {
	return errors.Is(err, lease.ErrFenceStale) || errors.Is(err, lease.ErrOwnerAlreadyActive) ||
		errors.Is(err, lease.ErrCapacityUnavailable)
}
