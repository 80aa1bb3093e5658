// Command schemagen writes config.schema.json, the JSON Schema of the
// gateway's configuration, from the Go types of package gw. Run it with
// go generate in examples/gateway.
package main

import (
	"fmt"
	"os"

	"github.com/routeguard/routeguard/examples/gateway/internal/schema"
)

func main() {
	b, err := schema.ForConfig("gw")
	if err == nil {
		err = os.WriteFile("config.schema.json", b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
}
