package promcollector

// This file is the same in combo/promcollector and combo/otelmetrics, apart
// from the package clause: it turns the layers' events and the router's
// attempts into calls on a sink, and keeps the state the gauges are read
// from. TestCoreIsShared checks that the two copies agree.

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

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
	// attemptSeries returns the series of an attempt with label set k;
	// it is called once per label set and target, the result is kept.
	attemptSeries(k attemptKey) *attemptSeries
	// recordAttempt records an attempt's duration, queue wait and, for a
	// success, first output (0: none).
	recordAttempt(s *attemptSeries, d, wait, firstOutput time.Duration)
	streamCut(cause string)
	// exclusionSeries and requestSeries work as attemptSeries does.
	exclusionSeries(reason string) *exclusionSeries
	recordExclusion(s *exclusionSeries)
	requestSeries(combo string) *requestSeries
	recordRequest(s *requestSeries, attempts int, overhead time.Duration)
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
	stores    []storeSource            // AttachSharedStore

	attemptsSeen   identTable[*attemptSeries]
	exclusionsSeen identTable[*exclusionSeries]
	requestsSeen   identTable[*requestSeries]
}

// storeSource is a shared state store the gauges read.
type storeSource struct {
	name     string
	lag      func() time.Duration
	degraded func() bool
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
	reason := ""
	switch a.Outcome {
	case combo.OutcomeSkipped:
		reason = string(a.Reason)
	case combo.OutcomeFailed:
		reason = a.Code
	}
	id := identKey{
		a: identOf(a.Target.Provider), b: identOf(a.Target.Model), c: identOf(a.Target.Connection),
		d: identOf(reason), e: identOf(string(a.Outcome)), n: a.Status,
	}
	s, ok := c.attemptsSeen.get(&id)
	if !ok {
		s = c.newAttemptSeries(&a, id, reason)
	}
	first := time.Duration(0)
	if a.Outcome == combo.OutcomeSucceeded {
		first = a.FirstOutput
	}
	c.sink.recordAttempt(s, a.Duration, a.QueueWait, first)
	if a.Cut != "" && a.Outcome != combo.OutcomeSkipped {
		c.sink.streamCut(boundedLabel(a.Cut))
	}
}

// newAttemptSeries is the slow path of onAttempt: it notes the attempt's
// connection and resolves its series by label values.
func (c *core) newAttemptSeries(a *combo.Attempt, id identKey, reason string) *attemptSeries {
	if conn := a.Target.Connection; conn != "" {
		c.mu.Lock()
		if _, known := c.conns[conn]; !known {
			c.conns[conn] = connState{} // conns never forgets one: the entry stays true
		}
		c.mu.Unlock()
	}
	s := c.sink.attemptSeries(keyOf(a))
	c.attemptsSeen.put(id, [5]string{a.Target.Provider, a.Target.Model, a.Target.Connection, reason, string(a.Outcome)}, s)
	return s
}

// exclusion counts one exclusion for reason.
func (c *core) exclusion(reason string) {
	id := identKey{a: identOf(reason)}
	s, ok := c.exclusionsSeen.get(&id)
	if !ok {
		s = c.sink.exclusionSeries(boundedLabel(reason))
		c.exclusionsSeen.put(id, [5]string{reason}, s)
	}
	c.sink.recordExclusion(s)
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
	id := identKey{a: identOf(name)}
	s, ok := c.requestsSeen.get(&id)
	if !ok {
		s = c.sink.requestSeries(name)
		c.requestsSeen.put(id, [5]string{name}, s)
	}
	c.sink.recordRequest(s, made, overhead)
	for i := range excluded {
		if !skippedIn(attempts, &excluded[i]) { // a terminal answer lists its skips as exclusions too
			c.exclusion(string(excluded[i].Reason))
		}
	}
	var prev *combo.Attempt
	for i := range attempts {
		a := &attempts[i]
		if a.Outcome == combo.OutcomeSkipped {
			c.exclusion(string(a.Reason))
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

// attachSharedStore adds (or, for a name already given, replaces) a
// shared state store whose lag and degraded flag the gauges read.
func (c *core) attachSharedStore(name string, lag func() time.Duration, degraded func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	src := storeSource{name: name, lag: lag, degraded: degraded}
	for i := range c.stores {
		if c.stores[i].name == name {
			c.stores[i] = src
			return
		}
	}
	c.stores = append(c.stores, src)
}

type storeSample struct {
	store            string
	lag              time.Duration
	hasLag, degraded bool
}

// storeSamples reads every attached store, in the order attached.
func (c *core) storeSamples() []storeSample {
	c.mu.RLock()
	stores := slices.Clone(c.stores)
	c.mu.RUnlock()
	out := make([]storeSample, 0, len(stores))
	for _, s := range stores {
		x := storeSample{store: s.name}
		if s.lag != nil {
			x.lag, x.hasLag = max(s.lag(), 0), true
		}
		if s.degraded != nil {
			x.degraded = s.degraded()
		}
		out = append(out, x)
	}
	return out
}

// ident names a string by where its bytes are and how many there are.
// Two strings with the same ident are equal; equal strings may have
// different idents (then they take two entries of an identTable).
type ident struct {
	p *byte
	n int
}

func identOf(s string) ident { return ident{unsafe.StringData(s), len(s)} }

// identKey is up to five strings and an int, by ident.
type identKey struct {
	a, b, c, d, e ident
	n             int
}

// identSlots is the size of an identTable: a router names a few dozen
// label sets at most; past that, colliding entries replace each other and
// the slow path (a map lookup by value) answers.
const identSlots = 512

// identTable maps label strings, by ident, to the series their values
// name, with one atomic load and no hashing of the strings' bytes: it
// keeps the per-request recording cost within its budget
// (BenchmarkRouterOverhead in examples/gateway, BenchmarkDoOverhead here),
// which a map keyed by the six label values (about 440 instructions per
// lookup) does not. An entry holds the strings its key points into, so
// their bytes cannot be freed and reused for other strings while it lives
// (a string whose bytes change under it, made with unsafe from a reused
// buffer, would break this as it breaks a map key). Entries are
// immutable; a slot is replaced whole.
type identTable[V any] struct {
	slots [identSlots]atomic.Pointer[identEntry[V]]
}

type identEntry[V any] struct {
	key  identKey
	hold [5]string
	v    V
}

func (k *identKey) slot() int {
	h := uint64(uintptr(unsafe.Pointer(k.a.p)))
	h = h*31 + uint64(uintptr(unsafe.Pointer(k.b.p)))
	h = h*31 + uint64(uintptr(unsafe.Pointer(k.c.p)))
	h = h*31 + uint64(uintptr(unsafe.Pointer(k.d.p)))
	h = h*31 + uint64(uintptr(unsafe.Pointer(k.e.p)))
	h = h*31 + uint64(k.n)
	h ^= h >> 29
	h *= 0x9e3779b97f4a7c15
	return int(h >> 55) // 9 bits: identSlots
}

// eq is k == *o, field by field (the compiler's == calls memequal).
func (k *identKey) eq(o *identKey) bool {
	return k.a == o.a && k.b == o.b && k.c == o.c && k.d == o.d && k.e == o.e && k.n == o.n
}

// get returns the value stored for k, checking its slot and the next one.
func (t *identTable[V]) get(k *identKey) (V, bool) {
	i := k.slot()
	if e := t.slots[i].Load(); e != nil && e.key.eq(k) {
		return e.v, true
	}
	return t.next(k, i)
}

// next is get's second probe, out of line so that get stays small.
func (t *identTable[V]) next(k *identKey, i int) (v V, ok bool) {
	if e := t.slots[(i+1)%identSlots].Load(); e != nil && e.key.eq(k) {
		return e.v, true
	}
	return v, false
}

// put stores v for k in a free slot of the two, else in the first.
func (t *identTable[V]) put(k identKey, hold [5]string, v V) {
	i := k.slot()
	e := &identEntry[V]{key: k, hold: hold, v: v}
	if t.slots[i].CompareAndSwap(nil, e) {
		return
	}
	if t.slots[(i+1)%identSlots].CompareAndSwap(nil, e) {
		return
	}
	t.slots[i].Store(e)
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
	nameReplicationLag     = "routeguard_replication_lag_seconds"
	nameStoreDegraded      = "routeguard_shared_store_degraded"

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
	helpReplicationLag     = "Lag of the last change a shared state store applied from another replica."
	helpStoreDegraded      = "1 while the shared state store's last remote call failed, else 0."
	helpOperation          = "GenAI operation duration: one attempt, up to the router's commit (a plain answer read whole, or a stream's first useful output)."
	helpFirstChunk         = "GenAI time to first chunk: from a streamed attempt's start to its first useful output."
)
