// Package gw is the reusable part of the reference gateway: a small
// OpenAI-compatible reverse proxy built on routeguard's router and its
// admin API.
//
// A Config names the providers, their connections, the client API keys,
// the combos and the resilience settings. Load reads it from a JSON or
// YAML file (by extension; one schema, strictly decoded: an unknown field
// is refused with its path), resolves ${NAME} environment references in
// its strings and validates it, reporting every problem with its path
// (ConfigErrors). New builds a Server, an http.Handler that serves
//
//	POST /v1/chat/completions   model = a combo name or "provider/model"
//	GET  /v1/models             the combos and provider models
//	POST /api/gateway/reload    reload the file (admin token)
//	/api/...                    the admin API of package combo/admin
//
// A combo orders its targets with a strategy of package combo, or is a
// composition: "fusion" asks a panel in parallel and has a judge
// synthesise the answers (Router.Fuse), "pipeline" runs combos in
// sequence, each step's answer the next one's input (combo.Pipeline).
// A request may narrow its combo with a "routeguard" body field (only,
// ignore and order, providers by id), removed before forwarding; a client
// key's maxInFlight caps its requests in flight (429 with Retry-After: 1).
//
// Server.Reload (and ReloadSource, on SIGHUP in the command) replaces the
// configuration while the Server runs: a bad one is refused and the old
// one keeps serving, requests in flight finish on the generation they
// started with, and the layers' state is kept for every provider and
// connection that remains and dropped for the removed ones. Resolved
// environment values are redacted from the Server's logs and refusals.
//
// The admin endpoints need the admin token as a bearer token, except two:
// GET /api/monitoring/health answers anyone with its overall status alone
// (the full report needs the token), and POST /api/v1/session-leases
// authenticates the client API keys that hold the lease scope.
//
// Each chat request is routed by a combo.Router over every layer:
// breakers, connection cooldowns, model lockouts, session affinity, leases,
// per-connection admission and the stream watchdog.
//
// What a client can rely on:
//
//   - Limits. Server.HTTPServer gives an http.Server with the Config's
//     server timeouts: headers must arrive within readHeaderTimeoutMs and
//     the whole request within readTimeoutMs (a late chat body gets 408),
//     and an idle keep-alive connection is closed after idleTimeoutMs.
//     There is no write timeout: a stream lasts as long as the upstream's.
//     Over maxConcurrentRequests a client request gets 503
//     gateway_overloaded with Retry-After: 1. Bodies are capped at
//     MaxRequestBody (413) and headers at MaxHeaderBytes (431).
//   - Headers. An upstream request carries only the client's Accept and
//     User-Agent, the provider's configured headers, the JSON content type
//     and the connection's key: no client credential, cookie, forwarding,
//     session or lease header is forwarded.
//   - Retry-After. Every Retry-After a client receives, whether copied from
//     an upstream or set by the router, passes through ClientRetryAfter: a
//     whole number of seconds in 1..86400, or no header at all. A failed
//     upstream answer keeps the upstream's rate-limit headers; when its
//     Retry-After is unusable or missing, the router's own retry time (such
//     as a restatement rule's 60 s) is sent.
//   - Tenancy. A session pin belongs to one client API key and its session
//     id together. Answers name targets as provider/model (the
//     X-Routeguard-Target header, the diagnostics of a 503); connection ids
//     are for the admin API only, and a connection held by another
//     client's lease is reported as merely unavailable.
//   - Content type. A chat body must be application/json (parameters
//     allowed); any other Content-Type gets 415. A request without a
//     Content-Type is read as JSON.
//
// StartDemo starts two fake providers on loopback and returns the embedded
// demo configuration that points at them.
package gw
