// Package breaker keeps one circuit breaker per upstream provider and an
// opt-in provider cooldown window gate.
//
// # Breaker
//
// A [Breaker] is a two-step circuit: [Breaker.Allow] asks before a request is
// sent and returns a done func that reports the [Outcome] afterwards. Its
// closed / open / half-open machine is a [gobreaker] two-step breaker; this
// package adds what a gateway needs on top of it:
//
//   - [Degraded]: a closed breaker whose failure count has reached the
//     profile's degraded level. It still admits every request; it tells a
//     router to prefer other providers.
//   - A leaky failure count: a failure adds one, a success while closed
//     subtracts one (never below zero), and closing after a probe or a reset
//     sets it to zero. An optional counting window ([Profile.Window]) lets old
//     failures expire.
//   - [Profile]s by credential class ([OAuth], [APIKey], [Local]) with an
//     escalating open time after repeated failed probes, capped.
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
// A refusal is an [*OpenError] (matching [ErrOpen]) that carries the wait
// and the kind of the last failure; [OpenError.WriteHTTP] writes the
// gateway's answer to it: 503, Retry-After, the
// X-OmniRoute-Provider-Breaker header and the provider_circuit_open error
// envelope.
//
// A [Set] holds one breaker per provider name, chooses its profile by class,
// bounds its size, and offers [Set.Snapshot] for health pages, [Set.Reset]
// and [Set.ResetAll], and a state-change hook that runs outside every lock.
//
// # Reports, kinds and deduplication
//
// A [Report] is an Outcome with detail: the failure's [Kind] (transient,
// rate_limit, quota_exhausted), the connection it used, and whether it was a
// network error or a local queue timeout. [Breaker.AllowReport] returns a
// done func that takes one; [Breaker.ReportAt] and [Set.ReportAt] account a
// report that belongs to no admission, the way a router records a failed
// attempt. Reports are filtered before they count: a queue timeout never
// counts, network errors count once per provider per Profile.NetworkDedup
// (10 s), and failures of one connection once per Profile.ConnDedup (5 s);
// the remembered connections are bounded by Profile.MaxConns.
//
// With [Profile.Hints] on, the kind of the last failure chooses the base of
// the open time ([KindPolicy.Cooldown]; built in: rate_limit 60 s,
// quota_exhausted 1 h), which escalates and is capped like Reset. A kind can
// also open a breaker by itself after [KindPolicy.OpenAt] failures.
//
// # Persistence
//
// The package does no I/O. [Set.Export] returns a [Record] per breaker
// (state, count, last failure and its kind, per-kind counts, cycles, start
// of the open period), plain data ready for JSON or a database row;
// [Set.Restore] puts records back after a restart. An open breaker resumes
// its open period where it stood, measured from its recorded start; a
// half-open one gets its probe slot back. Restore validates and clamps every
// field and refuses what it cannot interpret.
//
// # Time
//
// The breaker follows the wall clock, because the gobreaker machine it is
// built on reads [time.Now] itself; tests drive it inside [testing/synctest]
// bubbles, where time moves only when every goroutine is blocked.
// [Breaker.ReportAt] and [Set.ReportAt] take the report's time explicitly,
// for the deduplication windows and the failure time. A clock
// that steps backwards never shortens or lengthens an open period by more
// than the step, and never panics.
//
// # Window gate
//
// A [Gate] is the opt-in provider cooldown tracker. It is off unless
// [GateSettings.Enabled] is set. At the provider level it cools a provider
// once a threshold of failures falls inside a sliding window; at the
// connection level it cools one connection for an exponentially growing
// time. Every Gate method has an explicit-time form (RecordFailureAt,
// BlockedUntilAt, …) beside a shorthand that uses [time.Now].
//
// # Settings
//
// [Settings] and [GateSettings] are plain structs whose zero value means the
// built-in defaults. Normalize fills the defaults and clamps every field to
// its documented range; [FromEnv] and [GateFromEnv] read the OMNIROUTE_*
// and PROVIDER_COOLDOWN_* environment variables through a lookup func.
//
// All types are safe for concurrent use.
//
// [gobreaker]: https://pkg.go.dev/github.com/sony/gobreaker/v2
package breaker
