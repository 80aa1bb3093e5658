// Package admin serves routeguard's admin REST API: the HTTP routes an
// operator or a managed client uses to look at and steer the resilience
// layers of a combo router.
//
// A user starts from these calls:
//
//	layers := combo.Config{Breakers: set, Cooldowns: tracker, Leases: leases}
//	router := combo.New(layers) // serves the traffic
//	api := admin.New(admin.Config{Layers: layers, Authorize: checkToken, LeaseAuth: keys})
//	mux.Handle("/api/", api) // the seed's admin routes, the lease route included
//
//	// or the lease lifecycle alone:
//	mux.Handle(admin.LeasePath, admin.NewLeaseHandler(leases, keys, admin.LeaseConfig{}))
//
// [New] serves the seed's management routes over the layers of a
// combo.Config (GET/DELETE /api/monitoring/health, POST
// /api/resilience/reset, GET/DELETE /api/resilience/model-cooldowns,
// GET/POST /api/resilience/cooldowns; see [Handler]) and, when
// Layers.Leases and LeaseAuth are set, the session lease lifecycle at
// [LeasePath]. [NewLeaseHandler] serves the lease lifecycle alone, over a
// [lease.Manager]. [WriteLeaseError] answers a lease refusal (for example
// one a chat route gets from package lease) in the lease wire format, and
// [WriteBreakerOpen] a provider circuit breaker's refusal with the 503
// provider_circuit_open envelope.
//
// # The model
//
// The package renders; the layer packages decide. Every route reads a
// layer's state through its Snapshot/Status methods and changes it through
// its Reset/Clear methods, at the handler's clock ([Config.Now]); a refusal
// of a layer keeps its code and HTTP status on the layer's own typed error
// (*lease.Error, *breaker.Error) and this package adds the message and the
// body shape. The management routes answer errors as
// {"error": message, "code": code}; the lease route as
// {"error":{"message","type":"lease_error","code"}}. Both are an *[Error]
// (Code, Status, Message), which an authorizer, a [LeaseAuthenticator] or a
// [LeaseResolver] may also return to choose an answer; the sentinels
// ([ErrUnauthorized], [ErrForbidden], [ErrLeaseAPIKeyInvalid], …) name the
// refusals the contract gives a fixed answer.
//
// Authorization is the caller's: [Config.Authorize] decides every
// management request (nil refuses them all; the anonymous health answer
// shows only {"status"}), and the lease route authenticates API keys with
// [Config.LeaseAuth]. The lease route's answers never contain a
// connection id, an API key id, an owner or an owner digest, and no answer
// carries an internal error text.
//
// # The zero value
//
// admin.New(admin.Config{}) serves every route over no layer and refuses
// every management request: a nil layer is left out of the health report
// and its routes answer with empty lists, the lease route answers 404.
// Request bodies are limited to 64 KiB (16 KiB on the lease route).
//
// # Concurrency and cost
//
// Handlers are safe for concurrent use and start no goroutine. A request
// reads the layers it concerns through their snapshot and status calls (the
// full health report reads every layer) and encodes one JSON answer;
// nothing is cached between requests.
//
// Nothing in routeguard imports this package: a program that serves no
// admin API does not link it.
package admin
