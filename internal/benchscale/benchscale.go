// Package benchscale gives the store sizes of the insert-at-cap
// benchmarks.
package benchscale

import (
	"flag"
	"strings"
)

// Size is one store size of a scale benchmark, with its sub-benchmark
// name ("keys=100k").
type Size struct {
	Name string
	N    int
}

// Sizes returns the sizes 1k and 100k keys, and 1M keys when the -bench
// pattern names them ("keys=1M"): a million keys take seconds to set up
// and hundreds of megabytes, so they run only when asked.
func Sizes() []Size {
	s := []Size{{"keys=1k", 1000}, {"keys=100k", 100_000}}
	if f := flag.Lookup("test.bench"); f != nil && strings.Contains(f.Value.String(), "1M") {
		s = append(s, Size{"keys=1M", 1_000_000})
	}
	return s
}
