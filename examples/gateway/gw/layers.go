package gw

import (
	"strings"
	"time"

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

func breakerProfile(p BreakerProfile) breaker.Profile {
	return breaker.Profile{DegradedAt: p.DegradedAt, OpenAt: p.OpenAt, Reset: msDur(p.ResetMs),
		MaxMultiplier: p.MaxMultiplier, EscalationCount: p.EscalationCount, Window: msDur(p.WindowMs),
		ConnDedup: msDur(p.ConnDedupMs), NetworkDedup: msDur(p.NetworkDedupMs)}
}

func cooldownProfile(p CooldownProfile) cooldown.Profile {
	return cooldown.Profile{Base: msDur(p.BaseMs), Steps: p.Steps, Max: msDur(p.MaxMs)}
}

// buildLayers turns the resilience settings into the router's layers, and
// registers every connection with the cooldown tracker.
func buildLayers(c *Config) (combo.Config, error) {
	classOf := map[string]breaker.Class{}
	for _, p := range c.Providers {
		cl, _ := breaker.ParseClass(p.Class)
		classOf[p.ID] = cl
	}
	providerClass := func(p string) breaker.Class { return classOf[p] }
	rs := c.Resilience

	classifier := restate.New(restate.Settings{})
	if len(rs.ProviderErrorRules) > 0 {
		rules := map[string][]restate.OperatorRule{}
		for p, list := range rs.ProviderErrorRules {
			for _, r := range list {
				rules[p] = append(rules[p], restate.OperatorRule{Status: r.Status, Match: r.Match,
					Scope: restate.Scope(strings.ToLower(r.Scope)), Reason: restate.Reason(r.Reason), Cooldown: msDur(r.CooldownMs)})
			}
		}
		if err := classifier.SetOperatorRules(rules); err != nil {
			return combo.Config{}, &ConfigError{Field: "resilience.providerErrorRules", Problem: err.Error()}
		}
	}

	maxConc := map[string]queue.Settings{}
	tracker := cooldown.New(cooldown.Config{
		OAuth: cooldownProfile(rs.Cooldown.OAuth), APIKey: cooldownProfile(rs.Cooldown.APIKey),
		MaxHint: msDur(rs.Cooldown.MaxHintMs),
	})
	for _, p := range c.Providers {
		class := cooldown.APIKey
		if classOf[p.ID] == breaker.OAuth {
			class = cooldown.OAuth
		}
		for _, cn := range p.Connections {
			tracker.Register(cn.ID, cooldown.Options{Provider: p.ID, Class: class})
			if cn.MaxConcurrent > 0 {
				maxConc[cn.ID] = queue.Settings{MaxConcurrency: cn.MaxConcurrent}
			}
		}
	}

	q := rs.RequestQueue
	wd := rs.ThroughputWatchdog
	return combo.Config{
		Breakers: breaker.NewSet(breaker.Config{
			Settings: breaker.Settings{OAuth: breakerProfile(rs.Breaker.OAuth), APIKey: breakerProfile(rs.Breaker.APIKey),
				Local: breakerProfile(rs.Breaker.Local)},
			ClassOf: providerClass,
		}),
		Gate: breaker.NewGate(breaker.GateConfig{Settings: breaker.GateSettings{Enabled: rs.ProviderCooldown.Enabled,
			MinRetryCooldown: msDur(rs.ProviderCooldown.MinRetryCooldownMs), MaxRetryCooldown: msDur(rs.ProviderCooldown.MaxRetryCooldownMs)},
			ClassOf: providerClass}),
		Cooldowns: tracker,
		Lockouts: lockout.New(lockout.Config{Settings: lockout.Settings{Enabled: rs.Lockout.Enabled, ErrorCodes: rs.Lockout.ErrorCodes,
			BaseCooldown: msDur(rs.Lockout.BaseCooldownMs), MaxCooldown: msDur(rs.Lockout.MaxCooldownMs),
			MaxBackoffSteps: rs.Lockout.MaxBackoffSteps, EscalationWindow: msDur(rs.Lockout.EscalationWindowMs)}}),
		Pins:   affinity.New(affinity.Config{Settings: affinity.Settings{TTL: msDur(rs.SessionAffinityTTLMs)}}),
		Leases: lease.New(lease.Config{TTL: msDur(rs.LeaseTTLMs)}),
		Queue: queue.New(queue.Config{
			Defaults: queue.Settings{MaxQueueWait: msDur(q.MaxQueueWaitMs), ExecutionTimeout: msDur(q.ExecutionTimeoutMs),
				MaxQueueDepth: q.MaxQueueDepth, RequestsPerMinute: q.RequestsPerMinute},
			Overrides: func(key string) queue.Settings { return maxConc[key] },
		}),
		Classifier: classifier,
		Watchdog: watchdog.Config{
			Throughput: watchdog.Settings{Enabled: wd.Enabled, Warmup: msDur(wd.WarmupMs), Window: msDur(wd.WindowMs),
				MinBytesPerSecond: wd.MinBytesPerSecond},
			// The router holds a stream back until its first useful output
			// whatever HoldHeartbeats says.
			IdleTimeout: msDur(wd.IdleTimeoutMs), AttemptDeadline: msDur(wd.AttemptDeadlineMs),
		},
	}, nil
}

// buildCombos expands the configured combos into router combos: a target
// without a connection becomes one target per connection of its provider.
func buildCombos(c *Config) map[string]*combo.Combo {
	out := map[string]*combo.Combo{}
	providers := providerIndex(c)
	for _, cb := range c.Combos {
		rc := &combo.Combo{Name: cb.Name, Strategy: cb.Strategy, Settings: combo.Settings{
			MaxAttempts: cb.Settings.MaxAttempts, TargetTimeout: msDur(cb.Settings.TargetTimeoutMs),
			StickyLimit: cb.Settings.StickyLimit, CooldownWait: cooldownWait(c),
		}}
		for _, t := range cb.Targets {
			rc.Targets = append(rc.Targets, expand(providers[t.Provider], t)...)
		}
		out[cb.Name] = rc
	}
	return out
}

// cooldownWait is the combo cooldown-aware retry of the configuration,
// shared by the configured combos and the provider/model ones.
func cooldownWait(c *Config) combo.CooldownWait {
	cw := c.Resilience.ComboCooldownWait
	return combo.CooldownWait{Disabled: cw.Disabled, MaxWait: msDur(cw.MaxWaitMs),
		MaxAttempts: cw.MaxAttempts, Budget: msDur(cw.BudgetMs)}
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
