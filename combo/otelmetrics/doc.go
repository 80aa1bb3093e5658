// Package otelmetrics records what routeguard's layers and router do with
// OpenTelemetry metric instruments, from the meter provider you give it,
// and, optionally, a span per routed request and per attempt. It depends
// on the OpenTelemetry metric and trace APIs only.
//
// A program starts from these calls:
//
//	metrics, err := otelmetrics.New(otelmetrics.Options{MeterProvider: mp, Providers: providers})
//	metrics.AttachBreaker(&breakerCfg) // each layer's Config, before the layer is built
//	metrics.Attach(&routerCfg)         // the combo.Config, before combo.New
//	otelmetrics.NewTraces(otelmetrics.TraceOptions{TracerProvider: tp}).Attach(&routerCfg)
//	res, err := r.Do(ctx, req, send)   // every request is recorded
//
// Every Attach method chains after the hook the Config already has
// (OnChange, OnAttempt, OnRequest), which keeps being called first; call
// each once. Metrics.Attach also remembers the router Config's Breakers,
// Cooldowns, Queue and Now, which the observable gauges read at collection
// time.
//
// # Instruments
//
// The instruments have the names and attributes of the Prometheus metrics
// of combo/promcollector, so both give the same numbers for the same
// traffic:
//
//	routeguard_breaker_state{provider,state}                 Int64ObservableGauge, 1 for the current state
//	routeguard_breaker_transitions_total{provider,from,to}   Int64Counter
//	routeguard_connection_up{connection}                     Int64ObservableGauge
//	routeguard_connection_cooldowns_total{connection,reason} Int64Counter
//	routeguard_cooldown_until_timestamp_seconds{connection}  Float64ObservableGauge, Unix seconds, 0 when none
//	routeguard_model_lockouts_total{provider,model,reason}   Int64Counter
//	routeguard_exclusions_total{reason}                      Int64Counter
//	routeguard_attempts_total{provider,model,outcome,status_class,reason} Int64Counter
//	routeguard_request_attempts{combo}                       Int64Histogram
//	routeguard_fallbacks_total{from_provider,to_provider,result} Int64Counter
//	routeguard_in_flight{connection}, routeguard_queue_depth{connection} Int64ObservableGauge
//	routeguard_queue_wait_seconds{provider}                  Float64Histogram
//	routeguard_queue_rejected_total{connection,reason}       Int64Counter
//	routeguard_stream_cuts_total{cause}                      Int64Counter
//	routeguard_router_overhead_seconds                       Float64Histogram, 1 µs to 10 ms buckets
//	routeguard_replication_lag_seconds{store}                Float64ObservableGauge, for each store given to AttachSharedStore
//	routeguard_shared_store_degraded{store}                  Int64ObservableGauge, 1 while degraded
//
// and the GenAI client metrics gen_ai.client.operation.duration (unit s,
// the semantic conventions' bucket boundaries) for every attempt made,
// gen_ai.client.operation.time_to_first_chunk for every stream that
// succeeded, and gen_ai.client.token.usage (unit {token}, Int64Histogram)
// for every successful attempt whose answer reported its usage, with
// gen_ai.token.type input or output. They carry gen_ai.operation.name
// (Options.Operation, "chat" by default), gen_ai.provider.name,
// gen_ai.request.model and, for a failed attempt, error.type (its status,
// or _OTHER). See combo/promcollector for the meaning of each metric.
//
// # Traces
//
// Traces (see NewTraces) makes, when a request ends, a span for it (a child
// of the span in the context given to Do) and a client span under it for
// each attempt made, with the GenAI attributes and the trail's timings;
// the targets kept out before dispatch or skipped at it are events of the
// request span. The spans carry the trail's times, on the router's clock.
//
// # Cost
//
// Metrics is safe for concurrent use. Each attribute set is built once and
// its measurement options kept, found again for an attempt or a request by
// where its label strings are, with atomic loads only; from then on
// recording allocates nothing in this package. Without a MeterProvider
// the Attach methods chain no hook, so the router pays nothing; with the
// SDK, its instruments cost about 12,700 instructions per routed request
// in BenchmarkRouterOverhead of examples/gateway (seven measurements),
// nearly all of them the SDK's. Close unregisters the gauges' callback. Traces allocates
// per recorded span, and returns at once when the request span is not
// recording (no SDK, or not sampled).
package otelmetrics
