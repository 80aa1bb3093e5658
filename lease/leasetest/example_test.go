package leasetest_test

import (
	"fmt"

	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lease/leasetest"
)

func ExampleOwner() {
	tok := leasetest.Owner('A')
	fmt.Println(len(tok), lease.ValidOwner(tok))
	// Output: 47 true
}
