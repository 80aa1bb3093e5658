package combo_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
)

func ExampleRouter_Fuse() {
	up := combotest.New()
	defer up.Close()
	up.Script("fast", combotest.Reply{Body: "four"})
	up.Script("slow", combotest.Reply{Body: "4"})
	up.Script("down", combotest.Error(500, "boom"))

	send := func(ctx context.Context, t *combo.Target) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://upstream.test/v1/chat/completions", nil)
		req.Header.Set("Authorization", "Bearer "+t.Connection)
		return up.Transport().RoundTrip(req)
	}
	judge := func(_ context.Context, answers []combo.Answer) (combo.Answer, error) {
		var parts []string
		for _, a := range answers {
			parts = append(parts, a.Target.Connection+"="+string(a.Body))
		}
		return combo.Answer{Status: 200, Body: []byte(strings.Join(parts, " "))}, nil
	}
	r := combo.New(combo.Config{})
	f := &combo.Fusion{Name: "panel", Judge: judge, Panel: []combo.Target{
		{Provider: "p", Connection: "fast", Model: "m"},
		{Provider: "p", Connection: "down", Model: "m"},
		{Provider: "p", Connection: "slow", Model: "m"},
	}}
	ans, err := r.Fuse(context.Background(), f, combo.Request{}, send)
	fmt.Println(string(ans.Body), err)
	// Output: fast=four slow=4 <nil>
}

func ExampleDegradeBackground() {
	body, degraded, err := combo.DegradeBackground([]byte(`{"model":"m","background":true,"input":"hi"}`))
	if degraded {
		fmt.Println("warning:", combo.BackgroundWarning)
	}
	fmt.Println(string(body), err)
	// Output:
	// warning: background mode is not supported: the request was served synchronously
	// {"input":"hi","model":"m"} <nil>
}

func ExampleEmergencyFallback() {
	up := combotest.New()
	defer up.Close()
	up.Script("paid", combotest.Error(402, "payment required"))

	send := func(ctx context.Context, t *combo.Target) (*http.Response, error) {
		budget, _ := combo.OutputBudget(ctx)
		body := fmt.Sprintf(`{"model":%q,"max_tokens":%d}`, t.Model, budget)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://upstream.test/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+t.Connection)
		return up.Transport().RoundTrip(req)
	}
	em := &combo.EmergencyFallback{Target: combo.Target{Provider: "backup", Connection: "free", Model: "small"}, MaxOutputTokens: 1024}
	r := combo.New(combo.Config{Emergency: em})
	c := &combo.Combo{Name: "main", Targets: []combo.Target{{Provider: "p", Connection: "paid", Model: "big"}}}
	res, err := r.Do(context.Background(), combo.Request{Combo: c}, send)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Response.Body.Close()
	calls := up.Calls()
	fmt.Println(res.Emergency, res.Target.String(), string(calls[len(calls)-1].Body))
	// Output: true backup/free/small {"model":"small","max_tokens":1024}
}

func ExampleCapOutputTokens() {
	body, changed, err := combo.CapOutputTokens([]byte(`{"model":"m","max_tokens":32000,"messages":[]}`), 4096)
	fmt.Println(string(body), changed, err)
	body, changed, err = combo.CapOutputTokens([]byte(`{"model":"m","input":"hi"}`), 4096)
	fmt.Println(string(body), changed, err)
	// Output:
	// {"max_tokens":4096,"messages":[],"model":"m"} true <nil>
	// {"input":"hi","max_output_tokens":4096,"model":"m"} true <nil>
}

func ExamplePipeline_Run() {
	up := combotest.New()
	defer up.Close()
	up.Handle("", func(c combotest.Call) combotest.Reply {
		return combotest.Reply{Body: combotest.Credential(c.Header) + "(" + string(c.Body) + ")"}
	})
	send := func(ctx context.Context, t *combo.Target, step int, input []byte) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://upstream.test/v1/responses", strings.NewReader(string(input)))
		req.Header.Set("Authorization", "Bearer "+t.Connection)
		return up.Transport().RoundTrip(req)
	}
	p := &combo.Pipeline{Steps: []*combo.Combo{
		{Name: "draft", Targets: []combo.Target{{Provider: "p", Connection: "draft", Model: "m"}}},
		{Name: "review", Targets: []combo.Target{{Provider: "p", Connection: "review", Model: "m"}}},
	}}
	ans, err := p.Run(context.Background(), combo.New(combo.Config{}), combo.Request{}, []byte("question"), send)
	fmt.Println(string(ans.Body), err)
	// Output: review(draft(question)) <nil>
}

func ExampleRouter_Relay() {
	up := combotest.New()
	defer up.Close()
	up.Script("a", combotest.Error(503, "down"))
	send := func(ctx context.Context, t *combo.Target) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://upstream.test/v1/chat/completions", nil)
		req.Header.Set("Authorization", "Bearer "+t.Connection)
		return up.Transport().RoundTrip(req)
	}
	c := &combo.Combo{Name: "relay", Strategy: "context-relay", Targets: []combo.Target{
		{Provider: "p", Connection: "a", Model: "m"},
		{Provider: "p", Connection: "b", Model: "m"},
		{Provider: "p", Connection: "c", Model: "m"},
	}}
	hook := func(_ context.Context, h combo.Handoff) {
		fmt.Println("served by", h.Served.Connection, "- hand the context to", len(h.Next), "more")
	}
	res, err := combo.New(combo.Config{}).Relay(context.Background(), combo.Request{Combo: c}, send, hook)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Response.Body.Close()
	// Output: served by b - hand the context to 1 more
}

func TestParseToolLimitReadsRefusals(t *testing.T) {
	limit, ok := combo.ParseToolLimit(400, []byte(`Invalid 'tools': array too long. Expected an array with maximum length 128`))
	if limit != 128 || !ok {
		t.Fatalf("got %d %v, want 128 true", limit, ok)
	}
	limit, ok = combo.ParseToolLimit(400, []byte(`Too many tools`))
	if limit != -1 || !ok {
		t.Fatalf("got %d %v, want -1 true", limit, ok)
	}
}
