// Package combo is the router that joins routeguard's layers: for each
// request over a combo (a named, ordered list of targets) it asks every
// configured layer about every target, orders the eligible targets with the
// combo's strategy, dispatches them in order until one succeeds, and reports
// every outcome back to every layer.
//
// Most programs start from four calls:
//
//	r := combo.New(combo.Config{Breakers: ..., Cooldowns: ..., Lockouts: ...})
//	res, err := r.Do(ctx, combo.Request{Combo: c, Session: key}, send)
//	defer res.Response.Body.Close()          // on success: releases the attempt
//	var ce *combo.Error; errors.As(err, &ce) // otherwise: ce.Code, ce.Status, ce.Response(req)
//
// [New] builds a [Router] from a [Config] whose every layer is optional
// (New(Config{}) routes with none). [Router.Do] routes one [Request] over a
// [Combo] through a [SendFunc] that sends to one [Target]; [Transport] does
// the same behind an http.RoundTripper. A request the router does not serve
// ends in an [*Error] whose Code is one of the CodeX constants, matched with
// errors.Is by its sentinel ([ErrAllCoolingDown], [ErrUpstream], ...), and
// rendered as the contract's HTTP answer by [Error.Response] and
// [Error.WriteHTTP]. Transport removes routeguard's lease and session
// headers from what it sends upstream.
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
// (tool_limit), a connection leased to another session (lease_held), a
// full admission queue (queue_full), and then the user's own checks
// ([Config.Layers], see [Layer]) with the reasons they name, such as
// free_tier_drained. A request with a lease is restricted to the leased
// connection and fenced before every attempt.
//
// After a failed attempt the answer is restated and classified (package
// restate) and the verdict is translated for each layer: trip statuses to
// the breaker, account-level failures and terminal states to the connection
// cooldown, model-level failures to the model lockout, and provider or
// connection exhaustion to the request's own skip sets (on a provider that
// keeps its quotas per model, see [Config.PerModelQuota], one model's quota
// failure or bare 500 does not exhaust the provider or the connection). A
// success closes the loop: breaker success, the connection's error cleared,
// the model's failure count decayed, the session pinned. Every attempt is
// reported to [Config.OnAttempt] and to each user [Layer].
//
// A transport failure before any response (connection refused or reset, a
// TLS or response-header timeout) is sent again to the same target after
// [Settings.RetryDelay] (default 2 s), [Settings.MaxRetries] times (default
// once); an HTTP status is never retried on the same target.
//
// # Time and truncation
//
// Every request has a deadline, [Settings.RequestTimeout] (default 10 min):
// it covers every attempt, same-target retry and cooldown wait, and the
// reading of the answer, a committed stream included. Each attempt is
// bounded by [Settings.TargetTimeout] (default 120 s) until its commit, and
// never past the deadline, so a hung upstream costs at most the per-target
// timeout per attempt and the request deadline in all. A request whose
// deadline passes before an answer ends with a 504 [*Error] matching
// [ErrRequestTimeout]. The built-in layers learn nothing from the attempt
// the deadline cuts (OnAttempt and user layers see it, as a failure with
// that error), and no cooldown wait or retry pause is started that would
// reach the deadline.
//
// The router never passes on an answer that broke off as if it were whole.
// A non-streamed answer is read whole before commit (up to
// [Config.MaxBodyBytes], 32 MiB by default) and handed on from memory, with
// a correct Content-Length: a body that ends before its Content-Length or
// whose read fails is a failed attempt (502, 504 when the per-target
// timeout cut it) that falls back to the next target. Like a bad stream it
// locks the exact provider/connection/model and does not cool the
// connection; the breaker counts it as a network error. With no target
// left the caller gets an error, never a short 200. A committed stream that
// breaks off makes the body's Read return the error, never io.EOF
// (io.ErrUnexpectedEOF for a stream that ends before its Content-Length,
// [ErrRequestTimeout] at the deadline): a proxy must then abort its own
// response, for example with panic(http.ErrAbortHandler), after writing
// [StreamError] for an SSE client, instead of finishing it.
//
// When nothing can be dispatched the router answers with a terminal
// [*Error]: 400 capability_mismatch when every target was kept out because
// it cannot take this request (too many tools), 429 RATE_LIMIT_QUEUE_FULL
// with Retry-After when the admission queue refused every target, 503
// all_targets_cooling_down with Retry-After when some exclusion ends by
// itself (a user layer's exclusion with a recovery time included), 404
// no_executable_targets (code model_not_found) otherwise. These answers come
// at once, with no upstream call, under every strategy. The one exception is
// the cooldown-aware retry (see [CooldownWait]): when every target that is
// out is held by a short transient model lockout ending within MaxWait, the
// router waits until the earliest of them ends and dispatches again.
//
// When attempts were made and all failed, the answer is an [*Error] with
// [CodeUpstream] carrying the last upstream answer and the retry time to
// tell the client (the upstream's hint or a restatement rule's default, such
// as the 60 s of the agentrouter quota rule); [Transport] and
// [Error.Response] turn it into a Retry-After header when the upstream sent
// none. Every Retry-After they give is a whole number of seconds in
// 1..86 400.
//
// A streamed answer is held back until its first useful output, under the
// watchdog: a stream that is cut, ends early, is empty or carries an error
// event before that point is retried on the next target; once the caller
// has received a byte it is never replayed. Bytes alone never commit a
// stream: one that sends more than the watchdog's event bound (1 MiB by
// default) without a complete event (an endless line), or four times that
// without useful output, is a bad stream too. A cut, early or empty stream is
// evidence about one model: it locks that exact provider/connection/model
// and does not cool the connection, whose other models keep serving.
// [StreamRecovery], off by default, reopens such a stream once on the same
// target first, and continues a committed plain-text chat stream that
// breaks off on the next target, so that the caller reads one whole
// answer (see [ContinuationBody] and Request.Continue).
//
// # Strategies
//
// A combo names its strategy by string: "priority" (the default, also for
// ""), "fill-first", "context-relay" (priority order, see [Router.Relay]),
// "round-robin", "weighted", "p2c", "random", "strict-random",
// "least-used", "cost-optimized", "reset-aware", "reset-window",
// "headroom", "lkgp", "context-optimized", "cache-optimized",
// "quota-share" and "auto". [Config.Strategies] adds or replaces strategies
// by name; [Router.Strategy] looks a name up. A strategy is a value
// implementing [Strategy]; it tells the router what else it needs through
// optional interfaces: [TargetSlotter] (a concurrency slot per attempt, as
// round-robin takes), [ConnectionSlotter] (one connection slot per request,
// as quota-share takes) and [SessionOrderer] (it weighs sessions itself, as
// cache-optimized does).
//
// Session affinity chooses the connection within a provider; the strategy
// chooses the provider and model. Under every strategy a session pinned to
// a connection of the first target's provider and model is sent to that
// connection; when the pinned connection is not eligible the pin is dropped
// and the session is pinned again where it is served, so it does not drift
// back when the old connection recovers. A [SessionOrderer] keeps its own
// order: for cache-optimized, the connection likely to hold the prompt's
// cached prefix beats the session's pin.
//
// # Concurrency and cost
//
// A Router is safe for concurrent use and starts no goroutine. Screening and
// ordering allocate nothing; the per-request state and the attempts' timers
// are pooled. A successful request allocates its answer once (the Result,
// its first trail entry, the attempt, the final body, and room for a plain
// answer or a stream's held prefix of up to 456 bytes) and the queue's
// slot: two allocations with every layer on (TestDoAllocations). A request
// whose context can end adds context.WithCancel's two for its attempt's
// context (one whose context cannot end, such as context.Background, gets
// a context kept in the attempt's memory); a stream adds the watchdog's. A
// larger non-streamed answer costs one buffer of its size, held until its
// body is closed; a stream holds only what precedes its first useful
// output. Time comes from [Config.Now] (time.Now when nil) and is passed to
// every layer as an explicit now. The subpackage combotest provides fake upstreams for tests.
package combo
