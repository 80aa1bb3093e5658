// Package metricscore is the measuring half that combo/promcollector and
// combo/otelmetrics share: it turns the layers' events and the router's
// attempts into calls on a [Sink], and keeps the state the gauges are read
// from. It imports neither Prometheus nor OpenTelemetry; each package's
// Sink does.
package metricscore

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

// Family names a counter family of the Sink.
type Family int

// The counter families and their labels.
const (
	Transitions Family = iota // provider, from, to
	Cooldowns                 // connection, reason
	Lockouts                  // provider, model, reason
	Rejected                  // connection, reason
	StreamCuts                // cause
	Exclusions                // reason
	Fallbacks                 // from_provider, to_provider, result
)

// Sink receives every measurement. A is the series set of one attempt
// label set, C one counter series, R the series of one kind of request.
// Its methods are called concurrently. The Series methods are called once
// per label set as far as the Core can tell (it keeps their results);
// AttemptSeries and CounterSeries must return the same series for equal
// labels. The others must not allocate.
type Sink[A, C, R any] interface {
	// AttemptSeries returns the series of an attempt with label set k.
	AttemptSeries(k AttemptKey) A
	// RecordAttempt records one attempt.
	RecordAttempt(s A, o Observation)
	// CounterSeries returns the series of family f with the given label
	// values (as many as f has, in the order of its constant's comment).
	CounterSeries(f Family, labels [3]string) C
	// Inc adds one to a counter series.
	Inc(c C)
	// RequestSeries returns the series of a combo's requests that made
	// attempts attempts and count with them one exclusion on each series
	// of exclusions (the Exclusions series of their reasons, in order);
	// the Core counts other exclusions on their own, with Inc. It is
	// called once for each distinct set of arguments.
	RequestSeries(combo string, attempts int, exclusions []C) R
	// RecordRequest records one routed request of series s: its router
	// overhead, its attempts, and one on each of s's exclusion series.
	RecordRequest(s R, overhead time.Duration)
}

// Observation is what an attempt measured.
type Observation struct {
	Duration, QueueWait time.Duration
	// FirstOutput is a successful stream's time to its first useful
	// output; 0 for everything else.
	FirstOutput time.Duration
	// InputTokens and OutputTokens are a successful attempt's token usage
	// as its answer reported it; 0 when it reported none.
	InputTokens, OutputTokens int64
}

// AttemptKey is the label set of one attempt.
type AttemptKey struct {
	Provider, Model, Outcome, StatusClass, Reason string
	// ErrorType is the gen_ai error.type of a failed attempt: its status
	// ("503") or "_OTHER"; empty for a success or a skip.
	ErrorType string
}

// Skipped reports whether k is the label set of a skipped target.
func (k *AttemptKey) Skipped() bool { return k.Outcome == string(combo.OutcomeSkipped) }

// Label values the package gives itself.
const (
	reasonOther = "other"
	classNone   = "none"
	// ErrorTypeOther is the error.type of a failure without a status.
	ErrorTypeOther = "_OTHER"
	// RetrySameTarget is the Attempt.Code of an attempt retried on its
	// own target.
	RetrySameTarget = "retry_same_target"
	// DefaultOperation is the default gen_ai.operation.name.
	DefaultOperation = "chat"
)

// BreakerStates are the values of the state label of breaker_state, one
// series each.
var BreakerStates = [...]breaker.State{breaker.Closed, breaker.Degraded, breaker.Open, breaker.HalfOpen}

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

// ErrorType is the error.type of a failed attempt with status: the
// status ("503") for an error status, else "_OTHER".
func ErrorType(status int) string {
	if status >= 400 && status < len(statusText) {
		return statusText[status]
	}
	return ErrorTypeOther
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

// BoundedLabel returns s when it reads as a code from a fixed vocabulary
// (at most 64 letters, digits, '_', '-', '.', ':'), else "other", so that a
// free-text detail never becomes a label value.
func BoundedLabel(s string) string {
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
func keyOf(a *combo.Attempt) AttemptKey {
	k := AttemptKey{Provider: a.Target.Provider, Model: a.Target.Model, Outcome: string(a.Outcome)}
	switch a.Outcome {
	case combo.OutcomeSkipped:
		k.StatusClass, k.Reason = classNone, BoundedLabel(string(a.Reason))
	case combo.OutcomeFailed:
		k.StatusClass, k.Reason = statusClass(a.Status), BoundedLabel(a.Code)
		k.ErrorType = ErrorType(a.Status)
	default:
		k.StatusClass = statusClass(a.Status)
	}
	return k
}

// Chain returns a hook that calls prev (when set) and then next.
func Chain[E any](prev, next func(E)) func(E) {
	if prev == nil {
		return next
	}
	return func(e E) {
		prev(e)
		next(e)
	}
}

// Core turns events and attempts into calls on its Sink.
type Core[A, C, R any] struct {
	sink      Sink[A, C, R]
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

	attemptsSeen   attemptTable[A]
	countersSeen   table[C]
	exclusionsSeen strTable[C]
	requestsSeen   requestTable[R]
	requests       *Cache[requestKey, R] // the Sink's request series, by value
}

// requestKey is the value of a request's key: the combo, the attempts made
// and the reasons of the exclusions counted with the request.
type requestKey struct {
	combo   string
	made, n int
	reasons [shapeExclusions]string
}

// maxShapes bounds the request series that count exclusions with them:
// past it, a new kind of request counts its exclusions one by one.
const maxShapes = 1024

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

// New returns a Core recording into s. The breaker_state series of
// providers exist from the start; now is the clock of the gauges (nil: the
// router's, else time.Now).
func New[A, C, R any](s Sink[A, C, R], providers []string, now func() time.Time) *Core[A, C, R] {
	c := &Core[A, C, R]{
		sink: s, now: now, fixed: map[string]bool{},
		providers: map[string]breaker.State{}, conns: map[string]connState{}, keys: map[string]struct{}{},
	}
	for _, p := range providers {
		if p != "" {
			c.fixed[p] = true
		}
	}
	c.requests = NewCache(func(k requestKey) R {
		var excl []C
		if k.n > 0 {
			excl = make([]C, k.n)
			for i := range excl {
				excl[i] = c.exclusionSeries(k.reasons[i])
			}
		}
		return c.sink.RequestSeries(k.combo, k.made, excl)
	})
	return c
}

// Clock is the time the gauges are read at.
func (c *Core[A, C, R]) Clock() time.Time {
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

// Attach chains the router's attempt and request hooks and remembers the
// layers the gauges read at collection time.
func (c *Core[A, C, R]) Attach(cfg *combo.Config) {
	cfg.OnAttempt = Chain(cfg.OnAttempt, c.attemptHook())
	cfg.OnRequest = Chain(cfg.OnRequest, c.requestHook())
	c.mu.Lock()
	c.breakers, c.cooldowns, c.queue, c.routerNow = cfg.Breakers, cfg.Cooldowns, cfg.Queue, cfg.Now
	c.mu.Unlock()
}

// AttachBreaker chains the breaker events into cfg.OnChange.
func (c *Core[A, C, R]) AttachBreaker(cfg *breaker.Config) {
	cfg.OnChange = Chain(cfg.OnChange, c.onBreaker)
}

// AttachCooldown chains the cooldown events into cfg.OnChange.
func (c *Core[A, C, R]) AttachCooldown(cfg *cooldown.Config) {
	cfg.OnChange = Chain(cfg.OnChange, c.onCooldown)
}

// AttachLockout chains the lockout events into cfg.OnChange.
func (c *Core[A, C, R]) AttachLockout(cfg *lockout.Config) {
	cfg.OnChange = Chain(cfg.OnChange, c.onLockout)
}

// AttachQueue chains the queue events into cfg.OnChange.
func (c *Core[A, C, R]) AttachQueue(cfg *queue.Config) { cfg.OnChange = Chain(cfg.OnChange, c.onQueue) }

// count adds one to the series of family f with labels l.
func (c *Core[A, C, R]) count(f Family, l0, l1, l2 string) {
	l := [3]string{l0, l1, l2}
	var k key
	fits := k.setCounter(f, &l)
	var s C
	ok := false
	if fits {
		s, ok = c.countersSeen.get(&k)
	}
	if !ok {
		s = c.sink.CounterSeries(f, l)
		if fits {
			c.countersSeen.put(&k, l, s)
		}
	}
	c.sink.Inc(s)
}

// exclusionSeries returns the Exclusions series of reason.
func (c *Core[A, C, R]) exclusionSeries(reason string) C {
	s, ok := c.exclusionsSeen.get(reason)
	if !ok {
		s = c.sink.CounterSeries(Exclusions, [3]string{BoundedLabel(reason)})
		c.exclusionsSeen.put(reason, s)
	}
	return s
}

func (c *Core[A, C, R]) onBreaker(e breaker.Event) {
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
		c.count(Transitions, e.Provider, e.From.String(), e.To.String())
	}
}

func (c *Core[A, C, R]) onCooldown(e cooldown.Event) {
	if e.Conn == "" {
		return
	}
	c.mu.Lock()
	c.conns[e.Conn] = connState{state: e.State, until: e.Until}
	c.mu.Unlock()
	if e.Action == cooldown.Episode {
		c.count(Cooldowns, e.Conn, BoundedLabel(e.Reason), "")
	}
}

func (c *Core[A, C, R]) onLockout(e lockout.Event) {
	if e.Kind == lockout.EventLocked && !e.Removed {
		c.count(Lockouts, e.Provider, e.Model, BoundedLabel(string(e.Reason)))
	}
}

func (c *Core[A, C, R]) onQueue(e queue.Event) {
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
		c.count(Rejected, e.Key, "queue_full", "")
	case queue.EventQueueTimeout:
		c.count(Rejected, e.Key, "queue_timeout", "")
	}
}

// attemptHook returns the OnAttempt hook: the attempt's series, looked up
// by its fields, records it. It is a func literal, not a method value, so
// that the router's call reaches the work in one call.
func (c *Core[A, C, R]) attemptHook() func(combo.Attempt) {
	return func(a combo.Attempt) {
		reason, made := "", true
		o := Observation{Duration: a.Duration, QueueWait: a.QueueWait}
		switch a.Outcome {
		case combo.OutcomeSucceeded:
			o.FirstOutput = a.FirstOutput
			o.InputTokens, o.OutputTokens = int64(a.Usage.InputTokens), int64(a.Usage.OutputTokens)
		case combo.OutcomeFailed:
			reason = a.Code
		case combo.OutcomeSkipped:
			reason, made = string(a.Reason), false
		}
		s, ok := c.attemptsSeen.get(&a, reason)
		if !ok {
			s = c.newAttemptSeries(&a, reason)
		}
		c.sink.RecordAttempt(s, o)
		if a.Cut != "" && made {
			c.count(StreamCuts, BoundedLabel(a.Cut), "", "")
		}
	}
}

// newAttemptSeries is the slow path of the OnAttempt hook: it notes the
// attempt's connection and resolves its series by label values.
func (c *Core[A, C, R]) newAttemptSeries(a *combo.Attempt, reason string) A {
	if conn := a.Target.Connection; conn != "" {
		c.mu.Lock()
		if _, known := c.conns[conn]; !known {
			c.conns[conn] = connState{} // conns never forgets one: the entry stays true
		}
		c.mu.Unlock()
	}
	s := c.sink.AttemptSeries(keyOf(a))
	c.attemptsSeen.put(a, reason, s)
	return s
}

// routed reports whether a request that ended with err was routed: not
// when err is the caller's context or a lease refusal.
func routed(err error) bool {
	_, ok := errors.AsType[*combo.Error](err)
	return ok
}

// requestHook returns the OnRequest hook, which records each routed
// request (not one that ended with the caller's context error or a lease
// refusal): e.Combo's, that took e.Duration and made e.Attempts, with
// e.Excluded kept out before dispatch. Like attemptHook, it is a func
// literal so that the router's call reaches the work in one call.
//
// The router overhead is the duration less the time each attempt made
// spent on its upstream, from its admission to its end (the answer's
// headers and a plain answer's body, or a stream up to its first useful
// output). The pauses the router makes on purpose (admission waits, the
// same-target retry delay, cooldown waits) are included.
func (c *Core[A, C, R]) requestHook() func(combo.RequestEnd) {
	return func(e combo.RequestEnd) {
		if e.Err != nil && !routed(e.Err) {
			return
		}
		made, skipped, d := 0, 0, e.Duration
		for i := range e.Attempts {
			if a := &e.Attempts[i]; a.Outcome != combo.OutcomeSkipped {
				made++
				d -= a.Duration - a.QueueWait
			} else {
				skipped++
			}
		}
		// A request without skips counts its exclusions with its series,
		// in one add; the others count them one by one (see observeMore).
		with := e.Excluded
		if skipped > 0 || len(with) > shapeExclusions {
			with = nil
		}
		s, ok := c.requestsSeen.get(e.Combo, made, with)
		if !ok {
			s, with = c.newRequestSeries(e.Combo, made, with)
		}
		c.sink.RecordRequest(s, max(d, 0))
		if len(with) < len(e.Excluded) || skipped > 0 || made > 1 {
			c.observeMore(&e, len(with) < len(e.Excluded), skipped > 0)
		}
	}
}

// observeMore counts what a request's series does not: its exclusions
// one by one when the series does not count them (leaving out those a
// terminal answer lists both as skips and as exclusions), its skips and
// its fallbacks.
func (c *Core[A, C, R]) observeMore(e *combo.RequestEnd, exclusions, skips bool) {
	attempts := e.Attempts
	if exclusions {
		for i := range e.Excluded {
			if x := &e.Excluded[i]; !skips || !skippedIn(attempts, x) {
				c.sink.Inc(c.exclusionSeries(string(x.Reason)))
			}
		}
	}
	var prev *combo.Attempt
	for i := range attempts {
		a := &attempts[i]
		if a.Outcome == combo.OutcomeSkipped {
			c.sink.Inc(c.exclusionSeries(string(a.Reason)))
			continue
		}
		if prev != nil && prev.Code != RetrySameTarget {
			c.count(Fallbacks, prev.Target.Provider, a.Target.Provider, string(tryOutcome(attempts[i:])))
		}
		prev = a
	}
}

// newRequestSeries is the slow path of the OnRequest hook: it resolves the series of
// combo name's requests that made attempts and count the exclusions with
// with them, by value. Past maxShapes series, a request that would count
// its exclusions with a new series counts them one by one: it returns the
// exclusions its series counts.
func (c *Core[A, C, R]) newRequestSeries(name string, made int, with []combo.Exclusion) (R, []combo.Exclusion) {
	if len(with) > 0 && c.requests.Len() >= maxShapes {
		with = nil
		if s, ok := c.requestsSeen.get(name, made, nil); ok {
			return s, nil
		}
	}
	v := requestKey{combo: name, made: made, n: len(with)}
	for i := range with {
		v.reasons[i] = string(with[i].Reason)
	}
	s := c.requests.Get(v)
	c.requestsSeen.put(name, made, with, s)
	return s, with
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
		if a.Code != RetrySameTarget {
			break
		}
	}
	return out
}

// Samples for the gauges, taken at collection time.

// BreakerSample is one provider's breaker state.
type BreakerSample struct {
	Provider string
	State    breaker.State
}

// ConnSample is one connection's availability.
type ConnSample struct {
	Conn  string
	Up    bool
	Until time.Time // zero when the connection is not held back by a timer
}

// QueueSample is one admission queue key's load.
type QueueSample struct {
	Key              string
	Running, Waiting int
}

// BreakerSamples returns the state of every known provider: Options
// providers, the breakers of the attached Set and the providers heard of in
// events, sorted by provider.
func (c *Core[A, C, R]) BreakerSamples(now time.Time) []BreakerSample {
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
	out := make([]BreakerSample, 0, len(states))
	for p, s := range states {
		out = append(out, BreakerSample{p, s})
	}
	slices.SortFunc(out, func(a, b BreakerSample) int { return strings.Compare(a.Provider, b.Provider) })
	return out
}

// ConnSamples returns every known connection (from cooldown events, from
// attempts and, when attached, from the tracker), sorted by id.
func (c *Core[A, C, R]) ConnSamples(now time.Time) []ConnSample {
	c.mu.RLock()
	tr := c.cooldowns
	states := make(map[string]connState, len(c.conns))
	for k, v := range c.conns {
		states[k] = v
	}
	c.mu.RUnlock()
	out := make([]ConnSample, 0, len(states))
	if tr != nil {
		for _, in := range tr.SnapshotAt(now) {
			states[in.Conn] = connState{}
		}
		for conn := range states {
			st := tr.StatusAt(conn, now)
			out = append(out, ConnSample{Conn: conn, Up: st.State == cooldown.Available, Until: st.Until})
		}
	} else {
		for conn, st := range states {
			s := ConnSample{Conn: conn, Up: st.state == cooldown.Available}
			if !st.until.IsZero() && st.state != cooldown.Available {
				if now.Before(st.until) {
					s.Until = st.until
				} else {
					s.Up = true // the timed state has ended
				}
			}
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b ConnSample) int { return strings.Compare(a.Conn, b.Conn) })
	return out
}

// QueueSamples returns the running and waiting requests of every key the
// attached queue keeps, and 0 for keys heard of in events that it dropped.
func (c *Core[A, C, R]) QueueSamples(now time.Time) []QueueSample {
	c.mu.RLock()
	q := c.queue
	keys := make(map[string]QueueSample, len(c.keys))
	for k := range c.keys {
		keys[k] = QueueSample{Key: k}
	}
	c.mu.RUnlock()
	if q != nil {
		for _, ks := range q.SnapshotAt(now) {
			keys[ks.Key] = QueueSample{Key: ks.Key, Running: ks.Running, Waiting: ks.Waiting}
		}
	}
	out := make([]QueueSample, 0, len(keys))
	for _, s := range keys {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b QueueSample) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// AttachSharedStore adds (or, for a name already given, replaces) a
// shared state store whose lag and degraded flag the gauges read.
func (c *Core[A, C, R]) AttachSharedStore(name string, lag func() time.Duration, degraded func() bool) {
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

// StoreSample is one shared state store's lag and health.
type StoreSample struct {
	Store            string
	Lag              time.Duration
	HasLag, Degraded bool
}

// StoreSamples reads every attached store, in the order attached.
func (c *Core[A, C, R]) StoreSamples() []StoreSample {
	c.mu.RLock()
	stores := slices.Clone(c.stores)
	c.mu.RUnlock()
	out := make([]StoreSample, 0, len(stores))
	for _, s := range stores {
		x := StoreSample{Store: s.name}
		if s.lag != nil {
			x.Lag, x.HasLag = max(s.lag(), 0), true
		}
		if s.degraded != nil {
			x.Degraded = s.degraded()
		}
		out = append(out, x)
	}
	return out
}
