package sqlitestate

// SetBeforeCommit installs a hook that runs after a lease operation's writes
// and before its COMMIT (tests only; not safe to change concurrently with
// lease operations).
func SetBeforeCommit(s *State, fn func(op string) error) { s.leases.beforeCommit = fn }

// SetDriver makes Open use the named database/sql driver and returns a
// func that restores the default.
func SetDriver(name string) func() {
	old := driverName
	driverName = name
	return func() { driverName = old }
}
