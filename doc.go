// Package routeguard is an in-process resilience toolkit for Go programs that
// call several interchangeable upstreams, such as LLM API gateways.
//
// The root package holds only the vocabulary the layers share, the
// credential [Class] of a connection. Each resilience layer is its own
// package and can be used alone:
//
//   - breaker: provider circuit breaker and the provider cooldown window gate
//   - cooldown: per-connection cooldown, backoff and terminal states
//   - lockout: per-model lockout with scope rules and success decay
//   - affinity: session pins to a connection
//   - lease: exclusive session leases with generation fencing
//   - queue: admission control and per-connection concurrency
//   - restate: upstream status restatement and failure classification
//   - watchdog: slow-stream throughput watchdog for SSE
//   - combo: the router that asks every layer, orders targets and falls back
package routeguard
