package otelmetrics

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lockout"
	"github.com/routeguard/routeguard/queue"
)

// ScopeName is the instrumentation scope of the package's meter.
const ScopeName = "github.com/routeguard/routeguard/combo/otelmetrics"

// The GenAI semantic conventions' attributes.
const (
	attrOperationName = attribute.Key("gen_ai.operation.name")
	attrProviderName  = attribute.Key("gen_ai.provider.name")
	attrRequestModel  = attribute.Key("gen_ai.request.model")
	attrErrorType     = attribute.Key("error.type")
)

// Options configure Metrics. The zero value is usable but records into a
// no-op meter provider.
type Options struct {
	// MeterProvider creates the package's meter (scope ScopeName). nil
	// means a no-op provider: nothing is recorded.
	MeterProvider metric.MeterProvider
	// Providers are the providers whose routeguard_breaker_state series
	// exist from the start (as closed). Others appear once the attached
	// breaker Set holds a breaker for them or one of its events names them.
	Providers []string
	// Operation is the gen_ai.operation.name of every attempt. Default
	// "chat".
	Operation string
	// Now is the clock of the gauges observed at collection time (breaker
	// states, cooldown ends). nil means the Now of the combo.Config given to
	// Metrics.Attach, else time.Now.
	Now func() time.Time
}

// Metrics records routeguard's metrics as OpenTelemetry instruments, with
// the names and attributes of the promcollector package, plus the GenAI
// client metric gen_ai.client.operation.duration per attempt.
// Metrics is safe for concurrent use.
type Metrics struct {
	core *core
	op   string
	reg  metric.Registration

	transitions, cooldowns, lockouts, exclusions, attempts metric.Int64Counter
	fallbacks, rejected, streamCuts                        metric.Int64Counter
	requestAttempts                                        metric.Int64Histogram
	overhead, operation, firstChunk, queueWait             metric.Float64Histogram
	breakerState, connUp, inFlight, queueDepth             metric.Int64ObservableGauge
	coolUntil, storeLag                                    metric.Float64ObservableGauge
	storeDegraded                                          metric.Int64ObservableGauge

	overheadOpts       []metric.RecordOption
	attemptChildren    *cache[attemptKey, *attemptSeries]
	transitionChildren *cache[triple, []metric.AddOption]
	cooldownChildren   *cache[pair, []metric.AddOption]
	lockoutChildren    *cache[triple, []metric.AddOption]
	exclusionChildren  *cache[string, []metric.AddOption]
	fallbackChildren   *cache[triple, []metric.AddOption]
	rejectedChildren   *cache[pair, []metric.AddOption]
	cutChildren        *cache[string, []metric.AddOption]
	requestChildren    *cache[string, []metric.RecordOption]
	waitChildren       *cache[string, []metric.RecordOption]
	chunkChildren      *cache[pair, []metric.RecordOption]
}

// attemptSeries are the attributes one attempt label set records with.
type attemptSeries struct {
	count                 []metric.AddOption
	duration, wait, chunk []metric.RecordOption // nil for a skip
}

type exclusionSeries struct{ count []metric.AddOption }

type requestSeries struct{ attempts []metric.RecordOption }

func addOpts(kv ...attribute.KeyValue) []metric.AddOption {
	return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
}

func recordOpts(kv ...attribute.KeyValue) []metric.RecordOption {
	return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
}

// New returns Metrics whose instruments come from o.MeterProvider. Attach
// it to the layer configurations before the layers are built, and to the
// router's combo.Config before combo.New. The error joins the errors of the
// instruments that could not be created; the others still record.
func New(o Options) (*Metrics, error) {
	mp := o.MeterProvider
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	meter := mp.Meter(ScopeName)
	m := &Metrics{op: o.Operation}
	if m.op == "" {
		m.op = defaultOp
	}
	m.core = newCore(m, o.Providers, o.Now)
	var errs []error
	counter := func(name, help, unit string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithDescription(help), metric.WithUnit(unit))
		errs = append(errs, err)
		return c
	}
	m.transitions = counter(nameBreakerTransitions, helpBreakerTransitions, "{transition}")
	m.cooldowns = counter(nameConnectionCooldown, helpConnectionCooldown, "{cooldown}")
	m.lockouts = counter(nameModelLockouts, helpModelLockouts, "{lockout}")
	m.exclusions = counter(nameExclusions, helpExclusions, "{exclusion}")
	m.attempts = counter(nameAttempts, helpAttempts, "{attempt}")
	m.fallbacks = counter(nameFallbacks, helpFallbacks, "{fallback}")
	m.rejected = counter(nameQueueRejected, helpQueueRejected, "{request}")
	m.streamCuts = counter(nameStreamCuts, helpStreamCuts, "{stream}")
	var err error
	m.requestAttempts, err = meter.Int64Histogram(nameRequestAttempts, metric.WithDescription(helpRequestAttempts),
		metric.WithUnit("{attempt}"), metric.WithExplicitBucketBoundaries(attemptBuckets...))
	errs = append(errs, err)
	m.overhead, err = meter.Float64Histogram(nameRouterOverhead, metric.WithDescription(helpRouterOverhead),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(overheadBuckets...))
	errs = append(errs, err)
	m.operation, err = meter.Float64Histogram(genAIOperationDuration, metric.WithDescription(helpOperation),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(operationBuckets...))
	errs = append(errs, err)
	m.firstChunk, err = meter.Float64Histogram(genAIFirstChunk, metric.WithDescription(helpFirstChunk),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(firstChunkBuckets...))
	errs = append(errs, err)
	m.queueWait, err = meter.Float64Histogram(nameQueueWait, metric.WithDescription(helpQueueWait),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(queueWaitBuckets...))
	errs = append(errs, err)
	gauge := func(name, help, unit string) metric.Int64ObservableGauge {
		g, err := meter.Int64ObservableGauge(name, metric.WithDescription(help), metric.WithUnit(unit))
		errs = append(errs, err)
		return g
	}
	m.breakerState = gauge(nameBreakerState, helpBreakerState, "1")
	m.connUp = gauge(nameConnectionUp, helpConnectionUp, "1")
	m.inFlight = gauge(nameInFlight, helpInFlight, "{request}")
	m.queueDepth = gauge(nameQueueDepth, helpQueueDepth, "{request}")
	m.coolUntil, err = meter.Float64ObservableGauge(nameCooldownUntil, metric.WithDescription(helpCooldownUntil), metric.WithUnit("s"))
	errs = append(errs, err)
	m.storeLag, err = meter.Float64ObservableGauge(nameReplicationLag, metric.WithDescription(helpReplicationLag), metric.WithUnit("s"))
	errs = append(errs, err)
	m.storeDegraded = gauge(nameStoreDegraded, helpStoreDegraded, "1")
	m.reg, err = meter.RegisterCallback(m.observe, m.breakerState, m.connUp, m.inFlight, m.queueDepth, m.coolUntil,
		m.storeLag, m.storeDegraded)
	errs = append(errs, err)

	m.overheadOpts = recordOpts()
	m.attemptChildren = newCache(func(k attemptKey) *attemptSeries {
		ch := &attemptSeries{count: addOpts(
			attribute.String("provider", k.provider), attribute.String("model", k.model),
			attribute.String("outcome", k.outcome), attribute.String("status_class", k.statusClass),
			attribute.String("reason", k.reason))}
		if k.outcome != string(combo.OutcomeSkipped) {
			kv := []attribute.KeyValue{attrOperationName.String(m.op), attrProviderName.String(k.provider), attrRequestModel.String(k.model)}
			if k.errorType != "" {
				kv = append(kv, attrErrorType.String(k.errorType))
			}
			ch.duration = recordOpts(kv...)
			ch.wait = m.waitChildren.get(k.provider)
			ch.chunk = m.chunkChildren.get(pair{k.provider, k.model})
		}
		return ch
	})
	m.transitionChildren = newCache(func(k triple) []metric.AddOption {
		return addOpts(attribute.String("provider", k.a), attribute.String("from", k.b), attribute.String("to", k.c))
	})
	m.cooldownChildren = newCache(func(k pair) []metric.AddOption {
		return addOpts(attribute.String("connection", k.a), attribute.String("reason", k.b))
	})
	m.lockoutChildren = newCache(func(k triple) []metric.AddOption {
		return addOpts(attribute.String("provider", k.a), attribute.String("model", k.b), attribute.String("reason", k.c))
	})
	m.exclusionChildren = newCache(func(k string) []metric.AddOption { return addOpts(attribute.String("reason", k)) })
	m.fallbackChildren = newCache(func(k triple) []metric.AddOption {
		return addOpts(attribute.String("from_provider", k.a), attribute.String("to_provider", k.b), attribute.String("result", k.c))
	})
	m.rejectedChildren = newCache(func(k pair) []metric.AddOption {
		return addOpts(attribute.String("connection", k.a), attribute.String("reason", k.b))
	})
	m.cutChildren = newCache(func(k string) []metric.AddOption { return addOpts(attribute.String("cause", k)) })
	m.requestChildren = newCache(func(k string) []metric.RecordOption { return recordOpts(attribute.String("combo", k)) })
	m.waitChildren = newCache(func(k string) []metric.RecordOption { return recordOpts(attribute.String("provider", k)) })
	m.chunkChildren = newCache(func(k pair) []metric.RecordOption {
		return recordOpts(attrOperationName.String(m.op), attrProviderName.String(k.a), attrRequestModel.String(k.b))
	})
	return m, errors.Join(errs...)
}

// Attach chains the Metrics into cfg.OnAttempt and cfg.OnRequest (hooks
// already set are called first) and has the gauges read cfg.Breakers,
// cfg.Cooldowns and cfg.Queue when they are observed. Call it before
// combo.New(cfg), once.
func (m *Metrics) Attach(cfg *combo.Config) { m.core.attach(cfg) }

// AttachBreaker chains the Metrics into cfg.OnChange, keeping a hook
// already set (called first). Call it before breaker.NewSet(cfg), once.
func (m *Metrics) AttachBreaker(cfg *breaker.Config) { m.core.attachBreaker(cfg) }

// AttachCooldown chains the Metrics into cfg.OnChange, keeping a hook
// already set (called first). Call it before cooldown.New(cfg), once.
func (m *Metrics) AttachCooldown(cfg *cooldown.Config) { m.core.attachCooldown(cfg) }

// AttachLockout chains the Metrics into cfg.OnChange, keeping a hook
// already set (called first). Call it before lockout.New(cfg), once.
func (m *Metrics) AttachLockout(cfg *lockout.Config) { m.core.attachLockout(cfg) }

// AttachQueue chains the Metrics into cfg.OnChange, keeping a hook already
// set (called first). Call it before queue.New(cfg), once.
func (m *Metrics) AttachQueue(cfg *queue.Config) { m.core.attachQueue(cfg) }

// AttachSharedStore has the Metrics report a shared state store's
// routeguard_replication_lag_seconds (from lag; none when lag is nil) and
// routeguard_shared_store_degraded (1 while degraded reports true; none
// when degraded is nil), with attribute store=name, read in the gauges'
// callback. A name given again replaces the earlier funcs. The funcs are
// called concurrently with the router and must not block: the Stats and
// Degraded methods of combo/redisstate qualify.
func (m *Metrics) AttachSharedStore(name string, lag func() time.Duration, degraded func() bool) {
	m.core.attachSharedStore(name, lag, degraded)
}

// Close unregisters the callback of the observable gauges. The counters
// and histograms keep recording.
func (m *Metrics) Close() error {
	if m.reg == nil {
		return nil
	}
	return m.reg.Unregister()
}

// observe is the callback of the observable gauges.
func (m *Metrics) observe(_ context.Context, o metric.Observer) error {
	now := m.core.clock()
	for _, s := range m.core.breakerSamples(now) {
		for _, st := range breakerStates {
			v := int64(0)
			if st == s.state {
				v = 1
			}
			o.ObserveInt64(m.breakerState, v, metric.WithAttributes(attribute.String("provider", s.provider), attribute.String("state", st.String())))
		}
	}
	for _, s := range m.core.connSamples(now) {
		up, until := int64(0), 0.0
		if s.up {
			up = 1
		}
		if !s.until.IsZero() {
			until = float64(s.until.UnixNano()) / 1e9
		}
		attrs := metric.WithAttributes(attribute.String("connection", s.conn))
		o.ObserveInt64(m.connUp, up, attrs)
		o.ObserveFloat64(m.coolUntil, until, attrs)
	}
	for _, s := range m.core.queueSamples(now) {
		attrs := metric.WithAttributes(attribute.String("connection", s.key))
		o.ObserveInt64(m.inFlight, int64(s.running), attrs)
		o.ObserveInt64(m.queueDepth, int64(s.waiting), attrs)
	}
	for _, s := range m.core.storeSamples() {
		attrs := metric.WithAttributes(attribute.String("store", s.store))
		if s.hasLag {
			o.ObserveFloat64(m.storeLag, s.lag.Seconds(), attrs)
		}
		v := int64(0)
		if s.degraded {
			v = 1
		}
		o.ObserveInt64(m.storeDegraded, v, attrs)
	}
	return nil
}

// The sink.

var bg = context.Background()

func (m *Metrics) breakerTransition(provider, from, to string) {
	m.transitions.Add(bg, 1, m.transitionChildren.get(triple{provider, from, to})...)
}

func (m *Metrics) connectionCooldown(conn, reason string) {
	m.cooldowns.Add(bg, 1, m.cooldownChildren.get(pair{conn, reason})...)
}

func (m *Metrics) modelLockout(provider, model, reason string) {
	m.lockouts.Add(bg, 1, m.lockoutChildren.get(triple{provider, model, reason})...)
}

func (m *Metrics) queueRejected(key, reason string) {
	m.rejected.Add(bg, 1, m.rejectedChildren.get(pair{key, reason})...)
}

func (m *Metrics) attemptSeries(k attemptKey) *attemptSeries { return m.attemptChildren.get(k) }

func (m *Metrics) recordAttempt(s *attemptSeries, d, wait, firstOutput time.Duration) {
	m.attempts.Add(bg, 1, s.count...)
	if s.duration == nil {
		return // a skip
	}
	m.operation.Record(bg, d.Seconds(), s.duration...)
	m.queueWait.Record(bg, wait.Seconds(), s.wait...)
	if firstOutput > 0 {
		m.firstChunk.Record(bg, firstOutput.Seconds(), s.chunk...)
	}
}

func (m *Metrics) streamCut(cause string) { m.streamCuts.Add(bg, 1, m.cutChildren.get(cause)...) }

func (m *Metrics) exclusionSeries(reason string) *exclusionSeries {
	return &exclusionSeries{count: m.exclusionChildren.get(reason)}
}

func (m *Metrics) recordExclusion(s *exclusionSeries) { m.exclusions.Add(bg, 1, s.count...) }

func (m *Metrics) requestSeries(name string) *requestSeries {
	return &requestSeries{attempts: m.requestChildren.get(name)}
}

func (m *Metrics) recordRequest(s *requestSeries, attempts int, overhead time.Duration) {
	m.requestAttempts.Record(bg, int64(attempts), s.attempts...)
	m.overhead.Record(bg, overhead.Seconds(), m.overheadOpts...)
}

func (m *Metrics) fallback(from, to, result string) {
	m.fallbacks.Add(bg, 1, m.fallbackChildren.get(triple{from, to, result})...)
}
