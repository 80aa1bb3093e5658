package cooldown_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/routeguard/routeguard"
	"github.com/routeguard/routeguard/cooldown"
)

func Example() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cd := cooldown.New(cooldown.Config{})
	cd.RegisterAt("openai:k1", cooldown.Options{Provider: "openai", Class: routeguard.APIKey}, now)
	cd.RegisterAt("openai:k2", cooldown.Options{Provider: "openai", Class: routeguard.APIKey}, now)

	// A 429 without a hint starts a backoff episode of 3 s at level 0.
	r := cd.FailAt("openai:k1", cooldown.Failure{Status: 429, Reason: "rate_limit_exceeded", Backoff: true}, now)
	fmt.Println(r.Action, r.Cooldown, r.Status.State, r.Status.Level)

	// A concurrent failure is absorbed by the running episode.
	r = cd.FailAt("openai:k1", cooldown.Failure{Status: 429, Reason: "rate_limit_exceeded", Backoff: true}, now)
	fmt.Println(r.Action)

	// A 401 marks the other key expired.
	r = cd.FailAt("openai:k2", cooldown.Failure{Status: 401, Reason: "auth_error"}, now)
	fmt.Println(r.Action, r.Status.State)

	// A refusal carries the contract's code, status and wait.
	var refused *cooldown.Error
	if err := cd.CheckAt("openai:k1", now.Add(time.Second)); errors.As(err, &refused) {
		fmt.Println(refused.Code, refused.Status, refused.RetryAfter, errors.Is(err, cooldown.ErrCooling))
	}

	// After the episode ends the key is available again; its level stays 1
	// until a success.
	fmt.Println(cd.StatusAt("openai:k1", now.Add(2*time.Second)))
	fmt.Println(cd.StatusAt("openai:k1", now.Add(3*time.Second)))
	cd.SucceedAt("openai:k1", now.Add(4*time.Second))
	fmt.Println(cd.StatusAt("openai:k1", now.Add(4*time.Second)).Level)
	// Output:
	// episode 3s cooling 1
	// absorbed
	// terminated expired
	// connection_cooldown 429 2s true
	// cooling until 2026-03-01T12:00:03Z (rate_limit_exceeded, level 1)
	// available (level 1)
	// 0
}

func ExampleTracker_SeenEgressAt() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cd := cooldown.New(cooldown.Config{}) // family: opencode-go, opencode-cli
	for _, c := range []string{"c1", "c2", "c3"} {
		cd.RegisterAt(c, cooldown.Options{Provider: "opencode-go"}, now)
		cd.SeenEgressAt(c, "1.2.3.4", now)
	}
	r := cd.FailAt("c1", cooldown.Failure{Status: 429, Reason: "rate_limit_exceeded", Backoff: true}, now)
	fmt.Println(r.Cooldown, r.Egress)
	fmt.Println(cd.StatusAt("c3", now).State)
	// Output:
	// 3s [c2 c3]
	// cooling
}

func ExampleConfig_OnChange() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cd := cooldown.New(cooldown.Config{OnChange: func(e cooldown.Event) {
		fmt.Printf("%s %s: %s → %s", e.Conn, e.Action, e.From, e.State)
		if !e.Until.IsZero() {
			fmt.Printf(" until %s", e.Until.Format(time.TimeOnly))
		}
		fmt.Printf(" (level %d, removed %v)\n", e.Level, e.Removed)
	}})
	cd.FailAt("k1", cooldown.Failure{Status: 503, Reason: "server_error", Backoff: true}, now)
	cd.SucceedAt("k1", now.Add(time.Second))
	// Output:
	// k1 episode: available → cooling until 12:00:03 (level 1, removed false)
	// k1 succeeded: cooling → available (level 0, removed true)
}

func ExampleFromEnv() {
	lookup := func(k string) (string, bool) {
		if k == "OMNIROUTE_EGRESS_IP_LOCK_PROVIDERS" {
			return "OpenCode-Zen, foo", true
		}
		return "", false
	}
	cfg, err := cooldown.FromEnv(lookup)
	fmt.Println(cfg.EgressProviders, err)
	// Output:
	// [opencode-zen foo] <nil>
}
