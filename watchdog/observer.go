package watchdog

import (
	"bytes"
	"sync"
	"time"
)

// maxSamples bounds the window's sample ring. When it is full the two oldest
// samples merge, keeping the later timestamp, so the window can only
// overstate recent output (never abort more eagerly than exact sampling).
const maxSamples = 128

// maxName bounds the stored SSE event name; longer names are truncated.
const maxName = 128

type sample struct {
	at    time.Duration // offset from the start of the attempt
	bytes int64
}

// Observer watches one streaming attempt. It is fed the raw upstream bytes,
// chunk by chunk, splits them into SSE events, counts the useful text they
// carry and applies the guards of its [Config]: the throughput rule, the
// idle timeout, the attempt deadline and the readiness timeout.
//
// The first failing guard makes the Observer abort: ObserveAt and CheckAt
// return the same [*Error] from then on. The throughput rule is judged only
// when a chunk arrives; total silence is the idle timeout's job.
//
// Every time-dependent method has an At form that takes the time
// explicitly; the plain form X is shorthand for XAt(time.Now()). All the
// times given to one Observer must come from the same clock. Time going
// backwards is treated as no time passing. An Observer never starts
// goroutines or timers and holds at most Config.MaxEventBytes of buffered
// input. The zero value behaves like NewObserver(Config{}).
// An Observer is safe for concurrent use.
type Observer struct {
	mu sync.Mutex // protects everything below

	s     settings // the Config's effective values
	init  bool     // s is set
	parse bool     // events are parsed (throughput on or heartbeats held); see parsing

	readyAfter time.Duration // warm-up plus one window
	readiness  time.Duration // effective readiness timeout; 0: off

	// Times are kept as offsets from begin, which keeps the hot path on
	// plain integers.
	begun     bool          // begin is set
	begin     time.Time     // start of the attempt (StartAt or first chunk)
	observed  bool          // startedAt is set
	startedAt time.Duration // first chunk
	last      time.Duration // latest time seen; later inputs never go below it
	lastChunk time.Duration // latest chunk

	chunks, rawBytes, events, useful int64
	protected                        bool // a tool call or reasoning phase is in progress
	meaningful                       bool // an event other than a heartbeat was seen (readiness met)
	err                              *Error
	errEvent                         *ErrorEvent

	// window: a ring of samples in time order
	ring        [maxSamples]sample
	head, n     int
	windowBytes int64

	// SSE parser state
	carry    []byte // partial line (truncated while skipping)
	carryN   int    // logical length of the partial line
	data     []byte // joined data of the current event, once copied
	pend     []byte // data of the current event still inside the caller's chunk
	hasData  bool
	name     [maxName]byte
	nameN    int
	evRaw    int  // raw bytes of the current event's complete lines
	skipping bool // the current event exceeded MaxEventBytes
	chunkUse int64
}

// NewObserver returns an Observer for one attempt with cfg normalised.
func NewObserver(cfg Config) *Observer {
	o := &Observer{}
	o.setup(cfg)
	return o
}

func (o *Observer) setup(cfg Config) {
	o.s = cfg.settings()
	o.parse = o.s.throughput || o.s.hold
	o.readyAfter = o.s.warmup + o.s.window
	o.readiness = o.s.readiness
	o.init = true
}

// parsing reports whether chunks are split into events: always while the
// throughput rule is on or heartbeats are held (until StopParsing), and
// otherwise until the readiness timeout is met by a first non-heartbeat
// event.
func (o *Observer) parsing() bool {
	return o.parse || (o.readiness > 0 && !o.meaningful)
}

// StopParsing ends event parsing for the rest of the attempt unless the
// throughput rule needs it, or the readiness timeout is still waiting for
// its first event (parsing then stops by itself at that event): from then
// on useful bytes are no longer counted and error events no longer looked
// for, while the time guards and the raw byte count go on. A caller that
// needed events only up to a point (the first useful output, say) calls it
// there to save the per-chunk work.
func (o *Observer) StopParsing() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lazyInit()
	if !o.s.throughput {
		o.parse = false
	}
}

// Config returns the configuration in force, normalized (see
// [Config.Normalize]).
func (o *Observer) Config() Config {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lazyInit()
	return o.s.config()
}

func (o *Observer) lazyInit() {
	if !o.init {
		o.setup(Config{})
	}
}

// clock turns now into an offset from the start of the attempt, never
// below the latest offset seen, so that time never goes backwards.
func (o *Observer) clock(now time.Time) time.Duration {
	if !o.begun {
		o.begun, o.begin, o.last = true, now, 0
		return 0
	}
	off := max(now.Sub(o.begin), o.last)
	o.last = off
	return off
}

// peekClock is clock without recording now.
func (o *Observer) peekClock(now time.Time) time.Duration {
	if !o.begun {
		return 0
	}
	return max(now.Sub(o.begin), o.last)
}

// Start is shorthand for StartAt(time.Now()).
func (o *Observer) Start() { o.StartAt(time.Now()) }

// StartAt marks the start of the attempt, from which the attempt deadline,
// the readiness timeout and the first idle period count. Without it they
// count from the first chunk. Only the first call has an effect. The
// throughput warm-up always counts from the first chunk.
func (o *Observer) StartAt(now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lazyInit()
	o.clock(now)
}

// Observe is shorthand for ObserveAt(chunk, time.Now()).
func (o *Observer) Observe(chunk []byte) error { return o.ObserveAt(chunk, time.Now()) }

// ObserveAt feeds one upstream chunk received at now and returns nil, or the
// [*Error] that aborts the attempt. The time guards (attempt deadline,
// readiness timeout, idle timeout) are checked first, as of now and before
// the chunk counts, so a first event arriving exactly when the readiness
// timeout is due is too late; then the chunk's complete events are judged
// and the throughput rule applied. An empty chunk counts as a chunk for the
// idle timeout. ObserveAt never retains chunk.
func (o *Observer) ObserveAt(chunk []byte, now time.Time) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lazyInit()
	if o.err != nil {
		return o.err
	}
	off := o.clock(now)
	if e := o.guards(off); e != nil {
		o.err = e
		return e
	}
	if !o.observed {
		o.observed = true
		o.startedAt = off
	}
	o.lastChunk = off
	o.chunks++
	o.rawBytes += int64(len(chunk))
	if !o.parsing() {
		return nil
	}
	o.chunkUse = 0
	o.feed(chunk)
	if o.chunkUse > 0 {
		o.useful += o.chunkUse
		o.addSample(off, o.chunkUse)
	}
	if !o.s.throughput {
		return nil
	}
	o.prune(off)
	rate := o.rate()
	ready := off-o.startedAt >= o.readyAfter
	measurable := o.windowBytes == 0 || o.windowBytes >= o.s.minBytes
	if ready && !o.protected && measurable && rate < float64(o.s.minBytesPerSecond) {
		e := newError(CodeThroughputTooLow, off, o.s.window)
		e.WindowBytes, e.Rate = o.windowBytes, rate
		o.err = e
		return e
	}
	return nil
}

// Check is shorthand for CheckAt(time.Now()).
func (o *Observer) Check() error { return o.CheckAt(time.Now()) }

// CheckAt applies the time guards (attempt deadline, readiness timeout, idle
// timeout) at now without a chunk, and returns the [*Error] that aborts the
// attempt, if any. A caller blocked on a read calls it when the time
// returned by [Observer.DueAt] passes.
func (o *Observer) CheckAt(now time.Time) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lazyInit()
	if o.err != nil {
		return o.err
	}
	if !o.begun {
		return nil
	}
	if e := o.guards(o.clock(now)); e != nil {
		o.err = e
		return e
	}
	return nil
}

// guards applies the attempt deadline, then the readiness timeout, then
// the idle timeout.
func (o *Observer) guards(off time.Duration) *Error {
	if d := o.s.deadline; d > 0 && off >= d {
		return newError(CodeAttemptDeadline, off, d)
	}
	if d := o.readiness; d > 0 && !o.meaningful && off >= d {
		return newError(CodeReadinessTimeout, off, d)
	}
	if d := o.s.idle; d > 0 && off-o.idleSince() >= d {
		return newError(CodeIdleTimeout, off, d)
	}
	return nil
}

// idleSince returns the offset the idle period counts from.
func (o *Observer) idleSince() time.Duration {
	if o.observed {
		return o.lastChunk
	}
	return 0
}

// Due is shorthand for DueAt(time.Now()).
func (o *Observer) Due() (time.Time, bool) { return o.DueAt(time.Now()) }

// DueAt returns the earliest time, on the clock now was read from, at which
// CheckAt would abort if no chunk arrived before it, and false when no time
// guard is pending (none configured, or only a readiness timeout that is
// already met), the attempt has not started or it is already aborted. The
// result is now plus the time the attempt still has, so it may be at or
// before now when a guard is already due; if the clock went back, the time
// already counted is kept (no time passes). A caller waiting on a timer
// waits DueAt(now).Sub(now).
func (o *Observer) DueAt(now time.Time) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lazyInit()
	return o.dueAt(now)
}

func (o *Observer) dueAt(now time.Time) (time.Time, bool) {
	if o.err != nil || !o.begun {
		return time.Time{}, false
	}
	var due time.Duration
	ok := false
	if d := o.s.deadline; d > 0 {
		due, ok = d, true
	}
	if d := o.readiness; d > 0 && !o.meaningful && (!ok || d < due) {
		due, ok = d, true
	}
	if d := o.s.idle; d > 0 {
		if t := o.idleSince() + d; !ok || t < due {
			due, ok = t, true
		}
	}
	if !ok {
		return time.Time{}, false
	}
	return now.Add(due - o.peekClock(now)), true
}

// Err returns the error that aborted the attempt, or nil.
func (o *Observer) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err == nil {
		return nil
	}
	return o.err
}

// ErrorEvent returns a copy of the first error event seen in the stream (an
// event named "error", a JSON "type" of "error" or "response.failed", or a
// non-null root "error" field). Events are parsed only while the throughput
// rule is enabled or heartbeats are held, and otherwise only up to the
// chunk holding the first event other than a heartbeat (while the readiness
// timeout waits for it); an error event after that is not seen and it
// reports false. See [FindErrorEvent] for a stream already in memory.
func (o *Observer) ErrorEvent() (ErrorEvent, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.errEvent == nil {
		return ErrorEvent{}, false
	}
	ev := *o.errEvent
	ev.Data = bytes.Clone(ev.Data)
	return ev, true
}

// Stats is a snapshot of an Observer.
type Stats struct {
	Throughput     bool          // the throughput rule is on
	Started        time.Time     // first chunk; zero before it
	LastChunk      time.Time     // latest chunk; zero before it
	Chunks         int64         // chunks observed
	Bytes          int64         // raw bytes observed
	Events         int64         // complete SSE events parsed
	UsefulBytes    int64         // useful bytes in total
	WindowBytes    int64         // useful bytes inside the window
	Rate           float64       // WindowBytes per second of window
	ProtectedPhase bool          // a tool call or reasoning phase is in progress
	EventSeen      bool          // an event other than a heartbeat was seen (readiness met)
	Ready          bool          // warm-up and one full window have passed
	Buffered       int           // bytes held by the parser
	Err            error         // the abort, if any
	Elapsed        time.Duration // since the start of the attempt
}

// Stats is shorthand for StatsAt(time.Now()).
func (o *Observer) Stats() Stats { return o.StatsAt(time.Now()) }

// StatsAt returns a snapshot as of now, without changing the Observer.
func (o *Observer) StatsAt(now time.Time) Stats {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lazyInit()
	off := o.peekClock(now)
	st := Stats{
		Throughput:     o.s.throughput,
		Chunks:         o.chunks,
		Bytes:          o.rawBytes,
		Events:         o.events,
		UsefulBytes:    o.useful,
		ProtectedPhase: o.protected,
		EventSeen:      o.meaningful,
		Buffered:       len(o.carry) + len(o.data),
	}
	if o.err != nil {
		st.Err = o.err
	}
	st.Elapsed = off
	if o.observed {
		st.Started, st.LastChunk = o.begin.Add(o.startedAt), o.begin.Add(o.lastChunk)
		st.Ready = off-o.startedAt >= o.readyAfter
	}
	cut := off - o.s.window
	for k := range o.n {
		if sm := o.ring[(o.head+k)%maxSamples]; sm.at >= cut {
			st.WindowBytes += sm.bytes
		}
	}
	st.Rate = float64(st.WindowBytes) / max(1, o.s.window.Seconds())
	return st
}

func (o *Observer) rate() float64 {
	return float64(o.windowBytes) / max(1, o.s.window.Seconds())
}

func (o *Observer) addSample(at time.Duration, n int64) {
	o.windowBytes += n
	if o.n > 0 {
		if last := &o.ring[(o.head+o.n-1)%maxSamples]; last.at == at {
			last.bytes += n
			return
		}
	}
	if o.n == maxSamples {
		next := (o.head + 1) % maxSamples
		o.ring[next].bytes += o.ring[o.head].bytes
		o.head = next
		o.n--
	}
	o.ring[(o.head+o.n)%maxSamples] = sample{at: at, bytes: n}
	o.n++
}

// prune drops samples older than now − window (a sample exactly one window
// old stays).
func (o *Observer) prune(off time.Duration) {
	cut := off - o.s.window
	for o.n > 0 && o.ring[o.head].at < cut {
		o.windowBytes -= o.ring[o.head].bytes
		o.head = (o.head + 1) % maxSamples
		o.n--
	}
}

// feed splits chunk into lines and events. Events end at a blank line;
// lines end with "\n" or "\r\n".
func (o *Observer) feed(chunk []byte) {
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			o.partial(chunk)
			break
		}
		seg := chunk[:i]
		chunk = chunk[i+1:]
		if o.carryN == 0 {
			o.line(seg, true)
			continue
		}
		total := o.carryN + len(seg)
		if !o.skipping && o.evRaw+total+1 <= o.s.maxEventBytes {
			o.carry = appendBounded(o.carry, seg, o.s.maxEventBytes)
			o.line(o.carry, false)
		} else if total == 1 && o.carry[0] == '\r' {
			o.endEvent()
		} else if !o.skipping {
			o.overflow()
		}
		o.carry, o.carryN = o.carry[:0], 0
	}
	if o.pend != nil {
		o.data = appendBounded(o.data[:0], o.pend, o.s.maxEventBytes)
		o.pend = nil
	}
}

// partial keeps the unterminated tail of a chunk.
func (o *Observer) partial(rest []byte) {
	n := o.carryN + len(rest)
	first := rest[0]
	if o.carryN > 0 {
		first = o.carry[0]
	}
	maybeBlank := n == 1 && first == '\r'
	if !o.skipping && !maybeBlank && o.evRaw+n+1 > o.s.maxEventBytes {
		o.overflow()
	}
	switch {
	case !o.skipping:
		o.carry = appendBounded(o.carry, rest, o.s.maxEventBytes)
	case o.carryN == 0:
		// Skipping: keep only the first byte, enough to recognise "\r\n".
		o.carry = append(o.carry[:0], rest[0])
	default:
		o.carry = o.carry[:1]
	}
	o.carryN = n
}

// line handles one complete line; inChunk tells whether it points into the
// caller's chunk (and must be copied before ObserveAt returns).
func (o *Observer) line(l []byte, inChunk bool) {
	raw := len(l) + 1
	if n := len(l); n > 0 && l[n-1] == '\r' {
		l = l[:n-1]
	}
	if len(l) == 0 {
		o.endEvent()
		return
	}
	if o.skipping {
		return
	}
	o.evRaw += raw
	if o.evRaw > o.s.maxEventBytes {
		o.overflow()
		return
	}
	if l[0] == ':' {
		return // comment
	}
	field, value := l, l[len(l):]
	if i := bytes.IndexByte(l, ':'); i >= 0 {
		field, value = l[:i], l[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(field) {
	case "data":
		switch {
		case !o.hasData && inChunk:
			o.hasData, o.pend = true, value
		case !o.hasData:
			o.hasData = true
			o.data = appendBounded(o.data[:0], value, o.s.maxEventBytes)
		default:
			if o.pend != nil {
				o.data = appendBounded(o.data[:0], o.pend, o.s.maxEventBytes)
				o.pend = nil
			}
			o.data = appendBounded(o.data, []byte{'\n'}, o.s.maxEventBytes)
			o.data = appendBounded(o.data, value, o.s.maxEventBytes)
		}
	case "event":
		o.nameN = copy(o.name[:], value)
	}
}

// overflow drops the current event: it is longer than MaxEventBytes.
func (o *Observer) overflow() {
	o.skipping = true
	o.data, o.pend, o.hasData, o.nameN = o.data[:0], nil, false, 0
}

// endEvent handles a blank line: it judges the event, if any, and resets.
func (o *Observer) endEvent() {
	if !o.skipping && (o.hasData || o.nameN > 0) {
		o.events++
		payload := o.data
		if o.pend != nil {
			payload = o.pend
		}
		o.judge(payload, o.name[:o.nameN])
	}
	o.data, o.pend, o.hasData, o.nameN = o.data[:0], nil, false, 0
	o.evRaw, o.skipping = 0, false
}

// judge applies one event to the phase flag and the chunk's useful bytes.
func (o *Observer) judge(payload, name []byte) {
	info := classify(payload, name)
	if info.isError && o.errEvent == nil {
		ev := newErrorEvent(name, payload)
		o.errEvent = &ev
	}
	if !info.ping && len(bytes.TrimSpace(payload)) > 0 {
		o.meaningful = true
	}
	switch {
	case info.protected:
		o.protected = true
	case info.useful > 0:
		o.protected = false
		o.chunkUse += info.useful
	}
}

// appendBounded appends src to dst, growing the capacity at most to limit
// (the caller guarantees len(dst)+len(src) <= limit).
func appendBounded(dst, src []byte, limit int) []byte {
	need := len(dst) + len(src)
	if need > cap(dst) {
		c := max(2*cap(dst), need, 256)
		c = min(c, max(limit, need))
		nb := make([]byte, len(dst), c)
		copy(nb, dst)
		dst = nb
	}
	return append(dst, src...)
}

// sawEvent reports whether an event other than a heartbeat was seen.
func (o *Observer) sawEvent() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.meaningful
}
