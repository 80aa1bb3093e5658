package gw

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo"
)

// A "provider/model" request is served by an ad-hoc priority combo over
// every connection of the provider, with the same cooldown-aware retry as
// the configured combos.
func TestProviderModelCombo(t *testing.T) {
	cfg, err := Decode(DemoConfigJSON())
	require.NoError(t, err)
	cfg.Resilience.ComboCooldownWait = CooldownWaitConfig{MaxWaitMs: 1500, MaxAttempts: 2, BudgetMs: 4000}
	s, err := New(cfg, Options{})
	require.NoError(t, err)
	defer s.Close()

	want := combo.CooldownWait{MaxWait: 1500 * time.Millisecond, MaxAttempts: 2, Budget: 4 * time.Second}
	assert.Equal(t, want, s.combos["demo"].Settings.CooldownWait)

	c, err := s.resolve("steady/solid-model")
	require.NoError(t, err)
	assert.Equal(t, "steady/solid-model", c.Name)
	assert.Equal(t, combo.StrategyPriority, c.Strategy)
	assert.Equal(t, want, c.Settings.CooldownWait)
	require.Len(t, c.Targets, 2)
	assert.Equal(t, "steady-1", c.Targets[0].Connection)
	assert.Equal(t, "steady-2", c.Targets[1].Connection)
	for _, tg := range c.Targets {
		assert.Equal(t, "solid-model", tg.Model)
		assert.Equal(t, 8, tg.MaxConcurrent)
		assert.Equal(t, "apikey", tg.AuthClass)
	}

	for _, bad := range []string{"steady/unlisted", "nowhere/m", "steady/", "steady", "demo/x"} {
		_, err := s.resolve(bad)
		assert.ErrorIs(t, err, errModel, bad)
	}
}
