package promcollector

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lockout"
	"github.com/routeguard/routeguard/queue"
)

// Options configure a Collector. The zero value is usable.
type Options struct {
	// Providers are the providers whose routeguard_breaker_state series
	// exist from the start (as closed). Others appear once the attached
	// breaker Set holds a breaker for them or one of its events names them.
	Providers []string
	// Operation is the gen_ai.operation.name of every attempt. Default
	// "chat".
	Operation string
	// Now is the clock of the gauges read at collection time (breaker
	// states, cooldown ends). nil means the Now of the combo.Config given to
	// Collector.Attach, else time.Now.
	Now func() time.Time
	// ConstLabels are added to every metric; nil adds none.
	ConstLabels prometheus.Labels
}

// Collector is a prometheus.Collector of routeguard's metrics. Register it
// on your own prometheus.Registerer; it registers nothing by itself.
// A Collector is safe for concurrent use.
type Collector struct {
	core *core
	op   string

	breakerState, connUp, coolUntil, inFlight, queueDepth *prometheus.Desc

	transitions, cooldowns, lockouts, exclusions, attempts *prometheus.CounterVec
	fallbacks, rejected, streamCuts                        *prometheus.CounterVec
	requestAttempts, operation, firstChunk, queueWait      *prometheus.HistogramVec
	overhead                                               prometheus.Histogram

	storeLag, storeDegraded *prometheus.Desc

	attemptChildren    *cache[attemptKey, *attemptSeries]
	transitionChildren *cache[triple, prometheus.Counter]
	cooldownChildren   *cache[pair, prometheus.Counter]
	lockoutChildren    *cache[triple, prometheus.Counter]
	exclusionChildren  *cache[string, prometheus.Counter]
	fallbackChildren   *cache[triple, prometheus.Counter]
	rejectedChildren   *cache[pair, prometheus.Counter]
	cutChildren        *cache[string, prometheus.Counter]
	requestChildren    *cache[string, prometheus.Observer]
	waitChildren       *cache[string, prometheus.Observer]
	chunkChildren      *cache[pair, prometheus.Observer]
}

// attemptSeries are the series one attempt label set records into.
type attemptSeries struct {
	count          prometheus.Counter
	duration, wait prometheus.Observer // nil for a skip
	// chunk is made on the first streamed answer, so that a plain answer
	// adds no empty first-chunk series.
	chunk func() prometheus.Observer
}

type exclusionSeries struct{ count prometheus.Counter }

type requestSeries struct{ attempts prometheus.Observer }

// New returns a Collector. Attach it to the layer configurations before
// the layers are built, and to the router's combo.Config before combo.New.
func New(o Options) *Collector {
	c := &Collector{op: o.Operation}
	if c.op == "" {
		c.op = defaultOp
	}
	cl := o.ConstLabels
	c.core = newCore(c, o.Providers, o.Now)
	c.breakerState = prometheus.NewDesc(nameBreakerState, helpBreakerState, []string{"provider", "state"}, cl)
	c.connUp = prometheus.NewDesc(nameConnectionUp, helpConnectionUp, []string{"connection"}, cl)
	c.coolUntil = prometheus.NewDesc(nameCooldownUntil, helpCooldownUntil, []string{"connection"}, cl)
	c.inFlight = prometheus.NewDesc(nameInFlight, helpInFlight, []string{"connection"}, cl)
	c.queueDepth = prometheus.NewDesc(nameQueueDepth, helpQueueDepth, []string{"connection"}, cl)

	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: cl}, labels)
	}
	c.transitions = counter(nameBreakerTransitions, helpBreakerTransitions, "provider", "from", "to")
	c.cooldowns = counter(nameConnectionCooldown, helpConnectionCooldown, "connection", "reason")
	c.lockouts = counter(nameModelLockouts, helpModelLockouts, "provider", "model", "reason")
	c.exclusions = counter(nameExclusions, helpExclusions, "reason")
	c.attempts = counter(nameAttempts, helpAttempts, "provider", "model", "outcome", "status_class", "reason")
	c.fallbacks = counter(nameFallbacks, helpFallbacks, "from_provider", "to_provider", "result")
	c.rejected = counter(nameQueueRejected, helpQueueRejected, "connection", "reason")
	c.streamCuts = counter(nameStreamCuts, helpStreamCuts, "cause")
	c.requestAttempts = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: nameRequestAttempts, Help: helpRequestAttempts, ConstLabels: cl, Buckets: attemptBuckets,
	}, []string{"combo"})
	c.overhead = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: nameRouterOverhead, Help: helpRouterOverhead, ConstLabels: cl, Buckets: overheadBuckets,
	})
	c.operation = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: promOperationDuration, Help: helpOperation, ConstLabels: cl, Buckets: operationBuckets,
	}, []string{"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model", "error_type"})
	c.firstChunk = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: promFirstChunk, Help: helpFirstChunk, ConstLabels: cl, Buckets: firstChunkBuckets,
	}, []string{"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model"})
	c.queueWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: nameQueueWait, Help: helpQueueWait, ConstLabels: cl, Buckets: queueWaitBuckets,
	}, []string{"provider"})

	c.storeLag = prometheus.NewDesc(nameReplicationLag, helpReplicationLag, []string{"store"}, cl)
	c.storeDegraded = prometheus.NewDesc(nameStoreDegraded, helpStoreDegraded, []string{"store"}, cl)
	c.attemptChildren = newCache(func(k attemptKey) *attemptSeries {
		s := &attemptSeries{count: c.attempts.WithLabelValues(k.provider, k.model, k.outcome, k.statusClass, k.reason)}
		if k.outcome != string(combo.OutcomeSkipped) {
			s.duration = c.operation.WithLabelValues(c.op, k.provider, k.model, k.errorType)
			s.wait = c.waitChildren.get(k.provider)
			s.chunk = sync.OnceValue(func() prometheus.Observer { return c.chunkChildren.get(pair{k.provider, k.model}) })
		}
		return s
	})
	c.transitionChildren = newCache(func(k triple) prometheus.Counter { return c.transitions.WithLabelValues(k.a, k.b, k.c) })
	c.cooldownChildren = newCache(func(k pair) prometheus.Counter { return c.cooldowns.WithLabelValues(k.a, k.b) })
	c.lockoutChildren = newCache(func(k triple) prometheus.Counter { return c.lockouts.WithLabelValues(k.a, k.b, k.c) })
	c.exclusionChildren = newCache(func(k string) prometheus.Counter { return c.exclusions.WithLabelValues(k) })
	c.fallbackChildren = newCache(func(k triple) prometheus.Counter { return c.fallbacks.WithLabelValues(k.a, k.b, k.c) })
	c.rejectedChildren = newCache(func(k pair) prometheus.Counter { return c.rejected.WithLabelValues(k.a, k.b) })
	c.cutChildren = newCache(func(k string) prometheus.Counter { return c.streamCuts.WithLabelValues(k) })
	c.requestChildren = newCache(func(k string) prometheus.Observer { return c.requestAttempts.WithLabelValues(k) })
	c.waitChildren = newCache(func(k string) prometheus.Observer { return c.queueWait.WithLabelValues(k) })
	c.chunkChildren = newCache(func(k pair) prometheus.Observer { return c.firstChunk.WithLabelValues(c.op, k.a, k.b) })
	return c
}

// Attach chains the Collector into cfg.OnAttempt and cfg.OnRequest (hooks
// already set are called first) and has it read cfg.Breakers,
// cfg.Cooldowns and cfg.Queue when it is collected. Call it before
// combo.New(cfg), once.
func (c *Collector) Attach(cfg *combo.Config) { c.core.attach(cfg) }

// AttachBreaker chains the Collector into cfg.OnChange, keeping a hook
// already set (called first). Call it before breaker.NewSet(cfg), once.
func (c *Collector) AttachBreaker(cfg *breaker.Config) { c.core.attachBreaker(cfg) }

// AttachCooldown chains the Collector into cfg.OnChange, keeping a hook
// already set (called first). Call it before cooldown.New(cfg), once.
func (c *Collector) AttachCooldown(cfg *cooldown.Config) { c.core.attachCooldown(cfg) }

// AttachLockout chains the Collector into cfg.OnChange, keeping a hook
// already set (called first). Call it before lockout.New(cfg), once.
func (c *Collector) AttachLockout(cfg *lockout.Config) { c.core.attachLockout(cfg) }

// AttachQueue chains the Collector into cfg.OnChange, keeping a hook
// already set (called first). Call it before queue.New(cfg), once.
func (c *Collector) AttachQueue(cfg *queue.Config) { c.core.attachQueue(cfg) }

// AttachSharedStore has the Collector export a shared state store's
// routeguard_replication_lag_seconds (from lag; none when lag is nil) and
// routeguard_shared_store_degraded (1 while degraded reports true; none
// when degraded is nil), labelled store=name and read when the Collector
// is collected. A name given again replaces the earlier funcs. The funcs
// are called concurrently with the router and must not block: the Stats
// and Degraded methods of combo/redisstate qualify.
func (c *Collector) AttachSharedStore(name string, lag func() time.Duration, degraded func() bool) {
	c.core.attachSharedStore(name, lag, degraded)
}

// Describe sends the descriptors of every metric.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.breakerState, c.connUp, c.coolUntil, c.inFlight, c.queueDepth, c.storeLag, c.storeDegraded} {
		ch <- d
	}
	for _, v := range c.vecs() {
		v.Describe(ch)
	}
}

// Collect sends every metric; the gauges are read from the attached layers
// at the Collector's clock.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	now := c.core.clock()
	for _, s := range c.core.breakerSamples(now) {
		for _, st := range breakerStates {
			v := 0.0
			if st == s.state {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.breakerState, prometheus.GaugeValue, v, s.provider, st.String())
		}
	}
	for _, s := range c.core.connSamples(now) {
		up, until := 0.0, 0.0
		if s.up {
			up = 1
		}
		if !s.until.IsZero() {
			until = float64(s.until.UnixNano()) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(c.connUp, prometheus.GaugeValue, up, s.conn)
		ch <- prometheus.MustNewConstMetric(c.coolUntil, prometheus.GaugeValue, until, s.conn)
	}
	for _, s := range c.core.queueSamples(now) {
		ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(s.running), s.key)
		ch <- prometheus.MustNewConstMetric(c.queueDepth, prometheus.GaugeValue, float64(s.waiting), s.key)
	}
	for _, s := range c.core.storeSamples() {
		if s.hasLag {
			ch <- prometheus.MustNewConstMetric(c.storeLag, prometheus.GaugeValue, s.lag.Seconds(), s.store)
		}
		if s.degraded {
			ch <- prometheus.MustNewConstMetric(c.storeDegraded, prometheus.GaugeValue, 1, s.store)
		} else {
			ch <- prometheus.MustNewConstMetric(c.storeDegraded, prometheus.GaugeValue, 0, s.store)
		}
	}
	for _, v := range c.vecs() {
		v.Collect(ch)
	}
}

func (c *Collector) vecs() []prometheus.Collector {
	return []prometheus.Collector{c.transitions, c.cooldowns, c.lockouts, c.exclusions, c.attempts,
		c.fallbacks, c.rejected, c.streamCuts, c.requestAttempts, c.overhead, c.operation, c.firstChunk, c.queueWait}
}

// The sink.

func (c *Collector) breakerTransition(provider, from, to string) {
	c.transitionChildren.get(triple{provider, from, to}).Inc()
}

func (c *Collector) connectionCooldown(conn, reason string) {
	c.cooldownChildren.get(pair{conn, reason}).Inc()
}

func (c *Collector) modelLockout(provider, model, reason string) {
	c.lockoutChildren.get(triple{provider, model, reason}).Inc()
}

func (c *Collector) queueRejected(key, reason string) {
	c.rejectedChildren.get(pair{key, reason}).Inc()
}

func (c *Collector) attemptSeries(k attemptKey) *attemptSeries { return c.attemptChildren.get(k) }

func (c *Collector) recordAttempt(s *attemptSeries, d, wait, firstOutput time.Duration) {
	s.count.Inc()
	if s.duration == nil {
		return // a skip
	}
	s.duration.Observe(d.Seconds())
	s.wait.Observe(wait.Seconds())
	if firstOutput > 0 {
		s.chunk().Observe(firstOutput.Seconds())
	}
}

func (c *Collector) streamCut(cause string) { c.cutChildren.get(cause).Inc() }

func (c *Collector) exclusionSeries(reason string) *exclusionSeries {
	return &exclusionSeries{count: c.exclusionChildren.get(reason)}
}

func (c *Collector) recordExclusion(s *exclusionSeries) { s.count.Inc() }

func (c *Collector) requestSeries(name string) *requestSeries {
	return &requestSeries{attempts: c.requestChildren.get(name)}
}

func (c *Collector) recordRequest(s *requestSeries, attempts int, overhead time.Duration) {
	s.attempts.Observe(float64(attempts))
	c.overhead.Observe(overhead.Seconds())
}

func (c *Collector) fallback(from, to, result string) {
	c.fallbackChildren.get(triple{from, to, result}).Inc()
}
