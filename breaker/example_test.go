package breaker_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
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

// A router records failed attempts directly: failures of one connection
// within 5 s count once, network errors once per 10 s across connections,
// and queue timeouts never.
func ExampleBreaker_ReportAt() {
	b := breaker.New("openai", breaker.DefaultProfile(breaker.APIKey), nil)
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
		fmt.Print(b.ReportAt(r.rep, t0.Add(r.after)), " ")
	}
	fmt.Println(b.Status().Failures)
	// Output:
	// true false true true false false 3
}

// With hints on, a quota failure opens the breaker for an hour, escalating
// after the escalation count and capped at an hour times the multiplier.
func ExampleProfile_OpenDurationFor() {
	p := breaker.DefaultProfile(breaker.OAuth) // escalation 2, multiplier 8
	p.Hints = true
	p = p.Normalize()
	for cycles := 0; cycles <= 6; cycles++ {
		fmt.Print(p.OpenDurationFor(breaker.KindQuotaExhausted, cycles), " ")
	}
	fmt.Println()
	// Output:
	// 1h0m0s 1h0m0s 1h0m0s 2h0m0s 4h0m0s 8h0m0s 8h0m0s
}

// A store keeps the records of Export, as JSON or rows; after a restart
// Restore resumes each breaker where it stood.
func ExampleSet_Restore() {
	row := []byte(`[{"provider":"openai","state":"OPEN","failures":8,"openCycles":2,"lastFailure":"` +
		time.Now().Add(-30*time.Second).Format(time.RFC3339Nano) + `"}]`)
	var records []breaker.Record
	if err := json.Unmarshal(row, &records); err != nil {
		fmt.Println(err)
		return
	}
	set := breaker.NewSet(breaker.Config{
		ClassOf: func(string) breaker.Class { return breaker.OAuth }, // reset 60 s
	})
	if err := set.Restore(records); err != nil {
		fmt.Println(err)
		return
	}
	_, err := set.Allow("openai")
	var oe *breaker.OpenError
	if errors.As(err, &oe) {
		// About 30 s of the 60 s open period are left.
		fmt.Println(oe.State, oe.RetryAfter.Round(10*time.Second))
	}
	out, _ := json.Marshal(set.Export()[0].State)
	fmt.Println(string(out))
	// Output:
	// open 30s
	// "OPEN"
}

// A gateway that finds a provider's breaker open answers the client with
// the refusal itself: 503, Retry-After and the error envelope.
func ExampleOpenError_WriteHTTP() {
	b := breaker.New("openai", breaker.Profile{OpenAt: 1, Reset: time.Minute}, nil)
	done, _ := b.Allow()
	done(breaker.Failure)

	_, err := b.Allow()
	var oe *breaker.OpenError
	if errors.As(err, &oe) {
		rec := httptest.NewRecorder()
		oe.WriteHTTP(rec)
		fmt.Println(rec.Code, rec.Header().Get("Retry-After"), rec.Header().Get(breaker.HeaderProviderBreaker))
		fmt.Println(rec.Body.String())
	}
	// Output:
	// 503 60 open
	// {"error":{"message":"Provider openai circuit breaker is open","type":"server_error","code":"provider_circuit_open","provider":"openai","retry_after":60}}
}
