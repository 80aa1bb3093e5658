// Command chaos sends one stream of LLM requests to a set of failing fake
// providers twice, once straight to the first provider and once through
// routeguard, prints what each routeguard layer did, and compares the two.
//
// The providers run in process (package combotest) and fail in scripted
// phases: an openai outage with 503s, a model retired with 404s, a key
// rate-limited with 429 and Retry-After, a provider that streams heartbeats
// and no text, and a provider that reports an empty balance as 403
// Forbidden. The run takes about fifteen seconds and needs no network.
package main

import (
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	run(os.Stdout, defaultOptions)
}

// run plays the demo and returns both scores.
func run(out io.Writer, opt options) (direct, routed tally) {
	start := time.Now()
	fmt.Fprintf(out, "routeguard chaos demo: %d requests in %d phases, sent twice (client timeout %v)\n\n",
		opt.perPhase*numPhases, numPhases, opt.clientTimeout)
	direct = runDirect(out, opt)
	fmt.Fprintln(out)
	routed = runRouted(out, opt)
	fmt.Fprintln(out)
	printTable(out, direct, routed)
	fmt.Fprintf(out, "\nfinished in %v\n", time.Since(start).Round(100*time.Millisecond))
	return direct, routed
}
