package sqlitestate_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if op := os.Getenv(crashEnv); op != "" {
		crashChild(op, os.Getenv(crashPathEnv)) // exits
	}
	goleak.VerifyTestMain(m)
}
