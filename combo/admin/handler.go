package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lockout"
)

// Paths of the management routes served by the handler of [New]; the
// lease route is at [LeasePath].
const (
	HealthPath         = "/api/monitoring/health"
	ResetPath          = "/api/resilience/reset"
	ModelCooldownsPath = "/api/resilience/model-cooldowns"
	CooldownsPath      = "/api/resilience/cooldowns"
)

// defaultMaxBody is the default limit on a management request body.
const defaultMaxBody = 64 << 10

// The answers to a refused authorization.
var (
	unauthorized = Error{Code: CodeUnauthorized, Status: http.StatusUnauthorized, Message: "Unauthorized"}
	forbidden    = Error{Code: CodeForbidden, Status: http.StatusForbidden, Message: "Forbidden"}
)

// Config configures the admin API. The zero value serves every route over
// no layer, refusing every management request; [New] calls Normalize.
type Config struct {
	// Layers are the layers the API shows and steers: the combo.Config the
	// router was built with. Only its layer fields are read (Breakers,
	// Gate, Cooldowns, Lockouts, Leases, Queue, Pins) and its Now when
	// Config.Now is nil. Every layer is optional: a nil layer is left out
	// of the health report and its routes answer with empty lists (or 404
	// for the lease route).
	Layers combo.Config

	// Authorize decides whether a request may use the management routes;
	// a nil error means yes. Nil Authorize refuses every management
	// request (the anonymous health answer stays available). It returns
	// [ErrUnauthorized] (401) or [ErrForbidden] (403, also for any error
	// with an HTTPStatus() int method giving 403), or an *[Error] with a
	// 4xx status to choose the answer; any other error gives 401.
	Authorize func(*http.Request) error

	// LeaseAuth authenticates the API keys of the session lease route.
	// The route is mounted at [LeasePath] when both Layers.Leases and
	// LeaseAuth are set; it does its own authentication and does not call
	// Authorize.
	LeaseAuth LeaseAuthenticator
	// Lease configures the lease route (see [LeaseConfig]); the zero value
	// means its defaults, with this Config's clock.
	Lease LeaseConfig

	// MaxBodyBytes bounds the management routes' request bodies. Default
	// 64 KiB; range 1 KiB..1 MiB (other values, negative ones included,
	// are clamped); zero means the default.
	MaxBodyBytes int64
	// Now is the clock of the answers. Nil means Layers.Now, and
	// time.Now when that is nil too.
	Now func() time.Time
}

// Normalize returns c with every default filled in: MaxBodyBytes clamped
// into its range, Now (Layers.Now or time.Now), and Lease normalized with
// that clock when its own Now is nil. It never modifies c; [New] calls it.
func (c Config) Normalize() Config {
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = defaultMaxBody
	}
	c.MaxBodyBytes = min(max(c.MaxBodyBytes, minMaxBodyBytes), maxMaxBodyBytes)
	if c.Now == nil {
		c.Now = c.Layers.Now
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Lease.Now == nil {
		c.Lease.Now = c.Now
	}
	c.Lease = c.Lease.Normalize()
	return c
}

// Handler is the admin API: health, breaker reset, model lockouts,
// connection cooldowns and session leases over HTTP. Create one with
// [New]; it is safe for concurrent use and starts no goroutine.
//
// Routes:
//
//	GET    /api/monitoring/health          anonymous: {status}; authorized: the full report
//	DELETE /api/monitoring/health          reset every breaker
//	POST   /api/resilience/reset           reset every breaker
//	GET    /api/resilience/model-cooldowns list active model lockouts
//	DELETE /api/resilience/model-cooldowns clear one: {provider, connection, model}
//	GET    /api/resilience/cooldowns       list cooling and terminal connections
//	POST   /api/resilience/cooldowns       lift cooldowns: {connectionIds} or {all: true, provider?}
//	POST   /api/v1/session-leases          the lease lifecycle (see NewLeaseHandler)
//
// Model lockouts are listed (in the health report and by the
// model-cooldowns route) as {provider, connectionId, model, scope, reason,
// lockedAt, until, remainingMs, failureCount}, with lockedAt an RFC 3339
// time and until in Unix milliseconds; an exact-model lock lists its model
// as "exact:<model>".
//
// The full health report holds the breaker counts (circuitBreakers, where a
// degraded breaker counts as closed), each provider's breaker
// (providerHealth, providerBreakers; providers named test-* or test_* are
// left out), the window gate's entries, the model lockouts, the connection
// counts and the cooling or terminal connections (connectionStates), the
// queues, the session pins and the active leases. A layer that cannot
// answer turns status to "degraded" with an error message; the answer is
// still 200.
//
// Every error of a management route is a JSON answer
// {"error": message, "code": code} (see [Error] and the CodeX constants)
// with a 4xx status: 401/403 from the authorizer, 404, 405 with Allow, 413
// for an oversized body, 415 for a body that is not application/json, 400
// for bad JSON, unknown fields, trailing data or an invalid request.
type Handler struct {
	cfg    Config
	l      combo.Config
	max    int64
	leases http.Handler
}

// New returns the admin API over cfg.Layers.
func New(cfg Config) *Handler {
	c := cfg.Normalize()
	a := &Handler{cfg: c, l: c.Layers, max: c.MaxBodyBytes}
	if c.Layers.Leases != nil && c.LeaseAuth != nil {
		a.leases = NewLeaseHandler(c.Layers.Leases, c.LeaseAuth, c.Lease)
	}
	return a
}

func (a *Handler) now() time.Time { return a.cfg.Now() }

// ServeHTTP implements http.Handler.
func (a *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case HealthPath:
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			a.health(w, r)
		case http.MethodDelete:
			a.guard(w, r, a.deleteHealth)
		default:
			methodNotAllowed(w, "GET, HEAD, DELETE")
		}
	case ResetPath:
		if r.Method != http.MethodPost {
			methodNotAllowed(w, "POST")
			return
		}
		a.guard(w, r, a.reset)
	case ModelCooldownsPath:
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			a.guard(w, r, a.listLockouts)
		case http.MethodDelete:
			a.guard(w, r, a.clearLockout)
		default:
			methodNotAllowed(w, "GET, HEAD, DELETE")
		}
	case CooldownsPath:
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			a.guard(w, r, a.listCooldowns)
		case http.MethodPost:
			a.guard(w, r, a.clearCooldowns)
		default:
			methodNotAllowed(w, "GET, HEAD, POST")
		}
	case LeasePath:
		if a.leases == nil {
			writeError(w, &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: "Session leases are not enabled"})
			return
		}
		a.leases.ServeHTTP(w, r)
	default:
		writeError(w, &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: "Not found"})
	}
}

// authorize runs the caller's authorizer and maps its refusal to an
// *Error.
func (a *Handler) authorize(r *http.Request) *Error {
	if a.cfg.Authorize == nil {
		return &unauthorized
	}
	err := a.cfg.Authorize(r)
	if err == nil {
		return nil
	}
	var ae *Error
	if errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 {
		return ae
	}
	if errors.Is(err, ErrForbidden) {
		return &forbidden
	}
	var hs interface{ HTTPStatus() int }
	if errors.As(err, &hs) {
		if s := hs.HTTPStatus(); s == http.StatusForbidden {
			return &forbidden
		}
	}
	return &unauthorized
}

func (a *Handler) guard(w http.ResponseWriter, r *http.Request, h func(http.ResponseWriter, *http.Request)) {
	if err := a.authorize(r); err != nil {
		writeError(w, err)
		return
	}
	h(w, r)
}

// --- health ---

// breakerSummary counts breakers by state the way the health page shows
// them: Degraded breakers count as closed.
type breakerSummary struct {
	Open     int `json:"open"`
	HalfOpen int `json:"halfOpen"`
	Closed   int `json:"closed"`
	Total    int `json:"total"`
}

// summarizeBreakers counts the records of a breaker snapshot.
func summarizeBreakers(recs []breaker.Record) breakerSummary {
	sum := breakerSummary{Total: len(recs)}
	for _, r := range recs {
		switch r.State {
		case breaker.Open:
			sum.Open++
		case breaker.HalfOpen:
			sum.HalfOpen++
		default:
			sum.Closed++
		}
	}
	return sum
}

// healthBody is the full health report.
type healthBody struct {
	Status           string                    `json:"status"`
	Error            string                    `json:"error,omitempty"`
	Timestamp        time.Time                 `json:"timestamp"`
	CircuitBreakers  breakerSummary            `json:"circuitBreakers"`
	ProviderHealth   map[string]providerHealth `json:"providerHealth"`
	ProviderBreakers []breakerJSON             `json:"providerBreakers"`
	ProviderCooldown []gateJSON                `json:"providerCooldowns"`
	Lockouts         []lockoutJSON             `json:"lockouts"`
	Connections      connectionsJSON           `json:"connections"`
	ConnectionStates []connectionJSON          `json:"connectionStates"` // cooling and terminal connections
	Queues           []queueJSON               `json:"queues"`
	Sessions         sessionsJSON              `json:"sessions"`
	Leases           leasesJSON                `json:"leases"`
}

type providerHealth struct {
	State       breaker.State `json:"state"`
	Failures    int           `json:"failures"`
	LastFailure *time.Time    `json:"lastFailure"`
}

type breakerJSON struct {
	Provider      string        `json:"provider"`
	State         breaker.State `json:"state"`
	Failures      int           `json:"failures"`
	LastFailure   *time.Time    `json:"lastFailure"`
	RetryAfterMs  int64         `json:"retryAfterMs"`
	OpenCycles    int           `json:"openCycles"`
	ProbeInFlight bool          `json:"probeInFlight"`
}

type gateJSON struct {
	Provider    string     `json:"provider"`
	Connection  string     `json:"connectionId,omitempty"`
	Failures    int        `json:"failures"`
	LastFailure *time.Time `json:"lastFailure"`
	Until       *time.Time `json:"until"`
}

type lockoutJSON struct {
	Provider     string         `json:"provider"`
	Connection   string         `json:"connectionId"`
	Model        string         `json:"model"`
	Scope        string         `json:"scope"`
	Reason       lockout.Reason `json:"reason"`
	LockedAt     time.Time      `json:"lockedAt"`
	Until        int64          `json:"until"` // Unix milliseconds, as the spec lists it
	RemainingMs  int64          `json:"remainingMs"`
	FailureCount int            `json:"failureCount"`
}

type connectionsJSON struct {
	Tracked  int `json:"tracked"`
	Cooling  int `json:"cooling"`
	Terminal int `json:"terminal"`
}

type connectionJSON struct {
	Connection  string     `json:"connectionId"`
	Provider    string     `json:"provider"`
	State       string     `json:"state"`
	Terminal    bool       `json:"terminal"`
	Until       *time.Time `json:"until"`
	RemainingMs int64      `json:"remainingMs"`
	Reason      string     `json:"reason"`
	Level       int        `json:"backoffLevel"`
	ErrorStatus int        `json:"errorStatus,omitempty"`
	LastError   string     `json:"lastError,omitempty"`
}

type queueJSON struct {
	Key          string     `json:"key"`
	Running      int        `json:"running"`
	Waiting      int        `json:"waiting"`
	Cap          int        `json:"cap"`
	BlockedUntil *time.Time `json:"blockedUntil"`
}

type sessionsJSON struct {
	Pins int `json:"pins"`
}

type leasesJSON struct {
	Active int `json:"active"`
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func ms(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// hiddenProvider reports providers that health reports leave out.
func hiddenProvider(p string) bool {
	return strings.HasPrefix(p, "test-") || strings.HasPrefix(p, "test_")
}

func (a *Handler) health(w http.ResponseWriter, r *http.Request) {
	if a.authorize(r) != nil {
		writeJSON(w, http.StatusOK, struct {
			Status string `json:"status"`
		}{"healthy"})
		return
	}
	writeJSON(w, http.StatusOK, a.report(r.Context()))
}

// report builds the full health report.
func (a *Handler) report(ctx context.Context) healthBody {
	now := a.now()
	h := healthBody{
		Status:           "healthy",
		Timestamp:        now.UTC(),
		ProviderHealth:   map[string]providerHealth{},
		ProviderBreakers: []breakerJSON{},
		ProviderCooldown: []gateJSON{},
		Lockouts:         []lockoutJSON{},
		Queues:           []queueJSON{},
	}
	if b := a.l.Breakers; b != nil {
		snap := b.SnapshotAt(now)
		h.CircuitBreakers = summarizeBreakers(snap)
		for _, s := range snap {
			if hiddenProvider(s.Provider) {
				continue
			}
			h.ProviderHealth[s.Provider] = providerHealth{State: s.State, Failures: s.Failures, LastFailure: optTime(s.LastFailure)}
			h.ProviderBreakers = append(h.ProviderBreakers, breakerJSON{
				Provider: s.Provider, State: s.State, Failures: s.Failures, LastFailure: optTime(s.LastFailure),
				RetryAfterMs: ms(s.RetryAfter), OpenCycles: s.OpenCycles, ProbeInFlight: s.ProbeInFlight,
			})
		}
	}
	if g := a.l.Gate; g != nil { // a disabled gate has no entries
		for _, s := range g.SnapshotAt(now) {
			h.ProviderCooldown = append(h.ProviderCooldown, gateJSON{Provider: s.Provider, Connection: s.Connection,
				Failures: s.Failures, LastFailure: optTime(s.LastFailure), Until: optTime(s.Until)})
		}
	}
	h.Lockouts = a.lockouts(now)
	h.ConnectionStates = a.unavailable(now)
	if c := a.l.Cooldowns; c != nil {
		for _, in := range c.SnapshotAt(now) {
			h.Connections.Tracked++
			switch {
			case in.Status.State.Terminal():
				h.Connections.Terminal++
			case in.Status.State == cooldown.Cooling:
				h.Connections.Cooling++
			}
		}
	}
	if q := a.l.Queue; q != nil {
		for _, k := range q.SnapshotAt(now) {
			h.Queues = append(h.Queues, queueJSON{Key: k.Key, Running: k.Running, Waiting: k.Waiting, Cap: k.Cap,
				BlockedUntil: optTime(k.BlockedUntil)})
		}
	}
	if p := a.l.Pins; p != nil {
		h.Sessions.Pins = len(p.SnapshotAt(now).Pins)
	}
	if m := a.l.Leases; m != nil {
		ls, err := m.SnapshotAt(ctx, now)
		if err != nil {
			h.Status, h.Error = "degraded", "Health check partially unavailable"
		}
		h.Leases.Active = len(ls)
	}
	return h
}

func (a *Handler) deleteHealth(w http.ResponseWriter, r *http.Request) {
	if !a.readBody(w, r, &struct{}{}, false) {
		return
	}
	n := a.resetBreakers()
	writeJSON(w, http.StatusOK, struct {
		Success    bool   `json:"success"`
		Message    string `json:"message"`
		ResetCount int    `json:"resetCount"`
	}{true, "Reset " + strconv.Itoa(n) + " circuit breaker(s) to healthy state", n})
}

// --- reset ---

func (a *Handler) resetBreakers() int {
	if a.l.Breakers == nil {
		return 0
	}
	return a.l.Breakers.ResetAllAt(a.now())
}

func (a *Handler) reset(w http.ResponseWriter, r *http.Request) {
	if !a.readBody(w, r, &struct{}{}, false) {
		return
	}
	n := a.resetBreakers()
	writeJSON(w, http.StatusOK, struct {
		OK         bool   `json:"ok"`
		ResetCount int    `json:"resetCount"`
		Message    string `json:"message"`
	}{true, n, "Reset " + strconv.Itoa(n) + " circuit breaker(s)"})
}

// --- model lockouts ---

func (a *Handler) lockouts(now time.Time) []lockoutJSON {
	out := []lockoutJSON{}
	if a.l.Lockouts == nil {
		return out
	}
	for _, in := range a.l.Lockouts.SnapshotAt(now) {
		out = append(out, lockoutJSON{Provider: in.Provider, Connection: in.Connection, Model: in.Model,
			Scope: in.Scope.String(), Reason: in.Reason, LockedAt: in.LockedAt.UTC(), Until: in.Until.UnixMilli(),
			RemainingMs: ms(in.Remaining), FailureCount: in.FailureCount})
	}
	return out
}

func (a *Handler) listLockouts(w http.ResponseWriter, r *http.Request) {
	ls := a.lockouts(a.now())
	writeJSON(w, http.StatusOK, struct {
		Lockouts []lockoutJSON `json:"lockouts"`
		Total    int           `json:"total"`
	}{ls, len(ls)})
}

// modelLockRequest is the body of DELETE /api/resilience/model-cooldowns.
type modelLockRequest struct {
	Provider   string `json:"provider"`
	Connection string `json:"connection"`
	Model      string `json:"model"`
}

func (a *Handler) clearLockout(w http.ResponseWriter, r *http.Request) {
	var req modelLockRequest
	if !a.readBody(w, r, &req, true) {
		return
	}
	req.Provider, req.Connection, req.Model = strings.TrimSpace(req.Provider), strings.TrimSpace(req.Connection), strings.TrimSpace(req.Model)
	if req.Provider == "" || req.Model == "" {
		writeError(w, invalid("provider and model are required"))
		return
	}
	cleared := false
	if a.l.Lockouts != nil {
		cleared = a.l.Lockouts.ClearAt(req.Provider, req.Connection, req.Model, a.now())
	}
	writeJSON(w, http.StatusOK, struct {
		Cleared    bool   `json:"cleared"`
		Provider   string `json:"provider"`
		Connection string `json:"connection"`
		Model      string `json:"model"`
	}{cleared, req.Provider, req.Connection, req.Model})
}

// --- connection cooldowns ---

// unavailable lists the connections that are cooling or terminal at now.
func (a *Handler) unavailable(now time.Time) []connectionJSON {
	out := []connectionJSON{}
	if c := a.l.Cooldowns; c != nil {
		for _, in := range c.SnapshotAt(now) {
			if in.Status.State == cooldown.Available {
				continue
			}
			out = append(out, connectionJSON{
				Connection: in.Conn, Provider: in.Provider, State: in.Status.State.String(),
				Terminal: in.Status.State.Terminal(), Until: optTime(in.Status.Until), RemainingMs: ms(in.Status.Wait(now)),
				Reason: in.Status.Reason, Level: in.Status.Level, ErrorStatus: in.ErrorStatus, LastError: in.LastError,
			})
		}
	}
	return out
}

func (a *Handler) listCooldowns(w http.ResponseWriter, r *http.Request) {
	out := a.unavailable(a.now())
	writeJSON(w, http.StatusOK, struct {
		Connections []connectionJSON `json:"connections"`
		Total       int              `json:"total"`
	}{out, len(out)})
}

// cooldownsRequest is the body of POST /api/resilience/cooldowns.
type cooldownsRequest struct {
	ConnectionIDs []string `json:"connectionIds"`
	All           bool     `json:"all"`
	Provider      string   `json:"provider"`
}

// cooldownsResult is the answer of POST /api/resilience/cooldowns.
type cooldownsResult struct {
	Cleared         int `json:"cleared"`
	Unchanged       int `json:"unchanged"`
	SkippedTerminal int `json:"skippedTerminal"`
	LockoutsCleared int `json:"lockoutsCleared"`
}

func (a *Handler) clearCooldowns(w http.ResponseWriter, r *http.Request) {
	var req cooldownsRequest
	if !a.readBody(w, r, &req, true) {
		return
	}
	req.Provider = strings.TrimSpace(req.Provider)
	switch {
	case req.All && req.ConnectionIDs != nil:
		writeError(w, invalid("give either connectionIds or all, not both"))
		return
	case !req.All && req.Provider != "":
		writeError(w, invalid("provider is only valid with all: true"))
		return
	case !req.All && len(req.ConnectionIDs) == 0:
		writeError(w, invalid("connectionIds must name at least one connection, or set all: true"))
		return
	}
	ids := map[string]bool{}
	for _, id := range req.ConnectionIDs {
		id = strings.TrimSpace(id)
		if id == "" {
			writeError(w, invalid("connectionIds must not contain empty ids"))
			return
		}
		ids[id] = true
	}
	writeJSON(w, http.StatusOK, a.clearAt(ids, req.All, req.Provider, a.now()))
}

// clearAt lifts, at now, the cooldowns and model lockouts of the
// connections in ids, or (with all) of every tracked connection, narrowed to
// provider when it is not empty. Terminal connections are counted and left
// alone.
func (a *Handler) clearAt(ids map[string]bool, all bool, provider string, now time.Time) cooldownsResult {
	var res cooldownsResult
	picked := func(conn, prov string) bool {
		if all {
			return provider == "" || strings.EqualFold(prov, provider)
		}
		return ids[conn]
	}
	if c := a.l.Cooldowns; c != nil {
		var candidates []string
		if all {
			for _, in := range c.SnapshotAt(now) {
				if picked(in.Conn, in.Provider) {
					candidates = append(candidates, in.Conn)
				}
			}
		} else {
			for id := range ids {
				candidates = append(candidates, id)
			}
			sort.Strings(candidates)
		}
		var lift []string
		for _, id := range candidates {
			s := c.StatusAt(id, now)
			switch {
			case s.State.Terminal():
				res.SkippedTerminal++
			case s.State == cooldown.Cooling:
				res.Cleared++
				lift = append(lift, id)
			default:
				res.Unchanged++
				lift = append(lift, id) // clears a stale backoff level too
			}
		}
		if len(lift) > 0 {
			c.ClearAt(cooldown.Selector{IDs: lift}, now)
		}
	} else if !all {
		res.Unchanged = len(ids)
	}
	if l := a.l.Lockouts; l != nil {
		for _, in := range l.SnapshotAt(now) {
			if picked(in.Connection, in.Provider) && l.ClearAt(in.Provider, in.Connection, in.Model, now) {
				res.LockoutsCleared++
			}
		}
	}
	return res
}

// --- plumbing ---

func invalid(msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: msg}
}

// readBody reads a JSON body into dst, strictly: application/json only, at
// most the size limit, no unknown fields, no trailing data. An empty body is
// accepted when required is false. It answers the error itself and reports
// whether the handler may go on.
func (a *Handler) readBody(w http.ResponseWriter, r *http.Request, dst any, required bool) bool {
	if required && !isJSON(r.Header.Get("Content-Type")) {
		writeError(w, &Error{Status: http.StatusUnsupportedMediaType, Code: CodeContentType,
			Message: "Content-Type must be application/json"})
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.max))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeBodyTooLarge,
				Message: "Request body is larger than " + strconv.FormatInt(a.max, 10) + " bytes"})
			return false
		}
		writeError(w, &Error{Status: http.StatusBadRequest, Code: CodeInvalidJSON, Message: "Request body could not be read"})
		return false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if required {
			writeError(w, &Error{Status: http.StatusBadRequest, Code: CodeInvalidJSON, Message: "Request body is required"})
			return false
		}
		return true
	}
	if !required && !isJSON(r.Header.Get("Content-Type")) {
		writeError(w, &Error{Status: http.StatusUnsupportedMediaType, Code: CodeContentType,
			Message: "Content-Type must be application/json"})
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			writeError(w, &Error{Status: http.StatusBadRequest, Code: CodeUnknownField, Message: "Unknown field " + name})
			return false
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			writeError(w, &Error{Status: http.StatusBadRequest, Code: CodeInvalidJSON,
				Message: "Field " + strconv.Quote(te.Field) + " must be " + jsonKind(te.Type.Kind().String())})
			return false
		}
		writeError(w, &Error{Status: http.StatusBadRequest, Code: CodeInvalidJSON, Message: "Request body is not valid JSON"})
		return false
	}
	if !trailingEmpty(dec) {
		writeError(w, &Error{Status: http.StatusBadRequest, Code: CodeInvalidJSON, Message: "Request body has data after the JSON value"})
		return false
	}
	return true
}

func jsonKind(k string) string {
	switch k {
	case "slice":
		return "an array"
	case "bool":
		return "a boolean"
	case "string":
		return "a string"
	case "struct":
		return "an object"
	}
	return "a " + k
}

func trailingEmpty(dec *json.Decoder) bool {
	_, err := dec.Token()
	return err == io.EOF
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, &Error{Status: http.StatusMethodNotAllowed, Code: CodeMethodNotAllowed, Message: "Method not allowed"})
}

func writeError(w http.ResponseWriter, e *Error) {
	writeJSON(w, e.Status, struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}{e.Message, e.Code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil { // the answers are plain data; this does not happen
		status = http.StatusServiceUnavailable
		body = []byte(`{"error":"Answer could not be encoded","code":"` + CodeUnavailable + `"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
