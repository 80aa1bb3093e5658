// Package otelmetrics records what routeguard's layers and router do with
// OpenTelemetry metric instruments, from the meter provider you give it.
// It depends on the OpenTelemetry metric API only.
//
// A program starts from these calls:
//
//	metrics, err := otelmetrics.New(otelmetrics.Options{MeterProvider: mp, Providers: providers})
//	metrics.AttachBreaker(&breakerCfg)       // each layer's Config, before the layer is built
//	metrics.Attach(&routerCfg)               // the combo.Config, before combo.New
//	res, err := metrics.Do(ctx, r, req, send) // instead of r.Do: the request-level metrics
//
// Every Attach method chains the Metrics after the hook the Config already
// has (OnChange, OnAttempt), which keeps being called first; call each
// once. Attach also remembers the router Config's Breakers, Cooldowns,
// Queue and Now, which the observable gauges read at collection time.
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
//	routeguard_exclusions_total{reason}                      Int64Counter (Do)
//	routeguard_attempts_total{provider,model,outcome,status_class,reason} Int64Counter
//	routeguard_request_attempts{combo}                       Int64Histogram (Do)
//	routeguard_fallbacks_total{from_provider,to_provider,result} Int64Counter (Do)
//	routeguard_in_flight{connection}, routeguard_queue_depth{connection} Int64ObservableGauge
//	routeguard_queue_rejected_total{connection,reason}       Int64Counter
//	routeguard_stream_cuts_total{cause}                      Int64Counter
//	routeguard_router_overhead_seconds                       Float64Histogram, 1 µs to 10 ms buckets (Do)
//
// and the GenAI client metric gen_ai.client.operation.duration (unit s,
// the semantic conventions' bucket boundaries) for every attempt made, with
// gen_ai.operation.name (Options.Operation, "chat" by default),
// gen_ai.provider.name, gen_ai.request.model and, for a failed attempt,
// error.type (its status, or _OTHER). It is measured as
// combo.Attempt.Duration: up to the router's commit, the response headers
// of a plain answer or the first useful output of a stream.
// See combo/promcollector for the meaning of each metric.
//
// # Cost
//
// Metrics is safe for concurrent use. Each attribute set is built once and
// its measurement options kept; from then on recording allocates nothing in
// this package. Close unregisters the gauges' callback.
package otelmetrics
