package promcollector

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/internal/metricscore"
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
	core *metricscore.Core[*attemptSeries, *counter, *requestSeries]
	s    *series
}

// series holds every series the Collector has made. Recording is atomic
// adds on them; Collect turns them into constant metrics. A plain
// successful request makes four: two for its attempt's duration (which
// also counts the attempt and, when it did not wait, its queue wait of 0)
// and two for its router overhead (which also counts the request, its
// attempts and its exclusions).
type series struct {
	op string

	breakerState, connUp, coolUntil, inFlight, queueDepth, storeLag, storeDegraded *prometheus.Desc

	counterDescs                                                 [metricscore.Fallbacks + 1]*prometheus.Desc
	attemptsDesc, requestDesc, overheadDesc, opDesc, chunkDesc   *prometheus.Desc
	waitDesc, tokenDesc                                          *prometheus.Desc
	durationKind, overheadKind, chunkKind, waitKind, attemptKind *histKind
	tokenKind                                                    *histKind
	overhead                                                     *hist
	counters                                                     *metricscore.Cache[counterKey, *counter]
	attempts                                                     *metricscore.Cache[metricscore.AttemptKey, *attemptSeries]
	attemptCounts                                                *metricscore.Cache[[5]string, *counter]
	combos                                                       *metricscore.Cache[string, *comboSeries]
	ops                                                          *metricscore.Cache[opKey, *hist]
	waits                                                        *metricscore.Cache[string, *hist]
	chunks                                                       *metricscore.Cache[opKey, *hist]
	tokens                                                       *metricscore.Cache[opKey, *hist]
}

type counterKey struct {
	f      metricscore.Family
	labels [3]string
}

// opKey is the label set of the GenAI histograms: provider, model and a
// third label (error.type, or the token type).
type opKey struct{ provider, model, third string }

// attemptSeries are the series one attempt label set records into.
type attemptSeries struct {
	skips *counter // a skip's routeguard_attempts_total; nil for an attempt made
	// direct and queued hold the durations of the attempts made that did
	// not wait for admission and of those that did: parts of their
	// operation series, shared with their routeguard_attempts_total. An
	// attempt of direct is a wait of 0 of the wait series too.
	direct, queued histData
	wait           *hist // nil for a skip
	key            opKey
	// chunk, input and output are made on first use, so that a plain
	// answer adds no empty first-chunk series, nor an answer without usage
	// empty token series.
	chunk, input, output atomic.Pointer[hist]
}

// New returns a Collector. Attach it to the layer configurations before
// the layers are built, and to the router's combo.Config before combo.New.
func New(o Options) *Collector {
	s := &series{op: o.Operation}
	if s.op == "" {
		s.op = metricscore.DefaultOperation
	}
	cl := o.ConstLabels
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, cl)
	}
	s.breakerState = desc(metricscore.NameBreakerState, metricscore.HelpBreakerState, "provider", "state")
	s.connUp = desc(metricscore.NameConnectionUp, metricscore.HelpConnectionUp, "connection")
	s.coolUntil = desc(metricscore.NameCooldownUntil, metricscore.HelpCooldownUntil, "connection")
	s.inFlight = desc(metricscore.NameInFlight, metricscore.HelpInFlight, "connection")
	s.queueDepth = desc(metricscore.NameQueueDepth, metricscore.HelpQueueDepth, "connection")
	s.storeLag = desc(metricscore.NameReplicationLag, metricscore.HelpReplicationLag, "store")
	s.storeDegraded = desc(metricscore.NameStoreDegraded, metricscore.HelpStoreDegraded, "store")
	s.counterDescs = [...]*prometheus.Desc{
		metricscore.Transitions: desc(metricscore.NameBreakerTransitions, metricscore.HelpBreakerTransitions, "provider", "from", "to"),
		metricscore.Cooldowns:   desc(metricscore.NameConnectionCooldown, metricscore.HelpConnectionCooldown, "connection", "reason"),
		metricscore.Lockouts:    desc(metricscore.NameModelLockouts, metricscore.HelpModelLockouts, "provider", "model", "reason"),
		metricscore.Rejected:    desc(metricscore.NameQueueRejected, metricscore.HelpQueueRejected, "connection", "reason"),
		metricscore.StreamCuts:  desc(metricscore.NameStreamCuts, metricscore.HelpStreamCuts, "cause"),
		metricscore.Exclusions:  desc(metricscore.NameExclusions, metricscore.HelpExclusions, "reason"),
		metricscore.Fallbacks:   desc(metricscore.NameFallbacks, metricscore.HelpFallbacks, "from_provider", "to_provider", "result"),
	}
	s.attemptsDesc = desc(metricscore.NameAttempts, metricscore.HelpAttempts, "provider", "model", "outcome", "status_class", "reason")
	s.requestDesc = desc(metricscore.NameRequestAttempts, metricscore.HelpRequestAttempts, "combo")
	s.overheadDesc = desc(metricscore.NameRouterOverhead, metricscore.HelpRouterOverhead)
	s.opDesc = desc(metricscore.PromOperationDuration, metricscore.HelpOperation,
		"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model", "error_type")
	s.chunkDesc = desc(metricscore.PromFirstChunk, metricscore.HelpFirstChunk,
		"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model")
	s.tokenDesc = desc(metricscore.PromTokenUsage, metricscore.HelpTokenUsage,
		"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model", "gen_ai_token_type")
	s.waitDesc = desc(metricscore.NameQueueWait, metricscore.HelpQueueWait, "provider")

	const ns = float64(time.Second)
	s.durationKind = newHistKind(metricscore.OperationBuckets, ns)
	s.overheadKind = newHistKind(metricscore.OverheadBuckets, ns)
	s.chunkKind = newHistKind(metricscore.FirstChunkBuckets, ns)
	s.waitKind = newHistKind(metricscore.QueueWaitBuckets, ns)
	s.attemptKind = newHistKind(metricscore.AttemptBuckets, 1)
	s.tokenKind = newHistKind(metricscore.TokenBuckets, 1)
	s.overhead = newHist(s.overheadKind, s.overheadDesc)

	s.counters = metricscore.NewCache(func(k counterKey) *counter {
		n := 1
		switch k.f {
		case metricscore.Transitions, metricscore.Lockouts, metricscore.Fallbacks:
			n = 3
		case metricscore.Cooldowns, metricscore.Rejected:
			n = 2
		}
		return newCounter(s.counterDescs[k.f], k.labels[:n]...)
	})
	s.ops = metricscore.NewCache(func(k opKey) *hist { return newHist(s.durationKind, s.opDesc, s.op, k.provider, k.model, k.third) })
	s.waits = metricscore.NewCache(func(k string) *hist { return newHist(s.waitKind, s.waitDesc, k) })
	s.chunks = metricscore.NewCache(func(k opKey) *hist { return newHist(s.chunkKind, s.chunkDesc, s.op, k.provider, k.model) })
	s.tokens = metricscore.NewCache(func(k opKey) *hist { return newHist(s.tokenKind, s.tokenDesc, s.op, k.provider, k.model, k.third) })
	s.combos = metricscore.NewCache(func(k string) *comboSeries {
		return &comboSeries{desc: s.requestDesc, labels: []string{k}, created: time.Now()}
	})
	s.attemptCounts = metricscore.NewCache(func(k [5]string) *counter { return newCounter(s.attemptsDesc, k[:]...) })
	s.attempts = metricscore.NewCache(func(k metricscore.AttemptKey) *attemptSeries {
		count := s.attemptCounts.Get([5]string{k.Provider, k.Model, k.Outcome, k.StatusClass, k.Reason})
		if k.Skipped() {
			return &attemptSeries{skips: count}
		}
		a := &attemptSeries{direct: newHistData(s.durationKind), queued: newHistData(s.durationKind),
			key: opKey{k.Provider, k.Model, ""}, wait: s.waits.Get(k.Provider)}
		op := s.ops.Get(opKey{k.Provider, k.Model, k.ErrorType})
		for _, d := range []*histData{&a.direct, &a.queued} {
			count.share(d)
			op.add(d)
		}
		a.wait.addZeros(&a.direct)
		return a
	})
	return &Collector{core: metricscore.New(metricscore.Sink[*attemptSeries, *counter, *requestSeries](s), o.Providers, o.Now), s: s}
}

// Attach chains the Collector into cfg.OnAttempt and cfg.OnRequest (hooks
// already set are called first) and has it read cfg.Breakers,
// cfg.Cooldowns and cfg.Queue when it is collected. Call it before
// combo.New(cfg), once.
func (c *Collector) Attach(cfg *combo.Config) { c.core.Attach(cfg) }

// AttachBreaker chains the Collector into cfg.OnChange, keeping a hook
// already set (called first). Call it before breaker.NewSet(cfg), once.
func (c *Collector) AttachBreaker(cfg *breaker.Config) { c.core.AttachBreaker(cfg) }

// AttachCooldown chains the Collector into cfg.OnChange, keeping a hook
// already set (called first). Call it before cooldown.New(cfg), once.
func (c *Collector) AttachCooldown(cfg *cooldown.Config) { c.core.AttachCooldown(cfg) }

// AttachLockout chains the Collector into cfg.OnChange, keeping a hook
// already set (called first). Call it before lockout.New(cfg), once.
func (c *Collector) AttachLockout(cfg *lockout.Config) { c.core.AttachLockout(cfg) }

// AttachQueue chains the Collector into cfg.OnChange, keeping a hook
// already set (called first). Call it before queue.New(cfg), once.
func (c *Collector) AttachQueue(cfg *queue.Config) { c.core.AttachQueue(cfg) }

// AttachSharedStore has the Collector export a shared state store's
// routeguard_replication_lag_seconds (from lag; none when lag is nil) and
// routeguard_shared_store_degraded (1 while degraded reports true; none
// when degraded is nil), labelled store=name and read when the Collector
// is collected. A name given again replaces the earlier funcs. The funcs
// are called concurrently with the router and must not block: the Stats
// and Degraded methods of combo/redisstate qualify.
func (c *Collector) AttachSharedStore(name string, lag func() time.Duration, degraded func() bool) {
	c.core.AttachSharedStore(name, lag, degraded)
}

// Describe sends the descriptors of every metric.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	s := c.s
	for _, d := range []*prometheus.Desc{s.breakerState, s.connUp, s.coolUntil, s.inFlight, s.queueDepth, s.storeLag,
		s.storeDegraded, s.attemptsDesc, s.requestDesc, s.overheadDesc, s.opDesc, s.chunkDesc, s.tokenDesc, s.waitDesc} {
		ch <- d
	}
	for _, d := range s.counterDescs {
		ch <- d
	}
}

// Collect sends every metric; the gauges are read from the attached layers
// at the Collector's clock.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	now := c.core.Clock()
	for _, b := range c.core.BreakerSamples(now) {
		for _, st := range metricscore.BreakerStates {
			v := 0.0
			if st == b.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(s.breakerState, prometheus.GaugeValue, v, b.Provider, st.String())
		}
	}
	for _, cs := range c.core.ConnSamples(now) {
		up, until := 0.0, 0.0
		if cs.Up {
			up = 1
		}
		if !cs.Until.IsZero() {
			until = float64(cs.Until.UnixNano()) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(s.connUp, prometheus.GaugeValue, up, cs.Conn)
		ch <- prometheus.MustNewConstMetric(s.coolUntil, prometheus.GaugeValue, until, cs.Conn)
	}
	for _, q := range c.core.QueueSamples(now) {
		ch <- prometheus.MustNewConstMetric(s.inFlight, prometheus.GaugeValue, float64(q.Running), q.Key)
		ch <- prometheus.MustNewConstMetric(s.queueDepth, prometheus.GaugeValue, float64(q.Waiting), q.Key)
	}
	for _, st := range c.core.StoreSamples() {
		if st.HasLag {
			ch <- prometheus.MustNewConstMetric(s.storeLag, prometheus.GaugeValue, st.Lag.Seconds(), st.Store)
		}
		v := 0.0
		if st.Degraded {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(s.storeDegraded, prometheus.GaugeValue, v, st.Store)
	}
	ch <- s.overhead.metric()
	for _, v := range s.counters.Values() {
		ch <- v.metric()
	}
	for _, a := range s.attemptCounts.Values() {
		ch <- a.metric()
	}
	for _, r := range s.combos.Values() {
		ch <- r.metric(s.attemptKind)
	}
	for _, c := range []*metricscore.Cache[opKey, *hist]{s.ops, s.chunks, s.tokens} {
		for _, h := range c.Values() {
			ch <- h.metric()
		}
	}
	for _, h := range s.waits.Values() {
		ch <- h.metric()
	}
}

// The sink.

func (s *series) AttemptSeries(k metricscore.AttemptKey) *attemptSeries { return s.attempts.Get(k) }

func (s *series) RecordAttempt(a *attemptSeries, o metricscore.Observation) {
	if a.skips != nil {
		a.skips.v.Add(1)
		return
	}
	if o.QueueWait == 0 {
		a.direct.observe(s.durationKind, int64(o.Duration))
	} else {
		a.queued.observe(s.durationKind, int64(o.Duration))
		a.wait.observe(int64(o.QueueWait))
	}
	if o.FirstOutput > 0 || o.InputTokens > 0 || o.OutputTokens > 0 {
		s.recordOutput(a, &o)
	}
}

// recordOutput records a successful attempt's first output and token
// usage, out of line so that RecordAttempt keeps its observation in
// registers.
func (s *series) recordOutput(a *attemptSeries, o *metricscore.Observation) {
	if o.FirstOutput > 0 {
		s.lazy(&a.chunk, s.chunks, opKey{a.key.provider, a.key.model, ""}).observe(int64(o.FirstOutput))
	}
	if o.InputTokens > 0 {
		s.lazy(&a.input, s.tokens, opKey{a.key.provider, a.key.model, metricscore.TokenInput}).observe(o.InputTokens)
	}
	if o.OutputTokens > 0 {
		s.lazy(&a.output, s.tokens, opKey{a.key.provider, a.key.model, metricscore.TokenOutput}).observe(o.OutputTokens)
	}
}

// lazy returns the series in p, made from c's series of k on first use.
func (s *series) lazy(p *atomic.Pointer[hist], c *metricscore.Cache[opKey, *hist], k opKey) *hist {
	if h := p.Load(); h != nil {
		return h
	}
	h := c.Get(k)
	p.Store(h)
	return h
}

func (s *series) CounterSeries(f metricscore.Family, labels [3]string) *counter {
	return s.counters.Get(counterKey{f, labels})
}

func (s *series) Inc(c *counter) { c.v.Add(1) }

func (s *series) RequestSeries(name string, attempts int, exclusions []*counter) *requestSeries {
	r := &requestSeries{overhead: newHistData(s.overheadKind), made: attempts}
	s.overhead.add(&r.overhead)
	s.combos.Get(name).add(r)
	for _, x := range exclusions {
		x.share(&r.overhead)
	}
	return r
}

func (s *series) RecordRequest(r *requestSeries, overhead time.Duration) {
	r.overhead.observe(s.overheadKind, int64(overhead))
}
