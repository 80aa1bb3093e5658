package main

import (
	"os"
	"os/exec"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The demo run on a gateway started with -redis shows, besides every
// family of the run without it, the shared store's
// routeguard_replication_lag_seconds and routeguard_shared_store_degraded,
// one series each with store="redis": a lag of at least 0 and a store
// that is not degraded. The Redis is the one at ROUTEGUARD_REDIS_ADDR,
// else a private redis-server; with neither the test fails.
func TestE2EMetricsWithRedis(t *testing.T) {
	if os.Getenv("ROUTEGUARD_REDIS_ADDR") == "" {
		_, err := exec.LookPath("redis-server")
		require.NoError(t, err, "no Redis: set ROUTEGUARD_REDIS_ADDR or install redis-server")
	}
	addr := realRedisAddr(t)
	families := demoMetrics(t, "redis://"+addr+"/3")

	only := func(name string) *dto.Metric {
		t.Helper()
		mf := families[name]
		require.NotNil(t, mf, "%s missing", name)
		require.Equal(t, dto.MetricType_GAUGE, mf.GetType(), name)
		require.Len(t, mf.GetMetric(), 1, name)
		m := mf.GetMetric()[0]
		require.Len(t, m.GetLabel(), 1, name)
		assert.Equal(t, "store", m.GetLabel()[0].GetName(), name)
		assert.Equal(t, "redis", m.GetLabel()[0].GetValue(), name)
		return m
	}
	lag := only("routeguard_replication_lag_seconds")
	assert.GreaterOrEqual(t, lag.GetGauge().GetValue(), 0.0)
	assert.Less(t, lag.GetGauge().GetValue(), 60.0)
	assert.Equal(t, 0.0, only("routeguard_shared_store_degraded").GetGauge().GetValue())
}
