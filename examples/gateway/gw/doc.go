// Package gw is the reusable part of the reference gateway: a small
// OpenAI-compatible reverse proxy built on routeguard's router and its
// admin API.
//
// A Config (JSON, strictly decoded and validated) names the providers,
// their connections, the client API keys, the combos and the resilience
// settings. New builds a Server, an http.Handler that serves
//
//	POST /v1/chat/completions   model = a combo name or "provider/model"
//	GET  /v1/models             the combos and provider models
//	/api/...                    the admin API of package combo
//
// The admin endpoints need the admin token as a bearer token, except two:
// GET /api/monitoring/health answers anyone with its overall status alone
// (the full report needs the token), and POST /api/v1/session-leases
// authenticates the client API keys that hold the lease scope.
//
// Each chat request is routed by a combo.Router over every layer:
// breakers, connection cooldowns, model lockouts, session affinity, leases,
// per-connection admission and the stream watchdog. Session and lease
// headers are read, then removed before anything goes upstream.
//
// StartDemo starts two fake providers on loopback and returns the embedded
// demo configuration that points at them.
package gw
