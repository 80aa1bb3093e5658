package metricscore

// Metric names and help texts, the same in both metrics packages.
const (
	NameBreakerState       = "routeguard_breaker_state"
	NameBreakerTransitions = "routeguard_breaker_transitions_total"
	NameConnectionUp       = "routeguard_connection_up"
	NameConnectionCooldown = "routeguard_connection_cooldowns_total"
	NameCooldownUntil      = "routeguard_cooldown_until_timestamp_seconds"
	NameModelLockouts      = "routeguard_model_lockouts_total"
	NameExclusions         = "routeguard_exclusions_total"
	NameAttempts           = "routeguard_attempts_total"
	NameRequestAttempts    = "routeguard_request_attempts"
	NameFallbacks          = "routeguard_fallbacks_total"
	NameInFlight           = "routeguard_in_flight"
	NameQueueDepth         = "routeguard_queue_depth"
	NameQueueRejected      = "routeguard_queue_rejected_total"
	NameStreamCuts         = "routeguard_stream_cuts_total"
	NameRouterOverhead     = "routeguard_router_overhead_seconds"
	NameQueueWait          = "routeguard_queue_wait_seconds"
	NameReplicationLag     = "routeguard_replication_lag_seconds"
	NameStoreDegraded      = "routeguard_shared_store_degraded"

	// The GenAI client metrics, as OpenTelemetry names them and as their
	// Prometheus exporter writes them.
	GenAIOperationDuration = "gen_ai.client.operation.duration"
	GenAIFirstChunk        = "gen_ai.client.operation.time_to_first_chunk"
	GenAITokenUsage        = "gen_ai.client.token.usage"
	PromOperationDuration  = "gen_ai_client_operation_duration_seconds"
	PromFirstChunk         = "gen_ai_client_operation_time_to_first_chunk_seconds"
	PromTokenUsage         = "gen_ai_client_token_usage"

	HelpBreakerState       = "Provider circuit breaker state: 1 for the current state, 0 for the others."
	HelpBreakerTransitions = "Provider circuit breaker state changes."
	HelpConnectionUp       = "1 when the connection may be used, 0 while it cools down or is in a terminal state."
	HelpConnectionCooldown = "Connection cooldown episodes started, by classified reason."
	HelpCooldownUntil      = "Unix time at which the connection's cooldown (or known credits recovery) ends; 0 when none."
	HelpModelLockouts      = "Model lockouts created or extended."
	HelpExclusions         = "Targets kept out before dispatch, by exclusion reason."
	HelpAttempts           = "Attempts on targets: made (succeeded, failed) and skipped."
	HelpRequestAttempts    = "Attempts made per routed request, retries and fallbacks included."
	HelpFallbacks          = "Moves of a request from a failed target to the next one, by the result of the next one."
	HelpInFlight           = "Requests running on an admission queue key."
	HelpQueueDepth         = "Requests waiting on an admission queue key."
	HelpQueueRejected      = "Requests refused by a full admission queue or timed out waiting in it."
	HelpStreamCuts         = "Streamed attempts failed before their first useful output, by cause."
	HelpRouterOverhead     = "Time a routed request spent in the router, outside its attempts' upstream time."
	HelpQueueWait          = "Time an attempt waited for admission (queue and connection slots)."
	HelpReplicationLag     = "Lag of the last change a shared state store applied from another replica."
	HelpStoreDegraded      = "1 while the shared state store's last remote call failed, else 0."
	HelpOperation          = "GenAI operation duration: one attempt, up to the router's commit (a plain answer read whole, or a stream's first useful output)."
	HelpFirstChunk         = "GenAI time to first chunk: from a streamed attempt's start to its first useful output."
	HelpTokenUsage         = "GenAI tokens used by a successful attempt, as its answer reported them, by token type (input, output)."
)

// Token types: the values of gen_ai.token.type.
const (
	TokenInput  = "input"
	TokenOutput = "output"
)

// Bucket boundaries.
var (
	// OperationBuckets are the semantic conventions' boundaries for
	// gen_ai.client.operation.duration, in seconds.
	OperationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	// OverheadBuckets span 1 µs to 10 ms, in seconds.
	OverheadBuckets = []float64{1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2}
	// FirstChunkBuckets are the semantic conventions' boundaries for
	// gen_ai.client.operation.time_to_first_chunk, in seconds.
	FirstChunkBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	// QueueWaitBuckets span 1 ms to 60 s, in seconds; 0 counts the
	// attempts admitted at once.
	QueueWaitBuckets = []float64{0, 0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	// AttemptBuckets count attempts per request (0: nothing dispatched).
	AttemptBuckets = []float64{0, 1, 2, 3, 4, 5, 7, 10, 15, 20, 30}
	// TokenBuckets are the semantic conventions' boundaries for
	// gen_ai.client.token.usage, in tokens.
	TokenBuckets = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
)
