package gw

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo/redisstate"
)

// fakeReplicator answers Stats with what the test set.
type fakeReplicator struct{ st redisstate.ReplicationStats }

func (f *fakeReplicator) Stats() redisstate.ReplicationStats { return f.st }

// The gateway's metrics read the replicator's lag and degraded flag at
// every scrape, as store "redis".
func TestMetricsReadTheReplicator(t *testing.T) {
	m := newMetrics(&Config{})
	require.NotNil(t, m)
	rep := &fakeReplicator{}
	m.attachReplicator(rep)
	lag := func() float64 {
		v, err := gaugeValue(m, "routeguard_replication_lag_seconds")
		require.NoError(t, err)
		return v
	}
	degraded := func() float64 {
		v, err := gaugeValue(m, "routeguard_shared_store_degraded")
		require.NoError(t, err)
		return v
	}
	assert.Equal(t, 0.0, lag())
	assert.Equal(t, 0.0, degraded())
	rep.st = redisstate.ReplicationStats{Lag: 40 * time.Millisecond, Staleness: time.Second, Degraded: true}
	assert.Equal(t, 0.04, lag())
	assert.Equal(t, 1.0, degraded())
	rep.st = redisstate.ReplicationStats{Lag: 2 * time.Second}
	assert.Equal(t, 2.0, lag())
	assert.Equal(t, 0.0, degraded())

	var off *metrics // metrics disabled: nothing to attach
	off.attachReplicator(rep)
}

// gaugeValue is the value of the single series of name with store="redis".
func gaugeValue(m *metrics, name string) (float64, error) {
	mfs, err := m.reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, lp := range s.GetLabel() {
				if lp.GetName() == "store" && lp.GetValue() == "redis" {
					return s.GetGauge().GetValue(), nil
				}
			}
		}
	}
	return -1, nil
}
