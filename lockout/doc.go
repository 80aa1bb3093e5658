// Package lockout locks single models of a connection after model-level
// failures, so that one failing model (a per-model quota, a model the
// upstream does not know, a permission error for one mode) does not take its
// whole connection out of rotation.
//
// Start with these calls:
//
//	l := lockout.New(lockout.Config{Enabled: true})
//	l.RecordFailureAt(lockout.Failure{Provider: p, Connection: c, Model: m, Status: 429}, now)
//	until, reason, locked := l.LockedAt(p, c, m, now) // before each attempt
//	l.DecayAt(p, c, m, now)                           // after a success
//
// # Model
//
// A [Lockout] keys its state on provider + connection + model. A failure is
// written under one of three keys, chosen by [ResolveScope]: the model's
// quota family (429, 403, 402; see [FamilyFunc]), the model itself (404), or
// the exact trimmed, lower-cased model (anything else, such as a 5xx). A
// check with [Lockout.LockedAt] looks at all three and reports the latest
// end; a model is still locked at that end itself. Repeated failures within
// the escalation window lengthen the lock exponentially up to a cap, and
// successes ([Lockout.DecayAt]) halve the failure count, removing the lock
// when it reaches zero. [Lockout.LockAt] sets a lock of a given length
// without counting a failure; a lock that already ends later is never
// shortened.
//
// # Zero value and configuration
//
// The zero [Config] means the documented defaults, with lockout switched
// off ([Config].Enabled): until it is on, nothing is recorded and every model
// reads as unlocked. [Config.Normalize] shows the defaults filled in;
// [FromEnv] reads the MODEL_LOCKOUT_* environment variables. The zero
// Lockout is disabled and can be configured with [Lockout.SetConfig].
// Invalid environment values come back as [*Error] with
// [CodeInvalidConfig]; [Lockout.CheckAt] returns one with [CodeLocked].
//
// # Which calls
//
// Routers call LockedAt for every candidate, RecordFailureAt for every
// model-level failure and DecayAt for every success. Admin APIs use
// [Lockout.SnapshotAt] to list the active locks and [Lockout.ClearAt] to lift
// one; [Config].OnChange reports every lock created, extended or removed as
// an [Event]. Every time-dependent method takes the current time (the
// ...At form); Locked, Clear and Snapshot are shorthand for time.Now. A
// clock that jumps backwards counts as no time passing.
//
// # Concurrency and cost
//
// A Lockout is safe for concurrent use. State lives in memory, sharded by
// connection: a check takes no lock, writes nothing and allocates nothing
// for ASCII model names, so checks scale with the number of readers; writes
// are serialised per shard. Expired entries are pruned lazily on writes and
// listings (no goroutine is started), and the number of entries is capped
// ([Config].MaxEntries): past the cap, the entries closest to expiry are
// evicted, never the one just written.
package lockout
