package gw

import (
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/admin"
	"github.com/routeguard/routeguard/combo/promcollector"
	"github.com/routeguard/routeguard/combo/redisstate"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lockout"
	"github.com/routeguard/routeguard/queue"
)

// MetricsPath is the route of the Prometheus metrics.
const MetricsPath = "/metrics"

// MetricsConfig is where the gateway serves its Prometheus metrics (the
// routeguard_* families of package combo/promcollector and the GenAI
// client histograms). Only a restart applies a change of it.
type MetricsConfig struct {
	// Disabled turns the metrics off: nothing is recorded and /metrics is
	// not served.
	Disabled bool `json:"disabled"`
	// Listen, when set, is a separate address (host:port) that serves
	// GET /metrics without authentication, for a scraper on a private
	// network; the main listener then does not serve it. Empty (the
	// default) serves /metrics on the main listener, behind the admin
	// token.
	Listen string `json:"listen"`
}

func (m MetricsConfig) validate() error {
	if m.Listen == "" || m.Disabled {
		return nil
	}
	if _, _, err := net.SplitHostPort(m.Listen); err != nil {
		return &ConfigError{Field: "metrics.listen", Problem: "must be host:port: " + err.Error()}
	}
	return nil
}

// metrics are the gateway's Prometheus metrics: one collector over every
// layer, registered on the Server's own registry. A nil *metrics records
// nothing.
type metrics struct {
	c   *promcollector.Collector
	reg *prometheus.Registry
}

// newMetrics returns the metrics of cfg, nil when they are disabled. Every
// configured provider has a breaker_state series from the start.
func newMetrics(cfg *Config) *metrics {
	if cfg.Metrics.Disabled {
		return nil
	}
	providers := make([]string, 0, len(cfg.Providers))
	for _, p := range cfg.Providers {
		providers = append(providers, p.ID)
	}
	m := &metrics{c: promcollector.New(promcollector.Options{Providers: providers}), reg: prometheus.NewRegistry()}
	m.reg.MustRegister(m.c)
	return m
}

// The layers' hooks: each returns prev with the collector chained after
// it.

func (m *metrics) onBreaker(prev func(breaker.Event)) func(breaker.Event) {
	if m == nil {
		return prev
	}
	cfg := breaker.Config{OnChange: prev}
	m.c.AttachBreaker(&cfg)
	return cfg.OnChange
}

func (m *metrics) onCooldown(prev func(cooldown.Event)) func(cooldown.Event) {
	if m == nil {
		return prev
	}
	cfg := cooldown.Config{OnChange: prev}
	m.c.AttachCooldown(&cfg)
	return cfg.OnChange
}

func (m *metrics) onLockout(prev func(lockout.Event)) func(lockout.Event) {
	if m == nil {
		return prev
	}
	cfg := lockout.Config{OnChange: prev}
	m.c.AttachLockout(&cfg)
	return cfg.OnChange
}

func (m *metrics) onQueue(prev func(queue.Event)) func(queue.Event) {
	if m == nil {
		return prev
	}
	cfg := queue.Config{OnChange: prev}
	m.c.AttachQueue(&cfg)
	return cfg.OnChange
}

// attach chains the collector into the router's hooks and has it read the
// layers of cfg when it is scraped.
func (m *metrics) attach(cfg *combo.Config) {
	if m != nil {
		m.c.Attach(cfg)
	}
}

// replicationStats is what the shared-state gauges read of a
// *redisstate.Replicator.
type replicationStats interface {
	Stats() redisstate.ReplicationStats
}

// attachReplicator exports the replicator's routeguard_replication_lag_seconds
// and routeguard_shared_store_degraded, as store "redis".
func (m *metrics) attachReplicator(r replicationStats) {
	if m == nil || r == nil {
		return
	}
	m.c.AttachSharedStore("redis",
		func() time.Duration { return r.Stats().Lag },
		func() bool { return r.Stats().Degraded })
}

// handler serves the registry in the Prometheus text format; nil when
// the metrics are disabled.
func (m *metrics) handler() http.Handler {
	if m == nil {
		return nil
	}
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Registry is the registry the Server's metrics are registered on (nil
// when the configuration disables them), for tests and for programs that
// serve it themselves.
func (s *Server) Registry() *prometheus.Registry {
	if s.metrics == nil {
		return nil
	}
	return s.metrics.reg
}

// MetricsHandler serves GET /metrics without authentication, for the
// separate listener of MetricsConfig.Listen; nil when the metrics are
// disabled.
func (s *Server) MetricsHandler() http.Handler { return s.metrics.handler() }

// mountMetrics serves /metrics on the main listener, behind the admin
// token, unless the metrics are disabled or have a listener of their own.
func (s *Server) mountMetrics(cfg *Config) {
	h := s.metrics.handler()
	if h == nil || cfg.Metrics.Listen != "" {
		return
	}
	s.mux.HandleFunc(MetricsPath, func(w http.ResponseWriter, r *http.Request) {
		if err := s.authorizeAdmin(r); err != nil {
			status, code := http.StatusUnauthorized, "unauthorized"
			if errors.Is(err, admin.ErrForbidden) {
				status, code = http.StatusForbidden, "forbidden"
			}
			writeJSON(w, status, map[string]any{"error": http.StatusText(status), "code": code})
			return
		}
		h.ServeHTTP(w, r)
	})
}
