package breaker_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/routeguard/routeguard"
	"github.com/routeguard/routeguard/breaker"
)

// A router asks the set before each upstream call and reports the outcome
// afterwards; only trip statuses count against the provider.
func ExampleSet() {
	set := breaker.NewSet(breaker.Config{
		ClassOf: func(provider string) routeguard.Class { return routeguard.Local }, // opens at 2
	})
	now := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	for _, status := range []int{503, 429, 502, 200} {
		done, err := set.AllowReportAt("ollama", now)
		var be *breaker.Error
		if errors.As(err, &be) {
			fmt.Printf("refused (%s, %d), retry after %v\n", be.Code, be.Status, be.RetryAfter)
			continue
		}
		done(breaker.Report{Outcome: breaker.Classify(status, nil, nil), At: now})
		state, _ := set.StateAt("ollama", now)
		fmt.Printf("%d → %v\n", status, state)
	}
	// Output:
	// 503 → degraded
	// 429 → degraded
	// 502 → open
	// refused (provider_circuit_open, 503), retry after 15s
}

// The window gate takes explicit times. A router asks about the provider
// and the connection it would use in one call.
func ExampleGate() {
	gate := breaker.NewGate(breaker.GateConfig{
		Enabled: true,
		ClassOf: func(string) routeguard.Class { return routeguard.OAuth }, // 10 in 15 min → 5 min
	})
	t0 := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	for i := range 10 {
		gate.RecordFailureAt("claude", "acct-1", t0.Add(time.Duration(i)*time.Minute))
	}
	until, blocked := gate.BlockedUntilAt("claude", "", t0.Add(10*time.Minute))
	fmt.Println(blocked, until.Format(time.Kitchen))
	gate.RecordSuccessAt("claude", "", t0.Add(10*time.Minute)) // the provider recovers
	until, blocked = gate.BlockedUntilAt("claude", "acct-1", t0.Add(9*time.Minute))
	fmt.Println(blocked, until.Sub(t0.Add(9*time.Minute)))
	// Output:
	// true 9:14AM
	// true 1m20s
}

// A router records failed attempts directly: failures of one connection
// within 5 s count once, network errors once per 10 s across connections,
// and queue timeouts never.
func ExampleSet_ReportAt() {
	set := breaker.NewSet(breaker.Config{})
	t0 := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	for _, r := range []struct {
		after time.Duration
		rep   breaker.Report
	}{
		{0, breaker.Report{Outcome: breaker.Failure, Conn: "key-1"}},
		{4999 * time.Millisecond, breaker.Report{Outcome: breaker.Failure, Conn: "key-1"}},
		{5 * time.Second, breaker.Report{Outcome: breaker.Failure, Conn: "key-1"}},
		{6 * time.Second, breaker.Report{Outcome: breaker.Failure, Conn: "key-2", Network: true}},
		{7 * time.Second, breaker.Report{Outcome: breaker.Failure, Conn: "key-3", Network: true}},
		{8 * time.Second, breaker.Report{Outcome: breaker.Failure, QueueTimeout: true}},
	} {
		fmt.Print(set.ReportAt("openai", r.rep, t0.Add(r.after)), " ")
	}
	fmt.Println(set.SnapshotAt(t0.Add(9 * time.Second))[0].Failures)
	// Output:
	// true false true true false false 3
}

// A router with its own clock passes that clock's time to every call: the
// open period ends, and the probe is admitted, on that clock.
func ExampleSet_AllowReportAt() {
	set := breaker.NewSet(breaker.Config{
		ClassOf: func(string) routeguard.Class { return routeguard.Local }, // opens at 2, reset 15 s
	})
	now := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	for range 2 {
		done, _ := set.AllowReportAt("openai", now)
		done(breaker.Report{Outcome: breaker.Failure, At: now})
	}
	for _, after := range []time.Duration{0, 14 * time.Second, 15 * time.Second} {
		st, wait := set.StateAt("openai", now.Add(after))
		fmt.Println(after, st, wait)
	}
	probe, err := set.AllowReportAt("openai", now.Add(15*time.Second))
	fmt.Println("probe admitted:", err == nil)
	probe(breaker.Report{Outcome: breaker.Success, At: now.Add(16 * time.Second)})
	fmt.Println(set.StateAt("openai", now.Add(16*time.Second)))
	// Output:
	// 0s open 15s
	// 14s open 1s
	// 15s half-open 0s
	// probe admitted: true
	// closed 0s
}

// With hints on, a quota failure opens the breaker for an hour, escalating
// after the escalation count and capped at an hour times the multiplier.
func ExampleProfile() {
	set := breaker.NewSet(breaker.Config{
		ClassOf: func(string) routeguard.Class { return routeguard.OAuth }, // escalation 2, multiplier 8
		OAuth:   breaker.Profile{Hints: true},
	})
	now := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	quota := breaker.Report{Outcome: breaker.Failure, Kind: breaker.KindQuotaExhausted}
	for range 8 {
		set.ReportAt("claude", quota, now)
	}
	for range 6 {
		_, wait := set.StateAt("claude", now)
		fmt.Print(wait, " ")
		now = now.Add(wait)
		set.ReportAt("claude", quota, now) // the half-open breaker fails again
	}
	fmt.Println()
	// Output:
	// 1h0m0s 1h0m0s 1h0m0s 2h0m0s 4h0m0s 8h0m0s
}

// A store keeps the records of SnapshotAt, as JSON or rows; after a restart
// RestoreAt resumes each breaker where it stood.
func ExampleSet_RestoreAt() {
	now := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	row := []byte(`[{"provider":"openai","state":"OPEN","failures":8,"openCycles":2,"lastFailure":"` +
		now.Add(-30*time.Second).Format(time.RFC3339Nano) + `"}]`)
	var records []breaker.Record
	if err := json.Unmarshal(row, &records); err != nil {
		fmt.Println(err)
		return
	}
	set := breaker.NewSet(breaker.Config{
		ClassOf: func(string) routeguard.Class { return routeguard.OAuth }, // reset 60 s
	})
	if err := set.RestoreAt(records, now); err != nil {
		fmt.Println(err)
		return
	}
	_, err := set.AllowReportAt("openai", now)
	var be *breaker.Error
	if errors.As(err, &be) {
		fmt.Println(be.State, be.RetryAfter)
	}
	out, _ := json.Marshal(set.SnapshotAt(now)[0].State)
	fmt.Println(string(out))
	// Output:
	// open 30s
	// "OPEN"
}

// Every setting can come from the environment; a bad value keeps its
// default and is reported with the variable's name.
func ExampleFromEnv() {
	vars := map[string]string{
		"OMNIROUTE_CIRCUIT_BREAKER_OAUTH_THRESHOLD": "10",
		"OMNIROUTE_CIRCUIT_BREAKER_OAUTH_RESET_MS":  "soon",
	}
	cfg, err := breaker.FromEnv(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	var be *breaker.Error
	if errors.As(err, &be) {
		fmt.Println(be.Code, be.Field)
	}
	n := cfg.Normalize()
	fmt.Println(n.OAuth.OpenAt, n.OAuth.Reset)
	// Output:
	// invalid_config OMNIROUTE_CIRCUIT_BREAKER_OAUTH_RESET_MS
	// 10 1m0s
}
