package affinity_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/routeguard/routeguard/affinity"
)

func Example() {
	pins := affinity.New(affinity.Config{TTL: time.Hour})
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

	h := http.Header{}
	h.Set("X-Session-Id", "agent-42")
	key, _ := affinity.KeyFrom(h, nil)
	affinity.StripHeaders(h) // never forwarded upstream

	eligible := []affinity.Candidate{{Connection: "key-a", Priority: 2}, {Connection: "key-b", Priority: 1}}
	conn, _ := pins.SelectAt("openai", key, eligible, now)
	fmt.Println("first turn:", conn)

	conn, _ = pins.SelectAt("openai", key, eligible, now.Add(time.Minute))
	fmt.Println("second turn:", conn)

	// key-b is cooling down, so the caller no longer offers it: hard rebind.
	conn, _ = pins.SelectAt("openai", key, eligible[:1], now.Add(2*time.Minute))
	fmt.Println("third turn:", conn)

	// key-b has recovered, but the session stays where it is.
	conn, _ = pins.SelectAt("openai", key, eligible, now.Add(3*time.Minute))
	fmt.Println("fourth turn:", conn)
	fmt.Println("headers left:", len(h))
	// Output:
	// first turn: key-b
	// second turn: key-b
	// third turn: key-a
	// fourth turn: key-a
	// headers left: 0
}

func ExamplePins_PlanAt() {
	pins := affinity.New(affinity.Config{TTL: 30 * time.Minute})
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	body := []byte(`{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello"}]}`)
	key, ok := affinity.KeyFrom(nil, body)
	fmt.Println("key:", key.Source(), ok)

	req := affinity.Request{Provider: "claude", Key: key}
	candidates := []affinity.Candidate{{Connection: "acct-1", Priority: affinity.DefaultPriority}, {Connection: "acct-2", Priority: affinity.DefaultPriority}}
	plan, _ := pins.PlanAt(req, candidates, now)
	fmt.Println("try first:", plan.Connection, "pinned:", plan.Pinned)

	// acct-1 failed; acct-2 served the request, so the session is pinned there.
	pins.PinAt(req, "acct-2", now)
	plan, _ = pins.PlanAt(req, candidates, now.Add(time.Minute))
	fmt.Println("next turn:", plan.Connection, "pinned:", plan.Pinned)

	pin, _ := pins.LookupAt("claude", key, now.Add(time.Minute))
	fmt.Println("expires in:", pin.Expires.Sub(now))
	// Output:
	// key: input true
	// try first: acct-1 pinned: false
	// next turn: acct-2 pinned: true
	// expires in: 30m0s
}

func ExampleConfig_TTLFor() {
	s := affinity.Config{
		TTL:         time.Hour,
		ProviderTTL: map[string]time.Duration{"codex": 0, "claude": 2 * time.Hour},
	}
	fmt.Println(s.TTLFor("openai", 0))
	fmt.Println(s.TTLFor("codex", 0))
	fmt.Println(s.TTLFor("claude", 0))
	fmt.Println(s.TTLFor("codex", time.Minute))
	// Output:
	// 1h0m0s
	// 0s
	// 2h0m0s
	// 1m0s
}

func ExampleFromEnv() {
	env := map[string]string{
		"SESSION_AFFINITY_TTL_MS":          "3600000",
		"PROVIDER_SESSION_AFFINITY_TTL_MS": "codex=0,claude=1.5",
	}
	cfg, err := affinity.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	fmt.Println(cfg.TTL, cfg.ProviderTTL)
	var e *affinity.Error
	if errors.As(err, &e) {
		fmt.Println(e.Code, e.Status, e.Field, errors.Is(err, affinity.ErrInvalidConfig))
	}
	// Output:
	// 1h0m0s map[codex:0s]
	// invalid_config 400 PROVIDER_SESSION_AFFINITY_TTL_MS true
}

func ExampleConfig_OnChange() {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pins := affinity.New(affinity.Config{
		TTL: time.Hour,
		OnChange: func(e affinity.Event) {
			if e.Removed {
				fmt.Println(e.Reason, e.Provider, e.From, "removed")
				return
			}
			fmt.Printf("%s %s %q -> %s until %s\n", e.Reason, e.Provider, e.From, e.Connection, e.Until.Format(time.Kitchen))
		},
	})
	key, _ := affinity.NewKey("session", "agent-7")
	req := affinity.Request{Provider: "openai", Key: key}
	pins.PinAt(req, "key-a", now)
	pins.PinAt(req, "key-b", now)
	pins.EvictAt("openai", key, "key-b", now)
	// Output:
	// pinned openai "" -> key-a until 1:00PM
	// rebound openai "key-a" -> key-b until 1:00PM
	// evicted openai key-b removed
}

func ExampleKey_String() {
	h := http.Header{}
	h.Set("X-Codex-Session-Id", "secret-session-value")
	key, _ := affinity.KeyFrom(h, nil)
	fmt.Println(key.Source(), len(key.String()))
	// Output: header 15
}
