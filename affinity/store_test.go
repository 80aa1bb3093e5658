package affinity

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func skey(b byte, provider string) StoreKey {
	var d [32]byte
	d[0], d[1] = b, b^0x5a
	return StoreKey{Provider: provider, Session: d}
}

func TestMemoryStoreBasics(t *testing.T) {
	var s MemoryStore // zero value is usable
	assert.Equal(t, defaultMaxPins, s.capacity())
	k := skey(1, "p")
	pin := Pin{Connection: "A", Created: t0, LastUsed: t0, Expires: t0.Add(time.Minute)}
	require.NoError(t, s.Save(k, pin, t0))

	got, ok, err := s.Load(k, t0.Add(59*time.Second))
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, pin, got)

	ok, _ = s.DeleteIf(k, "B")
	assert.False(t, ok)
	ok, _ = s.DeleteIf(k, "A")
	assert.True(t, ok)
	ok, _ = s.Delete(k)
	assert.False(t, ok)

	require.NoError(t, s.Save(k, pin, t0))
	ok, _ = s.Delete(k)
	assert.True(t, ok)
	_, ok, _ = s.Load(skey(9, "q"), t0)
	assert.False(t, ok)
}

func TestMemoryStoreLazyExpiry(t *testing.T) {
	s := NewMemoryStore(0)
	k := skey(1, "p")
	require.NoError(t, s.Save(k, Pin{Connection: "A", Expires: t0.Add(time.Minute)}, t0))
	// Expires is exclusive: a pin is dead at its expiry instant.
	_, ok, _ := s.Load(k, t0.Add(time.Minute))
	assert.False(t, ok)
	assert.Equal(t, 0, s.Len())

	require.NoError(t, s.Save(k, Pin{Connection: "A", Expires: t0.Add(time.Minute)}, t0))
	l, _ := s.List(t0.Add(2 * time.Minute))
	assert.Empty(t, l, "dead pins are not listed")
	assert.Equal(t, 1, s.Len(), "listing does not delete")
}

func TestMemoryStoreBounded(t *testing.T) {
	assert.Equal(t, 128, NewMemoryStore(1).capacity())
	s := NewMemoryStore(64) // 4 per shard
	assert.Equal(t, 128, s.capacity())
	// Fill one shard (same first digest byte) beyond its share.
	for i := range 10 {
		var d [32]byte
		d[0], d[1] = 7, byte(i)
		require.NoError(t, s.Save(StoreKey{"p", d}, Pin{Connection: "A", Expires: t0.Add(time.Duration(i+1) * time.Minute)}, t0))
	}
	l, _ := s.List(t0)
	require.Len(t, l, 4)
	// The pins expiring first were evicted.
	assert.Equal(t, t0.Add(7*time.Minute), l[0].Pin.Expires)
	assert.Equal(t, t0.Add(10*time.Minute), l[3].Pin.Expires)

	// Dead pins go before live ones.
	var d [32]byte
	d[0], d[1] = 7, 100
	require.NoError(t, s.Save(StoreKey{"p", d}, Pin{Connection: "B", Expires: t0.Add(time.Hour)}, t0.Add(9*time.Minute)))
	l, _ = s.List(t0.Add(9 * time.Minute))
	require.Len(t, l, 2, "dead pins swept, the live ones kept")
	assert.Equal(t, t0.Add(10*time.Minute), l[0].Pin.Expires)
	assert.Equal(t, "B", l[1].Pin.Connection)
}

func TestMemoryStoreSweepsOnWrite(t *testing.T) {
	s := NewMemoryStore(32 * 64) // 64 per shard, sweep every 32 new keys
	for i := range 40 {
		var d [32]byte
		d[0], d[1] = 3, byte(i)
		require.NoError(t, s.Save(StoreKey{"p", d}, Pin{Connection: "A", Expires: t0.Add(time.Second)}, t0.Add(time.Duration(i)*time.Second)))
	}
	assert.Less(t, s.Len(), 40)
}

func TestStoreKeyString(t *testing.T) {
	k := skey(0xab, "openai")
	assert.Equal(t, "openai:abf1"+"000000000000000000000000000000000000000000000000000000000000", k.String())
}

func TestPinLive(t *testing.T) {
	assert.False(t, Pin{Expires: t0.Add(time.Hour)}.Live(t0), "no connection")
	assert.True(t, Pin{Connection: "A", Expires: t0.Add(time.Nanosecond)}.Live(t0))
	assert.False(t, Pin{Connection: "A", Expires: t0}.Live(t0))
}

// nearKey returns a key for provider whose session digest is the digest of
// k but for its last byte: same part of a MemoryStore, same digest prefix.
func nearKey(k StoreKey, provider string, last byte) StoreKey {
	c := StoreKey{Provider: provider, Session: k.Session}
	c.Session[31] = last
	return c
}

// Keys that share a part of the store and all but one byte of their digest,
// or their whole digest under another provider, are kept apart, whichever of
// them is written, deleted or swept first.
func TestMemoryStoreNearKeysStayApart(t *testing.T) {
	s := NewMemoryStore(0)
	a := skey(3, "openai")
	b := StoreKey{Provider: "claude", Session: a.Session}
	c := nearKey(a, "openai", 2)
	pa := Pin{Connection: "A", Expires: t0.Add(time.Minute)}
	pb := Pin{Connection: "B", Expires: t0.Add(2 * time.Minute)}
	pc := Pin{Connection: "C", Expires: t0.Add(3 * time.Minute)}
	for _, kp := range []struct {
		k StoreKey
		p Pin
	}{{a, pa}, {b, pb}, {c, pc}} {
		require.NoError(t, s.Save(kp.k, kp.p, t0))
	}
	load := func(k StoreKey, now time.Time) (string, bool) {
		p, ok, err := s.Load(k, now)
		require.NoError(t, err)
		return p.Connection, ok
	}
	for k, want := range map[StoreKey]string{a: "A", b: "B", c: "C"} {
		got, ok := load(k, t0)
		assert.True(t, ok)
		assert.Equal(t, want, got)
	}
	assert.Equal(t, 3, s.Len())
	l, _ := s.List(t0)
	require.Len(t, l, 3)
	assert.Equal(t, []Entry{{b, pb}, {a, pa}, {c, pc}}, l, "sorted by provider, then expiry; keys exact")

	// Overwrite one key, then delete another.
	pc2 := Pin{Connection: "C2", Expires: t0.Add(time.Hour)}
	require.NoError(t, s.Save(c, pc2, t0))
	assert.Equal(t, 3, s.Len())
	ok, _ := s.Delete(a)
	assert.True(t, ok)
	_, ok = load(a, t0)
	assert.False(t, ok)
	got, ok := load(c, t0)
	assert.True(t, ok)
	assert.Equal(t, "C2", got)

	require.NoError(t, s.Save(a, pa, t0))
	for k, want := range map[StoreKey]string{a: "A", b: "B", c: "C2"} {
		got, ok := load(k, t0)
		assert.True(t, ok)
		assert.Equal(t, want, got)
	}
	assert.Equal(t, 3, s.Len())

	// Expiry removes each on its own.
	_, ok = load(b, t0.Add(2*time.Minute))
	assert.False(t, ok)
	ok, _ = s.DeleteIf(c, "C")
	assert.False(t, ok)
	ok, _ = s.DeleteIf(c, "C2")
	assert.True(t, ok)
	assert.Equal(t, 1, s.Len())
}

// Config.MaxPins bounds the default store New creates; the default is
// 100 000 pins.
func TestNewMaxPinsBoundsDefaultStore(t *testing.T) {
	assert.Equal(t, defaultMaxPins, New(Config{}).mem.capacity())
	p := New(Config{TTL: time.Hour, MaxPins: 64})
	require.Equal(t, 128, p.mem.capacity())
	for i := range 1000 {
		p.SelectAt("p", mustKey(t, fmt.Sprint("k", i)), cands("A", "B"), t0.Add(time.Duration(i)*time.Millisecond))
	}
	assert.LessOrEqual(t, p.mem.Len(), 128)
	assert.Greater(t, p.mem.Len(), 64, "the bound is the rounded capacity")
}
