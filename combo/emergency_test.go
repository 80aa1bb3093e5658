package combo_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/restate"
)

// Emergency fallback (combo contract 6e, scenario 7).
func TestEmergencyFallbackScenario(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	tests := []struct {
		name     string
		env      map[string]string
		status   int
		body     string
		tools    int
		fallback bool
	}{
		{"402 without tools", nil, 402, "payment required", 0, true},
		{"402 with tools", nil, 402, "payment required", 3, false},
		{"disabled by env", map[string]string{restate.EnvEmergencyFallback: "0"}, 402, "payment required", 0, false},
		{"500 out of credits", nil, 500, "Out of credits", 0, true},
		{"plain 500", nil, 500, "boom", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := restate.FromEnv(env(tt.env))
			require.NoError(t, err)
			f := newFleet(t, "openai", "nvidia")
			f.cfg.Classifier = restate.New(set)
			f.cfg.Emergency = &combo.EmergencyFallback{}
			f.rebuild()
			f.up["openai"].Script("k1", combotest.Error(tt.status, tt.body))
			var mu sync.Mutex
			budgets := map[string]int{}
			send := func(ctx context.Context, tg *combo.Target) (*http.Response, error) {
				if n, ok := combo.OutputBudget(ctx); ok {
					mu.Lock()
					budgets[tg.String()] = n
					mu.Unlock()
				}
				return f.send(ctx, tg)
			}
			c := &combo.Combo{Name: "paid", Targets: []combo.Target{target("openai", "k1", "gpt-4o")}}
			res, err := f.router.Do(context.Background(), combo.Request{Combo: c, Tools: tt.tools}, send)
			if !tt.fallback {
				var ue *combo.UpstreamError
				require.ErrorAs(t, err, &ue)
				assert.Equal(t, tt.status, ue.Status)
				assert.Equal(t, 0, f.up["nvidia"].Total())
				assert.False(t, res.Emergency)
				return
			}
			require.NoError(t, err)
			defer res.Response.Body.Close()
			assert.True(t, res.Emergency)
			assert.Equal(t, combo.Target{Provider: "nvidia", Model: "openai/gpt-oss-120b"}, res.Target)
			assert.Equal(t, map[string]int{"nvidia/openai/gpt-oss-120b": 4096}, budgets)
			assert.Equal(t, 1, f.up["nvidia"].Total())
			assert.Equal(t, []string{
				"openai/k1/gpt-4o:failed:" + http.StatusText(tt.status),
				"nvidia//openai/gpt-oss-120b:succeeded:OK",
			}, outcomes(res))
		})
	}
}

func TestEmergencyFallbackToggledAtRunTime(t *testing.T) {
	f := newFleet(t, "openai", "backup")
	em := &combo.EmergencyFallback{Target: target("backup", "b1", "small"), MaxOutputTokens: 512}
	f.cfg.Emergency = em
	f.rebuild()
	f.up["openai"].Script("", combotest.Error(402, "payment required"))
	c := &combo.Combo{Name: "paid", Targets: []combo.Target{target("openai", "", "gpt-4o")}}

	em.SetEnabled(false)
	assert.False(t, em.Enabled())
	_, err := f.do(t, c)
	assert.ErrorIs(t, err, combo.ErrUpstream)
	assert.Equal(t, 0, f.up["backup"].Total())

	em.SetEnabled(true)
	var budget int
	send := func(ctx context.Context, tg *combo.Target) (*http.Response, error) {
		budget, _ = combo.OutputBudget(ctx)
		return f.send(ctx, tg)
	}
	res, err := f.router.Do(context.Background(), combo.Request{Combo: c}, send)
	require.NoError(t, err)
	res.Response.Body.Close()
	assert.Equal(t, "backup", res.Target.Provider)
	assert.Equal(t, 512, budget)
}

func TestEmergencyFallbackFailureKeepsOriginalAnswer(t *testing.T) {
	f := newFleet(t, "openai", "nvidia")
	f.cfg.Emergency = &combo.EmergencyFallback{}
	f.rebuild()
	f.up["openai"].Script("", combotest.Error(402, "payment required"))
	f.up["nvidia"].Script("", combotest.Error(503, "down"))
	c := &combo.Combo{Name: "paid", Targets: []combo.Target{target("openai", "", "gpt-4o")}}
	res, err := f.do(t, c)
	var ue *combo.UpstreamError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, 402, ue.Status, "the caller sees the original failure")
	assert.Equal(t, []string{
		"openai//gpt-4o:failed:Payment Required",
		"nvidia//openai/gpt-oss-120b:failed:Service Unavailable",
	}, outcomes(res))
	assert.Len(t, ue.Attempts, 2)
	assert.Equal(t, 1, f.up["nvidia"].Total(), "the emergency target is tried once")
}

func TestEmergencyTargetFailingItselfIsNotRetried(t *testing.T) {
	f := newFleet(t, "nvidia")
	f.cfg.Emergency = &combo.EmergencyFallback{}
	f.rebuild()
	f.up["nvidia"].Script("", combotest.Error(402, "payment required"))
	c := &combo.Combo{Name: "e", Targets: []combo.Target{{Provider: "nvidia", Model: "openai/gpt-oss-120b"}}}
	_, err := f.do(t, c)
	assert.ErrorIs(t, err, combo.ErrUpstream)
	assert.Equal(t, 1, f.up["nvidia"].Total())
}
