package main

import (
	"time"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lockout"
	"github.com/routeguard/routeguard/queue"
	"github.com/routeguard/routeguard/watchdog"
)

// newRouter builds a router with every layer on, each reporting to tl. The
// numbers are shortened so that the whole story fits in a few seconds.
func newRouter(tl *timeline) *combo.Router {
	cooldowns := cooldown.New(cooldown.Config{
		// A failing key without a retry hint cools for 1 s, doubling on
		// repeated failures.
		APIKey:   cooldown.Profile{Base: time.Second},
		OnChange: tl.cooldownChange,
	})
	for _, c := range []*combo.Combo{chat, streaming} {
		for _, t := range c.Targets {
			cooldowns.Register(t.Connection, cooldown.Options{Provider: t.Provider, Class: cooldown.APIKey})
		}
	}
	return combo.New(combo.Config{
		Breakers: breaker.NewSet(breaker.Config{
			// openai opens after 2 counted failures and stays open 1 s.
			Profiles:      map[string]breaker.Profile{"openai": {OpenAt: 2, Reset: time.Second}},
			OnStateChange: tl.breakerChange,
		}),
		Cooldowns: cooldowns,
		Lockouts: lockout.New(lockout.Config{
			// Only model-level answers lock a model; an outage (5xx) is
			// left to the breaker and the key cooldown.
			Settings: lockout.Settings{Enabled: true, ErrorCodes: []int{403, 404, 429}},
			OnChange: tl.lockoutChange,
		}),
		// A session stays on the key that served it.
		Pins: affinity.New(affinity.Config{Settings: affinity.Settings{TTL: time.Minute}}),
		// At most four requests at once on each key.
		Queue: queue.New(queue.Config{Defaults: queue.Settings{MaxConcurrency: 4}, OnEvent: tl.queueEvent}),
		Watchdog: watchdog.Config{
			// Judge a stream after 1 s: at least 1 byte of text per second.
			Throughput: watchdog.Settings{Enabled: true, Warmup: watchdog.NoWarmup, Window: time.Second},
		},
		OnAttempt: tl.attempt,
	})
}
