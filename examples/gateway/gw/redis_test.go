package gw_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/examples/gateway/gw"
	"github.com/routeguard/routeguard/lease"
)

// redisRig starts a gateway for cfg whose state is in memory, with the
// Redis of cfg.Redis attached.
func redisRig(t *testing.T, cfg *gw.Config, ups map[string]*combotest.Upstream) *rig {
	t.Helper()
	cfg.AdminToken = rigAdminToken
	st, err := gw.OpenState(gw.StateMemory, gw.StateOptions{})
	require.NoError(t, err)
	require.NoError(t, st.AttachRedis("", cfg.Redis, nil))
	t.Cleanup(func() { st.Close() })
	s, err := gw.New(cfg, gw.Options{State: st})
	require.NoError(t, err)
	r := &rig{t: t, gw: s, ups: ups}
	r.srv = httptest.NewServer(s)
	r.tr = &http.Transport{}
	r.client = &http.Client{Transport: r.tr}
	t.Cleanup(r.close)
	return r
}

// With redis.url set, two gateways share their connections' caps and
// their leases: while gateway A has a request in flight on a connection of
// maxConcurrent 1, gateway B refuses its own (queue_full) without calling
// upstream, and serves it once A is done; a lease taken through A keeps
// B's other owners off that connection.
func TestRedisSharesCapsAndLeasesAcrossGateways(t *testing.T) {
	mr := miniredis.RunT(t)
	release, started := make(chan struct{}), make(chan struct{})
	up := combotest.New()
	up.Handle("", func(c combotest.Call) combotest.Reply {
		if c.N == 1 {
			close(started)
			<-release
		}
		return combotest.OK("served")
	})
	mk := func() *gw.Config {
		p := provider("p", up, 1)
		p.Connections[0].MaxConcurrent = 1
		cfg := &gw.Config{Providers: []gw.Provider{p}, Redis: gw.RedisConfig{URL: "redis://" + mr.Addr(), Namespace: "gwtest"}}
		cfg.Resilience.ComboCooldownWait.Disabled = true
		return cfg
	}
	a := redisRig(t, mk(), map[string]*combotest.Upstream{"p": up})
	b := redisRig(t, mk(), nil)

	first := make(chan result, 1)
	go func() { first <- a.chat("p/"+rigModel, false, 10*time.Second) }()
	<-started
	refused := b.chat("p/"+rigModel, false, 10*time.Second)
	assert.NotEqual(t, http.StatusOK, refused.Status, "%s", refused.Body)
	assert.Contains(t, string(refused.Body), `"reason":"queue_full"`)
	assert.Equal(t, 1, up.Total(), "B's refused request never went upstream")
	close(release)
	assert.Equal(t, http.StatusOK, (<-first).Status)
	served := b.chat("p/"+rigModel, false, 10*time.Second)
	assert.Equal(t, http.StatusOK, served.Status, "%s", served.Body)
	assert.Equal(t, 2, up.Total())

	ctx := context.Background()
	now := time.Now()
	x := lease.Holder{Owner: lease.HashOwner("vlo_" + "x-owner-of-the-test-which-is-long-enough-000"), APIKeyID: "k"}
	y := lease.Holder{Owner: lease.HashOwner("vlo_" + "y-owner-of-the-test-which-is-long-enough-000"), APIKeyID: "k"}
	l, err := a.gw.Layers().Leases.AcquireAt(ctx, x, "p", []string{"p-1"}, now)
	require.NoError(t, err)
	assert.Equal(t, "p-1", l.Connection)
	_, err = b.gw.Layers().Leases.AcquireAt(ctx, y, "p", []string{"p-1"}, now)
	assert.True(t, errors.Is(err, lease.ErrCapacityUnavailable), "B's acquire of A's leased connection: %v", err)
}

// A redis.url that is not a Redis URL is refused with its field path.
func TestRedisConfigValidates(t *testing.T) {
	up := combotest.New()
	defer up.Close()
	for _, bad := range []gw.RedisConfig{{URL: "http://example.test"}, {URL: "redis://127.0.0.1:1", Namespace: "a{b}"}} {
		cfg := &gw.Config{Providers: []gw.Provider{provider("p", up, 1)}, Redis: bad}
		err := cfg.Validate()
		var ce *gw.ConfigError
		require.ErrorAs(t, err, &ce, "%+v", bad)
		assert.Contains(t, ce.Field, "redis.")
	}
}
