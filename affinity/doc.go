// Package affinity keeps a client session on the same connection (API key or
// account) of a provider across requests, for as long as that connection
// stays eligible.
//
// A user starts from four calls:
//
//	pins := affinity.New(affinity.Config{TTL: time.Hour})
//	key, ok := affinity.KeyFrom(req.Header, body) // the session, if any
//	affinity.StripHeaders(req.Header)             // never forwarded upstream
//	conn, ok := pins.SelectAt(provider, key, eligible, now)
//
// # The model
//
// A multi-turn agent works best when every turn lands on the same account:
// provider-side caches and per-account session state survive, and a session
// does not spread its rate-limit pressure over every key. A pin is a soft
// preference, never a requirement: it never makes an ineligible connection
// eligible; it only chooses among the [Candidate]s the caller has already
// filtered.
//
// [Pins] maps (provider, session) to a connection. [Pins.SelectAt] picks,
// among the eligible candidates, the pinned connection when the pin is live
// (and slides its expiry), or the least recently used candidate when there
// is no usable pin. A pin whose connection is no longer a candidate is
// dropped for good (a hard rebind): the session moves to another connection
// and does not come back when the old one recovers.
//
// # Session keys
//
// [KeyFrom] derives a [Key] from the session headers (X-Codex-Session-Id,
// X-Session-Id, X-Omniroute-Session, then any names configured in an
// [Extractor]) or, failing that, from the JSON request body: explicit
// session fields first, then a SHA-256 of the first user text, so every turn
// of a conversation maps to the same key. A value of at most 180 safe
// characters is kept as it is; anything else is replaced by its SHA-256;
// values longer than 4096 characters are refused. A Key prints only its
// source and a short digest, and stores and [Event]s see only a digest of
// it, never the raw value.
//
// # Configuration
//
// The zero [Config] disables affinity: no lifetime is set. The lifetime is
// resolved per request ([Request].TTL), then per provider
// ([Config].ProviderTTL, where 0 disables one provider), then globally
// ([Config].TTL); see [Config.TTLFor]. [FromEnv] reads the seed's
// environment variables; a bad value is an [*Error] with code
// [CodeInvalidConfig] that matches [ErrInvalidConfig]. [Pins.SetTTL]
// changes the lifetimes at run time.
//
// # Which calls to use
//
//   - [Pins.SelectAt] (or [Pins.ChooseAt] with a per-request TTL) commits at
//     once: a hit slides the pin, a new choice is pinned before the request
//     is sent.
//   - [Pins.PlanAt] then [Pins.PinAt]: plan without changing anything, pin
//     the connection that actually served the request. [Pins.RecordUseAt]
//     records the use of a connection chosen without a session key.
//   - [Pins.LookupAt] reads a pin; [Pins.UnpinAt] removes it;
//     [Pins.EvictAt] removes it only if it points at a given connection (a
//     timeout on that connection).
//   - [Config].OnChange reports every pin made, moved or removed as an
//     [Event]; [Pins.SnapshotAt] lists the state as plain data.
//
// # Time, memory, concurrency and cost
//
// Every time-dependent method takes the current time; clocks that jump
// backwards neither shorten a pin nor move its last use back. Nothing runs
// in the background: a pin simply dies once a read observes that its expiry
// has passed. Pins live behind the [Store] interface; [MemoryStore] is the
// in-memory default, bounded by [Config].MaxPins (dead pins go first, then
// the pin expiring first), and the connection-use table is bounded by
// [Config].MaxConnections (the connection used longest ago goes first). The
// affinitytest package checks another Store against the same rules.
//
// All types are safe for concurrent use. With the default store, a
// selection that hits a live pin, [Pins.PlanAt], [Pins.LookupAt] and
// [Config.TTLFor] allocate nothing, and a busy session writes its pin at
// most about once a second.
package affinity
