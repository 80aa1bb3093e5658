package lockout_test

import (
	"fmt"
	"time"

	"github.com/routeguard/routeguard/lockout"
)

func Example() {
	l := lockout.New(lockout.Config{Enabled: true})
	now := time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)

	// A 429 on one codex model locks its whole quota family on that
	// connection; a 502 would lock only the exact model.
	res := l.RecordFailureAt(lockout.Failure{
		Provider: "codex", Connection: "c1", Model: "gpt-5.6-luna", Status: 429,
	}, now)
	fmt.Println(res.Scope, res.Cooldown, res.FailureCount)

	_, reason, locked := l.LockedAt("codex", "c1", "gpt-5.6-sol", now.Add(time.Minute))
	fmt.Println("sol locked:", locked, reason)
	_, _, locked = l.LockedAt("codex", "c2", "gpt-5.6-sol", now.Add(time.Minute))
	fmt.Println("sol on c2 locked:", locked)

	for _, in := range l.SnapshotAt(now.Add(time.Minute)) {
		fmt.Println(in.Provider, in.Connection, in.Model, in.Reason, in.Remaining)
	}

	// A success halves the failure count; at zero the lock is gone.
	count, cleared := l.DecayAt("codex", "c1", "gpt-5.6-sol", now.Add(time.Minute))
	fmt.Println(count, cleared)
	_, _, locked = l.LockedAt("codex", "c1", "gpt-5.6-sol", now.Add(time.Minute))
	fmt.Println("sol locked:", locked)
	// Output:
	// family 2m0s 1
	// sol locked: true rate_limited
	// sol on c2 locked: false
	// codex c1 codex rate_limited 1m0s
	// 0 true
	// sol locked: false
}

func ExampleLockout_ClearAt() {
	l := lockout.New(lockout.Config{Enabled: true})
	now := time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)
	l.RecordFailureAt(lockout.Failure{Provider: "p", Connection: "c", Model: "A:B", Status: 503}, now)

	// The admin API lists the exact key and clears it by its listed name.
	snap := l.SnapshotAt(now)
	fmt.Println(snap[0].Model, snap[0].Until.Sub(now))
	fmt.Println(l.ClearAt("p", "c", snap[0].Model, now))
	fmt.Println(l.ClearAt("p", "c", snap[0].Model, now))
	// Output:
	// exact:a:b 2m0s
	// true
	// false
}

func ExampleFromEnv() {
	env := map[string]string{
		"MODEL_LOCKOUT_ENABLED":          "true",
		"MODEL_LOCKOUT_BASE_COOLDOWN_MS": "1000",
		"MODEL_LOCKOUT_ERROR_CODES":      "429,503",
	}
	c, err := lockout.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	fmt.Println(c.Enabled, c.BaseCooldown, c.ErrorCodes, err)
	// New (or Normalize) clamps the base up to its 5 s minimum.
	l := lockout.New(c)
	fmt.Println(l.Config().BaseCooldown)
	// Output:
	// true 1s [429 503] <nil>
	// 5s
}
