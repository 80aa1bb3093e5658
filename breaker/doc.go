// Package breaker keeps a circuit breaker per upstream provider, and an
// opt-in provider cooldown window gate.
//
// A gateway starts from four calls:
//
//	set := breaker.NewSet(breaker.Config{ClassOf: classOf})
//	done, err := set.AllowReportAt(provider, now) // before a request; err is a *breaker.Error
//	done(breaker.Report{Outcome: breaker.Classify(status, body, err), At: now})
//	set.ReportAt(provider, report, now)           // a result learned elsewhere
//
// and reads a provider's state with [Set.StateAt], or every breaker's with
// [Set.SnapshotAt].
//
// # Model
//
// Each provider's breaker is a two-step circuit: asked before a request is
// sent, told the result afterwards. A [gobreaker] two-step breaker decides
// when a closed breaker trips; this package runs the open and half-open
// states on the caller's clock and adds what a gateway needs on top:
//
//   - [Degraded]: a closed breaker whose failure count has reached the
//     profile's degraded level. It is a kept state: the failure that brings
//     the count to the level makes the breaker Degraded, and a success (or
//     the expiry of counted failures) that brings the count back to the
//     level or below makes it Closed. It still admits every request; it
//     tells a router to prefer other providers.
//   - A leaky failure count: a failure adds one, a success while closed
//     subtracts one (never below zero), and closing after a probe or a reset
//     sets it to zero. An optional counting window ([Profile.Window]) lets old
//     failures expire.
//   - [Profile]s by credential class ([routeguard.Class]: OAuth, APIKey,
//     Local; Unknown is treated as APIKey) with an escalating open time
//     after repeated failed probes, capped.
//   - One half-open probe at a time. A probe that never reports is re-issued
//     once the profile's reset time has passed since it was admitted.
//   - Generations: a result reported for a request admitted before the last
//     state change (or reset) never changes the state, so a late success does
//     not close an open breaker and a late failure does not restart its timer.
//   - Lazy recovery: there is no timer and no goroutine. Every call refreshes
//     the state first, so an expired open period turns into half-open when the
//     breaker is next asked.
//
// Only the statuses 408, 500, 502, 503 and 504 (and network failures) count
// as failures; see [Classify]. Everything a provider cannot be blamed for
// (429, 401, 403, 529, "overloaded" answers, context cancellation, local
// errors) is [Ignored]: neither a success nor a failure.
//
// A refusal is an [*Error] with code [CodeOpen] (matching [ErrOpen]) and
// status 503 that carries the wait and the kind of the last failure. The
// package renders no HTTP answer: the gateway's 503 with Retry-After, the
// X-OmniRoute-Provider-Breaker header and the provider_circuit_open
// envelope is the admin side's.
//
// # Reports, kinds and deduplication
//
// A [Report] is an Outcome with detail: the failure's [Kind] (transient,
// rate_limit, quota_exhausted), the connection it used, and whether it was a
// network error or a local queue timeout. Reports are filtered before they
// count: a queue timeout never counts, network errors count once per
// provider per Profile.NetworkDedup (10 s), and failures of one connection
// once per Profile.ConnDedup (5 s); the remembered connections are bounded
// by Profile.MaxConns.
//
// With [Profile.Hints] on, the kind of the last failure chooses the base of
// the open time ([KindPolicy.Cooldown]; built in: rate_limit 60 s,
// quota_exhausted 1 h), which escalates and is capped like Reset. A kind can
// also open a breaker by itself after [KindPolicy.OpenAt] failures.
//
// # Persistence and events
//
// The package does no I/O. [Set.SnapshotAt] returns a [Record] per breaker
// (state, count, last failure and its kind, per-kind counts, cycles, start
// of the open period, wait), plain data ready for a health page, JSON or a
// database row; [Set.RestoreAt] puts records back after a restart. An open
// breaker resumes its open period where it stood, measured from its
// recorded start; a half-open one gets its probe slot back. RestoreAt
// validates and clamps every field and refuses what it cannot interpret.
// [Config.OnChange] hears every state change as an [Event] that carries the
// state after it, and every breaker the Set drops to make room.
//
// # Window gate
//
// A [Gate] is the opt-in provider cooldown tracker. It is off unless
// [GateConfig.Enabled] is set. At the provider level it cools a provider
// once a threshold of failures falls inside a sliding window; at the
// connection level it cools one connection for an exponentially growing
// time. A provider's cooldown includes its end instant (cooling at
// T+cooldown, not after). [Gate.BlockedUntilAt] answers for a provider and
// one of its connections at once; [GateConfig.OnChange] hears each start,
// extension and end of a cooldown.
//
// # Zero values and settings
//
// [Config] and [GateConfig] are plain structs whose zero value means the
// built-in defaults: NewSet(Config{}) and NewGate(GateConfig{}) work. Each
// Normalize fills the defaults and clamps every field into the range its
// doc gives, without changing its receiver. [GateConfig.MinRetry] is a
// pointer because 0 is a real value for it: nil means the default 5 s.
// [FromEnv] and [GateFromEnv] read the OMNIROUTE_* and PROVIDER_COOLDOWN_*
// environment variables through a lookup func, with the library's one
// vocabulary (switches 1/true/yes/on and 0/false/no/off, whole numbers,
// whole milliseconds); every refused value is an [*Error] with code
// [CodeInvalidConfig] naming the variable.
//
// # Time
//
// Time is an input. Every method that depends on time takes now
// ([Set.AllowReportAt], [Set.ReportAt], [Set.StateAt], [Set.SnapshotAt],
// [Set.RestoreAt], [Set.ResetAt], [Set.ResetAllAt], and every Gate method),
// and a done func accounts its [Report] at Report.At. A zero now, or a
// zero Report.At, means time.Now(). Everything time-based follows the
// caller's clock: the end of an open period (open → half-open), the
// escalated open times, the probe lease, the counting window, the
// deduplication windows and the Set's choice of the idle breakers it drops.
// The gobreaker machine only decides when a closed breaker trips; its own
// timer never ends an open period. A router driven by an injected clock
// passes that clock's time to every call; a breaker should be driven by one
// clock.
//
// A time earlier than one a breaker has already been given is taken as
// that latest time: a clock that steps backwards means no time has passed,
// so it never shortens or lengthens an open period, and never panics.
//
// # Concurrency and cost
//
// Set and Gate are safe for concurrent use. Hooks run synchronously after
// every lock is released, so they may call back into the package. Asking a
// closed breaker allocates nothing (its admissions share one done func
// while its state holds); reporting a success to it, [Set.StateAt], a deduplicated failure and the gate's
// checks allocate nothing. Lookups of existing breakers share a read lock.
//
// [gobreaker]: https://pkg.go.dev/github.com/sony/gobreaker/v2
package breaker
