// Package sqlitestate keeps a gateway's routeguard state in one SQLite file
// (pure Go, modernc.org/sqlite), so that a restart resumes where the last
// process stopped.
//
// A gateway attaches it in a few lines:
//
//	st, err := sqlitestate.Open("/var/lib/gateway/state.db", sqlitestate.Options{})
//	defer st.Close()                                           // stops Run, writes what is pending
//	leases := lease.New(lease.Config{Store: st.Leases()})      // written through
//	cd := cooldown.New(cooldown.Config{Store: st.Cooldowns()}) // written behind
//	pins := affinity.New(affinity.Config{TTL: time.Hour, Store: st.Pins()})
//	set := breaker.NewSet(breaker.Config{OnChange: st.OnBreakerChange})
//	gate := breaker.NewGate(breaker.GateConfig{Enabled: true, OnChange: st.OnGateChange})
//	lk := lockout.New(lockout.Config{Enabled: true, OnChange: st.OnLockoutChange})
//	err = st.Restore(sqlitestate.Layers{Breakers: set, Gate: gate, Lockouts: lk}, time.Now())
//	go st.Run(ctx)                                             // the one writer
//
// # Two kinds of state
//
// Leases are correctness state: two owners on one connection, or an old
// generation admitted, is a bug. State.Leases is a lease.Store whose every
// write is one BEGIN IMMEDIATE transaction committed before the call
// returns; the schema itself (partial unique indexes) allows one active lease
// per connection and per owner; owners are stored as SHA-256 digests only;
// and generations stay monotonic per owner across restarts, because each
// owner's highest generation, and the generation floor of forgotten owners,
// are kept in the file. Fence and Owned are one indexed query each;
// Occupant, which a router asks for every candidate connection, reads an
// in-memory mirror of the file's active leases that every lease write
// updates after its commit (the process that opened the file is the only
// writer of its leases).
//
// Cooldowns, terminal connection states, session pins, breaker states and
// counts, the window gate's entries and model lockouts are efficiency
// state: a stale value costs an extra failed call, not a wrong answer. The
// layers keep reading their own memory (no SQL on a status check, a pin
// lookup, a breaker, gate or lockout check); their changes reach the file
// through the cooldown and affinity stores (State.Cooldowns, State.Pins:
// in-memory stores that queue every write) and the OnChange hooks of
// breaker, gate and lockout (State.OnBreakerChange, State.OnGateChange,
// State.OnLockoutChange). The failure counts of breakers and gate entries
// also change without a transition (a failure below a threshold); the
// writer reads them from the Set and Gate handed to Restore, in memory, at
// every flush, and queues those that changed. Each change goes into a
// bounded outbox that keeps one pending row per key (a later change of
// the key replaces it), and Run, the one writer, writes the outbox in
// batches every Options.FlushInterval. The hooks and stores never block
// and never touch the file.
//
// # Restoring
//
// Open loads the cooldowns and pins that are still live at Options.Clock's
// now into the stores it returns; State.Restore puts breakers, gate entries
// and lockouts back into the layers. Everything keeps its absolute times: a
// connection cooling until T still cools until T, a terminal connection
// stays terminal, an open breaker stays open for what was left of its open
// period, a provider the gate cools stays cooling until its recorded end, a
// model lock ends when it would have. The counts that decide the next
// answer come back too: a breaker one failure below its threshold (or a
// kind's) opens on the next failure, a gate connection's cooldown keeps
// escalating, a model lock's next failure escalates from its level. What
// has expired by then is dropped. A connection's backoff level once its
// cooldown is over, and a gate provider's failures spread over its window
// (they come back as if they all happened at the last one), start again.
//
// # What a crash can lose
//
// A lease operation that returned is on disk (with the default synchronous
// FULL, even across a power loss; with Options.RelaxedSync, across a crash
// of the process); one that did not return left no trace, so a crash never
// loses a lease and never grants one twice. Of the efficiency state, a crash
// loses at most the changes of the last Options.FlushInterval (plus the
// batch being written): those connections, pins, breakers and locks come
// back as they were one interval earlier, and the layers relearn the rest.
// Close writes everything pending, so a clean stop loses nothing. The outbox
// drops changes of new keys beyond Options.MaxPending (counted in
// Stats.Dropped), which only happens when Run is not running.
//
// # The file
//
// One file (with SQLite's -wal and -shm companions), created with mode
// 0600, in WAL mode, with a busy timeout (Options.BusyTimeout) for locks
// held by another process. The schema is versioned (PRAGMA user_version,
// SchemaVersion) and migrated forward by Open; a file of a newer version,
// a database of another program, a damaged file or one that is not a
// database at all is a startup error naming the file (ErrUnreadable,
// ErrNewerSchema), never reset silently. Options.Reset deletes the file and
// starts empty, for an operator who means it.
//
// Run also sweeps, every Options.SweepInterval: it deletes leases that ended
// more than Options.Retention ago, forgets the generation counters of idle
// owners (raising the generation floor first), and deletes efficiency rows
// that have expired, so the file stays as large as the live state.
//
// # Goroutines and concurrency
//
// The package starts no goroutine: Run is the writer and runs on the
// caller's goroutine, from the call to the cancellation of its context or
// Close. Every method of State, and every store and hook it returns, is safe
// for concurrent use.
package sqlitestate
