package combo

import (
	"context"
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
	"github.com/routeguard/routeguard/queue/slotstore"
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
	// Slots, if set, enforces each capped connection's Target.MaxConcurrent
	// across every process sharing the store (redisstate's State.Slots):
	// an attempt on such a connection takes a slot first and is skipped
	// (ReasonQueueFull) when none is free or the store refuses; the slot
	// is released when the attempt ends. Run [Router.RenewSlots] every
	// third of the store's slot lifetime: an attempt whose slot was lost
	// is cancelled.
	Slots slotstore.Store
	// Classifier restates and classifies failures; nil means a
	// classifier with the built-in tables and the default restate.Config.
	Classifier *restate.Classifier
	// Watchdog guards streamed answers. Its zero value keeps the
	// watchdog's defaults (the readiness timeout on at 120 s, events bounded
	// at 1 MiB) and the router holds a stream back until its first useful
	// output in any case. Its AttemptDeadline stays opt-in: every attempt is
	// bounded anyway by the per-target timeout until its commit and by the
	// request's deadline (Settings.RequestTimeout) throughout, so set it
	// only for a tighter bound on each streamed attempt.
	Watchdog watchdog.Config
	// MaxBodyBytes bounds a non-streamed answer: the router reads such an
	// answer whole before it commits to it, so that a body that breaks off
	// is a failed attempt (retried on the next target) instead of a short
	// answer. 0 (or a negative value) means 32 MiB; clamped to
	// 64 KiB..1 GiB. An answer over the limit ends the request with a 502
	// [*Error] matching [ErrBodyTooLarge], with no fallback (another
	// target's answer would most likely be as large) and nothing reported
	// to the layers.
	MaxBodyBytes int64

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
	// OnRequest, if set, is called once at the end of every Do with the
	// request's outcome, from the goroutine that ran it.
	OnRequest func(RequestEnd)

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
	// CacheHint scores how likely target t holds the cached prefix of
	// req's prompt, for the cache-optimized strategy: higher is likelier
	// and ≤ 0 means no known affinity. It is called once per target on
	// every request and must be fast and safe for concurrent use. nil
	// keeps the declared order.
	CacheHint func(req *Request, t *Target) float64
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

	// Layers are the user's own eligibility checks, asked in order after
	// the built-in layers (see [Layer]); nil adds none.
	Layers []Layer

	// PerModelQuota reports whether a provider keeps its quotas per model.
	// On such a provider a quota failure of one model does not exhaust the
	// provider for the rest of the request, and a bare 500 does not exhaust
	// the connection. nil means the built-in list: antigravity, agy,
	// gemini, github, passthrough and every provider whose id contains
	// "-compatible-".
	PerModelQuota func(provider, model string) bool
}

// RequestEnd is what [Config.OnRequest] is told when Do returns. Its
// slices are the request's own (those of the Result or the *Error): read
// them during the call, never keep or modify them.
type RequestEnd struct {
	// Context is the context Do was given, for a tracer to find the
	// caller's span in; it may have ended.
	Context  context.Context //nolint:containedctx // an event, handed to the hook and dropped
	Combo    string          // the combo's name
	Attempts []Attempt       // the trail, skips included
	Excluded []Exclusion     // the targets kept out before dispatch
	// Err is Do's error: nil on success, an [*Error], a lease error or the
	// caller's context error.
	Err error
	// Start is when Do began and Duration how long it took, on the router's
	// clock.
	Start    time.Time
	Duration time.Duration
}

// Normalize returns c with its defaults filled in: Logger a logger that
// discards, PerModelQuota the built-in list (see Config.PerModelQuota),
// MaxBodyBytes its default or clamped value.
// Every other nil field keeps its documented meaning (a nil layer is
// neither asked nor told anything, a nil Now is time.Now, a nil Classifier
// the default tables). It never modifies c; [New] calls it.
func (c Config) Normalize() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.PerModelQuota == nil {
		c.PerModelQuota = defaultPerModelQuota
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = defaultMaxBodyBytes
	}
	c.MaxBodyBytes = min(max(c.MaxBodyBytes, minMaxBodyBytes), maxMaxBodyBytes)
	return c
}

// Default and range of Config.MaxBodyBytes.
const (
	defaultMaxBodyBytes = 32 << 20
	minMaxBodyBytes     = 64 << 10
	maxMaxBodyBytes     = 1 << 30
)

// Layer is an eligibility check of the user's own, for what the built-in
// layers do not know (a provider's drained free tier, a budget, a
// maintenance window). The router asks every layer of [Config.Layers], in
// order, after the built-in layers; the first that refuses a target names
// its exclusion. Both methods are called concurrently for different
// requests, must not block and should not allocate.
type Layer interface {
	// Check says whether t may be tried at now. When not, reason names the
	// exclusion (a short snake_case string such as "free_tier_drained",
	// the Exclusion.Reason; "" reads as "layer_refused") and until is when
	// t may be tried again (zero when unknown). An exclusion with a future
	// until counts as one that ends by itself: a pool held back only by
	// such exclusions (and the built-in timed ones) is answered 503 with a
	// Retry-After that honours until; one without is treated like
	// "unavailable" (404 when nothing else is out).
	Check(t *Target, now time.Time) (reason string, until time.Time, ok bool)
	// Report learns the outcome of an attempt made on t (succeeded or
	// failed, same-target retries included; not skips), at now, right
	// after [Config.OnAttempt] sees it.
	Report(t *Target, a Attempt, now time.Time)
}

// defaultPerModelQuota is the built-in list of providers whose quotas are
// kept per model: antigravity, agy, gemini, github, passthrough and every
// provider whose id contains "-compatible-".
func defaultPerModelQuota(provider, _ string) bool {
	switch strings.ToLower(provider) {
	case "antigravity", "agy", "gemini", "github", "passthrough":
		return true
	}
	return strings.Contains(strings.ToLower(provider), "-compatible-")
}
