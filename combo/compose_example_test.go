package combo_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"

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
