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
	cfg.Resilience.ComboCooldownWait = CooldownWaitConfig{MaxWaitMs: new(1500), MaxAttempts: new(2), BudgetMs: 4000}
	s, err := New(cfg, Options{})
	require.NoError(t, err)
	defer s.Close()

	want := combo.CooldownWait{MaxWait: new(1500 * time.Millisecond), MaxAttempts: new(2), Budget: 4 * time.Second}
	assert.Equal(t, want, s.cur.Load().combos["demo"].Settings.CooldownWait)

	c, err := s.cur.Load().resolve("steady/solid-model")
	require.NoError(t, err)
	assert.Equal(t, "steady/solid-model", c.Name)
	assert.Equal(t, "priority", c.Strategy)
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
		_, err := s.cur.Load().resolve(bad)
		assert.ErrorIs(t, err, errModel, bad)
	}
}

// Queue contract 3a: for the cooldown-aware retry 0 is a value. In the
// JSON configuration an explicit "maxWaitMs": 0 (or "maxAttempts": 0)
// turns waiting off; an absent field or null keeps the default.
func TestExplicitZeroCooldownWaitIsZero(t *testing.T) {
	tests := []struct {
		name        string
		json        string
		maxWait     *time.Duration
		maxAttempts *int
		enabled     bool
	}{
		{"absent means the default", `{}`, nil, nil, true},
		{"null means the default", `{"maxWaitMs": null, "maxAttempts": null}`, nil, nil, true},
		{"maxWaitMs 0 is 0", `{"maxWaitMs": 0}`, new(time.Duration(0)), nil, false},
		{"maxAttempts 0 is 0", `{"maxAttempts": 0}`, nil, new(0), false},
		{"values are kept", `{"maxWaitMs": 2500, "maxAttempts": 3}`, new(2500 * time.Millisecond), new(3), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := `{"providers": [{"id": "p", "baseURL": "http://p.invalid/v1", "connections": [{"id": "p-1"}]}],
				"combos": [{"name": "c", "targets": [{"provider": "p", "model": "m"}]}],
				"resilience": {"comboCooldownWait": ` + tt.json + `}}`
			cfg, err := Parse([]byte(doc))
			require.NoError(t, err)
			s, err := New(cfg, Options{})
			require.NoError(t, err)
			defer s.Close()
			for _, c := range []*combo.Combo{s.cur.Load().combos["c"], must(s.cur.Load().resolve("p/m"))} {
				cw := c.Settings.CooldownWait
				assert.Equal(t, tt.maxWait, cw.MaxWait)
				assert.Equal(t, tt.maxAttempts, cw.MaxAttempts)
				assert.Equal(t, tt.enabled, cw.Enabled())
				assert.Equal(t, tt.enabled, cw.Normalize().Enabled())
			}
		})
	}
	_, err := Parse([]byte(`{"providers": [{"id": "p", "baseURL": "http://p.invalid/v1", "connections": [{"id": "p-1"}]}],
		"resilience": {"comboCooldownWait": {"maxWaitMs": "0"}}}`))
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "resilience.comboCooldownWait.maxWaitMs", ce.Field)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
