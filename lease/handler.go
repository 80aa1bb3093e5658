package lease

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Path is where the lifecycle route is conventionally mounted.
const Path = "/api/v1/session-leases"

// Caller is the authenticated API key behind a lifecycle request.
type Caller struct {
	// APIKeyID identifies the key; it is never sent back to the client.
	APIKeyID string
	// Scopes are the key's scopes; ScopeExclusive makes it managed.
	Scopes []string
	// AllowedConnections are the connections the key may lease.
	AllowedConnections []string
}

// Managed reports whether c's key has the ScopeExclusive scope.
func (c Caller) Managed() bool { return slices.Contains(c.Scopes, ScopeExclusive) }

// Authenticator identifies the API key behind a request. It returns
// [ErrAuthenticationRequired] when no key is presented and
// [ErrAPIKeyInvalid] when the key is unknown; any *[Error] is answered as
// it is, any other error as [ErrServiceUnavailable].
type Authenticator interface {
	Authenticate(r *http.Request) (Caller, error)
}

// AuthenticatorFunc adapts a function to [Authenticator].
type AuthenticatorFunc func(r *http.Request) (Caller, error)

// Authenticate calls f(r).
func (f AuthenticatorFunc) Authenticate(r *http.Request) (Caller, error) { return f(r) }

// Target is where an acquire may lease: the model's provider and the
// connections currently eligible for it.
type Target struct {
	// Provider is the model's provider; empty means the model names none
	// (ErrModelInvalid).
	Provider string
	// Candidates are the eligible connections in order of preference (the
	// provider's strategy and session affinity applied). The handler
	// keeps only those in the caller's allowlist. Nil means the caller's
	// whole allowlist.
	Candidates []string
}

// Resolver resolves the model of an acquire for a caller and applies the
// key's policy. Its *[Error] results are answered as they are (for example
// [ErrProviderRetired], [ErrEligibilityUnavailable] or a policy refusal);
// any other error becomes [ErrServiceUnavailable].
type Resolver interface {
	Resolve(ctx context.Context, c Caller, model string) (Target, error)
}

// ResolverFunc adapts a function to [Resolver].
type ResolverFunc func(ctx context.Context, c Caller, model string) (Target, error)

// Resolve calls f(ctx, c, model).
func (f ResolverFunc) Resolve(ctx context.Context, c Caller, model string) (Target, error) {
	return f(ctx, c, model)
}

// ConnectionInfo is what the status action may show about a connection.
type ConnectionInfo struct {
	// DisplayName is the operator-set name of the connection; empty is
	// shown as null (names generated from an e-mail or account name
	// must be left empty by the caller).
	DisplayName string
	// Provider is the provider shown; empty means the lease's provider.
	Provider string
}

// Handler limits.
const (
	DefaultMaxBodyBytes = 16 << 10
	MinMaxBodyBytes     = 1 << 10
	MaxMaxBodyBytes     = 1 << 20
)

// HandlerOptions configure [NewHandler]. A nil *HandlerOptions means all
// defaults.
type HandlerOptions struct {
	// Resolver resolves the model of an acquire. Nil means: the provider
	// is the text before the first "/" of the model (none without a "/")
	// and the candidates are the caller's whole allowlist.
	Resolver Resolver
	// Describe returns what the status action shows about a connection.
	// Nil shows a null display name and the lease's provider.
	Describe func(connection string) ConnectionInfo
	// MaxBodyBytes bounds the request body. Zero means
	// DefaultMaxBodyBytes (16 KiB); other values are clamped to
	// [MinMaxBodyBytes, MaxMaxBodyBytes].
	MaxBodyBytes int64
	// Now returns the time of each request. Nil means time.Now.
	Now func() time.Time
}

// Handler serves the lifecycle route (POST with a JSON [Command], and
// the OPTIONS preflight). Create one with [NewHandler]; it is safe for
// concurrent use.
type Handler struct {
	m       *Manager
	auth    Authenticator
	resolve Resolver
	desc    func(string) ConnectionInfo
	maxBody int64
	now     func() time.Time
}

// NewHandler returns the lifecycle route over m, authenticating with auth.
// It panics if m or auth is nil.
//
// A request is answered in this order: OPTIONS → 204 with the CORS
// headers; another method than POST → 405; authentication errors (401);
// a media type other than application/json → 415; a body over the limit
// → 413; a body that is not a [Command] → 400 LEASE_ACTION_INVALID; for
// acquire, resolution errors; a key without ScopeExclusive → 403
// LEASE_SCOPE_REQUIRED, with an empty allowlist → 403
// LEASE_KEY_CONFIGURATION_INVALID; a missing or malformed owner header →
// 400; then the action. renew, release and status answer any mismatch
// with 409 LEASE_FENCE_STALE and success with 200
// {state, generation, acquiredAt, renewedAt, expiresAt} (status adds
// connection {displayName, provider}). acquire answers with the same
// body, a 429 capacity body, or the refusals of [Manager.AcquireAt].
// No answer ever contains a connection id, API key id, owner or owner
// digest.
func NewHandler(m *Manager, auth Authenticator, opts *HandlerOptions) *Handler {
	if m == nil || auth == nil {
		panic("lease: NewHandler needs a Manager and an Authenticator")
	}
	var o HandlerOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	o.MaxBodyBytes = min(max(o.MaxBodyBytes, MinMaxBodyBytes), MaxMaxBodyBytes)
	if o.Resolver == nil {
		o.Resolver = ResolverFunc(splitModel)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Handler{m: m, auth: auth, resolve: o.Resolver, desc: o.Describe, maxBody: o.MaxBodyBytes, now: o.Now}
}

func splitModel(_ context.Context, c Caller, model string) (Target, error) {
	provider, _, ok := strings.Cut(model, "/")
	if !ok {
		provider = ""
	}
	return Target{Provider: strings.TrimSpace(provider)}, nil
}

// allowHeaders lists the request headers the route accepts from browsers.
const allowHeaders = "Authorization, Content-Type, X-OmniRoute-Lease-Owner, X-OmniRoute-Lease-Generation"

// lifecycle is the success body. It deliberately has no field for the
// connection id, API key id or owner.
type lifecycle struct {
	State      State          `json:"state"`
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
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
		WriteError(w, ErrMethodNotAllowed)
		return
	}
	body, status := h.serve(r)
	if status != nil {
		WriteError(w, status)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(body)
}

// serve runs one POST and returns the success body or the error to answer.
func (h *Handler) serve(r *http.Request) (lifecycle, error) {
	ctx := r.Context()
	caller, err := h.auth.Authenticate(r)
	if err != nil {
		return lifecycle{}, passThrough(err)
	}
	if caller.APIKeyID == "" {
		return lifecycle{}, ErrAuthenticationRequired
	}
	mt, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	if !strings.EqualFold(strings.TrimSpace(mt), "application/json") {
		return lifecycle{}, ErrContentTypeRequired
	}
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, h.maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return lifecycle{}, ErrBodyTooLarge
		}
		return lifecycle{}, ErrActionInvalid
	}
	cmd, err := ParseCommand(data)
	if err != nil {
		return lifecycle{}, err
	}
	var target Target
	if cmd.Action == ActionAcquire {
		target, err = h.resolve.Resolve(ctx, caller, cmd.Model)
		if err != nil {
			return lifecycle{}, passThrough(err)
		}
	}
	if !caller.Managed() {
		return lifecycle{}, ErrScopeRequired
	}
	if len(caller.AllowedConnections) == 0 {
		return lifecycle{}, ErrKeyConfigurationInvalid
	}
	owner, err := ParseOwnerHeader(r.Header)
	if err != nil {
		return lifecycle{}, err
	}
	now := h.now()
	holder := Holder{Owner: owner, APIKeyID: caller.APIKeyID, Generation: cmd.Generation}
	var l Lease
	switch cmd.Action {
	case ActionAcquire:
		if target.Provider == "" {
			return lifecycle{}, ErrModelInvalid
		}
		cands := allowed(target.Candidates, caller.AllowedConnections)
		l, _, err = h.m.AcquireAt(ctx, Claim{Owner: owner, APIKeyID: caller.APIKeyID, Provider: target.Provider, Candidates: cands}, now)
		if err != nil {
			return lifecycle{}, passThrough(err)
		}
	case ActionRenew:
		l, err = h.m.RenewAt(ctx, holder, now)
	case ActionRelease:
		l, err = h.m.ReleaseAt(ctx, holder, cmd.Reason, now)
	case ActionStatus:
		l, err = h.m.StatusAt(ctx, holder, now)
	}
	if err != nil {
		if errors.Is(err, ErrFenceStale) || errors.Is(err, ErrRequired) {
			return lifecycle{}, ErrFenceStale
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
	if cmd.Action == ActionStatus {
		out.Connection = h.describe(l)
	}
	return out, nil
}

func (h *Handler) describe(l Lease) *connectionDoc {
	var info ConnectionInfo
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

// passThrough keeps lease errors (*Error, *CapacityError) and hides the
// rest behind ErrServiceUnavailable.
func passThrough(err error) error {
	var le *Error
	var ce *CapacityError
	if errors.As(err, &le) || errors.As(err, &ce) {
		return err
	}
	return ErrServiceUnavailable
}
