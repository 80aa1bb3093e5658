package affinitytest_test

import (
	"fmt"
	"testing"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/affinity/affinitytest"
)

func ExampleRun() {
	// In a store's own test file:
	test := func(t *testing.T) {
		affinitytest.Run(t, func() affinity.Store { return affinity.NewMemoryStore(0) })
	}
	fmt.Println(test != nil)
	// Output: true
}
