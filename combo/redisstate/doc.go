// Package redisstate keeps the state that routeguard's gateway replicas
// must agree on in one Redis: exclusive session leases and per-connection
// concurrency caps.
//
// The calls a user starts from:
//
//	rs, err := redisstate.New(rdb, redisstate.Config{})           // rdb: the caller's redis.UniversalClient
//	leases := lease.New(lease.Config{Store: rs.Leases()})        // leases shared by every replica
//	ok, held, retryAt, err := rs.Slots().TryAcquire(ctx, conn, 1, rs.Holder(attemptID), now)
//	lost, err := rs.Slots().Renew(ctx, mySlots, now)             // every SlotTTL/3
//	r := combo.New(combo.Config{Leases: leases, Slots: rs.Slots()}) // caps across replicas; r.RenewSlots every SlotTTL/3
//
// # The model
//
// Leases ([State.Leases]) are authoritative in Redis: every lifecycle
// call (acquire, renew, release, transition, invalidate, status) is one
// Lua script and one round trip, atomic on the server and evaluated on the
// server's clock, so the lease contract's invariants (one active lease per
// owner and per connection, generations that only rise) hold across every
// process. Only owner digests are stored. Every key of the lease scripts
// shares the hash tag {<ns>:lease}, so the scripts run on Redis Cluster.
// Each change is also appended to the stream {<ns>:lease}:ev.
//
// Slots ([State.Slots]) are a sorted set per connection, {<ns>:sem:<conn>},
// of holder ids scored by expiry: acquiring reclaims expired holders,
// counts and adds in one script, is idempotent per holder, and renewal of
// any number of slots is one pipelined round trip. Waiting stays local.
// The interface is package queue/slotstore's (with its in-process
// reference, slotstore.NewMemory); package queue/queuetest is the
// conformance suite. Give it to combo.Config.Slots for the router's
// per-connection caps.
//
// # Replicated state
//
// Breaker open periods and resets, provider cooldown gate entries,
// cooldowns and terminal states, model lockouts and session pins are not
// remote state: each replica keeps them in its own layers, which the hot
// path reads, and a [Replicator] (from [State.Replicator]) shares their
// changes. The layers' OnChange hooks queue each change in a bounded
// outbox, one record per key; in the background one script per batch
// merges the records into the snapshot hash {<ns>:ev}:snap and appends
// them to the stream {<ns>:ev}:log, and every replica reads the stream
// (XREAD BLOCK) and merges the others' records into its layers. Records
// merge by a total order per key, so replays and reordering are harmless:
// a remote open breaker is open here until its end (then the local probe
// decides), a breaker reset anywhere closes the open periods it follows (a
// closing probe stays local), a gate cooldown and a cooldown take the
// later end, a terminal state stays until a reset, a lockout never
// shortens, pins follow the last writer. A sequence gap, a trimmed stream
// or a new dataset epoch makes a replica resync from the snapshot, and
// after Redis lost its data every replica publishes its live state again.
// [Replicator.Stats] gives the lag and the staleness for metrics.
//
// # The zero value
//
// Config{} gives namespace "rg", the server's clock, a 250 ms deadline per
// remote call, 24 h retention of ended leases, no fence mirror, no
// release quarantine, 15 s slots and local caps during an outage. The zero
// State is not usable; call New.
//
// # When Redis is in trouble
//
// Every remote call has a deadline (Config.Timeout) and goes through a
// routeguard breaker (provider "redis"), so an outage costs at most one
// timeout per call until the breaker opens, and nothing then. Lease calls
// answer a *lease.Error with CodeServiceUnavailable (503
// LEASE_SERVICE_UNAVAILABLE). Slot acquisition falls back to a local cap of
// the same size, or refuses with ErrUnavailable under Config.FailClosed.
// [State.Degraded] and Config.OnDegraded report it.
//
// # Fencing without a round trip
//
// With Config.FenceStaleness S > 0, Fence admits a request from a lease
// this process verified less than S ago without a remote call. That is safe
// only because a freed connection goes to another owner no sooner than
// Config.ReleaseQuarantine Q ≥ S + ClockSkew after it was freed; New
// refuses a smaller Q. Refusals are always checked with Redis.
//
// # Concurrency and cost
//
// A State is safe for concurrent use. A lease call or a slot acquire is one
// round trip (EVALSHA, EVAL once after the script cache is emptied); a
// fence from a fresh verification makes none and does not allocate.
//
// # Durability
//
// Redis replicates asynchronously and a restart without persistence loses
// every lease; run it with AOF (appendfsync everysec). A lost dataset is
// detected by its epoch (a field every lease script checks): each process
// re-seeds the leases it holds on its next call and reports
// Config.OnDataLoss, and new leases wait ReleaseQuarantine meanwhile (see
// [State.Leases]). Slots are re-seeded the same way: every slot set has
// a marker of the dataset epoch, a script that finds it missing sends the
// caller to the dataset's epoch key, and a process that knew the old
// epoch stores the slots it holds again (same holders, same expiries)
// before it acquires; new holders are refused for SlotTTL + ClockSkew
// after the loss is noticed, by which time every slot held before it is
// either stored again or expired (see [State.Slots]).
package redisstate
