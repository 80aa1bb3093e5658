package gw

import (
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/routeguard/routeguard"
	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lockout"
	"github.com/routeguard/routeguard/queue"
	"github.com/routeguard/routeguard/restate"
	"github.com/routeguard/routeguard/watchdog"
)

func msDur(ms int) time.Duration { return time.Duration(ms) * time.Millisecond }

// warmup maps the configured warm-up to the watchdog's: 0 keeps the default
// (nil), a negative value means none.
func warmup(ms int) *time.Duration {
	switch {
	case ms == 0:
		return nil
	case ms < 0:
		return new(time.Duration(0))
	}
	return new(msDur(ms))
}

// minRetry is the gate's minimum connection cooldown: 0 in this
// configuration still means the default (5 s), a negative value 0.
func minRetry(ms int) *time.Duration {
	if ms == 0 {
		return nil
	}
	return new(msDur(ms))
}

func breakerProfile(p BreakerProfile) breaker.Profile {
	return breaker.Profile{DegradedAt: p.DegradedAt, OpenAt: p.OpenAt, Reset: msDur(p.ResetMs),
		MaxMultiplier: p.MaxMultiplier, EscalationCount: p.EscalationCount, Window: msDur(p.WindowMs),
		ConnDedup: msDur(p.ConnDedupMs), NetworkDedup: msDur(p.NetworkDedupMs)}
}

func cooldownProfile(p CooldownProfile) cooldown.Profile {
	cp := cooldown.Profile{Max: msDur(p.MaxMs)}
	if p.BaseMs > 0 { // 0 in this configuration still means the default
		cp.Base = new(msDur(p.BaseMs))
	}
	if p.Steps > 0 {
		cp.Steps = new(p.Steps)
	}
	return cp
}

// lockoutSteps maps the configuration's maxBackoffSteps onto the lockout's:
// 0 (or absent) is the default, a negative value no escalation.
func lockoutSteps(n int) *int {
	switch {
	case n > 0:
		return new(n)
	case n < 0:
		return new(0)
	}
	return nil
}

// liveTables are the per-provider and per-connection facts the layers
// read through callbacks, replaced as a whole by a reload.
type liveTables struct {
	classOf map[string]routeguard.Class // by provider
	maxConc map[string]queue.Config     // by connection
}

func newLiveTables(c *Config) *liveTables {
	t := &liveTables{classOf: map[string]routeguard.Class{}, maxConc: map[string]queue.Config{}}
	for _, p := range c.Providers {
		cl, _ := routeguard.ParseClass(p.Class) // "" is Unknown: the breaker's APIKey profile
		t.classOf[p.ID] = cl
		for _, cn := range p.Connections {
			if cn.MaxConcurrent > 0 {
				t.maxConc[cn.ID] = queue.Config{MaxConcurrency: cn.MaxConcurrent}
			}
		}
	}
	return t
}

// operatorRules turns the configured provider error rules into the
// classifier's.
func operatorRules(rs Resilience) map[string][]restate.OperatorRule {
	rules := map[string][]restate.OperatorRule{}
	for p, list := range rs.ProviderErrorRules {
		for _, r := range list {
			rules[p] = append(rules[p], restate.OperatorRule{Status: r.Status, Match: r.Match,
				Scope: restate.Scope(strings.ToLower(r.Scope)), Reason: restate.Reason(r.Reason), Cooldown: msDur(r.CooldownMs)})
		}
	}
	return rules
}

// registerConnections gives every connection of c its provider tag and
// class in the cooldown tracker, keeping its state.
func registerConnections(tracker *cooldown.Tracker, c *Config, now time.Time) {
	for _, p := range c.Providers {
		class, _ := routeguard.ParseClass(p.Class) // OAuth, else the APIKey profile
		for _, cn := range p.Connections {
			tracker.RegisterAt(cn.ID, cooldown.Options{Provider: p.ID, Class: class}, now)
		}
	}
}

// buildLayers turns the resilience settings into the router's layers, and
// registers every connection with the cooldown tracker. The layers read
// provider classes and connection caps from live, so that a reload can
// change them.
//
// Each layer's change hook feeds the metrics, the state file (when the
// file needs a hook) and the Redis replicator; the cooldown Tracker's also
// calls forgotten (nil: none).
func buildLayers(c *Config, live *atomic.Pointer[liveTables], pins affinity.Store, ps *State, m *metrics,
	forgotten func(cooldown.Event)) (combo.Config, error) {
	providerClass := func(p string) routeguard.Class { return live.Load().classOf[p] }
	rs := c.Resilience

	classifier := restate.New(restate.Config{})
	if len(rs.ProviderErrorRules) > 0 {
		if err := classifier.SetOperatorRules(operatorRules(rs)); err != nil {
			return combo.Config{}, &ConfigError{Field: "resilience.providerErrorRules", Problem: err.Error()}
		}
	}

	tracker := cooldown.New(cooldown.Config{
		OAuth: cooldownProfile(rs.Cooldown.OAuth), APIKey: cooldownProfile(rs.Cooldown.APIKey),
		MaxHint: msDur(rs.Cooldown.MaxHintMs), Store: ps.cooldownStore(), OnChange: m.onCooldown(chain(ps.onCooldown(), forgotten)),
	})
	registerConnections(tracker, c, time.Now())

	q := rs.RequestQueue
	wd := rs.ThroughputWatchdog
	return combo.Config{
		Breakers: breaker.NewSet(breaker.Config{
			OAuth: breakerProfile(rs.Breaker.OAuth), APIKey: breakerProfile(rs.Breaker.APIKey),
			Local:    breakerProfile(rs.Breaker.Local),
			ClassOf:  providerClass,
			OnChange: m.onBreaker(ps.onBreaker()),
		}),
		Gate: breaker.NewGate(breaker.GateConfig{Enabled: rs.ProviderCooldown.Enabled,
			MinRetry: minRetry(rs.ProviderCooldown.MinRetryCooldownMs), MaxRetry: msDur(rs.ProviderCooldown.MaxRetryCooldownMs),
			ClassOf: providerClass, OnChange: ps.onGate()}),
		Cooldowns: tracker,
		Lockouts: lockout.New(lockout.Config{Enabled: rs.Lockout.Enabled, ErrorCodes: rs.Lockout.ErrorCodes,
			BaseCooldown: msDur(rs.Lockout.BaseCooldownMs), MaxCooldown: msDur(rs.Lockout.MaxCooldownMs),
			MaxBackoffSteps: lockoutSteps(rs.Lockout.MaxBackoffSteps), EscalationWindow: msDur(rs.Lockout.EscalationWindowMs),
			OnChange: m.onLockout(ps.onLockout())}),
		Pins:   affinity.New(affinity.Config{TTL: msDur(rs.SessionAffinityTTLMs), Store: pins, OnChange: ps.onPin()}),
		Leases: lease.New(lease.Config{TTL: msDur(rs.LeaseTTLMs), Store: ps.leaseStore()}),
		Slots:  ps.slotStore(),
		Queue: queue.New(queue.Config{
			MaxQueueWait: msDur(q.MaxQueueWaitMs), ExecutionTimeout: msDur(q.ExecutionTimeoutMs),
			MaxQueueDepth: q.MaxQueueDepth, RequestsPerMinute: q.RequestsPerMinute,
			Overrides: func(key string) queue.Config { return live.Load().maxConc[key] },
			OnChange:  m.onQueue(nil),
		}),
		Classifier: classifier,
		Watchdog: watchdog.Config{
			Throughput: wd.Enabled, Warmup: warmup(wd.WarmupMs), Window: msDur(wd.WindowMs),
			MinBytesPerSecond: wd.MinBytesPerSecond,
			// The router holds a stream back until its first useful output
			// whatever HoldHeartbeats says.
			IdleTimeout: msDur(wd.IdleTimeoutMs), AttemptDeadline: wd.attemptDeadline(),
		},
	}, nil
}

// buildCombos expands the configured ordering combos into router combos: a target
// without a connection becomes one target per connection of its provider.
func buildCombos(c *Config) map[string]*combo.Combo {
	out := map[string]*combo.Combo{}
	providers := providerIndex(c)
	for _, cb := range c.Combos {
		if cb.Strategy == StrategyFusion || cb.Strategy == StrategyPipeline {
			continue // see buildCompositions
		}
		rc := &combo.Combo{Name: cb.Name, Strategy: cb.Strategy, Settings: comboSettings(c, cb.Settings)}
		for _, t := range cb.Targets {
			rc.Targets = append(rc.Targets, expand(providers[t.Provider], t)...)
		}
		out[cb.Name] = rc
	}
	return out
}

// comboSettings are the router settings of a configured combo.
func comboSettings(c *Config, s ComboSettings) combo.Settings {
	return combo.Settings{MaxAttempts: s.MaxAttempts, TargetTimeout: msDur(s.TargetTimeoutMs),
		StickyLimit: s.StickyLimit, CooldownWait: cooldownWait(c), StreamRecovery: streamRecovery(c, s.StreamRecovery)}
}

// cooldownWait is the combo cooldown-aware retry of the configuration,
// shared by the configured combos and the provider/model ones.
// An explicit 0 in the JSON stays 0; an absent field is the default.
func cooldownWait(c *Config) combo.CooldownWait {
	cw := c.Resilience.ComboCooldownWait
	out := combo.CooldownWait{Disabled: cw.Disabled, Budget: msDur(cw.BudgetMs)}
	if cw.MaxWaitMs != nil {
		out.MaxWait = new(msDur(*cw.MaxWaitMs))
	}
	if cw.MaxAttempts != nil {
		out.MaxAttempts = new(*cw.MaxAttempts)
	}
	return out
}

func providerIndex(c *Config) map[string]*Provider {
	m := make(map[string]*Provider, len(c.Providers))
	for i := range c.Providers {
		m[c.Providers[i].ID] = &c.Providers[i]
	}
	return m
}

// expand turns one configured target into router targets.
func expand(p *Provider, t Target) []combo.Target {
	class := strings.ToLower(p.Class)
	if class == "" {
		class = "apikey"
	}
	var out []combo.Target
	for _, cn := range p.Connections {
		if t.Connection != "" && cn.ID != t.Connection {
			continue
		}
		out = append(out, combo.Target{Provider: p.ID, Connection: cn.ID, Model: t.Model, Weight: t.Weight,
			Priority: t.Priority, AuthClass: class, MaxConcurrent: cn.MaxConcurrent})
	}
	return out
}

// warnForgotten is the cooldown hook that logs a warning when the Tracker
// evicts a terminal state to stay within its cap (Cause "max_terminal"):
// the connection is eligible again until the upstream refuses it anew.
// Other drops (idle entries, the entry cap) carry nothing to warn about.
func (s *Server) warnForgotten(e cooldown.Event) {
	if s.logger == nil || e.Action != cooldown.Dropped || e.Cause != "max_terminal" {
		return
	}
	s.logger.Warn("cooldown: terminal state forgotten to stay within the cap; the connection is eligible again",
		slog.String("connection", e.Conn), slog.String("provider", e.Provider), slog.String("state", e.From.String()))
}
