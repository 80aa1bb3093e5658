package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/routeguard/routeguard/lease"
)

// LeasePath is where the lease lifecycle route is conventionally mounted.
const LeasePath = "/api/v1/session-leases"

// ScopeLeaseExclusive is the API key scope that makes a key managed: its
// sessions must hold a lease.
const ScopeLeaseExclusive = "lease:exclusive"

// ValidateLeaseKeyPolicy checks an API key's configuration when it is
// created or changed: a key whose scopes include [ScopeLeaseExclusive]
// must have at least one allowed connection, else an *[Error] 400
// LEASE_KEY_POLICY_INVALID matching [ErrLeaseKeyPolicyInvalid].
func ValidateLeaseKeyPolicy(scopes, allowedConnections []string) error {
	if slices.Contains(scopes, ScopeLeaseExclusive) && len(allowedConnections) == 0 {
		w := leaseWireFor(ErrLeaseKeyPolicyInvalid)
		return &Error{Code: w.code, Status: w.status, Message: w.message}
	}
	return nil
}

// LeaseCaller is the authenticated API key behind a lifecycle request.
type LeaseCaller struct {
	// APIKeyID identifies the key; it is never sent back to the client.
	APIKeyID string
	// Scopes are the key's scopes; ScopeLeaseExclusive makes it managed.
	Scopes []string
	// AllowedConnections are the connections the key may lease.
	AllowedConnections []string
}

// Managed reports whether c's key has the ScopeLeaseExclusive scope.
func (c LeaseCaller) Managed() bool { return slices.Contains(c.Scopes, ScopeLeaseExclusive) }

// LeaseAuthenticator identifies the API key behind a request. It returns
// [ErrLeaseAuthenticationRequired] when no key is presented and
// [ErrLeaseAPIKeyInvalid] when the key is unknown; an *[Error] or a
// refusal of package lease is answered as it is, any other error as 503
// LEASE_SERVICE_UNAVAILABLE.
type LeaseAuthenticator interface {
	Authenticate(r *http.Request) (LeaseCaller, error)
}

// LeaseAuthenticatorFunc adapts a function to [LeaseAuthenticator].
type LeaseAuthenticatorFunc func(r *http.Request) (LeaseCaller, error)

// Authenticate calls f(r).
func (f LeaseAuthenticatorFunc) Authenticate(r *http.Request) (LeaseCaller, error) { return f(r) }

// LeaseTarget is where an acquire may lease: the model's provider and the
// connections currently eligible for it.
type LeaseTarget struct {
	// Provider is the model's provider; empty means the model names none
	// (400 LEASE_MODEL_INVALID).
	Provider string
	// Candidates are the eligible connections in order of preference (the
	// provider's strategy and session affinity applied). The handler
	// keeps only those in the caller's allowlist. Nil means the caller's
	// whole allowlist.
	Candidates []string
}

// LeaseResolver resolves the model of an acquire for a caller and applies
// the key's policy. Its refusals are answered as they are: the package's
// sentinels ([ErrLeaseProviderRetired], [ErrLeaseEligibilityUnavailable],
// [ErrLeaseModelInvalid], …), refusals of package lease, or an *[Error]
// of the resolver's choice (a policy refusal); any other error becomes
// 503 LEASE_SERVICE_UNAVAILABLE.
type LeaseResolver interface {
	Resolve(ctx context.Context, c LeaseCaller, model string) (LeaseTarget, error)
}

// LeaseResolverFunc adapts a function to [LeaseResolver].
type LeaseResolverFunc func(ctx context.Context, c LeaseCaller, model string) (LeaseTarget, error)

// Resolve calls f(ctx, c, model).
func (f LeaseResolverFunc) Resolve(ctx context.Context, c LeaseCaller, model string) (LeaseTarget, error) {
	return f(ctx, c, model)
}

// LeaseConnection is what the status action may show about a connection.
type LeaseConnection struct {
	// DisplayName is the operator-set name of the connection; empty is
	// shown as null (names generated from an e-mail or account name
	// must be left empty by the caller).
	DisplayName string
	// Provider is the provider shown; empty means the lease's provider.
	Provider string
}

// Limits of the lease route's request body.
const (
	defaultLeaseMaxBody = 16 << 10
	minMaxBodyBytes     = 1 << 10
	maxMaxBodyBytes     = 1 << 20
)

// LeaseConfig configures [NewLeaseHandler]. The zero value means every
// default.
type LeaseConfig struct {
	// Resolver resolves the model of an acquire. Nil means: the provider
	// is the text before the first "/" of the model (none without a "/")
	// and the candidates are the caller's whole allowlist.
	Resolver LeaseResolver
	// Describe returns what the status action shows about a connection.
	// Nil shows a null display name and the lease's provider.
	Describe func(connection string) LeaseConnection
	// MaxBodyBytes bounds the request body. Default 16 KiB; range
	// 1 KiB..1 MiB (other values are clamped); zero or negative means the
	// default.
	MaxBodyBytes int64
	// Now returns the time of each request. Nil means time.Now (under
	// [New], the admin API's clock).
	Now func() time.Time
}

// Normalize returns c with every default filled in: MaxBodyBytes clamped
// into its range, the default Resolver, Now time.Now. Describe stays nil
// when unset (a null display name). It never modifies c;
// [NewLeaseHandler] calls it.
func (c LeaseConfig) Normalize() LeaseConfig {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = defaultLeaseMaxBody
	}
	c.MaxBodyBytes = min(max(c.MaxBodyBytes, minMaxBodyBytes), maxMaxBodyBytes)
	if c.Resolver == nil {
		c.Resolver = LeaseResolverFunc(splitModel)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// LeaseHandler serves the lease lifecycle route (POST with a JSON
// command, and the OPTIONS preflight). Create one with [NewLeaseHandler];
// it is safe for concurrent use.
type LeaseHandler struct {
	m       *lease.Manager
	auth    LeaseAuthenticator
	resolve LeaseResolver
	desc    func(string) LeaseConnection
	maxBody int64
	now     func() time.Time
}

// NewLeaseHandler returns the lease lifecycle route over m, authenticating
// with auth and configured by cfg (the zero LeaseConfig means every
// default). It panics if m or auth is nil.
//
// The request bodies are
//
//	{"action":"acquire","model":"<provider/model>"}
//	{"action":"renew","generation":N}
//	{"action":"release","generation":N,"reason":"OWNER_EXIT"|"CLIENT_CANCELLED"}
//	{"action":"status","generation":N}
//
// where the model is trimmed and 1..512 characters, and N is a JSON
// integer written without sign, fraction or exponent, 1..2^53−1 (an
// acquire may carry one; it is validated and ignored). Bad JSON, other
// types, unknown or misplaced fields, null values and trailing data give
// 400 LEASE_ACTION_INVALID. The owner token comes in the header
// X-OmniRoute-Lease-Owner.
//
// A request is answered in this order: OPTIONS → 204 with the CORS
// headers; another method than POST → 405; authentication errors (401);
// a media type other than application/json → 415; a body over the limit
// → 413 LEASE_BODY_TOO_LARGE; a body that is not a command → 400
// LEASE_ACTION_INVALID; for acquire, resolution errors; a key without
// ScopeLeaseExclusive → 403
// LEASE_SCOPE_REQUIRED, with an empty allowlist → 403
// LEASE_KEY_CONFIGURATION_INVALID; a missing or malformed owner header →
// 400; then the action. renew, release and status answer any mismatch
// with 409 LEASE_FENCE_STALE and success with 200
// {state, generation, acquiredAt, renewedAt, expiresAt} (status adds
// connection {displayName, provider}). acquire answers with the same
// body, a 429 capacity body ([WriteLeaseError]), or the refusals of
// [lease.Manager.AcquireAt]. Every error answer is written by
// [WriteLeaseError]. No answer ever contains a connection id, API key id,
// owner or owner digest.
func NewLeaseHandler(m *lease.Manager, auth LeaseAuthenticator, cfg LeaseConfig) *LeaseHandler {
	if m == nil || auth == nil {
		panic("admin: NewLeaseHandler needs a Manager and an Authenticator")
	}
	c := cfg.Normalize()
	return &LeaseHandler{m: m, auth: auth, resolve: c.Resolver, desc: c.Describe, maxBody: c.MaxBodyBytes, now: c.Now}
}

func splitModel(_ context.Context, c LeaseCaller, model string) (LeaseTarget, error) {
	provider, _, ok := strings.Cut(model, "/")
	if !ok {
		provider = ""
	}
	return LeaseTarget{Provider: strings.TrimSpace(provider)}, nil
}

// allowHeaders lists the request headers the route accepts from browsers.
const allowHeaders = "Authorization, Content-Type, X-OmniRoute-Lease-Owner, X-OmniRoute-Lease-Generation"

// lifecycle is the success body. It deliberately has no field for the
// connection id, API key id or owner.
type lifecycle struct {
	State      lease.State    `json:"state"`
	Generation uint64         `json:"generation"`
	AcquiredAt string         `json:"acquiredAt"`
	RenewedAt  string         `json:"renewedAt"`
	ExpiresAt  string         `json:"expiresAt"`
	Connection *connectionDoc `json:"connection,omitempty"`
}

type connectionDoc struct {
	DisplayName *string `json:"displayName"`
	Provider    string  `json:"provider"`
}

// timeFormat renders instants like JavaScript's Date.toISOString.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

func stamp(t time.Time) string { return t.UTC().Format(timeFormat) }

// ServeHTTP implements http.Handler.
func (h *LeaseHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodOptions:
		hd := w.Header()
		hd.Set("Allow", "POST, OPTIONS")
		hd.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
		hd.Set("Access-Control-Allow-Headers", allowHeaders)
		w.WriteHeader(http.StatusNoContent)
		return
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "POST, OPTIONS")
		WriteLeaseError(w, errMethod)
		return
	}
	body, status := h.serve(r)
	if status != nil {
		WriteLeaseError(w, status)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(body)
}

// serve runs one POST and returns the success body or the error to answer.
func (h *LeaseHandler) serve(r *http.Request) (lifecycle, error) {
	ctx := r.Context()
	caller, err := h.auth.Authenticate(r)
	if err != nil {
		return lifecycle{}, passThrough(err)
	}
	if caller.APIKeyID == "" {
		return lifecycle{}, ErrLeaseAuthenticationRequired
	}
	mt, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	if !strings.EqualFold(strings.TrimSpace(mt), "application/json") {
		return lifecycle{}, errContentType
	}
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, h.maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return lifecycle{}, errBodyTooLarge
		}
		return lifecycle{}, errActionInvalid
	}
	cmd, err := parseCommand(data)
	if err != nil {
		return lifecycle{}, err
	}
	var target LeaseTarget
	if cmd.Action == actionAcquire {
		target, err = h.resolve.Resolve(ctx, caller, cmd.Model)
		if err != nil {
			return lifecycle{}, passThrough(err)
		}
	}
	if !caller.Managed() {
		return lifecycle{}, errScopeRequired
	}
	if len(caller.AllowedConnections) == 0 {
		return lifecycle{}, errKeyConfigEmpty
	}
	owner, err := ownerHeader(r.Header)
	if err != nil {
		return lifecycle{}, err
	}
	now := h.now()
	holder := lease.Holder{Owner: owner, APIKeyID: caller.APIKeyID, Generation: cmd.Generation}
	var l lease.Lease
	switch cmd.Action {
	case actionAcquire:
		if target.Provider == "" {
			return lifecycle{}, ErrLeaseModelInvalid
		}
		cands := allowed(target.Candidates, caller.AllowedConnections)
		holder.Generation = 0
		l, err = h.m.AcquireAt(ctx, holder, target.Provider, cands, now)
		if err != nil {
			return lifecycle{}, passThrough(err)
		}
	case actionRenew:
		l, err = h.m.RenewAt(ctx, holder, now)
	case actionRelease:
		l, err = h.m.ReleaseAt(ctx, holder, cmd.Reason, now)
	case actionStatus:
		l, err = h.m.StatusAt(ctx, holder, now)
	}
	if err != nil {
		if errors.Is(err, lease.ErrFenceStale) || errors.Is(err, lease.ErrRequired) {
			return lifecycle{}, lease.ErrFenceStale
		}
		return lifecycle{}, passThrough(err)
	}
	out := lifecycle{
		State:      l.State,
		Generation: l.Generation,
		AcquiredAt: stamp(l.AcquiredAt),
		RenewedAt:  stamp(l.RenewedAt),
		ExpiresAt:  stamp(l.ExpiresAt),
	}
	if cmd.Action == actionStatus {
		out.Connection = h.describe(l)
	}
	return out, nil
}

func (h *LeaseHandler) describe(l lease.Lease) *connectionDoc {
	var info LeaseConnection
	if h.desc != nil {
		info = h.desc(l.Connection)
	}
	doc := &connectionDoc{Provider: info.Provider}
	if doc.Provider == "" {
		doc.Provider = l.Provider
	}
	if info.DisplayName != "" {
		doc.DisplayName = &info.DisplayName
	}
	return doc
}

// allowed returns the candidates (nil: the allowlist) that are in the
// allowlist, in the candidates' order, without duplicates.
func allowed(cands, allow []string) []string {
	if cands == nil {
		cands = allow
	}
	out := make([]string, 0, len(cands))
	for _, c := range cands {
		if c != "" && slices.Contains(allow, c) && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// ownerHeader reads the owner token from the lifecycle request: a missing
// or empty header gives LEASE_CONTEXT_REQUIRED, a malformed or repeated one
// LEASE_CONTEXT_INVALID.
func ownerHeader(h http.Header) (lease.OwnerHash, error) {
	vs := h[lease.HeaderOwner]
	if len(vs) > 1 {
		// Joined, repeated values are never a well-formed token, so
		// ParseOwner answers LEASE_CONTEXT_INVALID.
		return lease.ParseOwner(strings.Join(vs, ","))
	}
	if len(vs) == 0 {
		return lease.ParseOwner("")
	}
	return lease.ParseOwner(vs[0])
}
