package combo

import (
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/routeguard/routeguard/breaker"
)

// Strategy orders the eligible targets of one request. Order reorders
// p.Targets in place (it may also shorten it); the router dispatches in the
// resulting order. Order is called concurrently for different requests and
// must not keep p or its slice after it returns. Implementations should not
// allocate.
type Strategy interface {
	Order(p *Pick)
}

// A strategy says what else it needs from the router through optional
// interfaces, the way io.Copy asks a reader for [io.WriterTo]: the router
// looks for them on the strategy value and never at its name. A strategy
// implementing none of them gets the defaults: no concurrency slots, and a
// session's pin chooses the connection of the first target.

// TargetSlotter is implemented by a strategy whose every attempt holds a
// concurrency slot of its target, as round-robin does. With [Config.Queue]
// set, the router takes the slot named TargetSlot(t) before each attempt,
// capped by Target.MaxConcurrent (else Settings.ConcurrencyPerModel),
// waiting up to Settings.QueueTimeout behind at most Settings.QueueDepth
// others; a refused slot skips the target with reason queue_full.
type TargetSlotter interface {
	TargetSlot(t *Target) string
}

// ConnectionSlotter is implemented by a strategy whose request holds one
// slot of its first target's connection for the whole request, fallbacks
// included, as quota-share does (see [Config.NoQuotaShareSlot]). The slot is
// named ConnectionSlot(t), capped by Target.MaxConcurrent, and fails open.
type ConnectionSlotter interface {
	ConnectionSlot(t *Target) string
}

// SessionOrderer is implemented by a strategy that weighs a request's
// session itself, as cache-optimized does. When OrdersSessions reports
// true, the router keeps the strategy's order and does not move the
// session's pinned connection to the front.
type SessionOrderer interface {
	OrdersSessions() bool
}

// Pick is the input of a [Strategy]: the eligible targets of one request, in
// the combo's declared order.
type Pick struct {
	Combo   *Combo
	Targets []*Target
	Now     time.Time
	Request *Request
	// Signals reads the router's own per-target statistics.
	Signals Signals
}

// Signals gives strategies the router's view of each target.
type Signals interface {
	Stats(t *Target) Stats
}

// Stats are the router's counters for one target.
type Stats struct {
	Requests    int64
	Successes   int64
	Failures    int64
	InFlight    int64
	AvgLatency  time.Duration // moving average of successful attempts; 0 when unknown
	LastSuccess time.Time
	// Breaker is the state of the target's provider breaker; Closed when
	// the router has no breakers.
	Breaker breaker.State
}

// successRate is the percentage of successful attempts, or -1 when there is
// no attempt yet.
func (s Stats) successRate() float64 {
	n := s.Successes + s.Failures
	if n == 0 {
		return -1
	}
	return 100 * float64(s.Successes) / float64(n)
}

// Built-in strategy names, as a [Combo] names them.
const (
	strategyPriority         = "priority"
	strategyWeighted         = "weighted"
	strategyRoundRobin       = "round-robin"
	strategyFillFirst        = "fill-first"
	strategyP2C              = "p2c"
	strategyRandom           = "random"
	strategyStrictRandom     = "strict-random"
	strategyLeastUsed        = "least-used"
	strategyCostOptimized    = "cost-optimized"
	strategyResetAware       = "reset-aware"
	strategyResetWindow      = "reset-window"
	strategyHeadroom         = "headroom"
	strategyLKGP             = "lkgp"
	strategyContextOptimized = "context-optimized"
	strategyCacheOptimized   = "cache-optimized"
	strategyQuotaShare       = "quota-share"
	strategyAuto             = "auto"
	// strategyContextRelay orders like priority; Router.Relay adds its
	// hand-off hook.
	strategyContextRelay = "context-relay"
)

// inDeclaredOrder returns c when it names the priority strategy, else a
// copy of c that does: the order of [Router.Relay].
func inDeclaredOrder(c *Combo) *Combo {
	if c == nil || c.Strategy == strategyPriority {
		return c
	}
	cc := *c
	cc.Strategy = strategyPriority
	return &cc
}

// strategies is a router's set of strategies by name. It is filled once by
// New and only read after, so lookups take no lock.
type strategies struct {
	m   map[string]Strategy
	def Strategy // m's priority entry, the default, found without hashing
}

// newStrategies registers the built-in strategies, sharing one random source
// (cfg.Rand, or a securely seeded one) and cfg's quota source and cache hint,
// then cfg.Strategies over them.
func newStrategies(cfg *Config) *strategies {
	rnd := newLockedRand(cfg.Rand)
	s := &strategies{m: map[string]Strategy{
		strategyPriority:         priorityOrder{},
		strategyFillFirst:        priorityOrder{},
		strategyContextRelay:     priorityOrder{},
		strategyRoundRobin:       newRoundRobin(),
		strategyWeighted:         &weightedOrder{rnd: rnd},
		strategyP2C:              &p2cOrder{rnd: rnd},
		strategyRandom:           &randomOrder{rnd: rnd},
		strategyStrictRandom:     &strictRandom{rnd: rnd},
		strategyLeastUsed:        leastUsed{},
		strategyCostOptimized:    costOptimized{},
		strategyResetAware:       &resetAware{Quota: cfg.Quota},
		strategyResetWindow:      &resetWindow{Quota: cfg.Quota},
		strategyHeadroom:         headroomOrder{Quota: cfg.Quota},
		strategyLKGP:             lastKnownGood{},
		strategyContextOptimized: contextOptimized{},
		strategyCacheOptimized:   cacheOptimized{Hint: cfg.CacheHint},
		strategyQuotaShare:       &quotaShare{Quota: cfg.Quota},
		strategyAuto:             &autoStrategy{Quota: cfg.Quota, rnd: rnd},
	}}
	for name, st := range cfg.Strategies {
		s.m[name] = st
	}
	s.def = s.m[strategyPriority]
	return s
}

// Strategy returns the strategy registered under name ("" is priority), or
// an [*Error] ([CodeUnknownStrategy], matching [ErrUnknownStrategy]) whose Valid lists the known names. Configuration loaders
// use it to refuse an unknown name before any request.
func (r *Router) Strategy(name string) (Strategy, error) { return r.strategies.get(name) }

func (s *strategies) get(name string) (Strategy, error) {
	if name == "" || name == strategyPriority {
		return s.def, nil
	}
	st, ok := s.m[name]
	if !ok {
		return nil, &Error{Code: CodeUnknownStrategy, Status: http.StatusBadRequest, Strategy: name, Valid: s.names()}
	}
	return st, nil
}

func (s *strategies) names() []string {
	names := make([]string, 0, len(s.m))
	for n := range s.m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// priorityOrder keeps the declared order: the first eligible target is tried
// first, the next on failure. Fill-first is the same order.
type priorityOrder struct{}

// Order leaves p.Targets as declared.
func (priorityOrder) Order(*Pick) {}

// roundRobin rotates the start of the declared order by one target per
// request (or per StickyLimit requests), per combo.
type roundRobin struct {
	mu    sync.Mutex
	state map[string]*rrState // by combo name
}

type rrState struct {
	counter uint64
	sticky  Target // the current sticky target's identity
	used    int    // requests served by the sticky target in this batch
}

// newRoundRobin returns a round-robin strategy with no history.
func newRoundRobin() *roundRobin { return &roundRobin{state: make(map[string]*rrState)} }

// maxRRCombos bounds the per-combo state kept by RoundRobin.
const maxRRCombos = 4096

// TargetSlot names t's per-target slot: every round-robin attempt holds one
// (see [TargetSlotter]).
func (r *roundRobin) TargetSlot(t *Target) string { return "rr:" + t.String() }

// Order rotates p.Targets.
func (r *roundRobin) Order(p *Pick) {
	n := len(p.Targets)
	if n < 2 {
		return
	}
	name := ""
	limit := 0
	if p.Combo != nil {
		name = p.Combo.Name
		limit = p.Combo.Settings.StickyLimit
	}
	r.mu.Lock()
	st, ok := r.state[name]
	if !ok {
		if len(r.state) >= maxRRCombos {
			clear(r.state)
		}
		st = &rrState{}
		r.state[name] = st
	}
	start := -1
	if limit > 1 && st.used > 0 && st.used < limit {
		for i, t := range p.Targets {
			if sameTarget(t, &st.sticky) {
				start = i
				break
			}
		}
	}
	if start < 0 { // rotate; a sticky target that is not eligible is dropped
		start = int(st.counter % uint64(n))
		st.counter++
		st.used = 0
		st.sticky = identity(p.Targets[start])
	}
	st.used++
	r.mu.Unlock()
	rotate(p.Targets, start)
}

// rotate moves ts[k] to the front, keeping the cyclic order, without
// allocating.
func rotate(ts []*Target, k int) {
	if k <= 0 || k >= len(ts) {
		return
	}
	slices.Reverse(ts[:k])
	slices.Reverse(ts[k:])
	slices.Reverse(ts)
}

func identity(t *Target) Target {
	return Target{Provider: t.Provider, Connection: t.Connection, Model: t.Model}
}

func sameTarget(a, b *Target) bool {
	return a.Provider == b.Provider && a.Connection == b.Connection && a.Model == b.Model
}
