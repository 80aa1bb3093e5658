package gw_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/examples/gateway/gw"
)

func TestStreamRecoveryConfig(t *testing.T) {
	c, err := gw.Parse(edit(t, func(m map[string]any) {
		at(m, "resilience")["streamRecovery"] = map[string]any{"early": true}
		at(m, "combos", 0)["settings"] = map[string]any{"streamRecovery": map[string]any{"midStream": true, "maxContinuations": 3}}
	}))
	require.NoError(t, err)
	assert.Equal(t, &gw.StreamRecoveryConfig{Early: true}, c.Resilience.StreamRecovery)
	assert.Equal(t, &gw.StreamRecoveryConfig{MidStream: true, MaxContinuations: 3}, c.Combos[0].Settings.StreamRecovery)

	c, err = gw.Parse([]byte(validConfig))
	require.NoError(t, err)
	assert.Nil(t, c.Resilience.StreamRecovery, "off unless set")

	for _, tc := range []struct {
		name   string
		change func(m map[string]any)
		want   string
	}{
		{"combo: too many continuations", func(m map[string]any) {
			at(m, "combos", 0)["settings"] = map[string]any{"streamRecovery": map[string]any{"midStream": true, "maxContinuations": 6}}
		}, `config: combos[0].settings.streamRecovery.maxContinuations: must be 0..5 (0 or absent means 1), got 6`},
		{"global: negative continuations", func(m map[string]any) {
			at(m, "resilience")["streamRecovery"] = map[string]any{"maxContinuations": -1}
		}, `config: resilience.streamRecovery.maxContinuations: must be 0..5 (0 or absent means 1), got -1`},
		{"unknown field", func(m map[string]any) {
			at(m, "resilience")["streamRecovery"] = map[string]any{"continuations": 2}
		}, `config: resilience.streamRecovery.continuations: unknown field`},
		{"wrong type", func(m map[string]any) {
			at(m, "combos", 0)["settings"] = map[string]any{"streamRecovery": map[string]any{"early": "yes"}}
		}, `config: combos[0].settings.streamRecovery.early: must be a JSON string of another type (bool)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gw.Parse(edit(t, tc.change))
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
		})
	}
}
