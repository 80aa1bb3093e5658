package combo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/lockout"
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
		{"disabled by env", map[string]string{"OMNIROUTE_EMERGENCY_FALLBACK": "0"}, 402, "payment required", 0, false},
		{"disabled by env false", map[string]string{"OMNIROUTE_EMERGENCY_FALLBACK": "false"}, 402, "payment required", 0, false},
		{"enabled by env true", map[string]string{"OMNIROUTE_EMERGENCY_FALLBACK": "true"}, 402, "payment required", 0, true},
		{"500 out of credits", nil, 500, "Out of credits", 0, true},
		{"500 out of credits with tools", nil, 500, "Out of credits", 1, false},
		{"plain 500", nil, 500, "boom", 0, false},
		{"400 quota exceeded", nil, 400, `{"error":{"code":"quota_exceeded"}}`, 0, true},
		{"billing next to limit", nil, 403, "billing hard limit has been reached", 0, true},
		{"billing without limit wording", nil, 500, "billing service temporarily down", 0, false},
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
				var ue *combo.Error
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
	var ue *combo.Error
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

// The emergency attempt is screened like any other: an emergency target
// whose model is locked is not dispatched, and the caller sees the
// original failure.
func TestEmergencyTargetScreenedByLayers(t *testing.T) {
	f := newFleet(t, "openai", "nvidia")
	f.cfg.Emergency = &combo.EmergencyFallback{}
	f.rebuild()
	f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "nvidia", Model: "openai/gpt-oss-120b", Status: 429, Cooldown: time.Minute}, time.Now())
	f.up["openai"].Script("", combotest.Error(402, "payment required"))
	c := &combo.Combo{Name: "paid", Targets: []combo.Target{target("openai", "", "gpt-4o")}}
	res, err := f.do(t, c)
	var ue *combo.Error
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, 402, ue.Status)
	assert.False(t, res.Emergency)
	assert.Equal(t, 0, f.up["nvidia"].Total(), "a locked emergency target is not called")
	assert.Equal(t, 1, f.up["openai"].Total())
}

// A request whose caller has gone never falls back.
func TestEmergencySkippedWhenCallerGone(t *testing.T) {
	f := newFleet(t, "openai", "nvidia")
	f.cfg.Emergency = &combo.EmergencyFallback{}
	f.rebuild()
	c := &combo.Combo{Name: "paid", Targets: []combo.Target{target("openai", "k1", "gpt-4o")}}

	ctx, cancel := context.WithCancel(context.Background())
	f.up["openai"].Handle("k1", func(combotest.Call) combotest.Reply {
		cancel()
		return combotest.Reply{Status: 402, Body: "payment required"}
	})
	_, err := f.router.Do(ctx, combo.Request{Combo: c}, f.send)
	require.Error(t, err)
	assert.Equal(t, 0, f.up["nvidia"].Total(), "no fallback once the caller has gone")
}

// Behind a Transport, Rewrite finds the emergency budget in its request's
// context and caps the body with CapOutputTokens.
func TestEmergencyBudgetThroughTransport(t *testing.T) {
	f := newFleet(t, "openai", "nvidia")
	f.cfg.Emergency = &combo.EmergencyFallback{}
	f.rebuild()
	f.up["openai"].Script("", combotest.Error(402, "payment required"))
	c := &combo.Combo{Name: "paid", Targets: []combo.Target{target("openai", "", "gpt-4o")}}
	tr := &combo.Transport{
		Router: f.router,
		Combo:  func(*http.Request) (*combo.Combo, error) { return c, nil },
		Rewrite: func(req *http.Request, tg *combo.Target) (*http.Request, error) {
			if n, ok := combo.OutputBudget(req.Context()); ok {
				body, err := io.ReadAll(req.Body)
				if err != nil {
					return nil, err
				}
				body, _, err = combo.CapOutputTokens(body, n)
				if err != nil {
					return nil, err
				}
				req.Body = io.NopCloser(bytes.NewReader(body))
				req.ContentLength = int64(len(body))
			}
			req.URL.Host = tg.Provider + ".test"
			return req, nil
		},
		Base: roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			return f.up[strings.TrimSuffix(req.URL.Host, ".test")].Transport().RoundTrip(req)
		}),
	}
	req, err := http.NewRequest(http.MethodPost, "http://gateway.test/v1/chat/completions",
		strings.NewReader(`{"model":"paid","max_tokens":100000,"messages":[]}`))
	require.NoError(t, err)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	calls := f.up["nvidia"].Calls()
	require.Len(t, calls, 1)
	assert.JSONEq(t, `{"model":"paid","max_tokens":4096,"messages":[]}`, string(calls[0].Body))
	calls = f.up["openai"].Calls()
	require.Len(t, calls, 1)
	assert.JSONEq(t, `{"model":"paid","max_tokens":100000,"messages":[]}`, string(calls[0].Body), "only the emergency attempt is capped")
}

func TestCapOutputTokens(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		tokens  int
		want    string
		changed bool
		err     bool
	}{
		{"lowers max_tokens", `{"max_tokens":9000,"messages":[]}`, 4096, `{"max_tokens":4096,"messages":[]}`, true, false},
		{"keeps a smaller cap", `{"max_tokens":100,"messages":[]}`, 4096, `{"max_tokens":100,"messages":[]}`, false, false},
		{"every field present", `{"max_tokens":9000,"max_completion_tokens":200,"max_output_tokens":5000}`, 4096,
			`{"max_tokens":4096,"max_completion_tokens":200,"max_output_tokens":4096}`, true, false},
		{"chat without a cap", `{"messages":[{"role":"user","content":"a<b"}]}`, 4096,
			`{"max_tokens":4096,"messages":[{"role":"user","content":"a<b"}]}`, true, false},
		{"responses without a cap", `{"input":"hi","model":"m"}`, 512, `{"input":"hi","max_output_tokens":512,"model":"m"}`, true, false},
		{"null cap", `{"max_tokens":null}`, 64, `{"max_tokens":64}`, true, false},
		{"non-numeric cap", `{"max_tokens":"lots"}`, 64, `{"max_tokens":64}`, true, false},
		{"no budget", `{"max_tokens":9000}`, 0, `{"max_tokens":9000}`, false, false},
		{"not an object", `[1]`, 64, `[1]`, false, true},
		{"broken", `{"max_tokens":`, 64, `{"max_tokens":`, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, changed, err := combo.CapOutputTokens([]byte(tt.in), tt.tokens)
			assert.Equal(t, tt.changed, changed)
			if tt.err {
				require.ErrorIs(t, err, combo.ErrNotJSONObject)
			} else {
				require.NoError(t, err)
			}
			if changed {
				assert.JSONEq(t, tt.want, string(out))
				assert.NotContains(t, string(out), `\u003c`, "no HTML escaping")
			} else {
				assert.Equal(t, tt.in, string(out))
			}
		})
	}
}

func FuzzCapOutputTokens(f *testing.F) {
	f.Add([]byte(`{"max_tokens":9000,"messages":[]}`), 4096)
	f.Add([]byte(`{"input":"hi"}`), 1)
	f.Add([]byte(`{"max_output_tokens":-5}`), 10)
	f.Add([]byte(`[]`), 10)
	f.Fuzz(func(t *testing.T, body []byte, tokens int) {
		out, changed, err := combo.CapOutputTokens(body, tokens)
		if err != nil || !changed {
			if changed || string(out) != string(body) {
				t.Fatalf("unchanged body rewritten (err %v)", err)
			}
			if err != nil && !errors.Is(err, combo.ErrNotJSONObject) {
				t.Fatalf("error %v", err)
			}
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("capped body is not an object: %v", err)
		}
		capped := 0
		for _, k := range []string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
			v, ok := m[k]
			if !ok {
				continue
			}
			capped++
			var n float64
			if err := json.Unmarshal(v, &n); err != nil || n > float64(tokens) {
				t.Fatalf("%s = %s above %d", k, v, tokens)
			}
		}
		if capped == 0 {
			t.Fatalf("no cap field in %s", out)
		}
	})
}

// The classifier's EmergencyDisabled setting, changed at run time, switches
// the fallback off and on for the next failure.
func TestEmergencyFallbackToggledThroughClassifier(t *testing.T) {
	f := newFleet(t, "openai", "nvidia")
	cl := restate.New(restate.Config{})
	f.cfg.Classifier = cl
	f.cfg.Emergency = &combo.EmergencyFallback{}
	f.rebuild()
	f.up["openai"].Script("", combotest.Error(402, "payment required"))
	c := &combo.Combo{Name: "paid", Targets: []combo.Target{target("openai", "", "gpt-4o")}}

	set := cl.Config()
	set.EmergencyDisabled = true
	cl.SetConfig(set)
	_, err := f.do(t, c)
	require.ErrorIs(t, err, combo.ErrUpstream)
	assert.Equal(t, 0, f.up["nvidia"].Total())

	set.EmergencyDisabled = false
	cl.SetConfig(set)
	res, err := f.do(t, c)
	require.NoError(t, err)
	assert.True(t, res.Emergency)
	assert.Equal(t, 1, f.up["nvidia"].Total())
}

// A 402 leaves the connection out of credits; the next requests find
// nothing to dispatch and take the emergency fallback as the first did,
// without calling the exhausted connection again.
func TestEmergencyFallbackAfterCreditsExhausted(t *testing.T) {
	f := newFleet(t, "openai", "anthropic", "nvidia")
	f.cfg.Emergency = &combo.EmergencyFallback{}
	f.rebuild()
	f.up["openai"].Script("k1", combotest.Error(402, "payment required"))
	c := &combo.Combo{Name: "paid", Targets: []combo.Target{target("openai", "k1", "gpt-4o")}}
	for i := range 3 {
		res, err := f.do(t, c)
		require.NoError(t, err, "request %d", i)
		assert.True(t, res.Emergency)
		assert.Equal(t, "nvidia", res.Target.Provider)
	}
	assert.Equal(t, 1, f.up["openai"].Total(), "the exhausted connection is asked once")
	assert.Equal(t, 3, f.up["nvidia"].Total())
	assert.Equal(t, "credits_exhausted", f.cfg.Cooldowns.Status("k1").State.String())

	// The same with tools: the terminal answer, no fallback.
	_, err := f.do(t, c, func(r *combo.Request) { r.Tools = 1 })
	var te *combo.Error
	require.ErrorAs(t, err, &te)
	assert.Equal(t, 404, te.Status)
	assert.Equal(t, 3, f.up["nvidia"].Total())

	// Switched off: the terminal answer.
	f.cfg.Emergency.SetEnabled(false)
	_, err = f.do(t, c)
	require.ErrorAs(t, err, &te)
	assert.Equal(t, combo.TerminalNoExecutable, te.TerminalReason)

	// A pool held back by timers only (no connection out of credits) gets
	// its terminal answer, even with the fallback on.
	f.cfg.Emergency.SetEnabled(true)
	f.cfg.Lockouts.LockAt(lockout.Failure{Provider: "anthropic", Connection: "a1", Model: "claude", Status: 429, Cooldown: time.Minute}, time.Now())
	cooling := &combo.Combo{Name: "cooling", Targets: []combo.Target{target("anthropic", "a1", "claude")},
		Settings: combo.Settings{CooldownWait: combo.CooldownWait{Disabled: true}}}
	_, err = f.do(t, cooling)
	require.ErrorAs(t, err, &te)
	assert.Equal(t, 503, te.Status)
	assert.Equal(t, 3, f.up["nvidia"].Total())

	// One target out of credits and one cooling: the first request of such
	// a combo would have fallen back after the 402, and so does this one.
	mixed := &combo.Combo{Name: "mixed", Targets: []combo.Target{target("openai", "k1", "gpt-4o"), target("anthropic", "a1", "claude")},
		Settings: combo.Settings{CooldownWait: combo.CooldownWait{Disabled: true}}}
	res, err := f.do(t, mixed)
	require.NoError(t, err)
	assert.True(t, res.Emergency)
	assert.Equal(t, 4, f.up["nvidia"].Total())
	assert.Equal(t, 0, f.up["anthropic"].Total())
}

// The trigger may come from any target of the request, not only the last
// one tried.
func TestEmergencyFallbackOnAnEarlierFailure(t *testing.T) {
	f := newFleet(t, "openai", "anthropic", "nvidia")
	f.cfg.Emergency = &combo.EmergencyFallback{}
	f.rebuild()
	f.up["openai"].Script("", combotest.Error(402, "payment required"))
	f.up["anthropic"].Script("", combotest.Error(500, "boom"))
	f.up["nvidia"].Script("", combotest.OK("rescued"))
	c := &combo.Combo{Name: "paid", Targets: []combo.Target{target("openai", "", "gpt-4o"), target("anthropic", "", "claude")}}
	res, err := f.do(t, c)
	require.NoError(t, err)
	assert.True(t, res.Emergency)
	assert.Equal(t, []string{
		"openai//gpt-4o:failed:Payment Required",
		"anthropic//claude:failed:Internal Server Error",
		"nvidia//openai/gpt-oss-120b:succeeded:OK",
	}, outcomes(res))
}
