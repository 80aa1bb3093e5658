package gw_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/routeguard/routeguard/examples/gateway/gw"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const validConfig = `{
  "listen": "127.0.0.1:0",
  "adminToken": "adm",
  "apiKeys": [{"id": "kid1", "key": "rk-1", "scopes": ["lease:exclusive"], "allowedConnections": ["k1"]}],
  "providers": [
    {"id": "openai", "class": "apikey", "baseURL": "http://127.0.0.1:9001/v1",
     "connections": [{"id": "k1", "apiKey": "sk-1", "maxConcurrent": 2}, {"id": "k2", "apiKey": "sk-2"}], "models": ["gpt-4o"]},
    {"id": "anthropic", "class": "oauth", "baseURL": "http://127.0.0.1:9002/v1", "connections": [{"id": "c1", "apiKey": "sk-3"}]}
  ],
  "combos": [{"name": "smart", "strategy": "priority",
              "targets": [{"provider": "openai", "model": "gpt-4o"}, {"provider": "anthropic", "model": "claude", "connection": "c1"}]}],
  "resilience": {"breaker": {}, "cooldown": {}, "lockout": {}, "sessionAffinityTtlMs": 0,
                 "requestQueue": {}, "throughputWatchdog": {}, "comboCooldownWait": {}, "providerErrorRules": {}}
}`

// edit applies a change to the valid config's JSON tree.
func edit(t *testing.T, change func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(validConfig), &m))
	change(m)
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return b
}

func at(m map[string]any, path ...any) map[string]any {
	var cur any = m
	for _, p := range path {
		switch k := p.(type) {
		case string:
			cur = cur.(map[string]any)[k]
		case int:
			cur = cur.([]any)[k]
		}
	}
	return cur.(map[string]any)
}

func TestParseValidConfig(t *testing.T) {
	c, err := gw.Parse([]byte(validConfig))
	require.NoError(t, err)
	assert.Equal(t, "smart", c.Combos[0].Name)
	assert.Equal(t, 2, c.Providers[0].Connections[0].MaxConcurrent)
}

func TestDemoConfigIsValid(t *testing.T) {
	c, err := gw.Decode(gw.DemoConfigJSON())
	require.NoError(t, err)
	require.NoError(t, c.Validate())
	assert.Equal(t, gw.DefaultListen, c.Listen)
}

func TestConfigRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(m map[string]any)
		want   string
	}{
		{"unknown top-level field", func(m map[string]any) { m["listenAddr"] = "x" }, `config: listenAddr: unknown field`},
		{"unknown nested field", func(m map[string]any) { at(m, "providers", 0)["base_url"] = "x" }, `config: providers[0].base_url: unknown field`},
		{"unknown resilience field", func(m map[string]any) { at(m, "resilience", "breaker")["threshold"] = 3 }, `config: resilience.breaker.threshold: unknown field`},
		{"unknown field in a connection", func(m map[string]any) { at(m, "providers", 1, "connections", 0)["apikey_env"] = "X" },
			`config: providers[1].connections[0].apikey_env: unknown field`},
		{"unknown field in a target", func(m map[string]any) { at(m, "combos", 0, "targets", 1)["conn"] = "c1" },
			`config: combos[0].targets[1].conn: unknown field`},
		{"unknown field in an operator rule", func(m map[string]any) {
			at(m, "resilience")["providerErrorRules"] = map[string]any{"openai": []any{map[string]any{"status": 403, "pattern": "x"}}}
		}, `config: resilience.providerErrorRules.openai[0].pattern: unknown field`},
		{"unknown field in requestQueue", func(m map[string]any) { at(m, "resilience", "requestQueue")["maxWait"] = 5 },
			`config: resilience.requestQueue.maxWait: unknown field`},
		{"empty field name", func(m map[string]any) { at(m, "resilience")[""] = 1 },
			`config: resilience."": unknown field`},
		{"wrong type", func(m map[string]any) { at(m, "providers", 0, "connections", 0)["maxConcurrent"] = "2" },
			`config: providers[0].connections[0].maxConcurrent: must be a JSON string of another type (int)`},
		{"wrong type in a later element", func(m map[string]any) { at(m, "combos", 0, "targets", 1)["weight"] = "heavy" },
			`config: combos[0].targets[1].weight: must be a JSON string of another type (float64)`},
		{"wrong type in a list of strings", func(m map[string]any) { at(m, "apiKeys", 0)["scopes"] = []any{"lease:exclusive", 7} },
			`config: apiKeys[0].scopes[1]: must be a JSON number of another type (string)`},
		{"wrong type in an operator rule", func(m map[string]any) {
			at(m, "resilience")["providerErrorRules"] = map[string]any{"openai": []any{map[string]any{"status": "403"}}}
		}, `config: resilience.providerErrorRules.openai[0].status: must be a JSON string of another type (int)`},
		{"wrong type of a section", func(m map[string]any) { m["providers"] = map[string]any{} },
			`config: providers: must be a JSON object of another type ([]gw.Provider)`},
		{"unknown strategy", func(m map[string]any) { at(m, "combos", 0)["strategy"] = "fastest" },
			`config: combos[0].strategy: unknown strategy "fastest" (valid: `},
		{"duplicate provider", func(m map[string]any) { at(m, "providers", 1)["id"] = "openai" },
			`config: providers[1].id: duplicate provider id "openai"`},
		{"duplicate connection", func(m map[string]any) { at(m, "providers", 1, "connections", 0)["id"] = "k2" },
			`config: providers[1].connections[0].id: duplicate connection id "k2" (also in provider "openai")`},
		{"duplicate combo", func(m map[string]any) { m["combos"] = append(m["combos"].([]any), m["combos"].([]any)[0]) },
			`config: combos[1].name: duplicate combo name "smart"`},
		{"duplicate key id", func(m map[string]any) {
			m["apiKeys"] = append(m["apiKeys"].([]any), map[string]any{"id": "kid1", "key": "rk-2"})
		}, `config: apiKeys[1].id: duplicate API key id "kid1"`},
		{"unknown target provider", func(m map[string]any) { at(m, "combos", 0, "targets", 1)["provider"] = "mistral" },
			`config: combos[0].targets[1].provider: unknown provider "mistral"`},
		{"unknown target connection", func(m map[string]any) { at(m, "combos", 0, "targets", 1)["connection"] = "k1" },
			`config: combos[0].targets[1].connection: provider "anthropic" has no connection "k1"`},
		{"unlisted model", func(m map[string]any) { at(m, "combos", 0, "targets", 0)["model"] = "gpt-5" },
			`config: combos[0].targets[0].model: provider "openai" does not list model "gpt-5"`},
		{"unknown class", func(m map[string]any) { at(m, "providers", 0)["class"] = "token" },
			`config: providers[0].class: unknown class "token"`},
		{"bad base URL", func(m map[string]any) { at(m, "providers", 0)["baseURL"] = "127.0.0.1:9001" },
			`config: providers[0].baseURL: must be an absolute http or https URL`},
		{"managed key without connections", func(m map[string]any) { at(m, "apiKeys", 0)["allowedConnections"] = []any{} },
			`config: apiKeys[0].allowedConnections: a key with scope lease:exclusive needs at least one allowed connection`},
		{"allowed connection unknown", func(m map[string]any) { at(m, "apiKeys", 0)["allowedConnections"] = []any{"zz"} },
			`config: apiKeys[0].allowedConnections[0]: unknown connection "zz"`},
		{"unknown scope", func(m map[string]any) { at(m, "apiKeys", 0)["scopes"] = []any{"admin"} },
			`config: apiKeys[0].scopes[0]: unknown scope "admin"`},
		{"combo name with slash", func(m map[string]any) { at(m, "combos", 0)["name"] = "a/b" },
			`config: combos[0].name: must be non-empty and contain no '/'`},
		{"no providers", func(m map[string]any) { m["providers"] = []any{}; m["combos"] = []any{}; m["apiKeys"] = []any{} },
			`config: providers: at least one provider is required`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gw.Parse(edit(t, tc.change))
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), tc.want), "got %q", err.Error())
			var ce *gw.ConfigError
			assert.True(t, errors.As(err, &ce))
		})
	}
}

func TestConfigTrailingDataRefused(t *testing.T) {
	_, err := gw.Parse([]byte(validConfig + `{}`))
	require.EqualError(t, err, "config: (document): data after the JSON object")
	_, err = gw.Parse([]byte(`{"providers": [`))
	require.Error(t, err)
	_, err = gw.Parse([]byte(`[]`))
	require.EqualError(t, err, "config: (document): must be a JSON array of another type (gw.Config)")
}

func TestOperatorRulesValidated(t *testing.T) {
	b := edit(t, func(m map[string]any) {
		at(m, "resilience")["providerErrorRules"] = map[string]any{"openai": []any{map[string]any{"status": 403, "match": "", "scope": "model"}}}
	})
	c, err := gw.Parse(b)
	require.NoError(t, err)
	_, err = gw.New(c, gw.Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "config: resilience.providerErrorRules:")
}

// FuzzParse feeds arbitrary documents to the strict parser: it never
// panics, and what it accepts validates again and builds a server.
func FuzzParse(f *testing.F) {
	f.Add([]byte(validConfig))
	f.Add(gw.DemoConfigJSON())
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"providers":[{"id":"p","baseURL":"http://x","connections":[{"id":"c"}]}],"combos":[{"name":"x","targets":[{"provider":"p","model":"m"}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := gw.Parse(data)
		if err != nil {
			var ce *gw.ConfigError
			if errors.As(err, &ce) && (ce.Field == "" || ce.Problem == "") {
				t.Fatalf("refusal without a field or a problem: %#v", ce)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config fails validation: %v", err)
		}
		if s, err := gw.New(c, gw.Options{}); err == nil {
			s.Close()
		}
	})
}
