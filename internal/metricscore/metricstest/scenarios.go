// Package metricstest holds the Scenarios that both metrics modules drive
// through the router, with the values each must then export: the same
// Scenarios and the same numbers in combo/promcollector and
// combo/otelmetrics.
package metricstest

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lockout"
	"github.com/routeguard/routeguard/queue"
	"github.com/routeguard/routeguard/watchdog"
)

// Attacher is what both packages offer.
type Attacher interface {
	Attach(*combo.Config)
	AttachBreaker(*breaker.Config)
	AttachCooldown(*cooldown.Config)
	AttachLockout(*lockout.Config)
	AttachQueue(*queue.Config)
}

// Rig is a router over two fake providers, openai (connection sk-1, model
// gpt-4o) and anthropic (ak-1, claude), with every layer attached to m.
type Rig struct {
	m        Attacher
	r        *combo.Router
	cfg      combo.Config
	openai   *combotest.Upstream
	anthropc *combotest.Upstream
	smart    *combo.Combo
}

func NewRig(t *testing.T, m Attacher, wd watchdog.Config) *Rig {
	t.Helper()
	bc := breaker.Config{Profiles: map[string]breaker.Profile{"openai": {OpenAt: 2}}}
	cc := cooldown.Config{}
	lc := lockout.Config{Enabled: true}
	qc := queue.Config{MaxConcurrency: 4}
	m.AttachBreaker(&bc)
	m.AttachCooldown(&cc)
	m.AttachLockout(&lc)
	m.AttachQueue(&qc)
	g := &Rig{m: m, openai: combotest.New(), anthropc: combotest.New()}
	t.Cleanup(g.openai.Close)
	t.Cleanup(g.anthropc.Close)
	g.cfg = combo.Config{
		Breakers:  breaker.NewSet(bc),
		Cooldowns: cooldown.New(cc),
		Lockouts:  lockout.New(lc),
		Queue:     queue.New(qc),
		Watchdog:  wd,
	}
	m.Attach(&g.cfg)
	g.r = combo.New(g.cfg)
	g.smart = &combo.Combo{Name: "smart", Targets: []combo.Target{
		{Provider: "openai", Connection: "sk-1", Model: "gpt-4o"},
		{Provider: "anthropic", Connection: "ak-1", Model: "claude"},
	}, Settings: combo.Settings{MaxRetries: new(0)}}
	return g
}

func (g *Rig) send(ctx context.Context, t *combo.Target) (*http.Response, error) {
	up := g.openai
	if t.Provider == "anthropic" {
		up = g.anthropc
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+t.Provider+".test/v1/chat/completions", nil)
	req.Header.Set("Authorization", "Bearer "+t.Connection)
	return up.Transport().RoundTrip(req)
}

// do routes one request over the smart combo and reads the answer.
func (g *Rig) do(t *testing.T) *combo.Result {
	t.Helper()
	res, err := g.r.Do(context.Background(), combo.Request{Combo: g.smart}, g.send)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	_, _ = io.Copy(io.Discard, res.Response.Body)
	res.Response.Body.Close()
	return res
}

// ScenarioBreaker: openai answers 503 twice, ten minutes apart; each time
// the request falls back to anthropic. The openai breaker (opens at 2)
// goes closed → degraded → open.
func ScenarioBreaker(t *testing.T, m Attacher) *Rig {
	g := NewRig(t, m, watchdog.Config{})
	g.openai.Script("sk-1", combotest.Error(http.StatusServiceUnavailable, "down"))
	g.do(t)
	time.Sleep(10 * time.Minute)
	g.do(t)
	return g
}

// ScenarioCooldown: openai answers 429 with Retry-After 90 s at the
// bubble's start; the request falls back to anthropic once.
func ScenarioCooldown(t *testing.T, m Attacher) *Rig {
	g := NewRig(t, m, watchdog.Config{})
	g.openai.Script("sk-1", combotest.RateLimited(90*time.Second))
	g.do(t)
	return g
}

// ScenarioStreamCut: openai streams nothing but heartbeats and the
// readiness timeout (1 s) cuts it; the request falls back to anthropic.
func ScenarioStreamCut(t *testing.T, m Attacher) *Rig {
	g := NewRig(t, m, watchdog.Config{ReadinessTimeout: new(time.Second)})
	g.openai.Script("sk-1", combotest.SSE(400*time.Millisecond,
		combotest.Heartbeat(), combotest.Heartbeat(), combotest.Heartbeat(), combotest.Heartbeat()))
	g.do(t)
	return g
}

// ScenarioRetryThenFallback: openai drops the connection twice; the router
// sends to it once more (one same-target retry), then falls back to
// anthropic. That is one fallback, from the try of two attempts.
func ScenarioRetryThenFallback(t *testing.T, m Attacher) *Rig {
	g := NewRig(t, m, watchdog.Config{})
	g.smart.Settings = combo.Settings{MaxRetries: new(1), RetryDelay: new(time.Duration(0))}
	g.openai.Script("sk-1", combotest.Reset())
	res := g.do(t)
	if len(res.Attempts) != 3 {
		t.Fatalf("attempts %+v, want a retry, a failure and a success", res.Attempts)
	}
	return g
}

// ScenarioTokenUsage: openai answers with its usage (19 prompt, 10
// completion tokens); then it fails with 503 and anthropic answers with
// its own (300 input, 70 output); then openai answers without usage.
// The token histograms count the two answers that reported usage, and
// nothing for the failed attempt or the answer without usage.
func ScenarioTokenUsage(t *testing.T, m Attacher) *Rig {
	g := NewRig(t, m, watchdog.Config{})
	g.openai.Script("sk-1", combotest.Reply{Body: `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"}}],` +
		`"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29}}`})
	g.do(t)
	g.openai.Script("sk-1", combotest.Error(http.StatusServiceUnavailable, "down"))
	g.anthropc.Script("ak-1", combotest.Reply{Body: `{"type":"message","content":[{"type":"text","text":"Hi"}],` +
		`"usage":{"input_tokens":300,"cache_read_input_tokens":0,"output_tokens":70}}`})
	g.do(t)
	time.Sleep(10 * time.Minute) // past openai's cooldown
	g.openai.Script("sk-1", combotest.OK("no usage"))
	g.do(t)
	return g
}

// ScenarioStreamTimings: openai's four slots are taken by others for
// 500 ms; then it answers its headers after 1 s and its first text 2 s
// later. Its attempt waited 0.5 s for admission and saw its first useful
// output 3.5 s after its start; the router's overhead is the admission wait.
func ScenarioStreamTimings(t *testing.T, m Attacher) *Rig {
	g := NewRig(t, m, watchdog.Config{})
	var releases []func()
	for range 4 {
		release, err := g.cfg.Queue.Acquire(context.Background(), "sk-1")
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	go func() {
		time.Sleep(500 * time.Millisecond)
		for _, release := range releases {
			release()
		}
	}()
	reply := combotest.SSE(2*time.Second, combotest.Heartbeat(), combotest.ChatDelta("hello"), combotest.Done())
	reply.Latency = time.Second
	g.openai.Script("sk-1", reply)
	res := g.do(t)
	if len(res.Attempts) != 1 || res.Attempts[0].FirstOutput != 3500*time.Millisecond {
		t.Fatalf("attempts %+v, want one stream with its first output at 3.5 s", res.Attempts)
	}
	return g
}

// ScenarioEmptyStream: openai's stream ends before any event; the request
// falls back to anthropic, whose plain answer has no first chunk.
func ScenarioEmptyStream(t *testing.T, m Attacher) *Rig {
	g := NewRig(t, m, watchdog.Config{})
	g.openai.Script("sk-1", combotest.SSE(0))
	g.do(t)
	return g
}

// ScenarioQueueRefused: openai's four slots stay taken; a request to a
// combo of openai alone waits the queue's 15 s and is refused before any
// attempt. The terminal answer lists the skip among its exclusions too:
// it is counted once.
func ScenarioQueueRefused(t *testing.T, m Attacher) *Rig {
	g := NewRig(t, m, watchdog.Config{})
	for range 4 {
		release, err := g.cfg.Queue.Acquire(context.Background(), "sk-1")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(release)
	}
	one := &combo.Combo{Name: "one", Targets: g.smart.Targets[:1]}
	if _, err := g.r.Do(context.Background(), combo.Request{Combo: one}, g.send); err == nil {
		t.Fatal("Do: want the queue's refusal")
	}
	return g
}

// ScenarioExclusions: openai answers 429 with Retry-After 90 s; the
// request falls back to anthropic. The next two requests, while sk-1 cools
// down, keep openai out before dispatch and go to anthropic at once: each
// counts its exclusion with the request, and the request_attempts
// histogram holds one request of two attempts and two of one.
func ScenarioExclusions(t *testing.T, m Attacher) *Rig {
	g := NewRig(t, m, watchdog.Config{})
	g.openai.Script("sk-1", combotest.RateLimited(90*time.Second))
	g.do(t)
	for range 2 {
		if res := g.do(t); len(res.Excluded) != 1 || len(res.Attempts) != 1 {
			t.Fatalf("excluded %+v, attempts %+v, want openai kept out and one attempt", res.Excluded, res.Attempts)
		}
	}
	return g
}

// Sample is one expected value: a counter or gauge, or the _count or _sum
// of a histogram, with its labels as name=value pairs.
type Sample struct {
	Name   string
	Labels []string
	Value  float64
}

// Absent is the value of a Sample that must not exist.
const Absent = -1

// The bubble of testing/synctest starts at 2000-01-01 00:00:00 UTC.
const BubbleStart = 946684800

var wantBreaker = []Sample{
	{"routeguard_breaker_transitions_total", []string{"provider", "openai", "from", "closed", "to", "degraded"}, 1},
	{"routeguard_breaker_transitions_total", []string{"provider", "openai", "from", "degraded", "to", "open"}, 1},
	{"routeguard_breaker_state", []string{"provider", "openai", "state", "open"}, 1},
	{"routeguard_breaker_state", []string{"provider", "openai", "state", "closed"}, 0},
	{"routeguard_breaker_state", []string{"provider", "anthropic", "state", "closed"}, 1},
	{"routeguard_breaker_state", []string{"provider", "gemini", "state", "closed"}, 1}, // known from Options
	{"routeguard_breaker_state", []string{"provider", "gemini", "state", "open"}, 0},
	{"routeguard_fallbacks_total", []string{"from_provider", "openai", "to_provider", "anthropic", "result", "succeeded"}, 2},
	{"routeguard_attempts_total", []string{"provider", "openai", "model", "gpt-4o", "outcome", "failed", "status_class", "5xx", "reason", "server_error"}, 2},
	{"routeguard_attempts_total", []string{"provider", "anthropic", "model", "claude", "outcome", "succeeded", "status_class", "2xx", "reason", ""}, 2},
	{"routeguard_request_attempts_count", []string{"combo", "smart"}, 2},
	{"routeguard_request_attempts_sum", []string{"combo", "smart"}, 4},
	{"routeguard_router_overhead_seconds_count", nil, 2},
	{"routeguard_connection_cooldowns_total", []string{"connection", "sk-1", "reason", "server_error"}, 2},
	// The second 503, at 00:10:00, cools sk-1 for the second backoff step, 6 s.
	{"routeguard_cooldown_until_timestamp_seconds", []string{"connection", "sk-1"}, BubbleStart + 600 + 6},
	{"routeguard_connection_up", []string{"connection", "sk-1"}, 0},
	{"routeguard_connection_up", []string{"connection", "ak-1"}, 1},
	{"routeguard_model_lockouts_total", []string{"provider", "openai", "model", "exact:gpt-4o", "reason", "server_error"}, 2},
	{"routeguard_in_flight", []string{"connection", "ak-1"}, 0},
	{"routeguard_queue_depth", []string{"connection", "sk-1"}, 0},
}

var wantCooldown = []Sample{
	{"routeguard_cooldown_until_timestamp_seconds", []string{"connection", "sk-1"}, BubbleStart + 90},
	{"routeguard_cooldown_until_timestamp_seconds", []string{"connection", "ak-1"}, 0},
	{"routeguard_connection_up", []string{"connection", "sk-1"}, 0},
	{"routeguard_connection_up", []string{"connection", "ak-1"}, 1},
	{"routeguard_connection_cooldowns_total", []string{"connection", "sk-1", "reason", "rate_limit_exceeded"}, 1},
	{"routeguard_model_lockouts_total", []string{"provider", "openai", "model", "gpt-4o", "reason", "rate_limited"}, 1},
	{"routeguard_fallbacks_total", []string{"from_provider", "openai", "to_provider", "anthropic", "result", "succeeded"}, 1},
	{"routeguard_attempts_total", []string{"provider", "openai", "model", "gpt-4o", "outcome", "failed", "status_class", "4xx", "reason", "rate_limit_exceeded"}, 1},
	{"routeguard_request_attempts_count", []string{"combo", "smart"}, 1},
	{"routeguard_request_attempts_sum", []string{"combo", "smart"}, 2},
	{"routeguard_breaker_state", []string{"provider", "openai", "state", "closed"}, 1}, // a 429 is not a breaker failure
}

var wantStreamCut = []Sample{
	{"routeguard_stream_cuts_total", []string{"cause", "readiness_timeout"}, 1},
	{"routeguard_fallbacks_total", []string{"from_provider", "openai", "to_provider", "anthropic", "result", "succeeded"}, 1},
	{"routeguard_attempts_total", []string{"provider", "openai", "model", "gpt-4o", "outcome", "failed", "status_class", "5xx", "reason", "server_error"}, 1},
	{"routeguard_breaker_transitions_total", []string{"provider", "openai", "from", "closed", "to", "degraded"}, 1},
	{"routeguard_model_lockouts_total", []string{"provider", "openai", "model", "exact:gpt-4o", "reason", "server_error"}, 1},
	{"routeguard_connection_up", []string{"connection", "sk-1"}, 1}, // a cut stream locks the model, not the connection
	// The heartbeats the router read while holding the stream back are
	// upstream time, not the router's.
	{"routeguard_router_overhead_seconds_sum", nil, 0},
	{"routeguard_queue_wait_seconds_count", []string{"provider", "openai"}, 1},
	{"routeguard_queue_wait_seconds_sum", []string{"provider", "openai"}, 0},
	// Only a stream that succeeded has a first chunk: anthropic answered
	// in plain.
	{"gen_ai_client_operation_time_to_first_chunk_seconds_count", []string{"gen_ai_provider_name", "openai"}, Absent},
	{"gen_ai_client_operation_time_to_first_chunk_seconds_count", []string{"gen_ai_provider_name", "anthropic"}, Absent},
}

var wantStreamTimings = []Sample{
	{"routeguard_queue_wait_seconds_count", []string{"provider", "openai"}, 1},
	{"routeguard_queue_wait_seconds_sum", []string{"provider", "openai"}, 0.5},
	{"gen_ai_client_operation_time_to_first_chunk_seconds_count",
		[]string{"gen_ai_operation_name", "chat", "gen_ai_provider_name", "openai", "gen_ai_request_model", "gpt-4o"}, 1},
	{"gen_ai_client_operation_time_to_first_chunk_seconds_sum",
		[]string{"gen_ai_operation_name", "chat", "gen_ai_provider_name", "openai", "gen_ai_request_model", "gpt-4o"}, 3.5},
	{"gen_ai_client_operation_duration_seconds_sum",
		[]string{"gen_ai_operation_name", "chat", "gen_ai_provider_name", "openai", "gen_ai_request_model", "gpt-4o"}, 3.5},
	{"routeguard_router_overhead_seconds_count", nil, 1},
	{"routeguard_router_overhead_seconds_sum", nil, 0.5},
	{"routeguard_request_attempts_sum", []string{"combo", "smart"}, 1},
	{"routeguard_fallbacks_total", []string{"from_provider", "openai", "to_provider", "anthropic", "result", "succeeded"}, Absent},
}

var wantEmptyStream = []Sample{
	{"routeguard_stream_cuts_total", []string{"cause", "empty_stream"}, 1},
	{"routeguard_fallbacks_total", []string{"from_provider", "openai", "to_provider", "anthropic", "result", "succeeded"}, 1},
	{"routeguard_router_overhead_seconds_sum", nil, 0},
	{"gen_ai_client_operation_time_to_first_chunk_seconds_count", []string{"gen_ai_provider_name", "anthropic"}, Absent},
}

var wantRetryThenFallback = []Sample{
	{"routeguard_fallbacks_total", []string{"from_provider", "openai", "to_provider", "anthropic", "result", "succeeded"}, 1},
	{"routeguard_attempts_total", []string{"provider", "openai", "model", "gpt-4o", "outcome", "failed", "status_class", "none", "reason", "retry_same_target"}, 1},
	{"routeguard_request_attempts_count", []string{"combo", "smart"}, 1},
	{"routeguard_request_attempts_sum", []string{"combo", "smart"}, 3},
	// A same-target retry is not a fallback.
	{"routeguard_fallbacks_total", []string{"from_provider", "openai", "to_provider", "openai"}, Absent},
}

var wantTokenUsage = []Sample{
	{"gen_ai_client_token_usage_count", []string{"gen_ai_operation_name", "chat", "gen_ai_provider_name", "openai",
		"gen_ai_request_model", "gpt-4o", "gen_ai_token_type", "input"}, 1},
	{"gen_ai_client_token_usage_sum", []string{"gen_ai_provider_name", "openai", "gen_ai_token_type", "input"}, 19},
	{"gen_ai_client_token_usage_count", []string{"gen_ai_provider_name", "openai", "gen_ai_token_type", "output"}, 1},
	{"gen_ai_client_token_usage_sum", []string{"gen_ai_provider_name", "openai", "gen_ai_token_type", "output"}, 10},
	{"gen_ai_client_token_usage_count", []string{"gen_ai_operation_name", "chat", "gen_ai_provider_name", "anthropic",
		"gen_ai_request_model", "claude", "gen_ai_token_type", "input"}, 1},
	{"gen_ai_client_token_usage_sum", []string{"gen_ai_provider_name", "anthropic", "gen_ai_token_type", "input"}, 300},
	{"gen_ai_client_token_usage_sum", []string{"gen_ai_provider_name", "anthropic", "gen_ai_token_type", "output"}, 70},
	{"routeguard_attempts_total", []string{"provider", "openai", "model", "gpt-4o", "outcome", "succeeded", "status_class", "2xx"}, 2},
}

var wantQueueRefused = []Sample{
	{"routeguard_exclusions_total", []string{"reason", "queue_full"}, 1},
	{"routeguard_queue_rejected_total", []string{"connection", "sk-1", "reason", "queue_timeout"}, 1},
	{"routeguard_attempts_total", []string{"provider", "openai", "model", "gpt-4o", "outcome", "skipped", "status_class", "none", "reason", "queue_full"}, 1},
	{"routeguard_request_attempts_count", []string{"combo", "one"}, 1},
	{"routeguard_request_attempts_sum", []string{"combo", "one"}, 0},
	{"routeguard_queue_wait_seconds_count", []string{"provider", "openai"}, Absent}, // no attempt made
}

var wantExclusions = []Sample{
	{"routeguard_exclusions_total", []string{"reason", "model_lockout"}, 2},
	{"routeguard_request_attempts_count", []string{"combo", "smart"}, 3},
	{"routeguard_request_attempts_sum", []string{"combo", "smart"}, 4},
	{"routeguard_router_overhead_seconds_count", nil, 3},
	{"routeguard_fallbacks_total", []string{"from_provider", "openai", "to_provider", "anthropic", "result", "succeeded"}, 1},
	{"routeguard_attempts_total", []string{"provider", "anthropic", "model", "claude", "outcome", "succeeded", "status_class", "2xx"}, 3},
}

var Scenarios = []struct {
	Name string
	Run  func(*testing.T, Attacher) *Rig
	Want []Sample
}{
	{"breaker", ScenarioBreaker, wantBreaker},
	{"cooldown", ScenarioCooldown, wantCooldown},
	{"stream_cut", ScenarioStreamCut, wantStreamCut},
	{"retry_then_fallback", ScenarioRetryThenFallback, wantRetryThenFallback},
	{"stream_timings", ScenarioStreamTimings, wantStreamTimings},
	{"empty_stream", ScenarioEmptyStream, wantEmptyStream},
	{"queue_refused", ScenarioQueueRefused, wantQueueRefused},
	{"token_usage", ScenarioTokenUsage, wantTokenUsage},
	{"exclusions", ScenarioExclusions, wantExclusions},
}
