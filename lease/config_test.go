package lease_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/lease"
)

func TestConfigNormalize(t *testing.T) {
	cases := []struct {
		in, want lease.Config
	}{
		{lease.Config{}, lease.Config{TTL: 120 * time.Second, MaxOwners: 100_000, Retention: 24 * time.Hour}},
		{lease.Config{TTL: -1, MaxOwners: -5, Retention: -1}, lease.Config{TTL: 120 * time.Second, MaxOwners: 100_000, Retention: 24 * time.Hour}},
		{lease.Config{TTL: time.Millisecond, MaxOwners: 1, Retention: time.Second}, lease.Config{TTL: time.Second, MaxOwners: 16, Retention: time.Minute}},
		{lease.Config{TTL: time.Hour, MaxOwners: 1 << 40, Retention: 365 * 24 * time.Hour}, lease.Config{TTL: 30 * time.Minute, MaxOwners: 10_000_000, Retention: 30 * 24 * time.Hour}},
		{lease.Config{TTL: 5 * time.Second, MaxOwners: 50, Retention: time.Hour}, lease.Config{TTL: 5 * time.Second, MaxOwners: 50, Retention: time.Hour}},
	}
	for _, c := range cases {
		got := c.in.Normalize()
		assert.Equal(t, c.want.TTL, got.TTL, "TTL of %+v", c.in)
		assert.Equal(t, c.want.MaxOwners, got.MaxOwners, "MaxOwners of %+v", c.in)
		assert.Equal(t, c.want.Retention, got.Retention, "Retention of %+v", c.in)
	}
}

func TestClampTTL(t *testing.T) {
	assert.Equal(t, 120*time.Second, lease.ClampTTL(0))
	assert.Equal(t, time.Second, lease.ClampTTL(999*time.Millisecond))
	assert.Equal(t, 1800*time.Second, lease.ClampTTL(1800001*time.Millisecond))
	assert.Equal(t, 1500*time.Millisecond, lease.ClampTTL(1500*time.Millisecond))
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestFromEnv(t *testing.T) {
	c, err := lease.FromEnv(env(map[string]string{
		"LEASE_TTL_MS":               "1000",
		"LEASE_MAX_OWNERS":           " 500 ",
		"LEASE_HISTORY_RETENTION_MS": "3600000",
	}))
	require.NoError(t, err)
	assert.Equal(t, lease.Config{TTL: time.Second, MaxOwners: 500, Retention: time.Hour}, c)

	c, err = lease.FromEnv(env(map[string]string{"LEASE_TTL_MS": "soon", "LEASE_MAX_OWNERS": "-3", "LEASE_HISTORY_RETENTION_MS": "60000"}))
	require.Error(t, err)
	assert.ErrorIs(t, err, lease.ErrInvalidConfig)
	errs := err.(interface{ Unwrap() []error }).Unwrap()
	require.Len(t, errs, 2)
	var le *lease.Error
	require.ErrorAs(t, errs[0], &le)
	assert.Equal(t, lease.CodeInvalidConfig, le.Code)
	assert.Equal(t, 400, le.Status)
	assert.Equal(t, "LEASE_TTL_MS", le.Field)
	assert.EqualError(t, errs[0], `lease: invalid_config: LEASE_TTL_MS: not a number ("soon")`)
	require.ErrorAs(t, errs[1], &le)
	assert.Equal(t, "LEASE_MAX_OWNERS", le.Field)
	assert.EqualError(t, errs[1], `lease: invalid_config: LEASE_MAX_OWNERS: negative ("-3")`)
	assert.Equal(t, lease.Config{Retention: time.Minute}, c, "refused values leave their fields unset")

	c, err = lease.FromEnv(env(map[string]string{"LEASE_TTL_MS": "  "}))
	require.NoError(t, err)
	assert.Equal(t, lease.Config{}, c, "blank and missing variables are left unset")
}

func TestConfigNormalizeDoesNotModifyReceiver(t *testing.T) {
	in := lease.Config{TTL: time.Hour, MaxOwners: 1}
	out := in.Normalize()
	assert.Equal(t, lease.Config{TTL: time.Hour, MaxOwners: 1}, in)
	assert.Equal(t, 30*time.Minute, out.TTL)
}
