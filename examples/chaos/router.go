package main

import (
	"time"

	"github.com/routeguard/routeguard"
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
		APIKey:   cooldown.Profile{Base: new(time.Second)},
		OnChange: tl.cooldownChange,
	})
	now := time.Now()
	for _, c := range []*combo.Combo{chat, streaming} {
		for _, t := range c.Targets {
			cooldowns.RegisterAt(t.Connection, cooldown.Options{Provider: t.Provider, Class: routeguard.APIKey}, now)
		}
	}
	return combo.New(combo.Config{
		Breakers: breaker.NewSet(breaker.Config{
			// openai opens after 2 counted failures and stays open 1 s.
			Profiles: map[string]breaker.Profile{"openai": {OpenAt: 2, Reset: time.Second}},
			OnChange: tl.breakerChange,
		}),
		Cooldowns: cooldowns,
		Lockouts: lockout.New(lockout.Config{
			// Only model-level answers lock a model; an outage (5xx) is
			// left to the breaker and the key cooldown.
			Enabled: true, ErrorCodes: []int{403, 404, 429},
			OnChange: tl.lockoutChange,
		}),
		// A session stays on the key that served it.
		Pins: affinity.New(affinity.Config{TTL: time.Minute}),
		// At most four requests at once on each key.
		Queue: queue.New(queue.Config{MaxConcurrency: 4, OnChange: tl.queueEvent}),
		Watchdog: watchdog.Config{
			// Judge a stream after 1 s: at least 1 byte of text per second.
			Throughput: true, Warmup: new(time.Duration(0)), Window: time.Second,
		},
		OnAttempt: tl.attempt,
	})
}
