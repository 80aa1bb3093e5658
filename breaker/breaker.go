package breaker

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Event is one change of a breaker of a [Set], or of an entry of a
// [Gate], given to the OnChange hook of [Config] or [GateConfig]. It
// carries the state after the change, enough for a store to keep it
// without reading anything back.
//
// A breaker reports every change between its four states, and its removal
// from a Set. A gate entry is Open while it cools and Closed otherwise; the
// gate reports each start, extension and end of a cooldown, and the removal
// of an entry it has reported.
type Event struct {
	// Provider is the breaker's name, or the gate entry's provider.
	Provider string
	// Connection is the connection of a gate connection entry; empty for a
	// breaker and for a gate provider entry.
	Connection string
	// From and To are the states before and after the change. From is the
	// state the hook was last told of.
	From, To State
	// At is when the change was observed, on the clock of the call that
	// observed it. A change that falls due with time (open → half-open, the
	// end of a gate cooldown) is observed by the first call at or after the
	// time it became due: for a breaker any call, for a gate entry the next
	// write that touches it.
	At time.Time
	// Until is when the state ends by itself: the end of an open period
	// (To Open) or of a gate cooldown (for a provider entry its last
	// instant, for a connection entry the first instant after it); zero
	// when the state is untimed.
	Until time.Time
	// Failures is the breaker's leaky failure count after the change; for
	// a gate entry, the failures in the window (provider) or since the last
	// success (connection).
	Failures int
	// OpenCycles is the breaker's number of failed probes in a row; zero
	// for gate entries.
	OpenCycles int
	// Kind is the kind of the breaker's last counted failure; KindNone for
	// gate entries.
	Kind Kind
	// LastFailure is the time of the last counted failure; zero if none.
	LastFailure time.Time
	// Removed reports that the breaker or entry is gone: dropped by a Set
	// to make room, or by a Gate when it prunes or bounds its entries. To is
	// then Closed, the state a new breaker or entry starts in.
	Removed bool
	// Cause says what made a breaker's change when it was not a request's
	// result or the passing of time: "reset" for [Set.ResetAt] and
	// [Set.ResetAllAt] (so that a reset is told apart from a probe that
	// closed the breaker); empty otherwise, and for gate entries.
	Cause string
}

// causeReset is the Event.Cause of a change made by a reset.
const causeReset = "reset"

// circuit is the circuit breaker of one provider, kept by a [Set]. Ask
// with AllowReportAt before each request and report the request's result
// through the done func it returns; read the state without changing
// anything but lazy refreshes with StateAt.
//
// Circuits are created by a Set with newCircuit; the zero value is not
// usable. A circuit is safe for concurrent use.
type circuit struct {
	name string
	p    *Profile    // normalized; shared with the other breakers of its profile, never written
	hook func(Event) // read and cleared (when a Set drops the breaker) under mu
	// resetting marks, under mu, that the event the next unlock reports
	// comes from ResetAt.
	resetting bool

	// quick is what lock-free readers see of a breaker whose answers do
	// not depend on time, while it is closed or degraded without a counting
	// window: its generation shifted left by three, the clean bit (no
	// counted failure and no connection kept for deduplication, so that a
	// success changes nothing) shifted left by two, and one plus its state;
	// zero otherwise. It is stored under mu on every unlock that may have
	// changed any of them (see [circuit.unlockAndNotify]), so a reader sees
	// them as of some moment between two locked sections.
	quick atomic.Uint64

	mu sync.Mutex // protects everything below, and every call into cb
	// cb decides when a closed breaker trips. It is built on the first
	// failure the closed breaker counts. Once it has tripped (cbOpen) it is
	// left alone, its own timer never firing, and it is dropped when the
	// breaker closes again, so that the next closed period starts with a
	// fresh machine.
	cb     *gobreaker.TwoStepCircuitBreaker[struct{}]
	cbOpen bool
	// state is the kept state. Open turns HalfOpen lazily, on the first
	// call at or after openedAt+openFor.
	state State
	// gen changes on every change between closed, open and half-open, on
	// every probe re-issue or release, on Reset and on Restore; a done func
	// reports only while gen is the one it was issued under.
	gen uint64
	// seen is the latest time a call gave; a call with an earlier time is
	// taken to happen at seen (a clock step backwards: no time has passed).
	seen time.Time

	failures    int         // the leaky failure count
	times       []time.Time // counted failure times, oldest first; only with a Window
	lastFailure time.Time
	kind        Kind          // kind of the last failure
	kindCounts  [numKinds]int // counted failures by kind since the breaker last closed
	cycles      int           // failed probes in a row since the breaker last closed
	openedAt    time.Time     // start of the current open period
	openFor     time.Duration // length of the current open period
	trip        bool          // makes cb's next failure trip whatever the count

	probe      bool      // a half-open probe is out
	probeStart time.Time // when it was admitted

	conns map[string]time.Time // last counted failure by connection, for ConnDedup
	netAt time.Time            // last counted network error, for NetworkDedup

	reported State // the state last given to the hook

	// done is the done func of the current generation's plain (not
	// probe) admissions: they all report the same way, so they share one
	// func, made again when the generation changes.
	done atomic.Pointer[doneFunc]

	// owner is the Set that holds the breaker, nil once it has been
	// dropped (or for a breaker of no Set); guarded by mu.
	owner *Set
	// unusual is set while the breaker is counted in owner's unusual
	// count (its state is not Closed); guarded by mu.
	unusual bool
	// evRank and evLast are the breaker's eviction key (see
	// [circuit.evictKeyLocked]) as last published to owner; queued is set
	// while the breaker waits in owner's list of changed keys. All three
	// are guarded by mu.
	evRank int
	evLast time.Time
	queued bool
	// setRank, setLast and setPos are the key the owner's heap orders the
	// breaker by and its place there; guarded by the owner's lock.
	setRank int
	setLast time.Time
	setPos  int
}

// errTripped is the error fed to gobreaker's done func for a counted
// failure.
var errTripped = errors.New("breaker: counted failure")

// cbTimeout is gobreaker's open timeout: long enough never to end, since
// the breaker ends open periods itself, on its caller's clock.
const cbTimeout = 100 * 365 * 24 * time.Hour

// newCircuit returns a closed breaker named name with profile p, which
// is normalized and is not written after. onChange, if not nil, is called after every state change,
// outside the breaker's lock, from the goroutine that caused or observed
// the change.
func newCircuit(name string, p *Profile, onChange func(Event)) *circuit {
	b := &circuit{name: name, p: p, hook: onChange}
	b.publishQuickLocked() // b is not shared yet
	return b
}

// publishQuickLocked stores the quick word of the breaker's current state
// and generation; b.mu is held (or b is not shared yet).
func (b *circuit) publishQuickLocked() {
	var q uint64
	if b.state.admits() && b.p.Window == 0 {
		q = b.gen<<3 | uint64(b.state) + 1
		if b.failures == 0 && len(b.conns) == 0 {
			q |= quickClean
		}
	}
	// owner's count of breakers not Closed rises before a reader can see
	// this one open and falls after it is seen closed, so a Set whose count
	// reads zero holds no breaker a reader could see other than Closed.
	o := b.owner
	if o != nil && b.state != Closed && !b.unusual {
		o.unusual.Add(1)
		b.unusual = true
	}
	if b.quick.Load() != q {
		b.quick.Store(q)
	}
	if o != nil && b.state == Closed && b.unusual {
		o.unusual.Add(-1)
		b.unusual = false
	}
}

// quickClean is the clean bit of the quick word.
const quickClean = 1 << 2

// quickState returns the state and generation of a breaker that admits
// without reading the clock, and ok == false when the breaker must be
// asked under its lock.
func (b *circuit) quickState() (st State, gen uint64, ok bool) {
	q := b.quick.Load()
	if q == 0 {
		return 0, 0, false
	}
	return State(q&3 - 1), q >> 3, true
}

// newMachine builds the gobreaker machine that decides a closed breaker's
// trip: it trips on the leaky count (or b.trip), and its open state never
// ends by itself.
func (b *circuit) newMachine() *gobreaker.TwoStepCircuitBreaker[struct{}] {
	b.cbOpen = false
	return gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        b.name,
		MaxRequests: 1,
		Timeout:     cbTimeout,
		ReadyToTrip: func(gobreaker.Counts) bool {
			return b.trip || b.failures >= b.p.OpenAt // b.mu is held by the caller
		},
		OnStateChange: func(_ string, _, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				b.cbOpen = true // b.mu is held: every call into cb happens under it
			}
		},
	})
}

// clockLocked returns the time of a call that gave now: time.Now() for a
// zero now, and never earlier than a time an earlier call gave.
func (b *circuit) clockLocked(now time.Time) time.Time {
	if now.IsZero() {
		now = time.Now()
	}
	if now.Before(b.seen) {
		return b.seen
	}
	b.seen = now
	return now
}

// doneFunc is a done func with the generation it reports under.
type doneFunc struct {
	gen uint64
	fn  func(Report)
}

// AllowReportAt is [Set.AllowReportAt] for this breaker.
func (b *circuit) AllowReportAt(now time.Time) (done func(Report), err error) {
	gen, probe, err := b.admit(now)
	if err != nil {
		return nil, err
	}
	if probe {
		return func(r Report) { b.finish(gen, true, r) }, nil
	}
	if d := b.done.Load(); d != nil && d.gen == gen {
		return d.fn, nil
	}
	d := &doneFunc{gen: gen, fn: func(r Report) { b.finish(gen, false, r) }}
	b.done.Store(d)
	return d.fn, nil
}

// admit decides one admission at now: the generation to report under,
// whether it is the half-open probe, or the refusal.
func (b *circuit) admit(now time.Time) (gen uint64, probe bool, err error) {
	if _, gen, ok := b.quickState(); ok {
		// Without a counting window nothing in the closed state depends on
		// time: admit at once.
		return gen, false, nil
	}
	b.mu.Lock()
	if b.state.admits() && b.p.Window == 0 {
		gen = b.gen
		b.mu.Unlock()
		return gen, false, nil
	}
	now = b.clockLocked(now)
	b.refreshLocked(now)
	st, retry := b.stateLocked(now)
	switch {
	case st.admits():
		gen = b.gen
	case st == HalfOpen && !b.probe:
		b.probe, b.probeStart = true, now
		gen, probe = b.gen, true
	default:
		err = openError(b.name, st, retry, b.kind)
	}
	b.unlockAndNotify(now)
	return gen, probe, err
}

// finish accounts one admitted request's report, issued under generation
// gen.
func (b *circuit) finish(gen uint64, probe bool, r Report) {
	o := r.Outcome
	if r.QueueTimeout {
		o = Ignored
	}
	if o == Ignored && !probe {
		return
	}
	if q := b.quick.Load(); o == Success && !probe && q&quickClean != 0 && q>>3 == gen {
		// A success on a clean closed breaker of its generation changes
		// nothing: no count to lower, no connection to forget.
		return
	}
	b.mu.Lock()
	if o == Success && !probe && b.state.admits() && b.p.Window == 0 {
		// Hot path: a success on a closed breaker without a window.
		if gen == b.gen {
			b.dropFailureLocked()
			if r.Conn != "" {
				delete(b.conns, r.Conn)
			}
		}
		b.unlockAndNotify(r.At)
		return
	}
	now := b.clockLocked(r.At)
	b.refreshLocked(now)
	if gen == b.gen && (o != Failure || probe || b.passLocked(r, now)) {
		if o == Success && r.Conn != "" {
			delete(b.conns, r.Conn)
		}
		b.accountLocked(probe, o, r.Kind, now)
	}
	b.unlockAndNotify(now)
}

// accountLocked applies an outcome of the current generation.
func (b *circuit) accountLocked(probe bool, o Outcome, k Kind, now time.Time) {
	switch b.state {
	case Closed, Degraded:
		b.closedLocked(o, k, now)
	case HalfOpen:
		if !probe || !b.probe {
			return
		}
		switch o {
		case Success:
			b.closeLocked()
		case Failure:
			b.reopenLocked(k, now)
		default:
			// An ignored probe says nothing about the provider: free the
			// slot, and let a second call of its done func count for
			// nothing.
			b.probe, b.probeStart = false, time.Time{}
			b.gen++
		}
	}
}

// closedLocked applies an outcome to a closed (or degraded) breaker.
func (b *circuit) closedLocked(o Outcome, k Kind, now time.Time) {
	switch o {
	case Success:
		b.dropFailureLocked()
	case Failure:
		b.addFailureLocked(k, now)
		// Let gobreaker decide the trip; its ReadyToTrip reads the leaky
		// count, or b.trip when a kind's own threshold is reached. A closed
		// gobreaker always admits.
		if int(k) < numKinds {
			if at := b.p.Kinds[k].OpenAt; at > 0 && b.kindCounts[k] >= at {
				b.trip = true
			}
		}
		if b.cb == nil {
			b.cb = b.newMachine()
		}
		if gd, err := b.cb.Allow(); err == nil {
			gd(errTripped)
		}
		b.trip = false
		switch {
		case b.cbOpen:
			b.openLocked(now)
		case b.state == Closed && b.failures >= b.p.DegradedAt:
			b.state = Degraded
		}
	}
}

// openLocked starts an open period at now, for the open time of the last
// kind and the cycles.
func (b *circuit) openLocked(now time.Time) {
	b.state = Open
	b.gen++
	b.openedAt, b.openFor = now, b.p.openDurationFor(b.kind, b.cycles)
	b.probe, b.probeStart = false, time.Time{}
}

// closeLocked closes a half-open breaker: count, kind, cycles and kind
// counts are reset.
func (b *circuit) closeLocked() {
	if b.cbOpen {
		b.cb, b.cbOpen = nil, false
	}
	b.state = Closed
	b.gen++
	b.failures, b.times, b.cycles = 0, b.times[:0], 0
	b.kind, b.kindCounts = KindNone, [numKinds]int{}
	b.openedAt, b.openFor = time.Time{}, 0
	b.probe, b.probeStart = false, time.Time{}
}

// reopenLocked reopens a half-open breaker after a failure at now, with one
// more cycle.
func (b *circuit) reopenLocked(k Kind, now time.Time) {
	if int(k) >= numKinds {
		k = KindNone
	}
	b.cycles++
	b.lastFailure, b.kind = now, k
	b.openLocked(now)
}

func (b *circuit) addFailureLocked(k Kind, now time.Time) {
	if int(k) >= numKinds {
		k = KindNone
	}
	b.failures++
	b.lastFailure, b.kind = now, k
	if k != KindNone && b.kindCounts[k] < maxOpenAt {
		b.kindCounts[k]++
	}
	if b.p.Window > 0 {
		b.times = append(b.times, now)
	}
}

// dropFailureLocked takes one failure off the count; a degraded breaker
// whose count comes back to its degraded level closes.
func (b *circuit) dropFailureLocked() {
	if b.failures == 0 {
		return
	}
	b.failures--
	if len(b.times) > 0 {
		b.times = b.times[:copy(b.times, b.times[1:])]
	}
	b.leaveDegradedLocked()
}

// leaveDegradedLocked closes a degraded breaker whose count is at or below
// its degraded level.
func (b *circuit) leaveDegradedLocked() {
	if b.state == Degraded && b.failures <= b.p.DegradedAt {
		b.state = Closed
	}
}

// refreshLocked applies everything that became due by now: the end of an
// open period, the re-issue of an unreported probe, and the expiry of
// counted failures older than the window.
func (b *circuit) refreshLocked(now time.Time) {
	switch b.state {
	case Open:
		if !now.Before(b.openedAt.Add(b.openFor)) {
			b.state = HalfOpen
			b.gen++
		}
	case HalfOpen:
		if b.probe && now.Sub(b.probeStart) >= b.p.Reset {
			b.probe, b.probeStart = false, time.Time{}
			b.gen++ // the lost probe's late result is ignored
		}
	default:
		if b.p.Window > 0 && len(b.times) > 0 {
			cut := now.Add(-b.p.Window)
			i := 0
			for i < len(b.times) && !b.times[i].After(cut) {
				i++
			}
			if i > 0 {
				b.times = b.times[:copy(b.times, b.times[i:])]
				b.failures = len(b.times)
				b.leaveDegradedLocked()
			}
		}
	}
}

// stateLocked returns the state and the time until a probe, after a
// refresh at now.
func (b *circuit) stateLocked(now time.Time) (State, time.Duration) {
	switch b.state {
	case Open:
		return Open, b.untilLocked(b.openedAt, b.openFor, now)
	case HalfOpen:
		if b.probe {
			return HalfOpen, b.untilLocked(b.probeStart, b.p.Reset, now)
		}
		return HalfOpen, 0
	}
	return b.state, 0
}

// untilLocked returns the time left of a period of length d that started at
// start, within [0, d] even for a now before start.
func (b *circuit) untilLocked(start time.Time, d time.Duration, now time.Time) time.Duration {
	left := start.Add(d).Sub(now)
	return min(max(left, 0), d)
}

// unlockAndNotify notes the state, releases b.mu and then calls the hook if
// the state changed, so that the hook runs outside the lock. now may be
// zero on paths that did not need the clock; it is read only when there is
// a change.
func (b *circuit) unlockAndNotify(now time.Time) {
	if b.owner != nil {
		b.publishKeyLocked()
	}
	b.publishQuickLocked()
	var ev Event
	var hook func(Event)
	if b.state != b.reported {
		ev = b.eventLocked(b.clockLocked(now))
		b.reported = b.state
		hook = b.hook
	}
	b.mu.Unlock()
	if hook != nil {
		hook(ev)
	}
}

// eventLocked describes the change from the reported state to the current
// one at now.
func (b *circuit) eventLocked(now time.Time) Event {
	ev := Event{Provider: b.name, From: b.reported, To: b.state, At: now, Failures: b.failures,
		OpenCycles: b.cycles, Kind: b.kind, LastFailure: b.lastFailure}
	if b.resetting {
		ev.Cause, b.resetting = causeReset, false
	}
	if b.state == Open {
		ev.Until = b.openedAt.Add(b.openFor)
	}
	return ev
}

// removed tells the hook that a Set has dropped the breaker, at now. The
// breaker stays silent afterwards: requests admitted before may still
// report to it, but the hook hears only of the breaker the Set creates
// next for the provider.
func (b *circuit) removed(now time.Time) {
	b.mu.Lock()
	hook := b.hook
	b.hook = nil
	ev := b.eventLocked(b.clockLocked(now))
	ev.To, ev.Until, ev.Removed = Closed, time.Time{}, true
	b.mu.Unlock()
	if hook != nil {
		hook(ev)
	}
}

// StateAt is [Set.StateAt] for this breaker.
func (b *circuit) StateAt(now time.Time) (State, time.Duration) {
	if st, _, ok := b.quickState(); ok {
		// Nothing in a closed breaker without a window depends on time.
		return st, 0
	}
	b.mu.Lock()
	if b.state.admits() && b.p.Window == 0 && b.state == b.reported {
		// Nothing in a closed breaker without a window depends on time.
		st := b.state
		b.mu.Unlock()
		return st, 0
	}
	now = b.clockLocked(now)
	b.refreshLocked(now)
	st, retry := b.stateLocked(now)
	b.unlockAndNotify(now)
	return st, retry
}

// ResetAt closes the breaker and clears its count, cycles and failure time;
// now is the time the hook's [Event] carries (zero: time.Now()). Results
// of requests admitted before the reset are ignored.
func (b *circuit) ResetAt(now time.Time) {
	b.mu.Lock()
	b.resetLocked()
	b.resetting = b.state != b.reported // the unlock reports a change
	b.unlockAndNotify(now)
}

func (b *circuit) resetLocked() {
	if b.cbOpen {
		b.cb, b.cbOpen = nil, false
	}
	b.state = Closed
	b.gen++
	b.failures, b.times, b.cycles = 0, nil, 0
	b.kind, b.kindCounts = KindNone, [numKinds]int{}
	b.lastFailure, b.openedAt, b.openFor = time.Time{}, time.Time{}, 0
	b.probe, b.probeStart = false, time.Time{}
	b.conns, b.netAt = nil, time.Time{}
}

// evictKeyLocked returns the breaker's eviction rank, 0 when idle, 1 when
// closed (or degraded) with counted failures, 2 when open or half-open, and
// its last failure: a Set drops the breaker with the least (rank, last
// failure) first.
func (b *circuit) evictKeyLocked() (rank int, last time.Time) {
	switch {
	case b.idleLocked():
		return 0, b.lastFailure
	case b.state.admits():
		return 1, b.lastFailure
	}
	return 2, b.lastFailure
}

// publishKeyLocked tells the owner, when the eviction key has changed since
// it last heard, that the breaker needs re-ordering. It takes the owner's
// small list lock, never its main lock, so it is safe under b.mu.
func (b *circuit) publishKeyLocked() {
	rank, last := b.evictKeyLocked()
	if rank == b.evRank && last == b.evLast {
		return
	}
	b.evRank, b.evLast = rank, last
	if !b.queued {
		b.queued = true
		b.owner.changed(b)
	}
}

// idleLocked reports whether the breaker holds nothing worth keeping: closed,
// no counted failure.
func (b *circuit) idleLocked() bool { return b.state == Closed && b.failures == 0 }
