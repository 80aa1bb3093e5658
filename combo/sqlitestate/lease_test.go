package sqlitestate_test

import (
	"path/filepath"
	"testing"

	"github.com/routeguard/routeguard/combo/sqlitestate"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lease/leasetest"
)

// open opens a state file in a temporary directory and closes it at the end.
func open(t testing.TB, o sqlitestate.Options) (*sqlitestate.State, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := sqlitestate.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, path
}

func TestLeaseStoreConformance(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) lease.Store {
		st, _ := open(t, sqlitestate.Options{})
		return st.Leases()
	})
}
