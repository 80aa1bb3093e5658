package lease_test

import (
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lease/leasetest"
)

func TestValidOwner(t *testing.T) {
	cases := []struct {
		tok  string
		want bool
	}{
		{leasetest.Owner('A'), true},
		{leasetest.Owner('-'), true},
		{leasetest.Owner('_'), true},
		{leasetest.Owner('9'), true},
		{"vlo_" + strings.Repeat("A", 42), false},
		{"vlo_" + strings.Repeat("A", 44), false},
		{"vlo_short", false},
		{"VLO_" + strings.Repeat("A", 43), false},
		{"vlx_" + strings.Repeat("A", 43), false},
		{"vlo_" + strings.Repeat("A", 42) + "+", false},
		{"vlo_" + strings.Repeat("A", 42) + "=", false},
		{"vlo_" + strings.Repeat("A", 42) + "/", false},
		{" " + leasetest.Owner('A'), false},
		{"", false},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, lease.ValidOwner(c.tok), "ValidOwner(%q)", c.tok)
	}
}

func TestParseOwner(t *testing.T) {
	tok := leasetest.Owner('A')
	h, err := lease.ParseOwner("  " + tok + "\t")
	require.NoError(t, err)
	assert.Equal(t, lease.HashOwner(tok), h)
	assert.True(t, lease.EqualHash(h, lease.HashOwner(tok)))
	assert.False(t, lease.EqualHash(h, lease.HashOwner(leasetest.Owner('B'))))
	s := h.String()
	assert.Len(t, s, 64)
	assert.Equal(t, strings.ToLower(s), s)
	_, err = hex.DecodeString(s)
	assert.NoError(t, err)
	assert.NotContains(t, s, tok)

	_, err = lease.ParseOwner("   ")
	assert.ErrorIs(t, err, lease.ErrContextRequired)
	_, err = lease.ParseOwner("vlo_short")
	assert.ErrorIs(t, err, lease.ErrContextInvalid)
	assert.True(t, lease.IsZero(lease.OwnerHash{}))
	assert.False(t, lease.IsZero(h))
}

func TestParseGeneration(t *testing.T) {
	cases := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"1", 1, true},
		{" 42 ", 42, true},
		{"9007199254740991", lease.MaxGeneration, true},
		{"9007199254740992", 0, false},
		{"99999999999999999999", 0, false},
		{"0", 0, false},
		{"01", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"1.0", 0, false},
		{"1e3", 0, false},
		{"", 0, false},
		{"abc", 0, false},
		{"1 2", 0, false},
	}
	for _, c := range cases {
		got, err := lease.ParseGeneration(c.in)
		if c.ok {
			assert.NoError(t, err, "ParseGeneration(%q)", c.in)
			assert.Equal(t, c.want, got, "ParseGeneration(%q)", c.in)
		} else {
			assert.ErrorIs(t, err, lease.ErrContextInvalid, "ParseGeneration(%q)", c.in)
			assert.Zero(t, got)
		}
	}
}

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestParseHeader(t *testing.T) {
	tok := leasetest.Owner('A')
	cases := []struct {
		name string
		h    http.Header
		gen  uint64
		err  error
	}{
		{"valid", header("X-OmniRoute-Lease-Owner", tok, "X-OmniRoute-Lease-Generation", "3"), 3, nil},
		{"no headers", header(), 0, lease.ErrContextRequired},
		{"empty owner", header("X-OmniRoute-Lease-Owner", " ", "X-OmniRoute-Lease-Generation", "3"), 0, lease.ErrContextRequired},
		{"owner without generation", header("X-OmniRoute-Lease-Owner", tok), 0, lease.ErrContextInvalid},
		{"short owner", header("X-OmniRoute-Lease-Owner", "vlo_short", "X-OmniRoute-Lease-Generation", "1"), 0, lease.ErrContextInvalid},
		{"generation zero", header("X-OmniRoute-Lease-Owner", tok, "X-OmniRoute-Lease-Generation", "0"), 0, lease.ErrContextInvalid},
		{"generation too large", header("X-OmniRoute-Lease-Owner", tok, "X-OmniRoute-Lease-Generation", "9007199254740992"), 0, lease.ErrContextInvalid},
		{"repeated owner", header("X-OmniRoute-Lease-Owner", tok, "X-OmniRoute-Lease-Owner", tok, "X-OmniRoute-Lease-Generation", "1"), 0, lease.ErrContextInvalid},
		{"repeated generation", header("X-OmniRoute-Lease-Owner", tok, "X-OmniRoute-Lease-Generation", "1", "X-OmniRoute-Lease-Generation", "1"), 0, lease.ErrContextInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			owner, gen, err := lease.ParseHeader(c.h)
			if c.err != nil {
				assert.ErrorIs(t, err, c.err)
				assert.True(t, lease.IsZero(owner))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, lease.HashOwner(tok), owner)
			assert.Equal(t, c.gen, gen)
		})
	}
}

func TestParseHeaderAllocatesNothing(t *testing.T) {
	h := header("X-OmniRoute-Lease-Owner", leasetest.Owner('A'), "X-OmniRoute-Lease-Generation", "7")
	allocs := testing.AllocsPerRun(1000, func() {
		if _, _, err := lease.ParseHeader(h); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}

func TestStripHeaders(t *testing.T) {
	h := header("X-OmniRoute-Lease-Owner", leasetest.Owner('A'), "X-OmniRoute-Lease-Generation", "7", "Authorization", "Bearer x")
	h["x-omniroute-lease-owner"] = []string{"raw"}
	require.Len(t, h, 4)
	lease.StripHeaders(h)
	assert.Equal(t, http.Header{"Authorization": {"Bearer x"}}, h)
}

func TestOwnerHashEqual(t *testing.T) {
	a := lease.HashOwner(leasetest.Owner('A'))
	assert.True(t, lease.EqualHash(a, a))
	for i := range a {
		for _, bit := range []byte{0x01, 0x80} {
			b := a
			b[i] ^= bit
			assert.False(t, lease.EqualHash(a, b), "byte %d bit %#x", i, bit)
		}
	}
	assert.True(t, lease.EqualHash(lease.OwnerHash{}, lease.OwnerHash{}))
}
