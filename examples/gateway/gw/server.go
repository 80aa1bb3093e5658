package gw

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/lease"
)

// MaxRequestBody bounds a chat request body.
const MaxRequestBody = 8 << 20

// Options tune a Server beyond its configuration.
type Options struct {
	// Logger receives one record per failed or skipped attempt; nil
	// discards.
	Logger *slog.Logger
	// Upstream sends the requests to the providers; nil means a pooled
	// http.Transport.
	Upstream http.RoundTripper
}

// Server is the gateway: an http.Handler serving POST /v1/chat/completions,
// GET /v1/models and the admin API under /api/.
type Server struct {
	cfg       *Config
	layers    combo.Config
	router    *combo.Router
	admin     *combo.Admin
	combos    map[string]*combo.Combo
	providers map[string]*Provider
	conns     map[string]*Connection // by id
	keys      map[string]*APIKey     // by key value
	upstream  http.RoundTripper
	own       *http.Transport // closed by Close when the Server made it
	mux       *http.ServeMux
}

// New builds a Server from a validated configuration.
func New(cfg *Config, opts Options) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	layers, err := buildLayers(cfg)
	if err != nil {
		return nil, err
	}
	layers.Logger = opts.Logger
	s := &Server{
		cfg:       cfg,
		layers:    layers,
		router:    combo.New(layers),
		combos:    buildCombos(cfg),
		providers: providerIndex(cfg),
		conns:     map[string]*Connection{},
		keys:      map[string]*APIKey{},
		upstream:  opts.Upstream,
		mux:       http.NewServeMux(),
	}
	for i := range cfg.Providers {
		for j := range cfg.Providers[i].Connections {
			cn := &cfg.Providers[i].Connections[j]
			s.conns[cn.ID] = cn
		}
	}
	for i := range cfg.APIKeys {
		s.keys[cfg.APIKeys[i].Key] = &cfg.APIKeys[i]
	}
	if s.upstream == nil {
		s.own = &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
		}
		s.upstream = s.own
	}
	s.admin = combo.NewAdmin(combo.AdminConfig{
		Breakers: layers.Breakers, Gate: layers.Gate, Cooldowns: layers.Cooldowns, Lockouts: layers.Lockouts,
		Leases: layers.Leases, Queue: layers.Queue, Pins: layers.Pins,
		Authorize: s.authorizeAdmin,
		LeaseAuth: lease.AuthenticatorFunc(s.leaseCaller),
		LeaseOptions: &lease.HandlerOptions{
			Resolver: lease.ResolverFunc(s.leaseTarget),
			Describe: s.describe,
		},
	})
	s.mux.HandleFunc("/v1/chat/completions", s.chat)
	s.mux.HandleFunc("/v1/models", s.models)
	s.mux.Handle("/api/", s.admin)
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Layers returns the router's layers, for inspection in tests and tools.
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
	tok := bearer(r)
	switch {
	case s.cfg.AdminToken != "" && tok != "" &&
		subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.AdminToken)) == 1:
		return nil
	case tok != "" && s.keys[tok] != nil:
		return combo.ErrAdminForbidden
	}
	return combo.ErrAdminUnauthorized
}

// client returns the API key of a chat request; nil with no keys
// configured. ok is false when the request must be refused.
func (s *Server) client(r *http.Request) (*APIKey, bool) {
	if len(s.keys) == 0 {
		return nil, true
	}
	k := s.keys[bearer(r)]
	return k, k != nil
}

func (s *Server) leaseCaller(r *http.Request) (lease.Caller, error) {
	tok := bearer(r)
	if tok == "" {
		return lease.Caller{}, lease.ErrAuthenticationRequired
	}
	k := s.keys[tok]
	if k == nil {
		return lease.Caller{}, lease.ErrAPIKeyInvalid
	}
	return lease.Caller{APIKeyID: k.ID, Scopes: k.Scopes, AllowedConnections: k.AllowedConnections}, nil
}

// leaseTarget resolves the model of a lease acquire: a combo (its first
// target's provider) or provider/model. The candidates are the provider's
// connections that are not cooling or terminal now.
func (s *Server) leaseTarget(_ context.Context, _ lease.Caller, model string) (lease.Target, error) {
	c, err := s.resolve(model)
	if err != nil {
		return lease.Target{}, lease.ErrModelInvalid
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
		if s.layers.Cooldowns.StatusAt(t.Connection, now).Available() {
			cands = append(cands, t.Connection)
		}
	}
	if seen && len(cands) == 0 {
		return lease.Target{}, lease.ErrEligibilityUnavailable
	}
	return lease.Target{Provider: provider, Candidates: cands}, nil
}

func (s *Server) describe(conn string) lease.ConnectionInfo {
	if cn := s.conns[conn]; cn != nil {
		return lease.ConnectionInfo{DisplayName: cn.Name}
	}
	return lease.ConnectionInfo{}
}

// errModel is a model that names neither a combo nor a provider/model.
var errModel = errors.New("unknown model")

// resolve returns the combo serving model: a configured combo, or an
// ad-hoc one over every connection of provider for "provider/model".
func (s *Server) resolve(model string) (*combo.Combo, error) {
	if c := s.combos[model]; c != nil {
		return c, nil
	}
	pid, m, ok := strings.Cut(model, "/")
	p := s.providers[pid]
	if !ok || p == nil || m == "" || (len(p.Models) > 0 && !contains(p.Models, m)) {
		return nil, errModel
	}
	return &combo.Combo{Name: model, Strategy: combo.StrategyPriority, Targets: expand(p, Target{Provider: pid, Model: m}),
		Settings: combo.Settings{CooldownWait: cooldownWait(s.cfg)}}, nil
}

// models lists the combos and provider models as an OpenAI model list.
func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.client(r); !ok {
		writeOpenAIError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Invalid API key")
		return
	}
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		OwnedBy string `json:"owned_by"`
	}
	list := []model{}
	for _, c := range s.cfg.Combos {
		list = append(list, model{ID: c.Name, Object: "model", OwnedBy: "combo"})
	}
	for _, p := range s.cfg.Providers {
		for _, m := range p.Models {
			list = append(list, model{ID: p.ID + "/" + m, Object: "model", OwnedBy: p.ID})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": list})
}

// chat serves POST /v1/chat/completions through the router.
func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeOpenAIError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "Use POST")
		return
	}
	key, ok := s.client(r)
	if !ok {
		writeOpenAIError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Invalid or missing API key")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBody))
	if err != nil {
		writeOpenAIError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "body_too_large", "Request body is too large")
		return
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "invalid_json", "Request body must be a JSON object")
		return
	}
	var model string
	if err := json.Unmarshal(fields["model"], &model); err != nil || model == "" {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "model_required", "The model field is required")
		return
	}
	c, err := s.resolve(model)
	if err != nil {
		writeOpenAIError(w, http.StatusNotFound, "invalid_request_error", "model_not_found",
			"Model "+strconv.Quote(model)+" is neither a combo nor a known provider/model")
		return
	}

	rr := combo.Request{Combo: c}
	if k, ok := affinity.KeyFrom(r.Header, body); ok {
		d := k.Digest()
		rr.Session = hex.EncodeToString(d[:])
	}
	if managed(key) || lease.HasLeaseHeaders(r.Header) {
		_, gen, err := lease.ParseHeader(r.Header)
		if err != nil {
			lease.WriteError(w, err)
			return
		}
		id := ""
		if key != nil {
			id = key.ID
		}
		rr.Lease = &combo.LeaseClaim{Owner: strings.TrimSpace(r.Header.Get(lease.HeaderOwner)), APIKeyID: id, Generation: int64(gen)}
	}
	if tools, ok := fields["tools"]; ok {
		var list []json.RawMessage
		if json.Unmarshal(tools, &list) == nil {
			rr.Tools = len(list)
		}
	}

	out := forwardHeaders(r.Header)
	send := func(ctx context.Context, t *combo.Target) (*http.Response, error) {
		return s.send(ctx, t, fields, out)
	}
	res, err := s.router.Do(r.Context(), rr, send)
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
		if sc == lease.ScopeExclusive {
			return true
		}
	}
	return false
}

// send makes one upstream attempt: the body with the target's model, the
// connection's key as bearer token.
func (s *Server) send(ctx context.Context, t *combo.Target, fields map[string]json.RawMessage, h http.Header) (*http.Response, error) {
	p := s.providers[t.Provider]
	cn := s.conns[t.Connection]
	body, err := withModel(fields, t.Model)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(p.BaseURL, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = h.Clone()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+cn.APIKey)
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

// hopHeaders are never forwarded in either direction.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer",
	"Transfer-Encoding", "Upgrade", "Content-Length", "Host", "Authorization", "Cookie", "Set-Cookie", "Accept-Encoding"}

// forwardHeaders returns the client headers that go upstream: everything
// but hop-by-hop headers, credentials, and the session and lease headers.
func forwardHeaders(in http.Header) http.Header {
	h := in.Clone()
	for _, k := range hopHeaders {
		h.Del(k)
	}
	for k := range h {
		if strings.HasPrefix(strings.ToLower(k), "x-forwarded-") {
			delete(h, k)
		}
	}
	affinity.StripHeaders(h)
	lease.StripHeaders(h)
	return h
}

// relay copies the winning upstream answer to the client, flushing as it
// goes so that streams reach the client as they arrive.
func (s *Server) relay(w http.ResponseWriter, res *combo.Result) {
	resp := res.Response
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	for _, k := range hopHeaders {
		w.Header().Del(k)
	}
	w.Header().Set("X-Routeguard-Target", res.Target.Provider+"/"+res.Target.Model)
	w.Header().Set("X-Routeguard-Connection", res.Target.Connection)
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

// writeError answers a request the router could not serve.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var te *combo.TerminalError
	var ue *combo.UpstreamError
	var le *lease.Error
	var ce *lease.CapacityError
	switch {
	case errors.As(err, &te):
		te.WriteHTTP(w)
	case errors.As(err, &ce), errors.As(err, &le):
		lease.WriteError(w, err)
	case errors.As(err, &ue):
		copyRetryHeaders(w.Header(), ue.Header)
		if ue.Header != nil && json.Valid(ue.Body) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(ue.Status)
			_, _ = w.Write(ue.Body)
			return
		}
		msg := "Upstream request failed"
		if ue.Err != nil {
			msg += ": " + ue.Err.Error()
		}
		code := ue.Reason
		if code == "" {
			code = "upstream_error"
		}
		writeOpenAIError(w, ue.Status, "upstream_error", code, msg)
	case r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
	default:
		writeOpenAIError(w, http.StatusBadGateway, "upstream_error", "gateway_error", err.Error())
	}
}

// copyRetryHeaders passes the upstream's retry hints (Retry-After and the
// rate-limit headers) on to the client with a failed answer.
func copyRetryHeaders(dst, src http.Header) {
	for k, vs := range src {
		lk := strings.ToLower(k)
		if lk == "retry-after" || strings.HasPrefix(lk, "x-ratelimit-") || strings.HasPrefix(lk, "anthropic-ratelimit-") {
			dst[k] = vs
		}
	}
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
