package gw

import (
	"bytes"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/cooldown"
)

const reloadDoc = `{"providers": [
	{"id": "keep", "baseURL": "http://keep.invalid/v1", "connections": [{"id": "k1"}, {"id": "k2"}]},
	{"id": "gone", "baseURL": "http://gone.invalid/v1", "connections": [{"id": "g1"}]}],
	"combos": [{"name": "c", "targets": [{"provider": "keep", "model": "m"}, {"provider": "gone", "model": "m"}]}]}`

// A reload keeps the layer state of the connections that stay and drops
// that of the removed ones: cooldowns and pins here.
func TestReloadDropsStateOfRemovedConnectionsOnly(t *testing.T) {
	cfg, err := Parse([]byte(reloadDoc))
	require.NoError(t, err)
	s, err := New(cfg, Options{})
	require.NoError(t, err)
	defer s.Close()
	now := time.Now()
	cd := s.layers.Cooldowns
	for _, c := range []string{"k1", "g1"} {
		cd.FailAt(c, cooldown.Failure{Status: http.StatusTooManyRequests, Reason: "rate_limit_exceeded", RetryAfter: time.Minute}, now)
		require.Equal(t, cooldown.Cooling, cd.StatusAt(c, now).State, c)
	}
	for _, p := range []struct{ provider, conn string }{{"keep", "k2"}, {"gone", "g1"}} {
		k, _ := affinity.NewKey("test", "session-"+p.conn)
		require.NoError(t, s.pinStore.Save(affinity.StoreKey{Provider: p.provider, Session: k.Digest()},
			affinity.Pin{Connection: p.conn, Created: now, LastUsed: now, Expires: now.Add(time.Hour)}, now))
	}

	next, err := Parse([]byte(`{"providers": [{"id": "keep", "baseURL": "http://keep.invalid/v1", "connections": [{"id": "k1"}, {"id": "k2"}]}],
		"combos": [{"name": "c", "targets": [{"provider": "keep", "model": "m"}]}]}`))
	require.NoError(t, err)
	rep, err := s.Reload(next)
	require.NoError(t, err)
	assert.Equal(t, ReloadReport{Generation: 2, Added: []string{}, Removed: []string{"connection:g1", "provider:gone"},
		RestartRequired: []string{}}, rep)
	assert.Equal(t, cooldown.Cooling, cd.StatusAt("k1", now).State, "kept")
	assert.NotEqual(t, cooldown.Cooling, cd.StatusAt("g1", now).State, "dropped")
	entries, err := s.pinStore.List(now)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, "k2", entries[0].Pin.Connection)
	_, err = s.cur.Load().resolve("gone/m")
	assert.ErrorIs(t, err, errModel)
}

// A refused reload changes nothing; a changed restart-only setting is
// reported and keeps its old value.
func TestReloadRefusedKeepsTheConfiguration(t *testing.T) {
	cfg, err := Parse([]byte(reloadDoc))
	require.NoError(t, err)
	s, err := New(cfg, Options{})
	require.NoError(t, err)
	defer s.Close()
	bad := *cfg
	bad.Providers = nil
	_, err = s.Reload(&bad)
	require.EqualError(t, err, "config: providers: at least one provider is required\n"+
		`config: combos[0].targets[0].provider: unknown provider "keep"`+"\n"+
		`config: combos[0].targets[1].provider: unknown provider "gone"`)
	assert.Same(t, cfg, s.cur.Load().cfg)

	changed, err := Parse([]byte(reloadDoc))
	require.NoError(t, err)
	changed.Listen = "127.0.0.1:1"
	changed.Resilience.Lockout.Enabled = true
	rep, err := s.Reload(changed)
	require.NoError(t, err)
	assert.Equal(t, []string{"listen", "resilience.lockout"}, rep.RestartRequired)
}

// ${NAME} references are resolved in every string, a missing variable is
// refused with the field and the variable, $${ is a literal, and the
// resolved values are redacted from refusals and from log records.
func TestExpandEnvNamesFieldAndVariable(t *testing.T) {
	env := map[string]string{"KEY": "sk-secret-value", "HOST": "up.example"}
	lookup := func(n string) (string, bool) { v, ok := env[n]; return v, ok }
	doc := `{"adminToken": "$${literal}", "providers": [{"id": "p", "baseURL": "https://${HOST}/v1",
		"headers": {"x-token": "t-${KEY}"}, "connections": [{"id": "c", "apiKey": "${KEY}"}]}]}`
	c, err := ParseWith([]byte(doc), FormatJSON, lookup)
	require.NoError(t, err)
	assert.Equal(t, "${literal}", c.AdminToken)
	assert.Equal(t, "https://up.example/v1", c.Providers[0].BaseURL)
	assert.Equal(t, "sk-secret-value", c.Providers[0].Connections[0].APIKey)
	assert.Equal(t, "t-sk-secret-value", c.Providers[0].Headers["x-token"])

	_, err = ParseWith([]byte(`{"adminToken": "${NOPE}", "providers": [{"id": "p", "baseURL": "${KEY}", "connections": [{"id": "c", "apiKey": "${bad-name}"}]}]}`), FormatYAML, lookup)
	require.EqualError(t, err, "config: adminToken: environment variable NOPE is not set\n"+
		`config: providers[0].connections[0].apiKey: malformed environment reference: write ${NAME} with NAME of letters, digits and '_', or $${ for a literal "${"`)

	_, err = ParseWith([]byte(`{"providers": [{"id": "p", "baseURL": "ftp://${KEY}", "connections": [{"id": "c"}]}]}`), FormatJSON, lookup)
	require.EqualError(t, err, `config: providers[0].baseURL: must be an absolute http or https URL, got "ftp://[redacted]"`)

	var buf bytes.Buffer
	l := slog.New(&redactHandler{next: slog.NewTextHandler(&buf, nil), secrets: func() []string { return c.secrets }})
	l.With("conn", "sk-secret-value").Warn("failed with sk-secret-value", "err", http.ErrAbortHandler, "url", "https://x/?k=sk-secret-value", "n", 3)
	assert.NotContains(t, buf.String(), "sk-secret-value")
	assert.Contains(t, buf.String(), `msg="failed with [redacted]"`)
	assert.Contains(t, buf.String(), `url="https://x/?k=[redacted]"`)
	assert.Contains(t, buf.String(), "n=3")
}

// A YAML document is refused with the same path as the JSON one.
func TestYAMLRefusalsMatchJSON(t *testing.T) {
	_, jerr := Parse([]byte(`{"providers": [{"id": "p", "baseURL": "http://x", "connections": [{"id": "c", "maxConcurent": 2}]}]}`))
	_, yerr := ParseYAML([]byte("providers:\n  - id: p\n    baseURL: http://x\n    connections:\n      - {id: c, maxConcurent: 2}\n"))
	require.EqualError(t, jerr, "config: providers[0].connections[0].maxConcurent: unknown field")
	require.EqualError(t, yerr, jerr.Error())

	_, yerr = ParseYAML([]byte("providers:\n  - id: p\n    baseURL: http://x\n    connections: [{id: c, maxConcurrent: two}]\n"))
	require.EqualError(t, yerr, "config: providers[0].connections[0].maxConcurrent: must be a JSON string of another type (int)")
	_, yerr = ParseYAML([]byte("a: [\n"))
	require.ErrorContains(t, yerr, "config: (document): not valid YAML")
}

// A fusion's settings reach the router as configured; a panel member
// without a connection uses its provider's first; the judge defaults to
// the first panel target.
func TestFusionSettingsReachTheRouter(t *testing.T) {
	cfg, err := ParseYAML([]byte(`
providers:
  - {id: a, baseURL: "http://a.invalid", connections: [{id: a1}, {id: a2}]}
  - {id: b, baseURL: "http://b.invalid", connections: [{id: b1}]}
combos:
  - name: f
    strategy: fusion
    targets: [{provider: a, model: m}, {provider: b, model: n}]
    fusion: {minPanel: 5, graceMs: 1500, hardCapMs: 20000}
  - name: g
    strategy: fusion
    targets: [{provider: a, model: m, connection: a2}, {provider: b, model: n}]
    fusion: {judge: {provider: b, model: judge}}
`))
	require.NoError(t, err)
	s, err := New(cfg, Options{})
	require.NoError(t, err)
	defer s.Close()
	st := s.cur.Load()
	f := st.fusions["f"].fusion
	assert.Equal(t, 5, f.MinPanel, "clamped by the router to the panel's size")
	assert.Equal(t, 1500*time.Millisecond, f.Grace)
	assert.Equal(t, 20*time.Second, f.HardCap)
	assert.Equal(t, "a1", f.Panel[0].Connection)
	assert.Nil(t, f.JudgeTarget)
	assert.Equal(t, Target{Provider: "a", Model: "m"}, st.fusions["f"].judge)
	g := st.fusions["g"]
	assert.Equal(t, "a2", g.fusion.Panel[0].Connection)
	require.NotNil(t, g.fusion.JudgeTarget)
	assert.Equal(t, "b1", g.fusion.JudgeTarget.Connection)
	assert.Equal(t, "judge", g.judge.Model)
	assert.Nil(t, st.combos["f"], "a fusion is not an ordering combo")
}
