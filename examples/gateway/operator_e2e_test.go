package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// lastBody is the body of u's latest call, decoded.
func lastBody(t *testing.T, u *combotest.Upstream) map[string]any {
	t.Helper()
	calls := u.Calls()
	require.NotEmpty(t, calls)
	var m map[string]any
	require.NoError(t, json.Unmarshal(calls[len(calls)-1].Body, &m))
	return m
}

// content is the first choice's message content of a chat completion.
func content(t *testing.T, a answer) string {
	t.Helper()
	var c struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal([]byte(a.body), &c), a.body)
	require.NotEmpty(t, c.Choices, a.body)
	return c.Choices[0].Message.Content
}

// A fusion combo asks its panel in parallel without streaming or tools; a
// failing member is left out and the judge synthesises the others'
// answers; one answer is returned as it is; none is 503
// fusion_no_answers.
func TestE2EFusionPanelMemberFails(t *testing.T) {
	up := upstreams(t, "p1", "p2", "p3", "judge")
	up["p1"].Script("", combotest.Error(503, "p1 is down"))
	up["p2"].Script("", combotest.OK("answer from p2"))
	up["p3"].Script("", combotest.OK("answer from p3"))
	up["judge"].Script("", combotest.OK("the synthesis"))
	cfg := config([]gw.Provider{provider("p1", up["p1"], "p1-a"), provider("p2", up["p2"], "p2-a"),
		provider("p3", up["p3"], "p3-a"), provider("judge", up["judge"], "j-a")},
		gw.Combo{Name: "council", Strategy: gw.StrategyFusion,
			Targets: []gw.Target{{Provider: "p1", Model: "m1"}, {Provider: "p2", Model: "m2"}, {Provider: "p3", Model: "m3"}},
			Fusion:  &gw.FusionConfig{Judge: &gw.Target{Provider: "judge", Model: "jm"}, MinPanel: 9, GraceMs: 2000}},
		gw.Combo{Name: "pair", Strategy: gw.StrategyFusion,
			Targets: []gw.Target{{Provider: "p1", Model: "m1"}, {Provider: "p2", Model: "m2"}}})
	cfg.Resilience.Breaker.APIKey = gw.BreakerProfile{OpenAt: 50}
	g := startGateway(t, cfg)

	body := `{"model":"council","stream":false,"messages":[{"role":"user","content":"hi"}],` +
		`"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`
	a := g.do(t, http.MethodPost, "/v1/chat/completions", hdr("Content-Type", "application/json"), body)
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, "the synthesis", content(t, a))
	assert.Equal(t, "2", a.Header.Get("X-Routeguard-Answers"), "p1 failed; p2 and p3 answered")
	assert.Equal(t, "judge/jm", a.Header.Get("X-Routeguard-Judge"))
	assert.Equal(t, "judge/jm", a.Header.Get("X-Routeguard-Target"))
	for _, id := range []string{"p1", "p2", "p3"} {
		require.Equal(t, 1, up[id].Total(), id)
		leg := lastBody(t, up[id])
		assert.NotContains(t, leg, "tools", "tool_choice none: the panel gets no tools")
		assert.NotContains(t, leg, "stream")
	}
	prompt, _ := json.Marshal(lastBody(t, up["judge"])["messages"])
	assert.Contains(t, string(prompt), "answer from p2")
	assert.Contains(t, string(prompt), "answer from p3")
	assert.NotContains(t, string(prompt), "p1 is down")

	// A panel of two with one failure: the answer comes back as it is.
	a = g.chat(t, "pair", "hi", nil)
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, "answer from p2", content(t, a))
	assert.Equal(t, "1", a.Header.Get("X-Routeguard-Answers"))
	assert.Empty(t, a.Header.Get("X-Routeguard-Judge"))
	assert.Equal(t, 1, up["judge"].Total(), "one answer needs no judge")

	// Every member failing: 503 fusion_no_answers.
	up["p2"].Script("", combotest.Error(500, "p2 broke"))
	a = g.chat(t, "pair", "hi", nil)
	assert.Equal(t, http.StatusServiceUnavailable, a.StatusCode, a.body)
	assert.Equal(t, "fusion_no_answers", errorCode(t, a))

	// A stream request gets the composed answer as a stream (p1 and p2
	// are cooling now: p3 alone answers).
	up["p3"].Script("", combotest.OK("streamed p3"))
	h := hdr("Content-Type", "application/json")
	a = g.do(t, http.MethodPost, "/v1/chat/completions", h, chatBody("council", "hi", true))
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, "text/event-stream", a.Header.Get("Content-Type"))
	assert.Contains(t, a.body, `"streamed p3"`)
	assert.True(t, strings.HasSuffix(a.body, "data: [DONE]\n\n"), a.body)
}

// A request with tools (tool_choice not "none") bypasses the panel and
// goes to the judge alone, tools included.
func TestE2EFusionToolsGoToTheJudge(t *testing.T) {
	up := upstreams(t, "p1", "p2")
	up["p1"].Script("", combotest.OK("p1 with tools"))
	cfg := config([]gw.Provider{provider("p1", up["p1"], "p1-a"), provider("p2", up["p2"], "p2-a")},
		gw.Combo{Name: "pair", Strategy: gw.StrategyFusion,
			Targets: []gw.Target{{Provider: "p1", Model: "m1"}, {Provider: "p2", Model: "m2"}}})
	g := startGateway(t, cfg)
	body := `{"model":"pair","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}]}`
	a := g.do(t, http.MethodPost, "/v1/chat/completions", hdr("Content-Type", "application/json"), body)
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, "p1 with tools", content(t, a))
	assert.Equal(t, 0, up["p2"].Total(), "the panel is not asked")
	assert.Contains(t, lastBody(t, up["p1"]), "tools")
}

// A pipeline runs its steps in sequence, each step's answer the next
// one's input; a failing step ends it with pipeline_step_failed, the
// step's status and its Retry-After.
func TestE2EPipelineStepFails(t *testing.T) {
	up := upstreams(t, "p1", "p2")
	up["p1"].Script("", combotest.OK("the draft"))
	up["p2"].Script("", combotest.OK("the polished answer"))
	cfg := config([]gw.Provider{provider("p1", up["p1"], "p1-a"), provider("p2", up["p2"], "p2-a")},
		gw.Combo{Name: "chain", Strategy: gw.StrategyPipeline, Steps: []string{"p1/m1", "polish"}},
		gw.Combo{Name: "polish", Targets: []gw.Target{{Provider: "p2", Model: "m2"}}})
	g := startGateway(t, cfg)

	a := g.chat(t, "chain", "write something", nil)
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, "the polished answer", content(t, a))
	assert.Equal(t, "2", a.Header.Get("X-Routeguard-Steps"))
	assert.Equal(t, "p2/m2", a.Header.Get("X-Routeguard-Target"))
	first := lastBody(t, up["p1"])
	assert.Equal(t, "m1", first["model"])
	assert.Contains(t, first["messages"].([]any)[0].(map[string]any)["content"], "write something")
	second := lastBody(t, up["p2"])
	assert.Equal(t, "m2", second["model"])
	assert.Equal(t, []any{map[string]any{"role": "user", "content": "the draft"}}, second["messages"])

	up["p2"].Script("", combotest.RateLimited(7*time.Second))
	a = g.chat(t, "chain", "write something", nil)
	assert.Equal(t, http.StatusTooManyRequests, a.StatusCode, a.body)
	assert.Equal(t, "pipeline_step_failed", errorCode(t, a))
	assert.Equal(t, "1", a.Header.Get("X-Routeguard-Pipeline-Step"))
	assert.EqualValues(t, 1, a.json(t)["error"].(map[string]any)["step"])
	assert.Equal(t, "7", a.Header.Get("Retry-After"))
}

// A fusion or pipeline that is wrong is refused at start with the
// field's path, every problem listed.
func TestE2ECompositionConfigRefused(t *testing.T) {
	const provider = `{"id":"openai","baseURL":"http://127.0.0.1:9/v1","connections":[{"id":"k1","apiKey":"sk-1"}]}`
	doc := `{"providers":[` + provider + `],"combos":[
		{"name":"f","strategy":"fusion","targets":[{"provider":"openai","model":"m"}],"fusion":{"graceMs":-1,"judge":{"provider":"nope","model":"m"}}},
		{"name":"p","strategy":"pipeline","steps":["f","missing"]},
		{"name":"o","targets":[{"provider":"openai","model":"m"}],"steps":["o"]}]}`
	path := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
	out, err := exec.Command(gatewayBinary(t), "-config", path, "-check").CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", out)
	assert.Equal(t, 2, ee.ExitCode())
	assert.Equal(t, strings.Join([]string{
		`config: combos[0].targets: a fusion panel needs at least two targets`,
		`config: combos[0].fusion.judge.provider: unknown provider "nope"`,
		`config: combos[0].fusion.graceMs: must be ≥ 0 (0 or absent means 8000)`,
		`config: combos[2].steps: only a combo with strategy "pipeline" has steps`,
		`config: combos[1].steps[0]: step "f" is a fusion; a step must be a combo with an ordering strategy or a provider/model`,
		`config: combos[1].steps[1]: unknown combo or provider/model "missing"`,
	}, "\n"), strings.TrimSpace(string(out)))
}

// The committed example YAML configuration checks with its secrets set,
// and names each missing variable with its field otherwise.
func TestE2ECheckExampleConfig(t *testing.T) {
	cmd := exec.Command(gatewayBinary(t), "-check", "-config", filepath.Join("examples", "gateway.yaml"))
	cmd.Env = append(os.Environ(), "OPENAI_KEY=sk-o", "ANTHROPIC_KEY=sk-a", "ADMIN_TOKEN=t", "CLIENT_KEY=rk")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "ok\n", string(out))

	cmd = exec.Command(gatewayBinary(t), "-check", "-config", filepath.Join("examples", "gateway.yaml"))
	cmd.Env = append(os.Environ(), "OPENAI_KEY=sk-o", "ADMIN_TOKEN=t", "CLIENT_KEY=rk")
	out, err = cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", out)
	assert.Equal(t, 2, ee.ExitCode())
	assert.Equal(t, "config: providers[1].connections[0].apiKey: environment variable ANTHROPIC_KEY is not set\n", string(out))
}

// A YAML configuration is decoded with the JSON one's schema and paths;
// its ${NAME} secrets are resolved, and a resolved secret appears neither
// in the logs nor in an admin answer.
func TestE2EYAMLConfigSecretsNeverShown(t *testing.T) {
	up := upstreams(t, "openai")
	const secret, urlSecret = "sk-live-0123456789abcdef", "tenant-9f8e7d6c"
	doc := `adminToken: ` + adminToken + `
providers:
  - id: openai
    baseURL: ` + up["openai"].URL() + `/v1
    connections:
      - {id: k1, name: main key, apiKey: "${E2E_OPENAI_KEY}"}
  - id: dead
    baseURL: http://127.0.0.1:9/${E2E_URL_SECRET}/v1
    connections:
      - {id: d1, apiKey: "x-$${literal}"}
combos:
  - name: smart
    targets: [{provider: openai, model: gpt-4o}]
resilience:
  comboCooldownWait: {disabled: true}
`
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.yaml")
	require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
	g := startGatewayFile(t, path, []string{"E2E_OPENAI_KEY=" + secret, "E2E_URL_SECRET=" + urlSecret}, "-v")

	a := g.chat(t, "smart", "hi", nil)
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, secret, up["openai"].Calls()[0].Credential, "the secret is resolved from the environment")
	a = g.chat(t, "dead/m", "hi", nil) // a transport failure, logged with the URL
	assert.Equal(t, http.StatusBadGateway, a.StatusCode, a.body)

	var seen []string
	for _, p := range []string{"/api/monitoring/health", "/api/resilience/cooldowns", "/api/resilience/model-cooldowns"} {
		seen = append(seen, g.admin(t, http.MethodGet, p, "").body)
	}
	seen = append(seen, g.admin(t, http.MethodPost, gw.ReloadPath, "").body)
	seen = append(seen, a.body)
	// A refusal that would quote a secret quotes it redacted, in the
	// answer and in the log.
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(doc, "http://127.0.0.1:9/", "ftp://", 1)), 0o600))
	r := g.admin(t, http.MethodPost, gw.ReloadPath, "")
	require.Equal(t, http.StatusBadRequest, r.StatusCode, r.body)
	assert.JSONEq(t, `{"ok":false,"code":"invalid_config","errors":[{"field":"providers[1].baseURL",
		"problem":"must be an absolute http or https URL, got \"ftp://[redacted]/v1\""}]}`, r.body)
	require.Eventually(t, func() bool { return strings.Contains(g.stderr.String(), "config reload refused") }, 5*time.Second, 10*time.Millisecond)
	assert.Contains(t, g.stderr.String(), "ftp://[redacted]/v1")
	seen = append(seen, r.body, g.stderr.String(), g.stdout.String())
	for _, s := range seen {
		assert.NotContains(t, s, secret)
		assert.NotContains(t, s, urlSecret)
	}

	// An unknown field is refused with the same path as in JSON, and a
	// missing variable names the field and the variable.
	bad := strings.Replace(doc, "name: main key", "name: main key, maxConcurent: 2", 1)
	require.NoError(t, os.WriteFile(path, []byte(bad), 0o600))
	out, err := exec.Command(gatewayBinary(t), "-check", "-config", path).CombinedOutput()
	require.Error(t, err)
	assert.Equal(t, "config: providers[0].connections[0].maxConcurent: unknown field\n", string(out))
	out, err = exec.Command(gatewayBinary(t), "-config", path+".missing.yaml").CombinedOutput()
	require.Error(t, err, "%s", out)
	require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
	cmd := exec.Command(gatewayBinary(t), "-config", path, "-listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "E2E_URL_SECRET="+urlSecret)
	out, err = cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", out)
	assert.Equal(t, 1, ee.ExitCode())
	assert.Equal(t, "gateway: config: providers[0].connections[0].apiKey: environment variable E2E_OPENAI_KEY is not set\n", string(out))
}

// SIGHUP reloads the file: a cooldown on a kept connection survives, a
// removed provider is gone, a new combo serves, a request in flight
// finishes on the configuration it started with; a bad file is refused
// (the reload route answers 400 with the errors) and the old
// configuration keeps serving.
func TestE2EReloadKeepsStateOfKeptConnections(t *testing.T) {
	up := upstreams(t, "openai", "groq")
	up["openai"].Script("sk-k1", combotest.RateLimited(30*time.Second))
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	up["groq"].Handle("", func(c combotest.Call) combotest.Reply {
		if strings.Contains(string(c.Body), "slow please") {
			<-release
		}
		return combotest.OK("groq answers")
	})
	cfg := config([]gw.Provider{provider("openai", up["openai"], "k1", "k2"), provider("groq", up["groq"], "g1")},
		gw.Combo{Name: "keys", Targets: []gw.Target{{Provider: "openai", Model: "gpt-4o"}}},
		gw.Combo{Name: "fast", Targets: []gw.Target{{Provider: "groq", Model: "llama"}}})
	path := filepath.Join(t.TempDir(), "gateway.json")
	write := func(c *gw.Config) {
		b, err := json.Marshal(c)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, b, 0o600))
	}
	write(cfg)
	g := startGatewayFile(t, path, nil)

	a := g.chat(t, "keys", "hi", nil)
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, "k2", servedBy(t, up["openai"]), "k1 is cooling for 30 s")
	inflight := make(chan answer, 1)
	go func() { inflight <- g.chat(t, "fast", "slow please", nil) }()
	require.Eventually(t, func() bool { return up["groq"].Total() == 1 }, 5*time.Second, 5*time.Millisecond)

	// Remove groq, add a combo, keep openai.
	next := config([]gw.Provider{provider("openai", up["openai"], "k1", "k2")},
		gw.Combo{Name: "keys", Targets: []gw.Target{{Provider: "openai", Model: "gpt-4o"}}},
		gw.Combo{Name: "fresh", Strategy: "round-robin", Targets: []gw.Target{{Provider: "openai", Model: "gpt-4o-mini"}}})
	write(next)
	require.NoError(t, g.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return strings.Contains(g.stderr.String(), "config reloaded") }, 5*time.Second, 10*time.Millisecond)
	assert.Contains(t, g.stderr.String(), "generation=2")
	assert.Contains(t, g.stderr.String(), "removed=combo:fast,connection:g1,provider:groq")

	a = g.chat(t, "fresh", "hi", nil)
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, "k2", servedBy(t, up["openai"]), "the cooldown of kept k1 survived the reload")
	a = g.chat(t, "fast", "hi", nil)
	assert.Equal(t, http.StatusNotFound, a.StatusCode, a.body)
	a = g.chat(t, "groq/llama", "hi", nil)
	assert.Equal(t, http.StatusNotFound, a.StatusCode, "the removed provider is gone")
	cd := g.admin(t, http.MethodGet, "/api/resilience/cooldowns", "").json(t)
	require.EqualValues(t, 1, cd["total"], cd)
	c := cd["connections"].([]any)[0].(map[string]any)
	assert.Equal(t, "k1", c["connectionId"])
	assert.InDelta(t, 30_000, c["remainingMs"], 5_000)

	once.Do(func() { close(release) })
	a = <-inflight
	require.Equal(t, http.StatusOK, a.StatusCode, "the request in flight finished on its configuration: %s", a.body)
	assert.Equal(t, "groq/llama", a.Header.Get("X-Routeguard-Target"))

	// A bad file: refused with its errors, the running one stays.
	require.NoError(t, os.WriteFile(path, []byte(`{"providers":[{"id":"openai","baseURL":"ftp://x","connections":[{"id":"k1"}]}],"combos":[{"name":"keys","targets":[{"provider":"openai","model":"m"}]}],"bogus":1}`), 0o600))
	r := g.admin(t, http.MethodPost, gw.ReloadPath, "")
	require.Equal(t, http.StatusBadRequest, r.StatusCode, r.body)
	assert.JSONEq(t, `{"ok":false,"code":"invalid_config","errors":[{"field":"bogus","problem":"unknown field"}]}`, r.body)
	require.NoError(t, os.WriteFile(path, []byte(`{"providers":[{"id":"openai","baseURL":"ftp://x","connections":[{"id":"k1"}]}],"combos":[{"name":"keys","targets":[{"provider":"nope","model":"m"}]}]}`), 0o600))
	r = g.admin(t, http.MethodPost, gw.ReloadPath, "")
	require.Equal(t, http.StatusBadRequest, r.StatusCode, r.body)
	assert.JSONEq(t, `{"ok":false,"code":"invalid_config","errors":[
		{"field":"providers[0].baseURL","problem":"must be an absolute http or https URL, got \"ftp://x\""},
		{"field":"combos[0].targets[0].provider","problem":"unknown provider \"nope\""}]}`, r.body)
	require.NoError(t, g.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return strings.Count(g.stderr.String(), "config reload refused") == 3 }, 5*time.Second, 10*time.Millisecond)
	a = g.chat(t, "fresh", "hi", nil)
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)

	// The route needs the admin token; a good file reloads through it.
	r = g.do(t, http.MethodPost, gw.ReloadPath, nil, "")
	assert.Equal(t, http.StatusUnauthorized, r.StatusCode)
	write(cfg)
	r = g.admin(t, http.MethodPost, gw.ReloadPath, "")
	require.Equal(t, http.StatusOK, r.StatusCode, r.body)
	assert.JSONEq(t, `{"ok":true,"generation":3,"added":["combo:fast","connection:g1","provider:groq"],"removed":["combo:fresh"],"restartRequired":[]}`, r.body)
	a = g.chat(t, "fast", "hi", nil)
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
}

// A request narrows its combo with "routeguard": only, ignore and order
// name providers; an unknown one is 400; the field never reaches the
// upstream.
func TestE2ERoutingPreferences(t *testing.T) {
	up := upstreams(t, "p1", "p2", "p3")
	cfg := config([]gw.Provider{provider("p1", up["p1"], "a"), provider("p2", up["p2"], "b"), provider("p3", up["p3"], "c")},
		gw.Combo{Name: "all", Strategy: "priority",
			Targets: []gw.Target{{Provider: "p1", Model: "m"}, {Provider: "p2", Model: "m"}, {Provider: "p3", Model: "m"}}})
	g := startGateway(t, cfg)
	send := func(prefs string) answer {
		body := `{"model":"all","messages":[{"role":"user","content":"hi"}],"routeguard":` + prefs + `}`
		return g.do(t, http.MethodPost, "/v1/chat/completions", hdr("Content-Type", "application/json"), body)
	}
	for _, tc := range []struct{ prefs, want string }{
		{`{}`, "p1/m"},
		{`{"only":["p2","p3"]}`, "p2/m"},
		{`{"ignore":["p1"]}`, "p2/m"},
		{`{"order":["p3","p1"]}`, "p3/m"},
		{`{"only":["p1","p2"],"order":["p2"]}`, "p2/m"},
	} {
		a := send(tc.prefs)
		require.Equal(t, http.StatusOK, a.StatusCode, "%s: %s", tc.prefs, a.body)
		assert.Equal(t, tc.want, a.Header.Get("X-Routeguard-Target"), tc.prefs)
	}
	for _, id := range []string{"p1", "p2", "p3"} {
		for _, c := range up[id].Calls() {
			assert.NotContains(t, string(c.Body), "routeguard", "the field is removed before forwarding")
		}
	}
	// p2 fails: an order falls back to the others in declared order.
	up["p3"].Script("", combotest.Error(500, "p3 broke"))
	a := send(`{"order":["p3"]}`)
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Equal(t, "p1/m", a.Header.Get("X-Routeguard-Target"))

	for _, tc := range []struct{ prefs, code string }{
		{`{"only":["openrouter"]}`, "unknown_provider"},
		{`{"ignore":["p1","p2","p3"]}`, "no_provider_allowed"},
		{`{"prefer":["p1"]}`, "invalid_routeguard_preferences"},
		{`["p1"]`, "invalid_routeguard_preferences"},
	} {
		a := send(tc.prefs)
		assert.Equal(t, http.StatusBadRequest, a.StatusCode, tc.prefs)
		assert.Equal(t, tc.code, errorCode(t, a), tc.prefs)
	}
}

// A client key's maxInFlight caps its requests in flight: one over it is
// 429 client_in_flight_limit with Retry-After: 1; other keys are not
// affected, and the slot is free again when the request ends.
func TestE2EClientMaxInFlight(t *testing.T) {
	up := upstreams(t, "p1")
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	up["p1"].Handle("", func(c combotest.Call) combotest.Reply {
		if strings.Contains(string(c.Body), "hold") {
			<-release
		}
		return combotest.OK("done")
	})
	cfg := config([]gw.Provider{provider("p1", up["p1"], "a")},
		gw.Combo{Name: "c", Targets: []gw.Target{{Provider: "p1", Model: "m"}}})
	cfg.APIKeys = []gw.APIKey{{ID: "capped", Key: "rk-capped", MaxInFlight: 1}, {ID: "free", Key: "rk-free"}}
	g := startGateway(t, cfg)
	capped, free := hdr("Authorization", "Bearer rk-capped"), hdr("Authorization", "Bearer rk-free")

	held := make(chan answer, 1)
	go func() { held <- g.chat(t, "c", "hold", hdr("Authorization", "Bearer rk-capped")) }()
	require.Eventually(t, func() bool { return up["p1"].Total() == 1 }, 5*time.Second, 5*time.Millisecond)
	a := g.chat(t, "c", "hi", capped)
	assert.Equal(t, http.StatusTooManyRequests, a.StatusCode, a.body)
	assert.Equal(t, "1", a.Header.Get("Retry-After"))
	assert.Equal(t, "client_in_flight_limit", errorCode(t, a))
	assert.Equal(t, 1, up["p1"].Total(), "refused before any upstream call")
	a = g.chat(t, "c", "hi", free)
	assert.Equal(t, http.StatusOK, a.StatusCode, a.body)

	once.Do(func() { close(release) })
	require.Equal(t, http.StatusOK, (<-held).StatusCode)
	a = g.chat(t, "c", "hi", hdr("Authorization", "Bearer rk-capped"))
	assert.Equal(t, http.StatusOK, a.StatusCode, a.body)
}
