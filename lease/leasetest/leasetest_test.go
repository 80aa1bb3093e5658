package leasetest_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lease/leasetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunMemoryStore(t *testing.T) {
	leasetest.Run(t, func(*testing.T) lease.Store { return lease.NewMemoryStore(lease.Config{}) })
}

func TestRunSmallMemoryStore(t *testing.T) {
	// The smallest cap still holds every lease the suite makes.
	leasetest.Run(t, func(*testing.T) lease.Store {
		return lease.NewMemoryStore(lease.Config{MaxOwners: 16})
	})
}
