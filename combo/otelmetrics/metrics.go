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
	"github.com/routeguard/routeguard/internal/metricscore"
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
	attrTokenType     = attribute.Key("gen_ai.token.type")
)

// Options configure Metrics. The zero value is usable but records
// nothing.
type Options struct {
	// MeterProvider creates the package's meter (scope ScopeName). nil
	// means nothing is recorded, at no cost: the Attach methods chain no
	// hook (see Metrics.Attach).
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
// client metrics gen_ai.client.operation.duration and, when an answer
// reported its usage, gen_ai.client.token.usage per attempt.
// Metrics is safe for concurrent use.
type Metrics struct {
	core *metricscore.Core[*attemptSeries, *counterSeries, *requestSeries]
	s    *sink
	off  bool // no MeterProvider: nothing to record
	reg  metric.Registration

	breakerState, connUp, inFlight, queueDepth metric.Int64ObservableGauge
	coolUntil, storeLag                        metric.Float64ObservableGauge
	storeDegraded                              metric.Int64ObservableGauge
}

// sink holds the instruments and the attribute sets of every series made.
type sink struct {
	op string

	counters                                   [metricscore.Fallbacks + 1]metric.Int64Counter
	attempts                                   metric.Int64Counter
	requestAttempts, tokens                    metric.Int64Histogram
	overhead, operation, firstChunk, queueWait metric.Float64Histogram
	overheadOpts                               []metric.RecordOption
	counterSeries                              *metricscore.Cache[counterKey, *counterSeries]
	attemptSeries                              *metricscore.Cache[metricscore.AttemptKey, *attemptSeries]
	comboOpts                                  *metricscore.Cache[string, []metric.RecordOption]
	waitOpts                                   *metricscore.Cache[string, []metric.RecordOption]
}

type counterKey struct {
	f      metricscore.Family
	labels [3]string
}

// counterSeries is one counter's attribute set.
type counterSeries struct {
	inst metric.Int64Counter
	opts []metric.AddOption
}

// attemptSeries are the attributes one attempt label set records with.
type attemptSeries struct {
	count                                []metric.AddOption
	duration, wait, chunk, input, output []metric.RecordOption // nil for a skip
}

// requestSeries is one kind of request: its combo's attribute set, the
// attempts it made and the exclusions counted with it.
type requestSeries struct {
	attempts   []metric.RecordOption
	made       int64
	exclusions []*counterSeries
}

func addOpts(kv ...attribute.KeyValue) []metric.AddOption {
	return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
}

func recordOpts(kv ...attribute.KeyValue) []metric.RecordOption {
	return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
}

// counterLabels are the attribute keys of each counter family.
var counterLabels = [...][]string{
	metricscore.Transitions: {"provider", "from", "to"},
	metricscore.Cooldowns:   {"connection", "reason"},
	metricscore.Lockouts:    {"provider", "model", "reason"},
	metricscore.Rejected:    {"connection", "reason"},
	metricscore.StreamCuts:  {"cause"},
	metricscore.Exclusions:  {"reason"},
	metricscore.Fallbacks:   {"from_provider", "to_provider", "result"},
}

// New returns Metrics whose instruments come from o.MeterProvider. Attach
// it to the layer configurations before the layers are built, and to the
// router's combo.Config before combo.New. The error joins the errors of the
// instruments that could not be created; the others still record.
func New(o Options) (*Metrics, error) {
	mp := o.MeterProvider
	m := &Metrics{off: mp == nil}
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	meter := mp.Meter(ScopeName)
	s := &sink{op: o.Operation}
	if s.op == "" {
		s.op = metricscore.DefaultOperation
	}
	m.s = s
	m.core = metricscore.New(metricscore.Sink[*attemptSeries, *counterSeries, *requestSeries](s), o.Providers, o.Now)
	var errs []error
	counter := func(name, help, unit string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithDescription(help), metric.WithUnit(unit))
		errs = append(errs, err)
		return c
	}
	s.counters = [...]metric.Int64Counter{
		metricscore.Transitions: counter(metricscore.NameBreakerTransitions, metricscore.HelpBreakerTransitions, "{transition}"),
		metricscore.Cooldowns:   counter(metricscore.NameConnectionCooldown, metricscore.HelpConnectionCooldown, "{cooldown}"),
		metricscore.Lockouts:    counter(metricscore.NameModelLockouts, metricscore.HelpModelLockouts, "{lockout}"),
		metricscore.Rejected:    counter(metricscore.NameQueueRejected, metricscore.HelpQueueRejected, "{request}"),
		metricscore.StreamCuts:  counter(metricscore.NameStreamCuts, metricscore.HelpStreamCuts, "{stream}"),
		metricscore.Exclusions:  counter(metricscore.NameExclusions, metricscore.HelpExclusions, "{exclusion}"),
		metricscore.Fallbacks:   counter(metricscore.NameFallbacks, metricscore.HelpFallbacks, "{fallback}"),
	}
	s.attempts = counter(metricscore.NameAttempts, metricscore.HelpAttempts, "{attempt}")
	var err error
	s.requestAttempts, err = meter.Int64Histogram(metricscore.NameRequestAttempts, metric.WithDescription(metricscore.HelpRequestAttempts),
		metric.WithUnit("{attempt}"), metric.WithExplicitBucketBoundaries(metricscore.AttemptBuckets...))
	errs = append(errs, err)
	s.tokens, err = meter.Int64Histogram(metricscore.GenAITokenUsage, metric.WithDescription(metricscore.HelpTokenUsage),
		metric.WithUnit("{token}"), metric.WithExplicitBucketBoundaries(metricscore.TokenBuckets...))
	errs = append(errs, err)
	seconds := func(name, help string, buckets []float64) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithDescription(help), metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(buckets...))
		errs = append(errs, err)
		return h
	}
	s.overhead = seconds(metricscore.NameRouterOverhead, metricscore.HelpRouterOverhead, metricscore.OverheadBuckets)
	s.operation = seconds(metricscore.GenAIOperationDuration, metricscore.HelpOperation, metricscore.OperationBuckets)
	s.firstChunk = seconds(metricscore.GenAIFirstChunk, metricscore.HelpFirstChunk, metricscore.FirstChunkBuckets)
	s.queueWait = seconds(metricscore.NameQueueWait, metricscore.HelpQueueWait, metricscore.QueueWaitBuckets)
	gauge := func(name, help, unit string) metric.Int64ObservableGauge {
		g, err := meter.Int64ObservableGauge(name, metric.WithDescription(help), metric.WithUnit(unit))
		errs = append(errs, err)
		return g
	}
	m.breakerState = gauge(metricscore.NameBreakerState, metricscore.HelpBreakerState, "1")
	m.connUp = gauge(metricscore.NameConnectionUp, metricscore.HelpConnectionUp, "1")
	m.inFlight = gauge(metricscore.NameInFlight, metricscore.HelpInFlight, "{request}")
	m.queueDepth = gauge(metricscore.NameQueueDepth, metricscore.HelpQueueDepth, "{request}")
	m.coolUntil, err = meter.Float64ObservableGauge(metricscore.NameCooldownUntil, metric.WithDescription(metricscore.HelpCooldownUntil), metric.WithUnit("s"))
	errs = append(errs, err)
	m.storeLag, err = meter.Float64ObservableGauge(metricscore.NameReplicationLag, metric.WithDescription(metricscore.HelpReplicationLag), metric.WithUnit("s"))
	errs = append(errs, err)
	m.storeDegraded = gauge(metricscore.NameStoreDegraded, metricscore.HelpStoreDegraded, "1")
	m.reg, err = meter.RegisterCallback(m.observe, m.breakerState, m.connUp, m.inFlight, m.queueDepth, m.coolUntil,
		m.storeLag, m.storeDegraded)
	errs = append(errs, err)

	s.overheadOpts = recordOpts()
	s.counterSeries = metricscore.NewCache(func(k counterKey) *counterSeries {
		keys := counterLabels[k.f]
		kv := make([]attribute.KeyValue, len(keys))
		for i, key := range keys {
			kv[i] = attribute.String(key, k.labels[i])
		}
		return &counterSeries{inst: s.counters[k.f], opts: addOpts(kv...)}
	})
	s.waitOpts = metricscore.NewCache(func(k string) []metric.RecordOption { return recordOpts(attribute.String("provider", k)) })
	s.comboOpts = metricscore.NewCache(func(k string) []metric.RecordOption { return recordOpts(attribute.String("combo", k)) })
	s.attemptSeries = metricscore.NewCache(func(k metricscore.AttemptKey) *attemptSeries {
		a := &attemptSeries{count: addOpts(
			attribute.String("provider", k.Provider), attribute.String("model", k.Model),
			attribute.String("outcome", k.Outcome), attribute.String("status_class", k.StatusClass),
			attribute.String("reason", k.Reason))}
		if !k.Skipped() {
			kv := []attribute.KeyValue{attrOperationName.String(s.op), attrProviderName.String(k.Provider), attrRequestModel.String(k.Model)}
			a.chunk = recordOpts(kv...)
			a.input = recordOpts(append(kv, attrTokenType.String(metricscore.TokenInput))...)
			a.output = recordOpts(append(kv, attrTokenType.String(metricscore.TokenOutput))...)
			if k.ErrorType != "" {
				kv = append(kv, attrErrorType.String(k.ErrorType))
			}
			a.duration = recordOpts(kv...)
			a.wait = s.waitOpts.Get(k.Provider)
		}
		return a
	})
	return m, errors.Join(errs...)
}

// Attach chains the Metrics into cfg.OnAttempt and cfg.OnRequest (hooks
// already set are called first) and has the gauges read cfg.Breakers,
// cfg.Cooldowns and cfg.Queue when they are observed. Call it before
// combo.New(cfg), once.
//
// Without a MeterProvider it chains nothing (a nil OnAttempt becomes a
// no-op, so that calling it stays safe): the router pays nothing for it.
func (m *Metrics) Attach(cfg *combo.Config) {
	if !m.off {
		m.core.Attach(cfg)
	} else if cfg.OnAttempt == nil {
		cfg.OnAttempt = func(combo.Attempt) {}
	}
}

// AttachBreaker chains the Metrics into cfg.OnChange, keeping a hook
// already set (called first). Call it before breaker.NewSet(cfg), once.
func (m *Metrics) AttachBreaker(cfg *breaker.Config) {
	if !m.off {
		m.core.AttachBreaker(cfg)
	}
}

// AttachCooldown chains the Metrics into cfg.OnChange, keeping a hook
// already set (called first). Call it before cooldown.New(cfg), once.
func (m *Metrics) AttachCooldown(cfg *cooldown.Config) {
	if !m.off {
		m.core.AttachCooldown(cfg)
	}
}

// AttachLockout chains the Metrics into cfg.OnChange, keeping a hook
// already set (called first). Call it before lockout.New(cfg), once.
func (m *Metrics) AttachLockout(cfg *lockout.Config) {
	if !m.off {
		m.core.AttachLockout(cfg)
	}
}

// AttachQueue chains the Metrics into cfg.OnChange, keeping a hook already
// set (called first). Call it before queue.New(cfg), once.
func (m *Metrics) AttachQueue(cfg *queue.Config) {
	if !m.off {
		m.core.AttachQueue(cfg)
	}
}

// AttachSharedStore has the Metrics report a shared state store's
// routeguard_replication_lag_seconds (from lag; none when lag is nil) and
// routeguard_shared_store_degraded (1 while degraded reports true; none
// when degraded is nil), with attribute store=name, read in the gauges'
// callback. A name given again replaces the earlier funcs. The funcs are
// called concurrently with the router and must not block: the Stats and
// Degraded methods of combo/redisstate qualify.
func (m *Metrics) AttachSharedStore(name string, lag func() time.Duration, degraded func() bool) {
	m.core.AttachSharedStore(name, lag, degraded)
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
	now := m.core.Clock()
	for _, s := range m.core.BreakerSamples(now) {
		for _, st := range metricscore.BreakerStates {
			v := int64(0)
			if st == s.State {
				v = 1
			}
			o.ObserveInt64(m.breakerState, v, metric.WithAttributes(attribute.String("provider", s.Provider), attribute.String("state", st.String())))
		}
	}
	for _, s := range m.core.ConnSamples(now) {
		up, until := int64(0), 0.0
		if s.Up {
			up = 1
		}
		if !s.Until.IsZero() {
			until = float64(s.Until.UnixNano()) / 1e9
		}
		attrs := metric.WithAttributes(attribute.String("connection", s.Conn))
		o.ObserveInt64(m.connUp, up, attrs)
		o.ObserveFloat64(m.coolUntil, until, attrs)
	}
	for _, s := range m.core.QueueSamples(now) {
		attrs := metric.WithAttributes(attribute.String("connection", s.Key))
		o.ObserveInt64(m.inFlight, int64(s.Running), attrs)
		o.ObserveInt64(m.queueDepth, int64(s.Waiting), attrs)
	}
	for _, s := range m.core.StoreSamples() {
		attrs := metric.WithAttributes(attribute.String("store", s.Store))
		if s.HasLag {
			o.ObserveFloat64(m.storeLag, s.Lag.Seconds(), attrs)
		}
		v := int64(0)
		if s.Degraded {
			v = 1
		}
		o.ObserveInt64(m.storeDegraded, v, attrs)
	}
	return nil
}

// The sink.

var bg = context.Background()

func (s *sink) AttemptSeries(k metricscore.AttemptKey) *attemptSeries { return s.attemptSeries.Get(k) }

func (s *sink) RecordAttempt(a *attemptSeries, o metricscore.Observation) {
	s.attempts.Add(bg, 1, a.count...)
	if a.duration == nil {
		return // a skip
	}
	s.operation.Record(bg, o.Duration.Seconds(), a.duration...)
	s.queueWait.Record(bg, o.QueueWait.Seconds(), a.wait...)
	if o.FirstOutput > 0 {
		s.firstChunk.Record(bg, o.FirstOutput.Seconds(), a.chunk...)
	}
	if o.InputTokens > 0 {
		s.tokens.Record(bg, o.InputTokens, a.input...)
	}
	if o.OutputTokens > 0 {
		s.tokens.Record(bg, o.OutputTokens, a.output...)
	}
}

func (s *sink) CounterSeries(f metricscore.Family, labels [3]string) *counterSeries {
	return s.counterSeries.Get(counterKey{f, labels})
}

func (s *sink) Inc(c *counterSeries) { c.inst.Add(bg, 1, c.opts...) }

func (s *sink) RequestSeries(name string, attempts int, exclusions []*counterSeries) *requestSeries {
	return &requestSeries{attempts: s.comboOpts.Get(name), made: int64(attempts), exclusions: exclusions}
}

func (s *sink) RecordRequest(r *requestSeries, overhead time.Duration) {
	s.requestAttempts.Record(bg, r.made, r.attempts...)
	s.overhead.Record(bg, overhead.Seconds(), s.overheadOpts...)
	for _, x := range r.exclusions {
		s.Inc(x)
	}
}
