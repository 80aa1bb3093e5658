package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/routeguard/routeguard/examples/gateway/gw"
	"github.com/routeguard/routeguard/examples/gateway/internal/schema"
)

// The committed config.schema.json is the one the Go types give; run
// go generate in examples/gateway to refresh it.
func TestConfigSchemaIsCurrent(t *testing.T) {
	want, err := schema.ForConfig("gw")
	require.NoError(t, err)
	got, err := os.ReadFile("config.schema.json")
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "config.schema.json is stale: run go generate ./examples/gateway")
}

// exampleConfigs are the configuration files of the repository: the demo
// and every file under examples/.
func exampleConfigs(t *testing.T) []string {
	t.Helper()
	files := []string{filepath.Join("gw", "demo.json")}
	for _, pat := range []string{"*.json", "*.yaml", "*.yml"} {
		m, err := filepath.Glob(filepath.Join("examples", pat))
		require.NoError(t, err)
		files = append(files, m...)
	}
	require.GreaterOrEqual(t, len(files), 2)
	return files
}

// decodeAny reads a JSON or YAML document as generic JSON values.
func decodeAny(t *testing.T, path string, data []byte) any {
	t.Helper()
	if f, err := gw.FormatOf(path); err == nil && f == gw.FormatYAML {
		var v any
		require.NoError(t, yaml.Unmarshal(data, &v))
		var err error
		data, err = json.Marshal(v)
		require.NoError(t, err)
	}
	var doc any
	require.NoError(t, json.Unmarshal(data, &doc))
	return doc
}

// Every example configuration validates against the schema, and parses
// (with every variable set).
func TestExampleConfigsMatchSchema(t *testing.T) {
	sch, err := os.ReadFile("config.schema.json")
	require.NoError(t, err)
	for _, path := range exampleConfigs(t) {
		t.Run(path, func(t *testing.T) {
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			errs, err := schema.Validate(sch, decodeAny(t, path, data))
			require.NoError(t, err)
			assert.Empty(t, errs)
			f, err := gw.FormatOf(path)
			require.NoError(t, err)
			_, err = gw.ParseWith(data, f, func(string) (string, bool) { return "set", true })
			assert.NoError(t, err)
		})
	}
}

// The schema refuses what the decoder refuses: unknown fields, wrong
// types, unknown strategies; and it describes every field of the Go
// types (a document with every field set validates).
func TestConfigSchemaRefusesWhatTheDecoderRefuses(t *testing.T) {
	sch, err := os.ReadFile("config.schema.json")
	require.NoError(t, err)
	for doc, want := range map[string]string{
		`{"providers":[{"id":"p","baseURL":"http://x","connections":[{"id":"c","maxConcurent":1}]}]}`: "providers[0].connections[0].maxConcurent: unknown field",
		`{"combos":[{"name":"c","strategy":"fastest"}]}`:                                              "combos[0].strategy: fastest is not one of",
		`{"apiKeys":[{"id":"k","key":"x","maxInFlight":"2"}]}`:                                        "apiKeys[0].maxInFlight: must be of type integer",
		`{"resilience":{"comboCooldownWait":{"maxWaitMs":1.5}}}`:                                      "resilience.comboCooldownWait.maxWaitMs: must be of type [integer null]",
	} {
		var v any
		require.NoError(t, json.Unmarshal([]byte(doc), &v))
		errs, err := schema.Validate(sch, v)
		require.NoError(t, err)
		require.Len(t, errs, 1, doc)
		assert.True(t, strings.HasPrefix(errs[0], want), "%s: got %q", doc, errs[0])
	}

	full := fullConfig()
	b, err := json.Marshal(full)
	require.NoError(t, err)
	var v any
	require.NoError(t, json.NewDecoder(bytes.NewReader(b)).Decode(&v))
	errs, err := schema.Validate(sch, v)
	require.NoError(t, err)
	assert.Empty(t, errs, "every field of the Go types is in the schema")
}

// fullConfig is a configuration with every list and map non-empty, so
// that its JSON has every field.
func fullConfig() gw.Config {
	c := gw.Config{
		APIKeys: []gw.APIKey{{Scopes: []string{"lease:exclusive"}, AllowedConnections: []string{"c"}}},
		Providers: []gw.Provider{{Connections: []gw.Connection{{}}, Models: []string{"m"},
			Headers: map[string]string{"x": "y"}}},
		Combos: []gw.Combo{{Strategy: "fusion", Targets: []gw.Target{{}}, Steps: []string{"s"},
			Fusion: &gw.FusionConfig{Judge: &gw.Target{}}}},
	}
	c.Resilience.Lockout.ErrorCodes = []int{429}
	c.Resilience.ProviderErrorRules = map[string][]gw.ErrorRule{"p": {{}}}
	c.Resilience.ComboCooldownWait.MaxWaitMs = new(1)
	c.Resilience.ComboCooldownWait.MaxAttempts = new(1)
	return c
}
