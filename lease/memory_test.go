package lease_test

import (
	"testing"

	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lease/leasetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	leasetest.Run(t, func(*testing.T) lease.Store { return lease.NewMemoryStore(lease.Config{}) })
}
