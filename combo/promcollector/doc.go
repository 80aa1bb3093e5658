// Package promcollector exposes what routeguard's layers and router do as
// Prometheus metrics, through one prometheus.Collector that you register
// on your own Registerer (never the global one).
//
// A program starts from these calls:
//
//	metrics := promcollector.New(promcollector.Options{Providers: providers})
//	reg.MustRegister(metrics)
//	metrics.AttachBreaker(&breakerCfg) // each layer's Config, before the layer is built
//	metrics.Attach(&routerCfg)         // the combo.Config, before combo.New
//	res, err := r.Do(ctx, req, send)   // every request is recorded
//
// Every Attach method chains the Collector after the hook the Config
// already has (OnChange, OnAttempt, OnRequest), which keeps being called
// first; call each once. AttachBreaker, AttachCooldown, AttachLockout and
// AttachQueue take the layer Configs, because a layer reads its hook when
// it is built; Attach takes the router's (its OnAttempt and OnRequest
// hooks) and also remembers its Breakers, Cooldowns, Queue and Now, which
// the gauges read when the Collector is collected.
//
// # Metrics
//
// Labels are bounded: provider, connection id, model, combo, reason,
// state. A reason that is not a code (letters, digits, '_', '-', '.', ':',
// at most 64 bytes) is recorded as "other"; Target.Connection must be an
// id, never the credential itself.
//
//	routeguard_breaker_state{provider,state}                 gauge, 1 for the current state (closed, degraded, open, half-open), 0 for the others
//	routeguard_breaker_transitions_total{provider,from,to}   breaker state changes
//	routeguard_connection_up{connection}                     1 when the connection may be used
//	routeguard_connection_cooldowns_total{connection,reason} cooldown episodes started
//	routeguard_cooldown_until_timestamp_seconds{connection}  end of the current cooldown (or known credits recovery), 0 when none
//	routeguard_model_lockouts_total{provider,model,reason}   model locks created or extended (model as the lockout lists it: family, model or exact:<model>)
//	routeguard_exclusions_total{reason}                      targets kept out before dispatch or skipped at it, once per request
//	routeguard_attempts_total{provider,model,outcome,status_class,reason}
//	routeguard_request_attempts{combo}                       histogram of attempts made per request
//	routeguard_fallbacks_total{from_provider,to_provider,result} moves from a failed target to the next
//	routeguard_in_flight{connection}, routeguard_queue_depth{connection} running and waiting requests per admission key
//	routeguard_queue_wait_seconds{provider}                  histogram of each attempt's admission wait (combo.Attempt.QueueWait), 0 to 60 s
//	routeguard_queue_rejected_total{connection,reason}       queue_full, queue_timeout
//	routeguard_stream_cuts_total{cause}                      streams failed before their first useful output, by combo.Attempt.Cut: the watchdog's reasons, empty_stream, error_event, no_output, target_timeout, read_error
//	routeguard_router_overhead_seconds                       histogram, 1 µs to 10 ms buckets
//	routeguard_replication_lag_seconds{store}                lag of the last change a shared state store applied from another replica
//	routeguard_shared_store_degraded{store}                  1 while the store's last remote call failed, else 0
//	gen_ai_client_operation_duration_seconds{gen_ai_operation_name,gen_ai_provider_name,gen_ai_request_model,error_type}
//	gen_ai_client_operation_time_to_first_chunk_seconds{gen_ai_operation_name,gen_ai_provider_name,gen_ai_request_model}
//	gen_ai_client_token_usage{gen_ai_operation_name,gen_ai_provider_name,gen_ai_request_model,gen_ai_token_type}
//
// A breaker_state series exists from New for each of Options.Providers,
// and for every breaker of the attached Set; the states, connection and
// queue gauges are read from the attached layers at collection time, so an
// open period or a cooldown that has ended shows as such without waiting
// for the next event. Without an attached layer they follow its events.
//
// The gen_ai histograms are the Prometheus form of the OpenTelemetry
// GenAI client metrics gen_ai.client.operation.duration (its buckets) and
// gen_ai.client.operation.time_to_first_chunk. The first is recorded for
// every attempt made, as combo.Attempt.Duration: up to the router's
// commit, that is a plain answer read whole or the first useful output of
// a stream; error_type is the status of a failed attempt, or _OTHER. The
// second is recorded for every stream that succeeded, as
// combo.Attempt.FirstOutput: from the attempt's start to its first useful
// output (text, a tool call or reasoning), with the boundaries 1 ms to
// 10 s of the conventions' time-to-first-token histograms.
// The third, gen_ai.client.token.usage, is recorded for every successful
// attempt whose answer reported its usage (combo.Attempt.Usage, which the
// router reads from a plain answer's body and from a stream's events up
// to its commit), one observation per token type (input, output) that was
// reported, with the conventions' boundaries 1 to 4^13 tokens.
//
// routeguard_router_overhead_seconds is, per request, Do's duration less
// the time each attempt made spent on its upstream (from its admission to
// its commit or failure), on the router's clock. It includes the pauses the
// router makes on purpose: admission waits, the same-target retry delay,
// cooldown waits.
//
// The two shared-state gauges exist for each store given to
// AttachSharedStore, which takes funcs rather than a store so that this
// module needs none of the state modules: for combo/redisstate,
//
//	rep := state.Replicator(redisstate.ReplicatorConfig{})
//	metrics.AttachSharedStore("redis",
//		func() time.Duration { return rep.Stats().Lag },
//		func() bool { return rep.Stats().Degraded })
//
// # Cost
//
// A Collector is safe for concurrent use. Every label combination is
// resolved once; from then on recording an event takes atomic adds only.
// An attempt finds its series by where its label strings are (the
// Target's, the reason constants) and a request by where its combo's
// name and its exclusions' reasons are, each with one atomic load and no
// hashing of the strings' bytes. The Collector's own series are lock-free
// histograms (an atomic count per bucket, found by a short search, and
// the sum of each observation's excess over its bucket's least value,
// added only when not 0) and atomic counters; a counter that one
// histogram's observations already count (an attempt label set's
// routeguard_attempts_total and its operation durations; a kind of
// request's routeguard_request_attempts and exclusions and its router
// overhead) reads that histogram's counts, so a plain successful request
// makes four atomic adds, and one with exclusions no more. The exposition
// is built from them at collection time. BenchmarkRecord here measures
// the hooks alone (about 440 instructions for one attempt and a request
// with two exclusions); BenchmarkRouterOverhead of examples/gateway
// measures them in the router. Nothing allocates but collection.
//
// The package combo/otelmetrics records the same metrics with
// OpenTelemetry instruments, and the spans of each request.
package promcollector
