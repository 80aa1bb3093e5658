// Package cooldown keeps the health of each connection (one API key or
// account of one provider) so that a failing credential is skipped while its
// siblings keep serving, and a dead one stays dead until someone fixes it.
//
// A connection is in one of five states at any instant:
//
//   - [Available]: it may be used;
//   - [Cooling]: a transient failure started an episode that ends at a known
//     time;
//   - [Banned], [Expired], [CreditsExhausted]: terminal states. Only an
//     explicit [Tracker.Reset] (for example after a credential change) lifts
//     them, except that credits exhausted with a known recovery time becomes
//     selectable again once that time has passed.
//
// The length of an episode is the upstream retry hint when the connection's
// [Profile] honours hints, else a fixed cooldown given with the failure, else
// an exponential backoff base·2^level capped by the profile's maximum. The
// backoff level rises by one per backoff episode and falls to zero only on
// success. A failure reported while the connection is already cooling is
// absorbed: it neither extends the episode nor raises the level, so a burst
// of concurrent failures produces exactly one episode.
//
// The package does not classify upstream answers: the caller describes each
// failure with a [Failure] (status, reason, hint, flags) produced by its own
// classifier.
//
// # Egress-IP family lockout
//
// Some providers rate-limit by the client's egress IP rather than by key. For
// the providers of [Config.EgressProviders], the caller records the egress IP
// each connection was last seen on ([Tracker.SeenEgressAt]); a 429 rate-limit
// or quota failure on one of them then cools every sibling of the family seen
// on the same IP within the egress window. A sibling's longer cooldown is never
// shortened, a terminal sibling is never touched, and the family lockout never
// sets a terminal state.
//
// # Time and memory
//
// Every time-dependent method has an ...At form taking the current time; the
// plain form is shorthand for time.Now(). No goroutine or timer is started:
// a cooldown simply ends when a later read observes that its end has passed.
// Entries that carry no information any more are pruned lazily on writes,
// and the in-memory store holds at most [Config.MaxEntries] connections.
//
// A [Tracker] is safe for concurrent use. [Tracker.StatusAt] and
// [Tracker.SelectAt] allocate nothing. State lives behind the [Store]
// interface; [NewMemoryStore] is the default.
package cooldown
