package gw_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// An operator rule of resilience.providerErrorRules decides what a
// provider's answer means: here a 400 whose body says the tenant is
// suspended cools the connection for the rule's minute and the request
// moves on to the provider's next connection. Without the rule the same 400 is the
// client's own error and goes back to it, and no connection cools.
func TestProviderErrorRuleCoolsTheConnection(t *testing.T) {
	for _, withRule := range []bool{true, false} {
		t.Run(map[bool]string{true: "with rule", false: "without rule"}[withRule], func(t *testing.T) {
			up := combotest.New()
			up.Script("sk-p-1", combotest.Error(http.StatusBadRequest, "tenant suspended for review"))
			up.Script("sk-p-2", combotest.OK("from the second key"))
			cfg := &gw.Config{Providers: []gw.Provider{provider("p", up, 2)}, Combos: []gw.Combo{comboOf("c", 2*time.Second, "p")}}
			cfg.Resilience.ComboCooldownWait.Disabled = true
			if withRule {
				cfg.Resilience.ProviderErrorRules = map[string][]gw.ErrorRule{"p": {{
					Status: 400, Match: "TENANT SUSPENDED", Scope: "connection", Reason: "rate_limit_exceeded", CooldownMs: 60_000}}}
			}
			r := newRig(t, cfg, map[string]*combotest.Upstream{"p": up})

			before := time.Now()
			res := r.chat("c", false, 5*time.Second)
			after := time.Now()
			st := r.gw.Layers().Cooldowns.StatusAt("p-1", after)
			if !withRule {
				assert.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
				assert.Equal(t, 1, up.Total(), "no fallback for the client's own error")
				assert.Equal(t, cooldown.Available, st.State, st.String())
				return
			}
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			assert.Contains(t, string(res.Body), "from the second key")
			assert.Equal(t, 1, up.Count("sk-p-1"))
			assert.Equal(t, 1, up.Count("sk-p-2"))
			assert.Equal(t, cooldown.Cooling, st.State, st.String())
			assert.Equal(t, "rate_limit_exceeded", st.Reason)
			assert.False(t, st.Until.Before(before.Add(time.Minute)), "cooling until %v", st.Until)
			assert.False(t, st.Until.After(after.Add(time.Minute)), "cooling until %v", st.Until)

			// The cooled key is not asked again.
			res = r.chat("c", false, 5*time.Second)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			assert.Equal(t, 1, up.Count("sk-p-1"))
		})
	}
}

// Restatement contract M5: agentrouter's 403 "额度不足" is restated as a 429
// whose client retry time is the rule's 60 s. The upstream sent no
// Retry-After, so the gateway's answer carries the router's own.
func TestRestatedAnswerCarriesItsRetryAfter(t *testing.T) {
	up := combotest.New()
	up.Script("", combotest.Error(http.StatusForbidden, "用户额度不足"))
	cfg := &gw.Config{Providers: []gw.Provider{provider("agentrouter", up, 1)},
		Combos: []gw.Combo{comboOf("c", 2*time.Second, "agentrouter")}}
	cfg.Resilience.ComboCooldownWait.Disabled = true
	r := newRig(t, cfg, map[string]*combotest.Upstream{"agentrouter": up})

	res := r.chat("c", false, 5*time.Second)
	assert.Equal(t, http.StatusTooManyRequests, res.Status, "%s", res.Body)
	assert.Equal(t, "60", res.Header.Get("Retry-After"))
	assert.Equal(t, 1, up.Total())
}
