package otelmetrics

// This file is the same in combo/promcollector and combo/otelmetrics, apart
// from the package clause: it turns the layers' events and the router's
// attempts into calls on a sink, and keeps the state the gauges are read
// from. TestCoreIsShared checks that the two copies agree.

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lockout"
	"github.com/routeguard/routeguard/queue"
)

// sink receives every measurement. Its methods are called concurrently and
// must not allocate once a label combination has been seen.
type sink interface {
	breakerTransition(provider, from, to string)
	connectionCooldown(conn, reason string)
	modelLockout(provider, model, reason string)
	queueRejected(key, reason string)
	attempt(k attemptKey, d time.Duration)
	waited(provider string, d time.Duration)
	firstOutput(k attemptKey, d time.Duration)
	streamCut(cause string)
	exclusion(reason string)
	request(combo string, attempts int, overhead time.Duration)
	fallback(from, to, result string)
}

// attemptKey is the label set of one attempt.
type attemptKey struct {
	provider, model, outcome, statusClass, reason string
	// errorType is the gen_ai error.type of a failed attempt: its status
	// ("503") or "_OTHER"; empty for a success or a skip.
	errorType string
}

// Label values the package gives itself.
const (
	reasonOther     = "other"
	errorTypeOther  = "_OTHER"
	classNone       = "none"
	retrySameTarget = "retry_same_target"
	defaultOp       = "chat"
)

// breakerStates are the values of the state label of breaker_state, one
// series each.
var breakerStates = [...]breaker.State{breaker.Closed, breaker.Degraded, breaker.Open, breaker.HalfOpen}

// statusText holds the decimal form of every HTTP status, so that a
// status label costs no allocation.
var statusText = func() (t [600]string) {
	for i := 100; i < len(t); i++ {
		t[i] = itoa(i)
	}
	return t
}()

func itoa(n int) string {
	var b [3]byte
	b[0], b[1], b[2] = byte('0'+n/100), byte('0'+n/10%10), byte('0'+n%10)
	return string(b[:])
}

var statusClasses = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

// statusClass is the status_class label: "2xx" … "5xx", or "none" for an
// attempt without an HTTP status (a transport failure, a skip).
func statusClass(status int) string {
	if status < 100 || status > 599 {
		return classNone
	}
	return statusClasses[status/100-1]
}

// boundedLabel returns s when it reads as a code from a fixed vocabulary
// (at most 64 letters, digits, '_', '-', '.', ':'), else "other", so that a
// free-text detail never becomes a label value.
func boundedLabel(s string) string {
	if len(s) > 64 {
		return reasonOther
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':') {
			return reasonOther
		}
	}
	return s
}

// keyOf is the label set of a.
func keyOf(a *combo.Attempt) attemptKey {
	k := attemptKey{provider: a.Target.Provider, model: a.Target.Model, outcome: string(a.Outcome)}
	switch a.Outcome {
	case combo.OutcomeSkipped:
		k.statusClass, k.reason = classNone, boundedLabel(string(a.Reason))
	case combo.OutcomeFailed:
		k.statusClass, k.reason = statusClass(a.Status), boundedLabel(a.Code)
		k.errorType = errorTypeOther
		if a.Status >= 400 && a.Status < len(statusText) {
			k.errorType = statusText[a.Status]
		}
	default:
		k.statusClass = statusClass(a.Status)
	}
	return k
}

// chain returns a hook that calls prev (when set) and then next.
func chain[E any](prev, next func(E)) func(E) {
	if prev == nil {
		return next
	}
	return func(e E) {
		prev(e)
		next(e)
	}
}

// core is the measuring half shared by both packages.
type core struct {
	sink      sink
	now       func() time.Time // Options.Now; nil: the router's clock, else time.Now
	fixed     map[string]bool  // Options.Providers
	mu        sync.RWMutex
	routerNow func() time.Time
	breakers  *breaker.Set
	cooldowns *cooldown.Tracker
	queue     *queue.Queue
	providers map[string]breaker.State // from breaker events
	conns     map[string]connState     // from cooldown events and attempts
	keys      map[string]struct{}      // queue keys from queue events
}

type connState struct {
	state cooldown.State
	until time.Time
}

func newCore(s sink, providers []string, now func() time.Time) *core {
	c := &core{
		sink: s, now: now, fixed: map[string]bool{},
		providers: map[string]breaker.State{}, conns: map[string]connState{}, keys: map[string]struct{}{},
	}
	for _, p := range providers {
		if p != "" {
			c.fixed[p] = true
		}
	}
	return c
}

func (c *core) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	c.mu.RLock()
	f := c.routerNow
	c.mu.RUnlock()
	if f != nil {
		return f()
	}
	return time.Now()
}

// attach chains the router's attempt and request hooks and remembers the
// layers the gauges read at collection time.
func (c *core) attach(cfg *combo.Config) {
	cfg.OnAttempt = chain(cfg.OnAttempt, c.onAttempt)
	cfg.OnRequest = chain(cfg.OnRequest, c.onRequest)
	c.mu.Lock()
	c.breakers, c.cooldowns, c.queue, c.routerNow = cfg.Breakers, cfg.Cooldowns, cfg.Queue, cfg.Now
	c.mu.Unlock()
}

func (c *core) attachBreaker(cfg *breaker.Config)   { cfg.OnChange = chain(cfg.OnChange, c.onBreaker) }
func (c *core) attachCooldown(cfg *cooldown.Config) { cfg.OnChange = chain(cfg.OnChange, c.onCooldown) }
func (c *core) attachLockout(cfg *lockout.Config)   { cfg.OnChange = chain(cfg.OnChange, c.onLockout) }
func (c *core) attachQueue(cfg *queue.Config)       { cfg.OnChange = chain(cfg.OnChange, c.onQueue) }

func (c *core) onBreaker(e breaker.Event) {
	if e.Connection != "" || e.Provider == "" {
		return // a gate entry, or nothing to name
	}
	c.mu.Lock()
	if e.Removed && !c.fixed[e.Provider] {
		delete(c.providers, e.Provider)
	} else {
		c.providers[e.Provider] = e.To
	}
	c.mu.Unlock()
	if !e.Removed && e.From != e.To {
		c.sink.breakerTransition(e.Provider, e.From.String(), e.To.String())
	}
}

func (c *core) onCooldown(e cooldown.Event) {
	if e.Conn == "" {
		return
	}
	c.mu.Lock()
	c.conns[e.Conn] = connState{state: e.State, until: e.Until}
	c.mu.Unlock()
	if e.Action == cooldown.Episode {
		c.sink.connectionCooldown(e.Conn, boundedLabel(e.Reason))
	}
}

func (c *core) onLockout(e lockout.Event) {
	if e.Kind == lockout.EventLocked && !e.Removed {
		c.sink.modelLockout(e.Provider, e.Model, boundedLabel(string(e.Reason)))
	}
}

func (c *core) onQueue(e queue.Event) {
	if e.Key == "" {
		return
	}
	c.mu.Lock()
	if e.Removed {
		delete(c.keys, e.Key)
	} else {
		c.keys[e.Key] = struct{}{}
	}
	c.mu.Unlock()
	switch e.Kind {
	case queue.EventQueueFull:
		c.sink.queueRejected(e.Key, "queue_full")
	case queue.EventQueueTimeout:
		c.sink.queueRejected(e.Key, "queue_timeout")
	}
}

func (c *core) onAttempt(a combo.Attempt) {
	if conn := a.Target.Connection; conn != "" {
		c.mu.RLock()
		_, known := c.conns[conn]
		c.mu.RUnlock()
		if !known {
			c.mu.Lock()
			if _, known = c.conns[conn]; !known {
				c.conns[conn] = connState{}
			}
			c.mu.Unlock()
		}
	}
	k := keyOf(&a)
	c.sink.attempt(k, a.Duration)
	if a.Outcome == combo.OutcomeSkipped {
		return
	}
	c.sink.waited(a.Target.Provider, a.QueueWait)
	if a.Outcome == combo.OutcomeSucceeded && a.FirstOutput > 0 {
		c.sink.firstOutput(k, a.FirstOutput)
	}
	if a.Cut != "" {
		c.sink.streamCut(boundedLabel(a.Cut))
	}
}

// onRequest records one routed request (see observe).
func (c *core) onRequest(e combo.RequestEnd) {
	if e.Err != nil {
		if _, ok := errors.AsType[*combo.Error](e.Err); !ok {
			return // the caller's context, a lease refusal: nothing routed
		}
	}
	c.observe(e.Combo, e.Attempts, e.Excluded, overhead(&e))
}

// overhead is the time a request spent in the router: Do's duration less
// the time each attempt made spent on its upstream, from its admission to
// its end (the answer's headers and a plain answer's body, or a stream up
// to its first useful output). The pauses the router makes on purpose
// (admission waits, the same-target retry delay, cooldown waits) are
// included.
func overhead(e *combo.RequestEnd) time.Duration {
	d := e.Duration
	for i := range e.Attempts {
		if a := &e.Attempts[i]; a.Outcome != combo.OutcomeSkipped {
			d -= a.Duration - a.QueueWait
		}
	}
	return max(d, 0)
}

// observe records one routed request: its attempt count, router overhead,
// exclusions and fallbacks.
func (c *core) observe(name string, attempts []combo.Attempt, excluded []combo.Exclusion, overhead time.Duration) {
	made := 0
	for i := range attempts {
		if attempts[i].Outcome != combo.OutcomeSkipped {
			made++
		}
	}
	c.sink.request(name, made, overhead)
	for i := range excluded {
		if !skippedIn(attempts, &excluded[i]) { // a terminal answer lists its skips as exclusions too
			c.sink.exclusion(boundedLabel(string(excluded[i].Reason)))
		}
	}
	var prev *combo.Attempt
	for i := range attempts {
		a := &attempts[i]
		if a.Outcome == combo.OutcomeSkipped {
			c.sink.exclusion(boundedLabel(string(a.Reason)))
			continue
		}
		if prev != nil && prev.Code != retrySameTarget {
			c.sink.fallback(prev.Target.Provider, a.Target.Provider, string(tryOutcome(attempts[i:])))
		}
		prev = a
	}
}

// skippedIn reports whether x is a target of attempts skipped for x's
// reason.
func skippedIn(attempts []combo.Attempt, x *combo.Exclusion) bool {
	for i := range attempts {
		a := &attempts[i]
		if a.Outcome == combo.OutcomeSkipped && a.Reason == x.Reason && a.Target.Provider == x.Provider &&
			a.Target.Connection == x.Connection && a.Target.Model == x.Model {
			return true
		}
	}
	return false
}

// tryOutcome is the outcome of the try that starts with attempts[0]: the
// outcome of its last same-target retry.
func tryOutcome(attempts []combo.Attempt) combo.Outcome {
	out := attempts[0].Outcome
	for i := range attempts {
		a := &attempts[i]
		if a.Outcome == combo.OutcomeSkipped {
			continue
		}
		out = a.Outcome
		if a.Code != retrySameTarget {
			break
		}
	}
	return out
}

// Samples for the gauges, taken at collection time.

type breakerSample struct {
	provider string
	state    breaker.State
}

type connSample struct {
	conn  string
	up    bool
	until time.Time // zero when the connection is not held back by a timer
}

type queueSample struct {
	key              string
	running, waiting int
}

// breakerSamples returns the state of every known provider: Options
// providers, the breakers of the attached Set and the providers heard of in
// events, sorted by provider.
func (c *core) breakerSamples(now time.Time) []breakerSample {
	c.mu.RLock()
	set := c.breakers
	states := make(map[string]breaker.State, len(c.fixed)+len(c.providers))
	for p := range c.fixed {
		states[p] = breaker.Closed
	}
	for p, s := range c.providers {
		states[p] = s
	}
	c.mu.RUnlock()
	if set != nil {
		for p := range states {
			states[p] = breaker.Closed
		}
		for _, r := range set.SnapshotAt(now) {
			states[r.Provider] = r.State
		}
	}
	out := make([]breakerSample, 0, len(states))
	for p, s := range states {
		out = append(out, breakerSample{p, s})
	}
	slices.SortFunc(out, func(a, b breakerSample) int { return strings.Compare(a.provider, b.provider) })
	return out
}

// connSamples returns every known connection (from cooldown events, from
// attempts and, when attached, from the tracker), sorted by id.
func (c *core) connSamples(now time.Time) []connSample {
	c.mu.RLock()
	tr := c.cooldowns
	states := make(map[string]connState, len(c.conns))
	for k, v := range c.conns {
		states[k] = v
	}
	c.mu.RUnlock()
	out := make([]connSample, 0, len(states))
	if tr != nil {
		for _, in := range tr.SnapshotAt(now) {
			states[in.Conn] = connState{}
		}
		for conn := range states {
			st := tr.StatusAt(conn, now)
			out = append(out, connSample{conn: conn, up: st.State == cooldown.Available, until: st.Until})
		}
	} else {
		for conn, st := range states {
			s := connSample{conn: conn, up: st.state == cooldown.Available}
			if !st.until.IsZero() && st.state != cooldown.Available {
				if now.Before(st.until) {
					s.until = st.until
				} else {
					s.up = true // the timed state has ended
				}
			}
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b connSample) int { return strings.Compare(a.conn, b.conn) })
	return out
}

// queueSamples returns the running and waiting requests of every key the
// attached queue keeps, and 0 for keys heard of in events that it dropped.
func (c *core) queueSamples(now time.Time) []queueSample {
	c.mu.RLock()
	q := c.queue
	keys := make(map[string]queueSample, len(c.keys))
	for k := range c.keys {
		keys[k] = queueSample{key: k}
	}
	c.mu.RUnlock()
	if q != nil {
		for _, ks := range q.SnapshotAt(now) {
			keys[ks.Key] = queueSample{key: ks.Key, running: ks.Running, waiting: ks.Waiting}
		}
	}
	out := make([]queueSample, 0, len(keys))
	for _, s := range keys {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b queueSample) int { return strings.Compare(a.key, b.key) })
	return out
}

// cache keeps one value per label combination, made on first use, so that
// recording a known combination takes a read lock and allocates nothing.
type cache[K comparable, V any] struct {
	mu   sync.RWMutex
	m    map[K]V
	make func(K) V
}

func newCache[K comparable, V any](mk func(K) V) *cache[K, V] {
	return &cache[K, V]{m: map[K]V{}, make: mk}
}

func (c *cache[K, V]) get(k K) V {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok = c.m[k]; !ok {
		v = c.make(k)
		c.m[k] = v
	}
	return v
}

// pair is a two-label key.
type pair struct{ a, b string }

// triple is a three-label key.
type triple struct{ a, b, c string }

// Bucket boundaries.
var (
	// operationBuckets are the semantic conventions' boundaries for
	// gen_ai.client.operation.duration, in seconds.
	operationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	// overheadBuckets span 1 µs to 10 ms, in seconds.
	overheadBuckets = []float64{1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2}
	// firstChunkBuckets are the semantic conventions' boundaries for
	// gen_ai.client.operation.time_to_first_chunk, in seconds.
	firstChunkBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	// queueWaitBuckets span 1 ms to 60 s, in seconds; 0 counts the
	// attempts admitted at once.
	queueWaitBuckets = []float64{0, 0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	// attemptBuckets count attempts per request (0: nothing dispatched).
	attemptBuckets = []float64{0, 1, 2, 3, 4, 5, 7, 10, 15, 20, 30}
)

// Metric names and help texts, the same in both packages.
const (
	nameBreakerState       = "routeguard_breaker_state"
	nameBreakerTransitions = "routeguard_breaker_transitions_total"
	nameConnectionUp       = "routeguard_connection_up"
	nameConnectionCooldown = "routeguard_connection_cooldowns_total"
	nameCooldownUntil      = "routeguard_cooldown_until_timestamp_seconds"
	nameModelLockouts      = "routeguard_model_lockouts_total"
	nameExclusions         = "routeguard_exclusions_total"
	nameAttempts           = "routeguard_attempts_total"
	nameRequestAttempts    = "routeguard_request_attempts"
	nameFallbacks          = "routeguard_fallbacks_total"
	nameInFlight           = "routeguard_in_flight"
	nameQueueDepth         = "routeguard_queue_depth"
	nameQueueRejected      = "routeguard_queue_rejected_total"
	nameStreamCuts         = "routeguard_stream_cuts_total"
	nameRouterOverhead     = "routeguard_router_overhead_seconds"
	nameQueueWait          = "routeguard_queue_wait_seconds"

	// The GenAI client metrics, as OpenTelemetry names them and as their
	// Prometheus exporter writes them.
	genAIOperationDuration = "gen_ai.client.operation.duration"
	genAIFirstChunk        = "gen_ai.client.operation.time_to_first_chunk"
	promOperationDuration  = "gen_ai_client_operation_duration_seconds"
	promFirstChunk         = "gen_ai_client_operation_time_to_first_chunk_seconds"

	helpBreakerState       = "Provider circuit breaker state: 1 for the current state, 0 for the others."
	helpBreakerTransitions = "Provider circuit breaker state changes."
	helpConnectionUp       = "1 when the connection may be used, 0 while it cools down or is in a terminal state."
	helpConnectionCooldown = "Connection cooldown episodes started, by classified reason."
	helpCooldownUntil      = "Unix time at which the connection's cooldown (or known credits recovery) ends; 0 when none."
	helpModelLockouts      = "Model lockouts created or extended."
	helpExclusions         = "Targets kept out before dispatch, by exclusion reason."
	helpAttempts           = "Attempts on targets: made (succeeded, failed) and skipped."
	helpRequestAttempts    = "Attempts made per routed request, retries and fallbacks included."
	helpFallbacks          = "Moves of a request from a failed target to the next one, by the result of the next one."
	helpInFlight           = "Requests running on an admission queue key."
	helpQueueDepth         = "Requests waiting on an admission queue key."
	helpQueueRejected      = "Requests refused by a full admission queue or timed out waiting in it."
	helpStreamCuts         = "Streamed attempts failed before their first useful output, by cause."
	helpRouterOverhead     = "Time a routed request spent in the router, outside its attempts' upstream time."
	helpQueueWait          = "Time an attempt waited for admission (queue and connection slots)."
	helpOperation          = "GenAI operation duration: one attempt, up to the router's commit (a plain answer read whole, or a stream's first useful output)."
	helpFirstChunk         = "GenAI time to first chunk: from a streamed attempt's start to its first useful output."
)
