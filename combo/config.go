package combo

import (
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lockout"
	"github.com/routeguard/routeguard/queue"
	"github.com/routeguard/routeguard/restate"
	"github.com/routeguard/routeguard/watchdog"
)

// Config holds the layers a [Router] asks. Every layer is optional: a nil
// layer is neither asked nor told anything.
type Config struct {
	// Breakers is the provider circuit breaker set.
	Breakers *breaker.Set
	// Gate is the opt-in provider cooldown window gate.
	Gate *breaker.Gate
	// Cooldowns keeps per-connection cooldowns and terminal states. The
	// router reports failures and successes by connection id; register
	// each connection with the tracker (provider tag, auth class, extra
	// keys) to give it its profile.
	Cooldowns *cooldown.Tracker
	// Lockouts keeps per-model lockouts.
	Lockouts *lockout.Lockout
	// Pins keeps session affinity pins.
	Pins *affinity.Pins
	// Leases keeps exclusive session leases.
	Leases *lease.Manager
	// Queue admits attempts per connection (the key is the target's
	// connection id, or its provider when it names no connection).
	Queue *queue.Queue
	// Classifier restates and classifies failures; nil means
	// restate.Default.
	Classifier *restate.Classifier
	// Watchdog guards streamed answers; the zero value guards nothing but
	// still holds a stream back until its first useful output.
	Watchdog watchdog.Config

	// Strategies adds or replaces strategies by name.
	Strategies map[string]Strategy
	// Now is the router's clock; nil means time.Now.
	Now func() time.Time
	// Logger receives one record per failed or skipped attempt; nil
	// discards.
	Logger *slog.Logger
	// OnAttempt, if set, is called after every attempt with its trail
	// entry, from the goroutine that ran the request.
	OnAttempt func(Attempt)

	// Quota reports the quota windows of each target's connection to the
	// quota-aware strategies (reset-aware, reset-window, headroom,
	// quota-share, auto); nil means every quota is unknown.
	Quota QuotaSource
	// NoQuotaShareSlot turns off the quota-share connection slot: by
	// default a quota-share request first takes a slot of its first
	// target's connection (capped by Target.MaxConcurrent, waiting up to
	// Settings.QueueTimeout behind at most Settings.QueueDepth others) and
	// holds it for the whole request, fallbacks included. The slot fails
	// open: when the queue is full or the wait times out, the request goes
	// on without it. It needs Queue.
	NoQuotaShareSlot bool
	// CacheHint ranks targets by how likely they hold the request's cached
	// prompt prefix, for the cache-optimized strategy; nil keeps the
	// declared order.
	CacheHint CacheHint
	// Rand is the random source of the built-in random strategies
	// (weighted, p2c, random, strict-random, auto), used under a lock; nil
	// means a ChaCha8 source seeded from crypto/rand.
	Rand rand.Source

	// ToolLimits remembers how many tools each provider's model accepts,
	// learned from refusals; targets that cannot take a request's tool
	// count are excluded with reason tool_limit. nil learns nothing.
	ToolLimits *ToolLimits
	// Emergency, when set, sends a failed request without tools once to an
	// emergency target when the failure names exhausted funds or credits.
	Emergency *EmergencyFallback

	// PerModelQuota reports whether a provider keeps its quotas per model.
	// On such a provider a quota failure of one model does not exhaust the
	// provider for the rest of the request, and a bare 500 does not exhaust
	// the connection. nil means [DefaultPerModelQuota].
	PerModelQuota func(provider, model string) bool
}

// DefaultPerModelQuota is the built-in list of providers whose quotas are
// kept per model: antigravity, agy, gemini, github, passthrough and every
// provider whose id contains "-compatible-".
func DefaultPerModelQuota(provider, _ string) bool {
	switch strings.ToLower(provider) {
	case "antigravity", "agy", "gemini", "github", "passthrough":
		return true
	}
	return strings.Contains(strings.ToLower(provider), "-compatible-")
}
