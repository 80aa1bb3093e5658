package main

import (
	"os"
	"time"
)

// The closing table compares the two runs: here four requests, of which the
// direct run lost two and routeguard lost none, at one extra upstream call.
func Example_printTable() {
	var direct, routed tally
	for i, d := range []time.Duration{20, 25, 2000, 2000} {
		direct.add(i < 2, d*time.Millisecond)
	}
	for _, d := range []time.Duration{20, 25, 30, 1040} {
		routed.add(true, d*time.Millisecond)
	}
	direct.calls, routed.calls = 4, 5
	printTable(os.Stdout, direct, routed)
	// Output:
	//                            direct   routeguard
	// requests                        4            4
	// succeeded                       2            4
	// failed                          2            0
	// upstream calls                  4            5
	// upstream calls wasted           2            1
	// p50 latency                  25ms         25ms
	// p99 latency                    2s        1.04s
}
