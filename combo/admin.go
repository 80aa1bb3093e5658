package combo

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

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lockout"
	"github.com/routeguard/routeguard/queue"
)

// Paths served by the handler of [NewAdmin].
const (
	AdminHealthPath         = "/api/monitoring/health"
	AdminResetPath          = "/api/resilience/reset"
	AdminModelCooldownsPath = "/api/resilience/model-cooldowns"
	AdminCooldownsPath      = "/api/resilience/cooldowns"
)

// DefaultAdminMaxBody is the default limit on an admin request body.
const DefaultAdminMaxBody = 64 << 10

// Stable codes of the admin API's error answers.
const (
	AdminCodeUnauthorized     = "unauthorized"
	AdminCodeForbidden        = "forbidden"
	AdminCodeMethodNotAllowed = "method_not_allowed"
	AdminCodeNotFound         = "not_found"
	AdminCodeContentType      = "unsupported_media_type"
	AdminCodeBodyTooLarge     = "body_too_large"
	AdminCodeInvalidJSON      = "invalid_json"
	AdminCodeUnknownField     = "unknown_field"
	AdminCodeInvalidRequest   = "invalid_request"
	AdminCodeUnavailable      = "unavailable"
)

// AdminError is an error answer of the admin API: an HTTP status, a stable
// code and a message, written as {"error": message, "code": code}.
// An [AdminConfig.Authorize] function may return one to choose the status
// of a refusal (for example [ErrAdminForbidden] for a caller that is known
// but lacks the right).
type AdminError struct {
	Status  int
	Code    string
	Message string
}

func (e *AdminError) Error() string { return "combo admin: " + e.Code + ": " + e.Message }

// HTTPStatus returns the status of the answer.
func (e *AdminError) HTTPStatus() int { return e.Status }

// Is matches another *AdminError with the same code.
func (e *AdminError) Is(target error) bool {
	t, ok := target.(*AdminError)
	return ok && t.Code == e.Code
}

// Refusals an authorizer may return. Any other error from
// [AdminConfig.Authorize] is answered like ErrAdminUnauthorized.
var (
	ErrAdminUnauthorized = &AdminError{Status: http.StatusUnauthorized, Code: AdminCodeUnauthorized, Message: "Unauthorized"}
	ErrAdminForbidden    = &AdminError{Status: http.StatusForbidden, Code: AdminCodeForbidden, Message: "Forbidden"}
)

// AdminConfig configures the admin API. Every layer is optional: a nil
// layer is left out of the health report and its endpoints answer with
// empty lists (or 404 for the lease route).
type AdminConfig struct {
	Breakers  *breaker.Set
	Gate      *breaker.Gate
	Cooldowns *cooldown.Tracker
	Lockouts  *lockout.Lockout
	Leases    *lease.Manager
	Queue     *queue.Queue
	Pins      *affinity.Pins

	// Authorize decides whether a request may use the management
	// endpoints; nil error means yes. Nil Authorize refuses every
	// management request (the anonymous health answer stays available).
	// An *AdminError (or any error with an HTTPStatus() int method giving
	// a 4xx status) chooses the refusal's status; other errors give 401.
	Authorize func(*http.Request) error

	// LeaseAuth authenticates the API keys of the session lease route.
	// The route is mounted at lease.Path when both Leases and LeaseAuth are
	// set; it does its own authentication and does not call Authorize.
	LeaseAuth lease.Authenticator
	// LeaseOptions configure the lease route; nil means its defaults.
	LeaseOptions *lease.HandlerOptions

	// MaxBodyBytes bounds request bodies. Zero means DefaultAdminMaxBody
	// (64 KiB); values are clamped to [1 KiB, 1 MiB].
	MaxBodyBytes int64
	// Now is the clock of the answers; nil means time.Now.
	Now func() time.Time
}

// Admin is the admin API: health, breaker reset, model lockouts,
// connection cooldowns and session leases over HTTP. Create one with
// [NewAdmin]; it is safe for concurrent use and starts no goroutine.
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
//	POST   /api/v1/session-leases          the lease lifecycle (see package lease)
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
// Every error is a JSON answer with a 4xx status: 401/403 from the
// authorizer, 404, 405 with Allow, 413 for an oversized body, 415 for a
// body that is not application/json, 400 for bad JSON, unknown fields,
// trailing data or an invalid request.
type Admin struct {
	cfg    AdminConfig
	max    int64
	leases http.Handler
}

// NewAdmin returns the admin API over the layers in cfg.
func NewAdmin(cfg AdminConfig) *Admin {
	a := &Admin{cfg: cfg, max: cfg.MaxBodyBytes}
	switch {
	case a.max == 0:
		a.max = DefaultAdminMaxBody
	case a.max < 1<<10:
		a.max = 1 << 10
	case a.max > 1<<20:
		a.max = 1 << 20
	}
	if cfg.Leases != nil && cfg.LeaseAuth != nil {
		a.leases = lease.NewHandler(cfg.Leases, cfg.LeaseAuth, cfg.LeaseOptions)
	}
	return a
}

func (a *Admin) now() time.Time {
	if a.cfg.Now != nil {
		return a.cfg.Now()
	}
	return time.Now()
}

// ServeHTTP implements http.Handler.
func (a *Admin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case AdminHealthPath:
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			a.health(w, r)
		case http.MethodDelete:
			a.guard(w, r, a.deleteHealth)
		default:
			methodNotAllowed(w, "GET, HEAD, DELETE")
		}
	case AdminResetPath:
		if r.Method != http.MethodPost {
			methodNotAllowed(w, "POST")
			return
		}
		a.guard(w, r, a.reset)
	case AdminModelCooldownsPath:
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			a.guard(w, r, a.listLockouts)
		case http.MethodDelete:
			a.guard(w, r, a.clearLockout)
		default:
			methodNotAllowed(w, "GET, HEAD, DELETE")
		}
	case AdminCooldownsPath:
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			a.guard(w, r, a.listCooldowns)
		case http.MethodPost:
			a.guard(w, r, a.clearCooldowns)
		default:
			methodNotAllowed(w, "GET, HEAD, POST")
		}
	case lease.Path:
		if a.leases == nil {
			writeAdminError(w, &AdminError{Status: http.StatusNotFound, Code: AdminCodeNotFound, Message: "Session leases are not enabled"})
			return
		}
		a.leases.ServeHTTP(w, r)
	default:
		writeAdminError(w, &AdminError{Status: http.StatusNotFound, Code: AdminCodeNotFound, Message: "Not found"})
	}
}

// authorize runs the caller's authorizer and maps its refusal to an
// *AdminError.
func (a *Admin) authorize(r *http.Request) *AdminError {
	if a.cfg.Authorize == nil {
		return ErrAdminUnauthorized
	}
	err := a.cfg.Authorize(r)
	if err == nil {
		return nil
	}
	var ae *AdminError
	if errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 {
		return ae
	}
	var hs interface{ HTTPStatus() int }
	if errors.As(err, &hs) {
		if s := hs.HTTPStatus(); s == http.StatusForbidden {
			return ErrAdminForbidden
		}
	}
	return ErrAdminUnauthorized
}

func (a *Admin) guard(w http.ResponseWriter, r *http.Request, h func(http.ResponseWriter, *http.Request)) {
	if err := a.authorize(r); err != nil {
		writeAdminError(w, err)
		return
	}
	h(w, r)
}

// --- health ---

// healthBody is the full health report.
type healthBody struct {
	Status           string                    `json:"status"`
	Error            string                    `json:"error,omitempty"`
	Timestamp        time.Time                 `json:"timestamp"`
	CircuitBreakers  breaker.Summary           `json:"circuitBreakers"`
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

func (a *Admin) health(w http.ResponseWriter, r *http.Request) {
	if a.authorize(r) != nil {
		writeAdminJSON(w, http.StatusOK, struct {
			Status string `json:"status"`
		}{"healthy"})
		return
	}
	writeAdminJSON(w, http.StatusOK, a.report(r.Context()))
}

// report builds the full health report.
func (a *Admin) report(ctx context.Context) healthBody {
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
	if b := a.cfg.Breakers; b != nil {
		snap := b.Snapshot()
		h.CircuitBreakers = breaker.Summarize(snap)
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
	if g := a.cfg.Gate; g != nil && g.Enabled() {
		for _, s := range g.SnapshotAt(now) {
			h.ProviderCooldown = append(h.ProviderCooldown, gateJSON{Provider: s.Provider, Connection: s.Connection,
				Failures: s.Failures, LastFailure: optTime(s.LastFailure), Until: optTime(s.Until)})
		}
	}
	h.Lockouts = a.lockouts(now)
	h.ConnectionStates = a.unavailable(now)
	if c := a.cfg.Cooldowns; c != nil {
		for _, in := range c.SnapshotAt(now) {
			h.Connections.Tracked++
			switch {
			case in.Status.Terminal():
				h.Connections.Terminal++
			case in.Status.State == cooldown.Cooling:
				h.Connections.Cooling++
			}
		}
	}
	if q := a.cfg.Queue; q != nil {
		for _, k := range q.SnapshotAt(now) {
			h.Queues = append(h.Queues, queueJSON{Key: k.Key, Running: k.Running, Waiting: k.Waiting, Cap: k.Cap,
				BlockedUntil: optTime(k.BlockedUntil)})
		}
	}
	if p := a.cfg.Pins; p != nil {
		h.Sessions.Pins = len(p.SnapshotAt(now).Pins)
	}
	if m := a.cfg.Leases; m != nil {
		ls, err := m.SnapshotAt(ctx, now)
		if err != nil {
			h.Status, h.Error = "degraded", "Health check partially unavailable"
		}
		h.Leases.Active = len(ls)
	}
	return h
}

func (a *Admin) deleteHealth(w http.ResponseWriter, r *http.Request) {
	if !a.readBody(w, r, &struct{}{}, false) {
		return
	}
	n := a.resetBreakers()
	writeAdminJSON(w, http.StatusOK, struct {
		Success    bool   `json:"success"`
		Message    string `json:"message"`
		ResetCount int    `json:"resetCount"`
	}{true, "Reset " + strconv.Itoa(n) + " circuit breaker(s) to healthy state", n})
}

// --- reset ---

func (a *Admin) resetBreakers() int {
	if a.cfg.Breakers == nil {
		return 0
	}
	return a.cfg.Breakers.ResetAll()
}

func (a *Admin) reset(w http.ResponseWriter, r *http.Request) {
	if !a.readBody(w, r, &struct{}{}, false) {
		return
	}
	n := a.resetBreakers()
	writeAdminJSON(w, http.StatusOK, struct {
		OK         bool   `json:"ok"`
		ResetCount int    `json:"resetCount"`
		Message    string `json:"message"`
	}{true, n, "Reset " + strconv.Itoa(n) + " circuit breaker(s)"})
}

// --- model lockouts ---

func (a *Admin) lockouts(now time.Time) []lockoutJSON {
	out := []lockoutJSON{}
	if a.cfg.Lockouts == nil {
		return out
	}
	for _, in := range a.cfg.Lockouts.SnapshotAt(now) {
		out = append(out, lockoutJSON{Provider: in.Provider, Connection: in.Connection, Model: in.Model,
			Scope: in.Scope.String(), Reason: in.Reason, LockedAt: in.LockedAt.UTC(), Until: in.Until.UnixMilli(),
			RemainingMs: ms(in.Remaining), FailureCount: in.FailureCount})
	}
	return out
}

func (a *Admin) listLockouts(w http.ResponseWriter, r *http.Request) {
	ls := a.lockouts(a.now())
	writeAdminJSON(w, http.StatusOK, struct {
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

func (a *Admin) clearLockout(w http.ResponseWriter, r *http.Request) {
	var req modelLockRequest
	if !a.readBody(w, r, &req, true) {
		return
	}
	req.Provider, req.Connection, req.Model = strings.TrimSpace(req.Provider), strings.TrimSpace(req.Connection), strings.TrimSpace(req.Model)
	if req.Provider == "" || req.Model == "" {
		writeAdminError(w, invalid("provider and model are required"))
		return
	}
	cleared := false
	if a.cfg.Lockouts != nil {
		cleared = a.cfg.Lockouts.ClearAt(req.Provider, req.Connection, req.Model, a.now())
	}
	writeAdminJSON(w, http.StatusOK, struct {
		Cleared    bool   `json:"cleared"`
		Provider   string `json:"provider"`
		Connection string `json:"connection"`
		Model      string `json:"model"`
	}{cleared, req.Provider, req.Connection, req.Model})
}

// --- connection cooldowns ---

// unavailable lists the connections that are cooling or terminal at now.
func (a *Admin) unavailable(now time.Time) []connectionJSON {
	out := []connectionJSON{}
	if c := a.cfg.Cooldowns; c != nil {
		for _, in := range c.UnavailableAt(now) {
			out = append(out, connectionJSON{
				Connection: in.Conn, Provider: in.Provider, State: in.Status.State.String(),
				Terminal: in.Status.Terminal(), Until: optTime(in.Status.Until), RemainingMs: ms(in.Status.Wait(now)),
				Reason: in.Status.Reason, Level: in.Status.Level, ErrorStatus: in.ErrorStatus, LastError: in.LastError,
			})
		}
	}
	return out
}

func (a *Admin) listCooldowns(w http.ResponseWriter, r *http.Request) {
	out := a.unavailable(a.now())
	writeAdminJSON(w, http.StatusOK, struct {
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

func (a *Admin) clearCooldowns(w http.ResponseWriter, r *http.Request) {
	var req cooldownsRequest
	if !a.readBody(w, r, &req, true) {
		return
	}
	req.Provider = strings.TrimSpace(req.Provider)
	switch {
	case req.All && req.ConnectionIDs != nil:
		writeAdminError(w, invalid("give either connectionIds or all, not both"))
		return
	case !req.All && req.Provider != "":
		writeAdminError(w, invalid("provider is only valid with all: true"))
		return
	case !req.All && len(req.ConnectionIDs) == 0:
		writeAdminError(w, invalid("connectionIds must name at least one connection, or set all: true"))
		return
	}
	ids := map[string]bool{}
	for _, id := range req.ConnectionIDs {
		id = strings.TrimSpace(id)
		if id == "" {
			writeAdminError(w, invalid("connectionIds must not contain empty ids"))
			return
		}
		ids[id] = true
	}
	writeAdminJSON(w, http.StatusOK, a.clearAt(ids, req.All, req.Provider, a.now()))
}

// clearAt lifts, at now, the cooldowns and model lockouts of the
// connections in ids, or (with all) of every tracked connection, narrowed to
// provider when it is not empty. Terminal connections are counted and left
// alone.
func (a *Admin) clearAt(ids map[string]bool, all bool, provider string, now time.Time) cooldownsResult {
	var res cooldownsResult
	picked := func(conn, prov string) bool {
		if all {
			return provider == "" || strings.EqualFold(prov, provider)
		}
		return ids[conn]
	}
	if c := a.cfg.Cooldowns; c != nil {
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
			case s.Terminal():
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
	if l := a.cfg.Lockouts; l != nil {
		for _, in := range l.SnapshotAt(now) {
			if picked(in.Connection, in.Provider) && l.ClearAt(in.Provider, in.Connection, in.Model, now) {
				res.LockoutsCleared++
			}
		}
	}
	return res
}

// --- plumbing ---

func invalid(msg string) *AdminError {
	return &AdminError{Status: http.StatusBadRequest, Code: AdminCodeInvalidRequest, Message: msg}
}

// readBody reads a JSON body into dst, strictly: application/json only, at
// most the size limit, no unknown fields, no trailing data. An empty body is
// accepted when required is false. It answers the error itself and reports
// whether the handler may go on.
func (a *Admin) readBody(w http.ResponseWriter, r *http.Request, dst any, required bool) bool {
	if required && !isJSON(r.Header.Get("Content-Type")) {
		writeAdminError(w, &AdminError{Status: http.StatusUnsupportedMediaType, Code: AdminCodeContentType,
			Message: "Content-Type must be application/json"})
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.max))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeAdminError(w, &AdminError{Status: http.StatusRequestEntityTooLarge, Code: AdminCodeBodyTooLarge,
				Message: "Request body is larger than " + strconv.FormatInt(a.max, 10) + " bytes"})
			return false
		}
		writeAdminError(w, &AdminError{Status: http.StatusBadRequest, Code: AdminCodeInvalidJSON, Message: "Request body could not be read"})
		return false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if required {
			writeAdminError(w, &AdminError{Status: http.StatusBadRequest, Code: AdminCodeInvalidJSON, Message: "Request body is required"})
			return false
		}
		return true
	}
	if !required && !isJSON(r.Header.Get("Content-Type")) {
		writeAdminError(w, &AdminError{Status: http.StatusUnsupportedMediaType, Code: AdminCodeContentType,
			Message: "Content-Type must be application/json"})
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			writeAdminError(w, &AdminError{Status: http.StatusBadRequest, Code: AdminCodeUnknownField, Message: "Unknown field " + name})
			return false
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			writeAdminError(w, &AdminError{Status: http.StatusBadRequest, Code: AdminCodeInvalidJSON,
				Message: "Field " + strconv.Quote(te.Field) + " must be " + jsonKind(te.Type.Kind().String())})
			return false
		}
		writeAdminError(w, &AdminError{Status: http.StatusBadRequest, Code: AdminCodeInvalidJSON, Message: "Request body is not valid JSON"})
		return false
	}
	if !trailingEmpty(dec) {
		writeAdminError(w, &AdminError{Status: http.StatusBadRequest, Code: AdminCodeInvalidJSON, Message: "Request body has data after the JSON value"})
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
	writeAdminError(w, &AdminError{Status: http.StatusMethodNotAllowed, Code: AdminCodeMethodNotAllowed, Message: "Method not allowed"})
}

func writeAdminError(w http.ResponseWriter, e *AdminError) {
	writeAdminJSON(w, e.Status, struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}{e.Message, e.Code})
}

func writeAdminJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil { // the answers are plain data; this does not happen
		status = http.StatusServiceUnavailable
		body = []byte(`{"error":"Answer could not be encoded","code":"` + AdminCodeUnavailable + `"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
