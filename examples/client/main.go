// Command client wraps a custom LLM client with routeguard: its http.Client sends through
// combo.Transport, so each call is routed over two fake providers and falls back by itself.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/cooldown"
)

// chat is the custom client: one Chat Completions call, the answer's text.
func chat(c *http.Client, prompt string) (string, error) {
	body, _ := json.Marshal(map[string]any{"model": "smart", "messages": []any{map[string]string{"role": "user", "content": prompt}}})
	resp, err := c.Post("http://llm.local/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var a struct {
		Choices []struct{ Message struct{ Content string } }
	}
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || len(a.Choices) == 0 {
		return "", fmt.Errorf("no answer: %s", resp.Status)
	}
	return a.Choices[0].Message.Content, nil
}

func main() {
	primary, backup := combotest.New(), combotest.New()
	defer primary.Close()
	defer backup.Close()
	primary.Script("", combotest.Error(http.StatusServiceUnavailable, "overloaded"))
	backup.Script("", combotest.OK("Hello from the backup"))
	baseURL := map[string]string{"primary": primary.URL(), "backup": backup.URL()}
	smart := &combo.Combo{Name: "smart", Targets: []combo.Target{
		{Provider: "primary", Connection: "key-1", Model: "gpt-4o"},
		{Provider: "backup", Connection: "key-2", Model: "claude"}}}
	router := combo.New(combo.Config{Cooldowns: cooldown.New(cooldown.Config{}), // a failed key sits out
		OnAttempt: func(a combo.Attempt) { fmt.Printf("  %v: %s %d\n", &a.Target, a.Outcome, a.Status) }})
	client := &http.Client{Transport: &combo.Transport{Router: router,
		Combo: func(*http.Request) (*combo.Combo, error) { return smart, nil },
		Rewrite: func(req *http.Request, t *combo.Target) (*http.Request, error) {
			u, err := url.Parse(baseURL[t.Provider] + req.URL.Path) // and t.Model into the body
			req.URL, req.Host = u, ""
			req.Header.Set("Authorization", "Bearer "+t.Connection)
			return req, err
		}}}
	for call := 1; call <= 2; call++ {
		fmt.Printf("call %d\n", call)
		text, err := chat(client, "Say hello")
		fmt.Printf("  answer %q, error %v\n", text, err)
	}
}
