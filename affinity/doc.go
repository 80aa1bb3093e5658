// Package affinity keeps a client session on the same connection (API key or
// account) of a provider across requests, for as long as that connection
// stays eligible.
//
// A multi-turn agent works best when every turn lands on the same account:
// provider-side caches and per-account session state survive, and a session
// does not spread its rate-limit pressure over every key. The package offers
// a soft pin: a preference, never a requirement. It never makes an ineligible
// connection eligible; it only chooses among the candidates the caller has
// already filtered.
//
// # Session keys
//
// [KeyFrom] derives a [Key] from the request headers (x-codex-session-id,
// x-session-id, x-omniroute-session, then any names configured in an
// [Extractor]) or, failing that, from the JSON request body: explicit session
// fields first, then a SHA-256 of the first user text, so every turn of a
// conversation maps to the same key. A value of at most 180 safe characters
// is kept as it is; anything else is replaced by its SHA-256; values longer
// than 4096 characters are refused. A Key prints only its source and a short
// digest, and stores see only a digest of it, never the raw value.
// [StripHeaders] removes the session headers before a request goes upstream.
//
// # Pins
//
// [Pins] maps (provider, session) to a connection. [Pins.SelectAt] picks,
// among the caller's eligible candidates, the pinned connection when the pin
// is live (and slides its expiry), or the least recently used candidate
// when there is no usable pin. A pin whose connection is no longer a
// candidate is dropped for good (a hard rebind): the session moves to
// another connection and does not come back when the old one recovers.
// Callers that pin only after a successful attempt use [Pins.PlanAt], which
// changes nothing, and then [Pins.PinAt].
//
// The time to live is resolved per request, then per provider, then
// globally ([Settings.TTLFor]); zero disables affinity.
//
// Pins live behind the [Store] interface. [MemoryStore] is the in-memory
// default: sharded, bounded, and pruned lazily; nothing runs in the
// background.
//
// Every time-dependent method has an ...At form that takes the current time
// explicitly; the short form uses time.Now. All types are safe for concurrent
// use.
package affinity
