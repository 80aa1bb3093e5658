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
// [NewMemorySlots] is the in-process reference; package slottest is the
// conformance suite.
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
// every lease; run it with AOF (appendfsync everysec). This package does
// not yet detect a lost dataset (see the epoch check in the design).
package redisstate
