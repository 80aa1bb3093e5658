package combo

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Strategy orders the eligible targets of one request. Order reorders
// p.Targets in place (it may also shorten it); the router dispatches in the
// resulting order. Order is called concurrently for different requests and
// must not keep p or its slice after it returns. Implementations should not
// allocate.
type Strategy interface {
	Order(p *Pick)
}

// StrategyFunc adapts a function to [Strategy].
type StrategyFunc func(p *Pick)

// Order calls f(p).
func (f StrategyFunc) Order(p *Pick) { f(p) }

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
	Breaker     BreakerState
}

// SuccessRate is the percentage of successful attempts, or -1 when there is
// no attempt yet.
func (s Stats) SuccessRate() float64 {
	n := s.Successes + s.Failures
	if n == 0 {
		return -1
	}
	return 100 * float64(s.Successes) / float64(n)
}

// BreakerState is the provider breaker's state as strategies see it.
type BreakerState uint8

// Breaker states.
const (
	BreakerClosed BreakerState = iota
	BreakerDegraded
	BreakerHalfOpen
	BreakerOpen
)

// Built-in strategy names, as a [Combo] names them.
const (
	StrategyPriority         = "priority"
	StrategyWeighted         = "weighted"
	StrategyRoundRobin       = "round-robin"
	StrategyFillFirst        = "fill-first"
	StrategyP2C              = "p2c"
	StrategyRandom           = "random"
	StrategyStrictRandom     = "strict-random"
	StrategyLeastUsed        = "least-used"
	StrategyCostOptimized    = "cost-optimized"
	StrategyResetAware       = "reset-aware"
	StrategyResetWindow      = "reset-window"
	StrategyHeadroom         = "headroom"
	StrategyLKGP             = "lkgp"
	StrategyContextOptimized = "context-optimized"
	StrategyCacheOptimized   = "cache-optimized"
	StrategyQuotaShare       = "quota-share"
	StrategyAuto             = "auto"
	// StrategyContextRelay orders like priority; Router.Relay adds its
	// hand-off hook.
	StrategyContextRelay = "context-relay"
)

// strategies is a router's set of strategies by name.
type strategies struct {
	mu sync.RWMutex
	m  map[string]Strategy
}

// newStrategies registers the built-in strategies, sharing one random source
// (cfg.Rand, or a securely seeded one) and cfg's quota source and cache hint,
// then cfg.Strategies over them.
func newStrategies(cfg *Config) *strategies {
	rnd := newLockedRand(cfg.Rand)
	s := &strategies{m: map[string]Strategy{
		StrategyPriority:         Priority{},
		StrategyFillFirst:        Priority{},
		StrategyContextRelay:     Priority{},
		StrategyRoundRobin:       NewRoundRobin(),
		StrategyWeighted:         &Weighted{rnd: rnd},
		StrategyP2C:              &P2C{rnd: rnd},
		StrategyRandom:           &Random{rnd: rnd},
		StrategyStrictRandom:     &StrictRandom{rnd: rnd},
		StrategyLeastUsed:        LeastUsed{},
		StrategyCostOptimized:    CostOptimized{},
		StrategyResetAware:       &ResetAware{Quota: cfg.Quota},
		StrategyResetWindow:      &ResetWindow{Quota: cfg.Quota},
		StrategyHeadroom:         Headroom{Quota: cfg.Quota},
		StrategyLKGP:             LastKnownGood{},
		StrategyContextOptimized: ContextOptimized{},
		StrategyCacheOptimized:   CacheOptimized{Hint: cfg.CacheHint},
		StrategyQuotaShare:       &QuotaShare{Quota: cfg.Quota},
		StrategyAuto:             &Auto{Quota: cfg.Quota, rnd: rnd},
	}}
	for name, st := range cfg.Strategies {
		s.m[name] = st
	}
	return s
}

// Strategy returns the strategy registered under name ("" is priority), or
// an [*UnknownStrategyError] listing the valid names. Configuration loaders
// use it to refuse an unknown name before any request.
func (r *Router) Strategy(name string) (Strategy, error) { return r.strategies.get(name) }

func (s *strategies) get(name string) (Strategy, error) {
	if name == "" {
		name = StrategyPriority
	}
	s.mu.RLock()
	st, ok := s.m[name]
	s.mu.RUnlock()
	if !ok {
		return nil, &UnknownStrategyError{Name: name, Valid: s.names()}
	}
	return st, nil
}

func (s *strategies) names() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, 0, len(s.m))
	for n := range s.m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// UnknownStrategyError reports a combo naming a strategy the router does not
// know.
type UnknownStrategyError struct {
	Name  string
	Valid []string
}

func (e *UnknownStrategyError) Error() string {
	return fmt.Sprintf("combo: unknown strategy %q (valid: %s)", e.Name, strings.Join(e.Valid, ", "))
}

// Priority keeps the declared order: the first eligible target is tried
// first, the next on failure. Fill-first is the same order.
type Priority struct{}

// Order leaves p.Targets as declared.
func (Priority) Order(*Pick) {}

// RoundRobin rotates the start of the declared order by one target per
// request (or per StickyLimit requests), per combo.
type RoundRobin struct {
	mu    sync.Mutex
	state map[string]*rrState // by combo name
}

type rrState struct {
	counter uint64
	sticky  Target // the current sticky target's identity
	used    int    // requests served by the sticky target in this batch
}

// NewRoundRobin returns a round-robin strategy with no history.
func NewRoundRobin() *RoundRobin { return &RoundRobin{state: make(map[string]*rrState)} }

// maxRRCombos bounds the per-combo state kept by RoundRobin.
const maxRRCombos = 4096

// Order rotates p.Targets.
func (r *RoundRobin) Order(p *Pick) {
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
