package gw

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/combo/admin"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/restate"
)

// ReloadPath is the admin route that reloads the configuration: POST,
// with the admin token.
const ReloadPath = "/api/gateway/reload"

// ReloadReport says what a reload changed.
type ReloadReport struct {
	// Generation counts the configurations served, from 1 at start.
	Generation int64 `json:"generation"`
	// Added and Removed list providers, connections, API keys (by id) and
	// combos, each as "provider:<id>", "connection:<id>", "apiKey:<id>"
	// or "combo:<name>", sorted.
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
	// RestartRequired lists the changed settings a reload does not apply
	// (listen, server, state and resilience except providerErrorRules); the
	// values the gateway started with stay in force.
	RestartRequired []string `json:"restartRequired"`
}

// ReloadSource reads the configuration again with Options.Load and
// applies it with Reload. Each outcome is logged; a refused configuration
// leaves the current one serving.
func (s *Server) ReloadSource() (ReloadReport, error) {
	if s.load == nil {
		return ReloadReport{}, errors.New("gateway: this configuration cannot be reloaded")
	}
	cfg, err := s.load()
	if err != nil {
		s.logReload(ReloadReport{}, err)
		return ReloadReport{}, err
	}
	return s.Reload(cfg)
}

// Reload replaces the configuration with cfg, without a restart. An
// invalid cfg is refused (a ConfigErrors) and the current configuration
// keeps serving. Otherwise new requests are served by cfg at once, while
// requests in flight finish on the configuration they started with.
//
// The layers' state (breakers, cooldowns, lockouts, pins, leases, queues)
// is kept for every provider and connection cfg still has, and dropped
// for the ones it removes: their breakers are reset, their cooldowns,
// lockouts and pins forgotten, their queues' waiters refused and their
// leases, like those of removed API keys, ended. Settings that only a
// restart applies are listed in the report and keep their old values.
func (s *Server) Reload(cfg *Config) (ReloadReport, error) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	rep, err := s.reload(cfg)
	s.logReload(rep, err)
	return rep, err
}

func (s *Server) reload(cfg *Config) (ReloadReport, error) {
	if err := cfg.Validate(); err != nil {
		return ReloadReport{}, err
	}
	rules := operatorRules(cfg.Resilience)
	if err := restate.New(restate.Config{}).SetOperatorRules(rules); err != nil {
		return ReloadReport{}, ConfigErrors{{Field: "resilience.providerErrorRules", Problem: cfg.redact(err.Error())}}
	}
	old := s.cur.Load()
	rep := ReloadReport{Generation: old.gen + 1, RestartRequired: restartOnly(s.boot, cfg)}

	// The settings a reload applies, then the new generation.
	if s.layers.Classifier != nil {
		if err := s.layers.Classifier.SetOperatorRules(rules); err != nil {
			return ReloadReport{}, ConfigErrors{{Field: "resilience.providerErrorRules", Problem: cfg.redact(err.Error())}}
		}
	}
	now := time.Now()
	s.live.Store(newLiveTables(cfg))
	registerConnections(s.layers.Cooldowns, cfg, now)
	next := s.newState(cfg, rep.Generation)
	s.cur.Store(next)

	rep.Added, rep.Removed = diff(inventory(old.cfg), inventory(cfg))
	s.dropRemoved(old, next, now)
	return rep, nil
}

// restartOnly lists the settings of cfg that differ from boot's and that
// only a restart applies.
func restartOnly(boot, cfg *Config) []string {
	out := []string{}
	if boot.Listen != cfg.Listen {
		out = append(out, "listen")
	}
	if boot.Server != cfg.Server {
		out = append(out, "server")
	}
	if boot.Redis != cfg.Redis {
		out = append(out, "redis")
	}
	if boot.State != cfg.State {
		out = append(out, "state")
	}
	br, cr := reflect.ValueOf(boot.Resilience), reflect.ValueOf(cfg.Resilience)
	t := br.Type()
	for i := range t.NumField() {
		if t.Field(i).Name == "ProviderErrorRules" {
			continue
		}
		if !reflect.DeepEqual(br.Field(i).Interface(), cr.Field(i).Interface()) {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			out = append(out, "resilience."+name)
		}
	}
	return out
}

// inventory names what a configuration holds, as ReloadReport lists it.
func inventory(c *Config) []string {
	var out []string
	for _, p := range c.Providers {
		out = append(out, "provider:"+p.ID)
		for _, cn := range p.Connections {
			out = append(out, "connection:"+cn.ID)
		}
	}
	for _, k := range c.APIKeys {
		out = append(out, "apiKey:"+k.ID)
	}
	for _, cb := range c.Combos {
		out = append(out, "combo:"+cb.Name)
	}
	return out
}

// diff returns what b has and a lacks, and the reverse, sorted.
func diff(a, b []string) (added, removed []string) {
	added, removed = []string{}, []string{}
	for _, x := range b {
		if !slices.Contains(a, x) {
			added = append(added, x)
		}
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			removed = append(removed, x)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed
}

// dropRemoved forgets the layer state of the providers, connections and
// API keys that old has and next lacks.
func (s *Server) dropRemoved(old, next *state, now time.Time) {
	goneProvider := func(p string) bool { return old.providers[p] != nil && next.providers[p] == nil }
	goneConn := func(c string) bool { return old.conns[c] != nil && next.conns[c] == nil }
	l := s.layers
	for p := range old.providers {
		if goneProvider(p) && l.Breakers != nil {
			l.Breakers.ResetAt(p, now)
		}
	}
	for c := range old.conns {
		if !goneConn(c) {
			continue
		}
		if l.Cooldowns != nil {
			l.Cooldowns.ForgetAt(c, now)
		}
		if l.Queue != nil {
			l.Queue.ResetAt(c, now)
		}
	}
	if l.Lockouts != nil {
		for _, in := range l.Lockouts.SnapshotAt(now) {
			if goneProvider(in.Provider) || (in.Connection != "" && goneConn(in.Connection)) {
				l.Lockouts.ClearAt(in.Provider, in.Connection, in.Model, now)
			}
		}
	}
	if entries, err := s.pinStore.List(now); err == nil {
		for _, e := range entries {
			if goneProvider(e.Key.Provider) || goneConn(e.Pin.Connection) {
				_, _ = s.pinStore.DeleteIf(affinity.StoreKey{Provider: e.Key.Provider, Session: e.Key.Session}, e.Pin.Connection)
			}
		}
	}
	if l.Leases != nil {
		goneKey := map[string]bool{}
		for _, k := range old.cfg.APIKeys {
			goneKey[k.ID] = true
		}
		for _, k := range next.cfg.APIKeys {
			delete(goneKey, k.ID)
		}
		ctx := context.Background()
		list, _ := l.Leases.SnapshotAt(ctx, now)
		for _, ls := range list {
			if ls.State != lease.StateActive {
				continue
			}
			h := lease.Holder{Owner: ls.Owner, APIKeyID: ls.APIKeyID, Generation: ls.Generation}
			switch {
			case goneKey[ls.APIKeyID]:
				_, _ = l.Leases.InvalidateAt(ctx, h, lease.Reason("MANAGED_KEY_REVOKED"), now)
			case goneConn(ls.Connection) || goneProvider(ls.Provider):
				_, _ = l.Leases.InvalidateAt(ctx, h, lease.Reason("CONNECTION_INELIGIBLE"), now)
			}
		}
	}
}

// logReload records the outcome of a reload.
func (s *Server) logReload(rep ReloadReport, err error) {
	if s.logger == nil {
		return
	}
	if err != nil {
		args := []any{"err", err.Error()}
		for _, p := range Problems(err) {
			args = append(args, p.Field, p.Problem)
		}
		s.logger.Error("config reload refused; the current configuration keeps serving", args...)
		return
	}
	s.logger.Info("config reloaded", "generation", rep.Generation, "added", strings.Join(rep.Added, ","),
		"removed", strings.Join(rep.Removed, ","), "restartRequired", strings.Join(rep.RestartRequired, ","))
}

// reloadRoute serves POST /api/gateway/reload under the admin token: 200
// with the ReloadReport, 400 with every refusal of a bad configuration
// ({"ok":false,"code":"invalid_config","errors":[{"field","problem"}]}),
// 409 when the configuration has no source to reload from.
func (s *Server) reloadRoute(w http.ResponseWriter, r *http.Request) {
	if err := s.authorizeAdmin(r); err != nil {
		status, code := http.StatusUnauthorized, "unauthorized"
		if errors.Is(err, admin.ErrForbidden) {
			status, code = http.StatusForbidden, "forbidden"
		}
		writeJSON(w, status, map[string]any{"error": http.StatusText(status), "code": code})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": "Use POST", "code": "method_not_allowed"})
		return
	}
	if s.load == nil {
		writeJSON(w, http.StatusConflict, map[string]any{"error": "This configuration was not loaded from a file", "code": "reload_unavailable"})
		return
	}
	rep, err := s.ReloadSource()
	if err != nil {
		type problem struct {
			Field   string `json:"field"`
			Problem string `json:"problem"`
		}
		list := []problem{}
		for _, p := range Problems(err) {
			list = append(list, problem{p.Field, p.Problem})
		}
		if len(list) == 0 {
			list = append(list, problem{"(file)", redactAll(err.Error(), s.secrets())})
		}
		writeJSON(w, http.StatusBadRequest, map[string]any{"ok": false, "code": "invalid_config", "errors": list})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "generation": rep.Generation, "added": rep.Added,
		"removed": rep.Removed, "restartRequired": rep.RestartRequired})
}
