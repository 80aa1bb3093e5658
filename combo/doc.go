// Package combo is the router that joins routeguard's layers: for each
// request over a combo (a named, ordered list of targets) it asks every
// configured layer about every target, orders the eligible targets with the
// combo's strategy, dispatches them in order until one succeeds, and reports
// every outcome back to every layer.
//
// The layers wrap a dispatch in this order:
//
//	breaker(gate(lockout(cooldown(exhaustion(lease(queue(watchdog(send))))))))
//
// Before dispatch a target is excluded by the first layer that refuses it:
// an OPEN provider breaker (circuit_open), the provider window gate
// (provider_cooldown), a model lockout (model_lockout), a cooling or
// terminal connection (connection_cooldown, unavailable), a failure earlier
// in the same request (exhausted), a tool count the model refused before
// (tool_limit), a connection leased to another session (lease_held), or a
// full admission queue (queue_full).
// A request with a lease is restricted to the leased connection and fenced
// before every attempt.
//
// After a failed attempt the answer is restated and classified (package
// restate) and the verdict is translated for each layer: trip statuses to
// the breaker, account-level failures and terminal states to the connection
// cooldown, model-level failures to the model lockout, and provider or
// connection exhaustion to the request's own skip sets (on a provider that
// keeps its quotas per model, see [Config.PerModelQuota], one model's quota
// failure or bare 500 does not exhaust the provider or the connection). A
// success closes the loop: breaker success, the connection's error cleared,
// the model's failure count decayed, the session pinned.
//
// When nothing can be dispatched the router answers with a [TerminalError]:
// 400 capability_mismatch when every target was kept out because it cannot
// take this request (too many tools), 503 all_targets_cooling_down with
// Retry-After when some exclusion ends by itself, 404 no_executable_targets
// otherwise. A short transient model
// lockout may be waited out instead (see [CooldownWait]).
//
// A streamed answer is held back until its first useful output, under the
// watchdog: a stream that is cut, ends early or carries an error event
// before that point is retried on the next target; once the caller has
// received a byte it is never replayed.
//
// The Router starts no goroutine. Strategies are values implementing
// [Strategy]; [Transport] adapts a Router to an http.RoundTripper, and the
// subpackage combotest provides fake upstreams for tests.
package combo
