// Package cooldown keeps the health of each connection (one API key or
// account of one provider) so that a failing credential is skipped while its
// siblings keep serving, and a dead one stays dead until someone fixes it.
//
// A user starts from four calls:
//
//	cd := cooldown.New(cooldown.Config{})        // every default
//	st := cd.StatusAt(conn, now)                 // before dispatch: st.State == cooldown.Available?
//	cd.FailAt(conn, cooldown.Failure{...}, now)  // after a failed attempt, as classified
//	cd.SucceedAt(conn, now)                      // after a served request
//
// # The model
//
// A connection is in one of five states at any instant:
//
//   - [Available]: it may be used;
//   - [Cooling]: a transient failure started an episode that ends at a known
//     time;
//   - [Banned], [Expired], [CreditsExhausted]: terminal states. Only an
//     explicit [Tracker.ResetAt] (for example after a credential change)
//     lifts them, except that credits exhausted with a known recovery time
//     becomes selectable again once that time has passed.
//
// The length of an episode is the upstream retry hint when the connection's
// [Profile] honours hints, else a fixed cooldown given with the failure, else
// an exponential backoff base·2^level capped by the profile's maximum. The
// backoff level rises by one per backoff episode and falls to zero only on
// success. A failure reported while the connection is already cooling never
// shortens the episode and never raises the level, so a burst of concurrent
// failures produces exactly one episode; only an explicit cooldown (the
// retry hint or a fixed cooldown) that ends later extends the episode to
// that end, so the connection does not come back before the upstream said
// it could.
//
// The package does not classify upstream answers: the caller describes each
// failure with a [Failure] (status, reason, hint, flags) produced by its own
// classifier. A connection's credential class ([routeguard.Class], set with
// [Tracker.RegisterAt]) picks its profile: OAuth, or APIKey for every other
// class, [routeguard.Unknown] included.
//
// # The zero value
//
// The zero [Config] means every default, each documented beside its field;
// [Config.Normalize] shows the effective values. A [Profile]'s Base, Steps
// and Hints are pointers, because 0 (or off) is a real value for them: nil
// means the class default, Base 0 means no backoff cooldown and Steps 0
// means no escalation. [FromEnv] reads the seed's environment variable, only
// when asked. A connection the Tracker has never heard of is available at
// level 0. The zero [Tracker] is not usable; call [New].
//
// # Which calls to use
//
// [Tracker.StatusAt] answers one connection; [Tracker.CheckAt] answers with
// an [*Error] carrying the contract's code ([CodeCooling], [CodeUnavailable])
// and HTTP status. [Tracker.SnapshotAt] lists every tracked connection (the
// content of a cooldowns API), [Tracker.ClearAt] lifts cooldowns and
// [Tracker.ResetAt] terminal states, for the connections a [Selector] picks.
// [Tracker.RecheckDueAt] and [Tracker.RecheckedAt] schedule the re-checks of
// an expired connection. [Config.OnChange] receives an [Event], with the
// state after the change, for every change of a connection's status and
// every removal of its entry.
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
// # Time, concurrency and cost
//
// Every time-dependent method takes the current time (its ...At form);
// [Tracker.Status] is shorthand for StatusAt(conn, time.Now()). A clock that
// goes back is tolerated: a cooldown never ends early because of it. No
// goroutine or timer is started: a cooldown simply ends when a later read
// observes that its end has passed. Entries that carry no information any
// more are pruned lazily on writes, and the in-memory store holds at most
// [Config.MaxEntries] connections that are not terminal and
// [Config.MaxTerminal] terminal ones, dropping (and reporting) entries as
// those fields say. It keeps its entries ordered for that, so a write costs
// O(log n) amortised however many connections it holds; its writes are
// serialised, its reads are not.
//
// A [Tracker] is safe for concurrent use. [Tracker.StatusAt],
// [Tracker.CheckAt] of an available connection and a failure absorbed by a
// running episode allocate nothing and take one read lock. State lives
// behind the [Store] interface; [NewMemoryStore] is the default, and the
// cooldowntest package checks other implementations.
package cooldown
