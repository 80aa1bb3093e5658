package main

import (
	"os"

	"github.com/routeguard/routeguard/breaker"
)

// Failures a router learns outside AllowReportAt are reported directly;
// repeats from one connection within 5 s count once. The state survives a
// restart as JSON records.
func Example_reportAndRestore() {
	var changes []breaker.Event
	set := breaker.NewSet(breaker.Config{
		Profiles: profiles,
		OnChange: func(e breaker.Event) { changes = append(changes, e) },
	})
	if err := reportAndRestore(os.Stdout, set, &changes); err != nil {
		panic(err)
	}
	// Output:
	// direct failure on key-1 counted: true
	// direct failure on key-1 counted: false
	// direct failure on key-2 counted: true
	//          closed → degraded
	// restored after a restart: degraded with 2 failures
}
