package cooldown_test

import (
	"fmt"
	"time"

	"github.com/routeguard/routeguard/cooldown"
)

func Example() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cd := cooldown.New(cooldown.Config{})
	cd.Register("openai:k1", cooldown.Options{Provider: "openai", Class: cooldown.APIKey})
	cd.Register("openai:k2", cooldown.Options{Provider: "openai", Class: cooldown.APIKey})

	// A 429 without a hint starts a backoff episode of 3 s at level 0.
	r := cd.FailAt("openai:k1", cooldown.Failure{Status: 429, Reason: "rate_limit_exceeded", Backoff: true}, now)
	fmt.Println(r.Action, r.Cooldown, r.Status.State, r.Status.Level)

	// A concurrent failure is absorbed by the running episode.
	r = cd.FailAt("openai:k1", cooldown.Failure{Status: 429, Reason: "rate_limit_exceeded", Backoff: true}, now)
	fmt.Println(r.Action)

	// A 401 marks the other key expired.
	r = cd.FailAt("openai:k2", cooldown.Failure{Status: 401, Reason: "auth_error"}, now)
	fmt.Println(r.Action, r.Status.State)

	sel := cd.SelectAt(nil, []string{"openai:k1", "openai:k2"}, now.Add(time.Second))
	fmt.Println(len(sel.Available), sel.AllCooling(), sel.Human(now.Add(time.Second)))

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
	// 0 true reset after 2s
	// cooling until 2026-03-01T12:00:03Z (rate_limit_exceeded, level 1)
	// available (level 1)
	// 0
}

func ExampleTracker_SeenEgressAt() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cd := cooldown.New(cooldown.Config{}) // family: opencode-go, opencode-cli
	for _, c := range []string{"c1", "c2", "c3"} {
		cd.Register(c, cooldown.Options{Provider: "opencode-go"})
		cd.SeenEgressAt(c, "1.2.3.4", now)
	}
	r := cd.FailAt("c1", cooldown.Failure{Status: 429, Reason: "rate_limit_exceeded", Backoff: true}, now)
	fmt.Println(r.Cooldown, r.Egress)
	fmt.Println(cd.StatusAt("c3", now).State)
	// Output:
	// 3s [c2 c3]
	// cooling
}

func ExampleFromEnv() {
	lookup := func(k string) (string, bool) {
		if k == cooldown.EgressEnv {
			return "OpenCode-Zen, foo", true
		}
		return "", false
	}
	cfg, err := cooldown.FromEnv(lookup)
	fmt.Println(cfg.EgressProviders, err)
	// Output:
	// [opencode-zen foo] <nil>
}
