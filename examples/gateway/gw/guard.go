package gw

import (
	"fmt"
	"log"
	"net/http"
	"strings"
	"time"
)

// ServerConfig bounds what a client can make the gateway hold: how long
// it waits for a request's headers and body, how long an idle keep-alive
// connection stays open, and how many requests run at once. Each field is
// optional: absent or 0 means the default; a negative value is refused; a
// positive value is clamped into its range. Writing an answer has no
// deadline, so a long stream is never cut for taking long.
type ServerConfig struct {
	// ReadHeaderTimeoutMs is how long a client has, from the start of a
	// request, to send all of its headers (default 10 000, 100..300 000).
	// A client that trickles its headers is disconnected when it ends.
	ReadHeaderTimeoutMs int `json:"readHeaderTimeoutMs"`
	// ReadTimeoutMs is how long a client has, from the start of a
	// request, to send all of it, headers and body (default 30 000,
	// 100..600 000). A chat request whose body is late gets 408 and the
	// connection is closed. The deadline ends once the body is read: the
	// answer may take as long as it takes.
	ReadTimeoutMs int `json:"readTimeoutMs"`
	// IdleTimeoutMs is how long a keep-alive connection may wait for its
	// next request (default 60 000, 100..3 600 000).
	IdleTimeoutMs int `json:"idleTimeoutMs"`
	// MaxConcurrentRequests caps the client requests (the /v1/ routes)
	// being served at once (default 1024, 1..1 000 000). A request over
	// the cap is answered 503 with code "gateway_overloaded" and
	// Retry-After: 1 without touching any upstream. The admin API is not
	// counted, so that an operator can look at a busy gateway.
	MaxConcurrentRequests int `json:"maxConcurrentRequests"`
}

// Defaults and ranges of ServerConfig.
const (
	DefaultReadHeaderTimeout     = 10 * time.Second
	DefaultReadTimeout           = 30 * time.Second
	DefaultIdleTimeout           = 60 * time.Second
	DefaultMaxConcurrentRequests = 1024

	// MaxHeaderBytes bounds the size of a request's headers; a larger
	// header block (net/http allows 4 KiB of slack) is answered 431.
	MaxHeaderBytes = 64 << 10
)

// serverLimits are the ServerConfig with every default filled in.
type serverLimits struct {
	readHeader, read, idle time.Duration
	maxConcurrent          int
}

// serverField describes one ServerConfig field: its JSON name, default,
// and range in the field's own unit.
type serverField struct {
	name     string
	value    int
	def      int
	min, max int
}

func (c ServerConfig) fields() []serverField {
	return []serverField{
		{"readHeaderTimeoutMs", c.ReadHeaderTimeoutMs, int(DefaultReadHeaderTimeout / time.Millisecond), 100, 300_000},
		{"readTimeoutMs", c.ReadTimeoutMs, int(DefaultReadTimeout / time.Millisecond), 100, 600_000},
		{"idleTimeoutMs", c.IdleTimeoutMs, int(DefaultIdleTimeout / time.Millisecond), 100, 3_600_000},
		{"maxConcurrentRequests", c.MaxConcurrentRequests, DefaultMaxConcurrentRequests, 1, 1_000_000},
	}
}

// validate refuses a negative setting, naming it as "server.<field>".
func (c ServerConfig) validate() error {
	for _, f := range c.fields() {
		if f.value < 0 {
			return &ConfigError{Field: "server." + f.name, Problem: fmt.Sprintf("must be ≥ 0 (0 or absent means %d)", f.def)}
		}
	}
	return nil
}

// limits returns the settings with defaults filled in and clamped.
func (c ServerConfig) limits() serverLimits {
	v := make([]int, 0, 4)
	for _, f := range c.fields() {
		x := f.value
		if x <= 0 {
			x = f.def
		}
		v = append(v, min(max(x, f.min), f.max))
	}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	return serverLimits{readHeader: ms(v[0]), read: ms(v[1]), idle: ms(v[2]), maxConcurrent: v[3]}
}

// HTTPServer returns an http.Server serving s with the configuration's
// server limits: header, request and idle timeouts and the header size
// bound. It has no write timeout: net/http lifts the read deadline once a
// request's body is read, so nothing cuts a long answer. errorLog may be
// nil.
func (s *Server) HTTPServer(errorLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.limits.readHeader,
		ReadTimeout:       s.limits.read,
		IdleTimeout:       s.limits.idle,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          errorLog,
	}
}

// clientRoute reports whether path is one of the client routes that the
// concurrency cap counts.
func clientRoute(path string) bool { return strings.HasPrefix(path, "/v1/") }

// admit takes a slot of the concurrency cap; false when it is full.
func (s *Server) admit() bool {
	select {
	case s.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s *Server) leave() { <-s.slots }

// writeOverloaded answers a request over the concurrency cap.
func writeOverloaded(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	writeOpenAIError(w, http.StatusServiceUnavailable, "server_error", "gateway_overloaded",
		"The gateway is serving as many requests as it allows; retry shortly")
}

// guardWriter is the ResponseWriter every handler writes through: it
// passes every retry hint through ClientRetryAfter when the status line
// is written, whoever set it.
type guardWriter struct {
	http.ResponseWriter
	wrote bool
}

func (g *guardWriter) WriteHeader(code int) {
	if !g.wrote && code >= 200 {
		g.wrote = true
		sanitizeRetryHeaders(g.Header(), time.Now())
	}
	g.ResponseWriter.WriteHeader(code)
}

func (g *guardWriter) Write(p []byte) (int, error) {
	if !g.wrote {
		g.WriteHeader(http.StatusOK)
	}
	return g.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (flushing,
// read deadlines).
func (g *guardWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// Flush flushes the underlying writer, for code that asserts
// http.Flusher.
func (g *guardWriter) Flush() {
	if !g.wrote {
		g.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(g.ResponseWriter).Flush()
}
