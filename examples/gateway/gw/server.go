package gw

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/admin"
	"github.com/routeguard/routeguard/combo/redisstate"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lease"
)

// MaxRequestBody bounds a chat request body.
const MaxRequestBody = 8 << 20

// Options tune a Server beyond its configuration.
type Options struct {
	// Logger receives one record per failed or skipped attempt and one
	// per reload; nil discards. The configuration's resolved environment
	// values are redacted from every record.
	Logger *slog.Logger
	// Upstream sends the requests to the providers; nil means a pooled
	// http.Transport.
	Upstream http.RoundTripper
	// Load reads the configuration again, for Server.ReloadSource (on
	// SIGHUP and POST /api/gateway/reload); nil means the configuration
	// cannot be reloaded.
	Load func() (*Config, error)
	// State keeps the layers' state (see State); nil keeps it in memory.
	// The Server does not close it.
	State *State
}

// Server is the gateway: an http.Handler serving POST /v1/chat/completions,
// GET /v1/models, POST /api/gateway/reload and the admin API under /api/.
//
// The layers (breakers, cooldowns, lockouts, pins, leases, queues) live as
// long as the Server; the configuration that routes over them can be
// replaced with Reload while requests are served (see Reload).
type Server struct {
	layers   combo.Config
	routers  routerSet // the routers that may hold shared slots (RunSlots)
	live     atomic.Pointer[liveTables]
	pinStore affinity.Store
	cur      atomic.Pointer[state]
	boot     *Config // the configuration the Server started with
	admin    *admin.Handler
	upstream http.RoundTripper
	own      *http.Transport // closed by Close when the Server made it
	mux      *http.ServeMux
	limits   serverLimits
	slots    chan struct{} // the concurrency cap of the client routes
	logger   *slog.Logger  // redacting; nil when Options.Logger is nil
	load     func() (*Config, error)
	reloadMu sync.Mutex
	inflight inFlight
	metrics  *metrics // nil when disabled
	// repl shares the layers' state on Redis (RunReplication); nil
	// without Redis.
	repl       *redisstate.Replicator
	replLayers redisstate.Layers
}

// state is one generation of the configuration: a request reads it once
// and is served by it to the end, whatever reloads happen meanwhile.
type state struct {
	gen       int64
	cfg       *Config
	router    *combo.Router
	combos    map[string]*combo.Combo // the ordering combos
	fusions   map[string]*fusionRoute
	pipelines map[string][]string // step names
	providers map[string]*Provider
	conns     map[string]*Connection // by id
	keys      map[string]*APIKey     // by key value
}

// New builds a Server from a validated configuration.
func New(cfg *Config, opts Options) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{
		boot:     cfg,
		upstream: opts.Upstream,
		mux:      http.NewServeMux(),
		limits:   cfg.Server.limits(),
		load:     opts.Load,
		pinStore: opts.State.pinStore(),
	}
	s.live.Store(newLiveTables(cfg))
	s.metrics = newMetrics(cfg)
	layers, err := buildLayers(cfg, &s.live, s.pinStore, opts.State, s.metrics, s.warnForgotten)
	if err != nil {
		return nil, err
	}
	if err := opts.State.restore(layers, time.Now()); err != nil {
		return nil, err
	}
	if opts.Logger != nil {
		s.logger = slog.New(&redactHandler{next: opts.Logger.Handler(), secrets: s.secrets})
		layers.Logger = s.logger
	}
	s.metrics.attach(&layers)
	s.layers = layers
	if s.repl = opts.State.replicator(); s.repl != nil {
		s.replLayers = redisstate.Layers{Breakers: layers.Breakers, Cooldowns: opts.State.cooldownStore(),
			Lockouts: layers.Lockouts, Gate: layers.Gate, Pins: s.pinStore}
		s.metrics.attachReplicator(s.repl)
	}
	s.cur.Store(s.newState(cfg, 1))
	s.slots = make(chan struct{}, s.limits.maxConcurrent)
	if s.upstream == nil {
		s.own = newUpstreamTransport(s.limits.maxConcurrent)
		s.upstream = s.own
	}
	s.admin = admin.New(admin.Config{
		Layers:    layers,
		Authorize: s.authorizeAdmin,
		LeaseAuth: admin.LeaseAuthenticatorFunc(s.leaseCaller),
		Lease: admin.LeaseConfig{
			Resolver: admin.LeaseResolverFunc(s.leaseTarget),
			Describe: s.describe,
		},
	})
	s.mux.HandleFunc("/v1/chat/completions", s.chat)
	s.mux.HandleFunc("/v1/models", s.models)
	s.mux.HandleFunc(ReloadPath, s.reloadRoute)
	s.mux.Handle("/api/", s.admin)
	s.mountMetrics(cfg)
	return s, nil
}

// newUpstreamTransport is the pooled transport for many client
// connections to few upstreams: as many idle connections per upstream as
// requests may be in flight (so that a burst does not end in a wave of
// closes and redials), no cap on open ones, HTTP/1.1 without an HTTP/2
// attempt (nothing to negotiate on plain-HTTP upstreams; HTTPS upstreams
// still use TLS), and buffers that take a typical answer in one read.
func newUpstreamTransport(maxInFlight int) *http.Transport {
	perHost := min(max(maxInFlight, 256), 4096)
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     false,
		MaxIdleConns:          4 * perHost,
		MaxIdleConnsPerHost:   perHost,
		MaxConnsPerHost:       0,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ReadBufferSize:        32 << 10,
		WriteBufferSize:       32 << 10,
	}
}

// newState builds generation gen of cfg over the Server's layers.
func (s *Server) newState(cfg *Config, gen int64) *state {
	st := &state{
		gen:       gen,
		cfg:       cfg,
		router:    s.routers.add(combo.New(s.layers)),
		combos:    buildCombos(cfg),
		providers: providerIndex(cfg),
		conns:     map[string]*Connection{},
		keys:      map[string]*APIKey{},
	}
	st.fusions, st.pipelines = buildCompositions(cfg, st.providers)
	for i := range cfg.Providers {
		for j := range cfg.Providers[i].Connections {
			cn := &cfg.Providers[i].Connections[j]
			st.conns[cn.ID] = cn
		}
	}
	for i := range cfg.APIKeys {
		st.keys[cfg.APIKeys[i].Key] = &cfg.APIKeys[i]
	}
	return st
}

// secrets are the resolved environment values of the configuration in
// use, and of the one the Server started with.
func (s *Server) secrets() []string {
	out := s.boot.secrets
	if st := s.cur.Load(); st != nil && st.cfg != s.boot {
		out = append(slices.Clip(out), st.cfg.secrets...)
	}
	return out
}

// ServeHTTP implements http.Handler. A client route over the concurrency
// cap is answered 503 at once; every retry hint in an answer passes
// through ClientRetryAfter.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g := &guardWriter{ResponseWriter: w}
	if clientRoute(r.URL.Path) {
		if !s.admit() {
			writeOverloaded(g)
			return
		}
		defer s.leave()
	}
	s.mux.ServeHTTP(g, r)
}

// Layers returns the router's layers, for inspection in tests and tools.
// They are the same for the Server's whole life, across reloads.
func (s *Server) Layers() combo.Config { return s.layers }

// Close releases the idle upstream connections the Server opened.
func (s *Server) Close() {
	if s.own != nil {
		s.own.CloseIdleConnections()
	}
}

// bearer returns the bearer token of r, or "".
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// authorizeAdmin admits the admin token. A client API key is a known
// caller without the right (403); anything else is unauthenticated (401).
func (s *Server) authorizeAdmin(r *http.Request) error {
	st := s.cur.Load()
	tok := bearer(r)
	switch {
	case st.cfg.AdminToken != "" && tok != "" &&
		subtle.ConstantTimeCompare([]byte(tok), []byte(st.cfg.AdminToken)) == 1:
		return nil
	case tok != "" && st.keys[tok] != nil:
		return admin.ErrForbidden
	}
	return admin.ErrUnauthorized
}

// client returns the API key of a chat request; nil with no keys
// configured. ok is false when the request must be refused.
func (st *state) client(r *http.Request) (*APIKey, bool) {
	if len(st.keys) == 0 {
		return nil, true
	}
	k := st.keys[bearer(r)]
	return k, k != nil
}

func (s *Server) leaseCaller(r *http.Request) (admin.LeaseCaller, error) {
	tok := bearer(r)
	if tok == "" {
		return admin.LeaseCaller{}, admin.ErrLeaseAuthenticationRequired
	}
	k := s.cur.Load().keys[tok]
	if k == nil {
		return admin.LeaseCaller{}, admin.ErrLeaseAPIKeyInvalid
	}
	return admin.LeaseCaller{APIKeyID: k.ID, Scopes: k.Scopes, AllowedConnections: k.AllowedConnections}, nil
}

// leaseTarget resolves the model of a lease acquire: a combo (its first
// target's provider) or provider/model. The candidates are the provider's
// connections that are not cooling or terminal now.
func (s *Server) leaseTarget(_ context.Context, _ admin.LeaseCaller, model string) (admin.LeaseTarget, error) {
	c, err := s.cur.Load().resolve(model)
	if err != nil {
		return admin.LeaseTarget{}, admin.ErrLeaseModelInvalid
	}
	provider := c.Targets[0].Provider
	now := time.Now()
	var cands []string
	seen := false
	for _, t := range c.Targets {
		if t.Provider != provider {
			continue
		}
		seen = true
		if s.layers.Cooldowns.StatusAt(t.Connection, now).State == cooldown.Available {
			cands = append(cands, t.Connection)
		}
	}
	if seen && len(cands) == 0 {
		return admin.LeaseTarget{}, admin.ErrLeaseEligibilityUnavailable
	}
	return admin.LeaseTarget{Provider: provider, Candidates: cands}, nil
}

func (s *Server) describe(conn string) admin.LeaseConnection {
	if cn := s.cur.Load().conns[conn]; cn != nil {
		return admin.LeaseConnection{DisplayName: cn.Name}
	}
	return admin.LeaseConnection{}
}

// errModel is a model that names neither a combo nor a provider/model.
var errModel = errors.New("unknown model")

// resolve returns the ordering combo serving model: a configured combo,
// or an ad-hoc one over every connection of provider for
// "provider/model". Fusions and pipelines are not resolved here.
func (st *state) resolve(model string) (*combo.Combo, error) {
	if c := st.combos[model]; c != nil {
		return c, nil
	}
	pid, m, ok := strings.Cut(model, "/")
	p := st.providers[pid]
	if !ok || p == nil || m == "" || (len(p.Models) > 0 && !contains(p.Models, m)) {
		return nil, errModel
	}
	return &combo.Combo{Name: model, Strategy: "priority", Targets: expand(p, Target{Provider: pid, Model: m}),
		Settings: combo.Settings{CooldownWait: cooldownWait(st.cfg), StreamRecovery: streamRecovery(st.cfg, nil)}}, nil
}

// models lists the combos and provider models as an OpenAI model list.
func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	st := s.cur.Load()
	if _, ok := st.client(r); !ok {
		writeOpenAIError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Invalid API key")
		return
	}
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		OwnedBy string `json:"owned_by"`
	}
	list := []model{}
	for _, c := range st.cfg.Combos {
		list = append(list, model{ID: c.Name, Object: "model", OwnedBy: "combo"})
	}
	for _, p := range st.cfg.Providers {
		for _, m := range p.Models {
			list = append(list, model{ID: p.ID + "/" + m, Object: "model", OwnedBy: p.ID})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": list})
}

// chatRequest is one chat request as read and checked, before routing.
type chatRequest struct {
	st     *state
	key    *APIKey
	fields map[string]json.RawMessage // the body, without the routeguard field; only for compositions
	body   chatBody                   // the body as received, with its routing fields
	model  string
	prefs  prefs
	rr     combo.Request // session, lease and tools; Combo unset
	header http.Header   // the client's headers
}

// chat serves POST /v1/chat/completions through the router. The whole
// request is served by the configuration generation it started on.
func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	st := s.cur.Load()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeOpenAIError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "Use POST")
		return
	}
	key, ok := st.client(r)
	if !ok {
		writeOpenAIError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Invalid or missing API key")
		return
	}
	if key != nil && key.MaxInFlight > 0 {
		if !s.inflight.enter(key.ID, key.MaxInFlight) {
			w.Header().Set("Retry-After", "1")
			writeOpenAIError(w, http.StatusTooManyRequests, "rate_limit_error", codeClientInFlight,
				"This API key has "+strconv.Itoa(key.MaxInFlight)+" requests in flight, its limit")
			return
		}
		defer s.inflight.leave(key.ID)
	}
	if !jsonContentType(r.Header) {
		writeOpenAIError(w, http.StatusUnsupportedMediaType, "invalid_request_error", "unsupported_media_type",
			"Content-Type must be application/json")
		return
	}
	body, err := readBody(w, r)
	if err != nil {
		writeBodyError(w, err)
		return
	}
	// Only the fields routing needs are read; the body goes upstream as it
	// came, with the target's model written in place.
	cb, ok := parseChatBody(body)
	if !ok {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "invalid_json", "Request body must be a JSON object")
		return
	}
	model, ok := cb.modelName()
	if !ok || model == "" {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "model_required", "The model field is required")
		return
	}
	cr := &chatRequest{st: st, key: key, body: cb, model: model, header: r.Header}
	if cb.prefs != nil {
		p, perr := parsePrefs(cb.prefs, st.providers)
		if perr != nil {
			writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", perr.code, perr.msg)
			return
		}
		cr.prefs = p
	}
	if k, ok := affinity.KeyFrom(r.Header, body); ok {
		cr.rr.Session = sessionFor(keyID(key), k)
	}
	if managed(key) || r.Header[lease.HeaderOwner] != nil || r.Header[lease.HeaderGeneration] != nil {
		_, gen, err := lease.ParseHeader(r.Header)
		if err != nil {
			admin.WriteLeaseError(w, err)
			return
		}
		cr.rr.Lease = &combo.LeaseClaim{Owner: strings.TrimSpace(r.Header.Get(lease.HeaderOwner)), APIKeyID: keyID(key), Generation: int64(gen)}
	}
	cr.rr.Tools = cb.toolCount()

	switch {
	case st.fusions[model] != nil:
		cr.fields = cb.fields()
		s.serveFusion(w, r, cr, st.fusions[model])
		return
	case st.pipelines[model] != nil:
		cr.fields = cb.fields()
		s.servePipeline(w, r, cr, st.pipelines[model])
		return
	}
	c, err := st.resolve(model)
	if err != nil {
		writeOpenAIError(w, http.StatusNotFound, "invalid_request_error", "model_not_found",
			"Model "+strconv.Quote(model)+" is neither a combo nor a known provider/model")
		return
	}
	if c, ok = cr.prefs.narrow(c); !ok {
		writeNoProviderLeft(w)
		return
	}
	rr := cr.rr
	rr.Combo = c
	rr.Continue = s.continuation(st, c, cb, r.Header)
	send := func(ctx context.Context, t *combo.Target) (*http.Response, error) {
		return s.sendBody(ctx, st, t, cb.withModel(t.Model), r.Header)
	}
	res, err := st.router.Do(r.Context(), rr, send)
	setTrail(w, r, res, err)
	if res != nil {
		w.Header().Set("X-Routeguard-Attempts", strconv.Itoa(len(res.Attempts)))
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.relay(w, res)
}

func managed(k *APIKey) bool {
	if k == nil {
		return false
	}
	for _, sc := range k.Scopes {
		if sc == admin.ScopeLeaseExclusive {
			return true
		}
	}
	return false
}

// send makes one upstream attempt: the body with the target's model, the
// headers of upstreamHeader (the connection's key as bearer token).
func (s *Server) send(ctx context.Context, st *state, t *combo.Target, fields map[string]json.RawMessage, client http.Header) (*http.Response, error) {
	body, err := withModel(fields, t.Model)
	if err != nil {
		return nil, err
	}
	return s.sendBody(ctx, st, t, body, client)
}

// sendBody makes one upstream attempt with body, which already names the
// target's model.
func (s *Server) sendBody(ctx context.Context, st *state, t *combo.Target, body []byte, client http.Header) (*http.Response, error) {
	p := st.providers[t.Provider]
	cn := st.conns[t.Connection]
	if p == nil {
		return nil, fmt.Errorf("gateway: provider %q is not configured", t.Provider)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(p.BaseURL, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = upstreamHeader(client, p, cn)
	return s.upstream.RoundTrip(req)
}

// withModel re-encodes the request body with model in place of the
// client's model.
func withModel(fields map[string]json.RawMessage, model string) ([]byte, error) {
	m, err := json.Marshal(model)
	if err != nil {
		return nil, err
	}
	cp := make(map[string]json.RawMessage, len(fields))
	for k, v := range fields {
		cp[k] = v
	}
	cp["model"] = m
	return json.Marshal(cp)
}

// relayBufs are the copy buffers of relay.
var relayBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// relay copies the winning upstream answer to the client. An event stream
// is flushed after every read, so that events reach the client as they
// arrive; any other answer (read whole by the router) goes out with its
// Content-Length and is left to the server's buffering.
func (s *Server) relay(w http.ResponseWriter, res *combo.Result) {
	resp := res.Response
	defer resp.Body.Close()
	relayHeader(w.Header(), resp.Header)
	// The target as provider/model; connection ids are for the admin API.
	w.Header().Set("X-Routeguard-Target", res.Target.Provider+"/"+res.Target.Model)
	stream := isEventStream(resp.Header)
	if !stream && resp.ContentLength >= 0 && resp.StatusCode >= 200 && resp.StatusCode != http.StatusNoContent &&
		resp.StatusCode != http.StatusNotModified {
		w.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	w.WriteHeader(resp.StatusCode)
	var rc *http.ResponseController
	if stream {
		rc = http.NewResponseController(w)
	}
	bp := relayBufs.Get().(*[]byte)
	defer relayBufs.Put(bp)
	buf := *bp
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if stream {
				_ = rc.Flush()
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			// The answer broke off: end the connection without finishing
			// the body, so that the client sees a cut, never a shorter
			// answer that looks complete. An event stream first gets an
			// error event saying why, in terms fit for the client.
			if stream {
				_, _ = w.Write(combo.StreamError(err))
				_ = rc.Flush()
			}
			panic(http.ErrAbortHandler)
		}
	}
}

// isEventStream reports whether h declares server-sent events.
func isEventStream(h http.Header) bool {
	ct := strings.TrimSpace(h.Get("Content-Type"))
	const sse = "text/event-stream"
	return len(ct) >= len(sse) && strings.EqualFold(ct[:len(sse)], sse)
}

// writeError answers a request the router could not serve.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ce *combo.Error
	isTerminal := errors.As(err, &ce) && ce.TerminalReason != ""
	var ue *combo.Error
	isUpstream := errors.As(err, &ue) && ue.Code == combo.CodeUpstream
	var le *lease.Error
	switch {
	case ce != nil && isComposition(ce.Code):
		s.writeCompositionError(w, r, ce)
	case isTerminal:
		clientView(ce).WriteHTTP(w)
	case errors.As(err, &le):
		admin.WriteLeaseError(w, err)
	case isUpstream:
		copyRetryHeaders(w.Header(), ue.Header)
		// The upstream's Retry-After when it is usable, else the router's
		// own retry time (such as a restatement rule's default).
		sec, ok := ClientRetryAfter(ue.Header.Get("Retry-After"), time.Now())
		if rs := ue.RetryAfterSeconds(); !ok && rs > 0 {
			sec, ok = ClientRetryAfter(strconv.FormatInt(rs, 10), time.Now())
		}
		if ok {
			w.Header().Set("Retry-After", strconv.FormatInt(sec, 10))
		}
		if ue.Header != nil && json.Valid(ue.Body) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(ue.Status)
			_, _ = w.Write(ue.Body)
			return
		}
		// The transport error stays in the log: it names upstream
		// addresses, which are not the client's business.
		s.logError(r, err)
		msg := "Upstream request failed"
		code := ue.Reason
		if code == "" {
			code = "upstream_error"
		}
		writeOpenAIError(w, ue.Status, "upstream_error", code, msg)
	case r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
	default:
		s.logError(r, err)
		writeOpenAIError(w, http.StatusBadGateway, "upstream_error", "gateway_error", "The gateway could not serve the request")
	}
}

// logError records an error whose text is not sent to the client.
func (s *Server) logError(r *http.Request, err error) {
	if l := s.logger; l != nil {
		l.Warn("request failed", "path", r.URL.Path, "err", err)
	}
}

// copyRetryHeaders passes the upstream's rate-limit headers on to the
// client with a failed answer; its Retry-After goes through
// ClientRetryAfter (see writeError).
func copyRetryHeaders(dst, src http.Header) {
	for k, vs := range src {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "x-ratelimit-") || strings.HasPrefix(lk, "anthropic-ratelimit-") {
			dst[k] = append([]string(nil), vs...)
		}
	}
}

// writeBodyError answers a chat request whose body could not be read:
// 413 over the size limit, 408 when it did not arrive within the read
// timeout, 400 otherwise. The connection is closed after the answer.
func writeBodyError(w http.ResponseWriter, err error) {
	w.Header().Set("Connection", "close")
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		writeOpenAIError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "body_too_large", "Request body is too large")
	case errors.Is(err, os.ErrDeadlineExceeded):
		writeOpenAIError(w, http.StatusRequestTimeout, "invalid_request_error", "request_timeout", "The request body did not arrive in time")
	default:
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "body_unreadable", "The request body could not be read")
	}
}

// keyID is the id of a client's API key; "" without keys.
func keyID(k *APIKey) string {
	if k == nil {
		return ""
	}
	return k.ID
}

func writeOpenAIError(w http.ResponseWriter, status int, typ, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"message": msg, "type": typ, "code": code}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
