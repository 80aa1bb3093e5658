package affinitytest_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/affinity/affinitytest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestMemoryStore(t *testing.T) {
	affinitytest.Run(t, func() affinity.Store { return affinity.NewMemoryStore(0) })
}

func TestSmallMemoryStore(t *testing.T) {
	affinitytest.Run(t, func() affinity.Store { return affinity.NewMemoryStore(32) })
}
