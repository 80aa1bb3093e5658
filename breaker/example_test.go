package breaker_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/routeguard/routeguard/breaker"
)

// A router asks the set before each upstream call and reports the outcome
// afterwards; only trip statuses count against the provider.
func ExampleSet() {
	set := breaker.NewSet(breaker.Config{
		ClassOf: func(provider string) breaker.Class { return breaker.Local }, // opens at 2
	})
	for _, status := range []int{503, 429, 502, 200} {
		done, err := set.Allow("ollama")
		if errors.Is(err, breaker.ErrOpen) {
			var oe *breaker.OpenError
			errors.As(err, &oe)
			fmt.Printf("refused, Retry-After: %d\n", oe.RetryAfterSeconds())
			continue
		}
		done(breaker.Classify(status, nil))
		state, _ := set.State("ollama")
		fmt.Printf("%d → %v\n", status, state)
	}
	// Output:
	// 503 → degraded
	// 429 → degraded
	// 502 → open
	// refused, Retry-After: 15
}

// The window gate takes explicit times.
func ExampleGate() {
	gate := breaker.NewGate(breaker.GateConfig{
		Settings: breaker.GateSettings{Enabled: true},
		ClassOf:  func(string) breaker.Class { return breaker.OAuth }, // 10 in 15 min → 5 min
	})
	t0 := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	for i := range 10 {
		gate.RecordFailureAt("claude", "acct-1", t0.Add(time.Duration(i)*time.Minute))
	}
	until, blocked := gate.BlockedUntilAt("claude", t0.Add(10*time.Minute))
	fmt.Println(blocked, until.Format(time.Kitchen))
	until, blocked = gate.ConnBlockedUntilAt("claude", "acct-1", t0.Add(9*time.Minute))
	fmt.Println(blocked, until.Sub(t0.Add(9*time.Minute)))
	// Output:
	// true 9:14AM
	// true 1m20s
}

func ExampleProfile_OpenDuration() {
	p := breaker.DefaultProfile(breaker.OAuth)
	for cycles := 1; cycles <= 6; cycles++ {
		fmt.Print(p.OpenDuration(cycles), " ")
	}
	fmt.Println()
	// Output:
	// 1m0s 1m0s 2m0s 4m0s 8m0s 8m0s
}
