package otelmetrics_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/combo/otelmetrics"
	"github.com/routeguard/routeguard/cooldown"
)

// attrs is a span's or an event's attributes as a map, for exact
// comparison.
func attrs(kvs []attribute.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

// A fallback: openai answers 503 after 1 s, anthropic streams its first
// text 2 s after its headers, and gemini's connection is cooling down. The
// request span, a child of the caller's span, holds one client span per
// attempt and the exclusion as an event.
func TestTracesFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sr := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
		tr := otelmetrics.NewTraces(otelmetrics.TraceOptions{TracerProvider: tp})

		openai, anthropic := combotest.New(), combotest.New()
		t.Cleanup(openai.Close)
		t.Cleanup(anthropic.Close)
		openai.Script("sk-1", combotest.Error(http.StatusServiceUnavailable, "down").After(time.Second))
		stream := combotest.SSE(2*time.Second, combotest.Heartbeat(), combotest.ChatDelta("hello"), combotest.Done())
		stream.Latency = 500 * time.Millisecond
		anthropic.Script("ak-1", stream)

		cfg := combo.Config{Cooldowns: cooldown.New(cooldown.Config{})}
		cfg.Cooldowns.FailAt("gk-1", cooldown.Failure{Status: 429, Cooldown: time.Minute}, time.Now())
		tr.Attach(&cfg)
		r := combo.New(cfg)
		smart := &combo.Combo{Name: "smart", Targets: []combo.Target{
			{Provider: "gemini", Connection: "gk-1", Model: "gemini-pro"},
			{Provider: "openai", Connection: "sk-1", Model: "gpt-4o"},
			{Provider: "anthropic", Connection: "ak-1", Model: "claude"},
		}, Settings: combo.Settings{MaxRetries: new(0)}}
		send := func(ctx context.Context, t *combo.Target) (*http.Response, error) {
			up := openai
			if t.Provider == "anthropic" {
				up = anthropic
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+t.Provider+".test/v1/chat/completions", nil)
			req.Header.Set("Authorization", "Bearer "+t.Connection)
			return up.Transport().RoundTrip(req)
		}

		ctx, parent := tp.Tracer("test").Start(context.Background(), "POST /v1/chat/completions")
		start := time.Now()
		res, err := r.Do(ctx, combo.Request{Combo: smart}, send)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Response.Body)
		res.Response.Body.Close()
		parent.End()

		spans := sr.Ended()
		if len(spans) != 4 {
			t.Fatalf("%d spans, want the caller's, the request's and two attempts'", len(spans))
		}
		byName := map[string]sdktrace.ReadOnlySpan{}
		for _, s := range spans {
			byName[s.Name()] = s
		}
		reqSpan, first, second := byName["chat smart"], byName["chat gpt-4o"], byName["chat claude"]
		if reqSpan == nil || first == nil || second == nil {
			t.Fatalf("span names %v", byName)
		}
		if reqSpan.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Error("the request span is not a child of the caller's span")
		}
		for _, s := range []sdktrace.ReadOnlySpan{first, second} {
			if s.Parent().SpanID() != reqSpan.SpanContext().SpanID() {
				t.Errorf("%s is not a child of the request span", s.Name())
			}
			if s.SpanKind() != trace.SpanKindClient {
				t.Errorf("%s kind %v, want client", s.Name(), s.SpanKind())
			}
		}
		check := func(name string, got, want map[string]any) {
			t.Helper()
			if len(got) != len(want) {
				t.Errorf("%s attributes %v, want %v", name, got, want)
				return
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s attribute %s = %v, want %v", name, k, got[k], v)
				}
			}
		}
		check("request", attrs(reqSpan.Attributes()), map[string]any{
			"gen_ai.operation.name": "chat", "routeguard.combo": "smart", "routeguard.attempts": int64(2),
		})
		check("openai", attrs(first.Attributes()), map[string]any{
			"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o",
			"routeguard.outcome": "failed", "http.response.status_code": int64(503), "error.type": "503",
			"routeguard.reason": "server_error", "routeguard.queue_wait": 0.0, "routeguard.first_byte": 1.0,
		})
		check("anthropic", attrs(second.Attributes()), map[string]any{
			"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic", "gen_ai.request.model": "claude",
			"routeguard.outcome": "succeeded", "http.response.status_code": int64(200),
			"routeguard.queue_wait": 0.0, "routeguard.first_byte": 0.5,
			"gen_ai.response.time_to_first_chunk": 2.5, "routeguard.stream.useful_bytes": int64(len("hello")),
		})
		if first.Status().Code != codes.Error || second.Status().Code != codes.Unset || reqSpan.Status().Code != codes.Unset {
			t.Errorf("statuses %v %v %v, want the failed attempt's only in error", first.Status(), second.Status(), reqSpan.Status())
		}
		// Times on the router's clock: the request from Do's start to the
		// stream's commit, each attempt its own part of it.
		if !reqSpan.StartTime().Equal(start) || reqSpan.EndTime().Sub(start) != 3500*time.Millisecond {
			t.Errorf("request span %v..%v, want 3.5 s from %v", reqSpan.StartTime(), reqSpan.EndTime(), start)
		}
		if first.EndTime().Sub(first.StartTime()) != time.Second || !second.StartTime().Equal(first.EndTime()) ||
			second.EndTime().Sub(second.StartTime()) != 2500*time.Millisecond {
			t.Errorf("attempt spans %v..%v and %v..%v", first.StartTime(), first.EndTime(), second.StartTime(), second.EndTime())
		}
		ev := reqSpan.Events()
		if len(ev) != 1 || ev[0].Name != "routeguard.exclusion" {
			t.Fatalf("events %+v, want one exclusion", ev)
		}
		check("exclusion", attrs(ev[0].Attributes), map[string]any{
			"gen_ai.provider.name": "gemini", "gen_ai.request.model": "gemini-pro",
			"routeguard.reason": "connection_cooldown", "routeguard.retry_after": 60.0,
		})
	})
}

// A request that fails everywhere: the request span carries the error's
// code as error.type and the status Error.
func TestTracesFailedRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sr := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
		tr := otelmetrics.NewTraces(otelmetrics.TraceOptions{TracerProvider: tp, Operation: "text_completion"})
		up := combotest.New()
		t.Cleanup(up.Close)
		up.Script("sk-1", combotest.Error(http.StatusInternalServerError, "boom"))
		var cfg combo.Config
		tr.Attach(&cfg)
		r := combo.New(cfg)
		c := &combo.Combo{Name: "one", Targets: []combo.Target{{Provider: "openai", Connection: "sk-1", Model: "gpt-4o"}},
			Settings: combo.Settings{MaxRetries: new(0)}}
		_, err := r.Do(context.Background(), combo.Request{Combo: c}, func(ctx context.Context, t *combo.Target) (*http.Response, error) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://openai.test/v1/completions", nil)
			req.Header.Set("Authorization", "Bearer "+t.Connection)
			return up.Transport().RoundTrip(req)
		})
		if err == nil {
			t.Fatal("want an error")
		}
		spans := sr.Ended()
		if len(spans) != 2 {
			t.Fatalf("%d spans, want 2", len(spans))
		}
		reqSpan := spans[1]
		if reqSpan.Name() != "text_completion one" || reqSpan.Status().Code != codes.Error {
			t.Errorf("request span %q status %v", reqSpan.Name(), reqSpan.Status())
		}
		if got := attrs(reqSpan.Attributes())["error.type"]; got != combo.CodeUpstream {
			t.Errorf("error.type %v, want %v", got, combo.CodeUpstream)
		}
		if reqSpan.Parent().IsValid() {
			t.Error("a request without a caller's span has a root span")
		}
	})
}
