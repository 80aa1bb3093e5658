package leasetest_test

import (
	"fmt"

	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lease/leasetest"
)

func ExampleOwner() {
	tok := leasetest.Owner('A')
	_, err := lease.ParseOwner(tok)
	fmt.Println(len(tok), err)
	// Output: 47 <nil>
}
