package breaker

import (
	"errors"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Change is one state change of a breaker, given to a state-change hook.
type Change struct {
	// Provider is the breaker's name.
	Provider string
	// From and To are the states before and after.
	From, To State
	// At is when the change was observed. Lazy changes (open → half-open)
	// are observed by the first call after they became due.
	At time.Time
}

// Breaker is a circuit breaker for one provider. Ask with [Breaker.Allow]
// before each request and report the request's [Outcome] through the done
// func it returns; read the state without changing anything but lazy
// refreshes with [Breaker.State].
//
// Breakers are created with [New] (or by a [Set]); the zero value is not
// usable. A Breaker is safe for concurrent use.
type Breaker struct {
	name string
	p    Profile
	hook func(Change)

	mu sync.Mutex // protects everything below, and every call into cb
	cb *gobreaker.TwoStepCircuitBreaker[struct{}]
	gs gobreaker.State // cb's state, mirrored by its OnStateChange
	// gen changes on every state change of cb, on every probe re-issue and
	// on Reset; a done func reports only while gen is the one it was
	// issued under.
	gen uint64

	failures    int         // the leaky failure count
	times       []time.Time // counted failure times, oldest first; only with a Window
	lastFailure time.Time
	kind        Kind          // kind of the last failure
	kindCounts  [NumKinds]int // counted failures by kind since the breaker last closed
	cycles      int           // failed probes in a row since the breaker last closed
	openedAt    time.Time     // start of the current open period
	openFor     time.Duration // length of the current open period
	trip        bool          // makes cb's next failure trip whatever the count

	// restored is set by Restore for an open or half-open record: cb is
	// closed underneath, and the visible state follows openedAt, openFor
	// and probeDone alone until the first probe reports (see restoredProbe).
	restored bool

	probeDone  func(error) // cb's done func of the probe in flight, or nil
	probeStart time.Time

	conns map[string]time.Time // last counted failure by connection, for ConnDedup
	netAt time.Time            // last counted network error, for NetworkDedup

	reported State // the state last given to the hook
}

// Errors fed to gobreaker's done funcs.
var (
	errTripped  = errors.New("breaker: counted failure")
	errExcluded = errors.New("breaker: ignored result")
)

// New returns a closed breaker named name with profile p (normalized with
// [Profile.Normalize]). onChange, if not nil, is called after every state
// change, outside the breaker's lock, from the goroutine that caused or
// observed the change.
func New(name string, p Profile, onChange func(Change)) *Breaker {
	b := &Breaker{name: name, p: p.Normalize(), hook: onChange}
	b.cb = b.newMachine()
	return b
}

// newMachine builds the gobreaker machine: one half-open probe, no closed
// interval, an open timeout of Reset (gobreaker leaves the open state once
// strictly after its timeout, hence the nanosecond less), tripping on the
// leaky count.
func (b *Breaker) newMachine() *gobreaker.TwoStepCircuitBreaker[struct{}] {
	b.gs = gobreaker.StateClosed
	return gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        b.name,
		MaxRequests: 1,
		Timeout:     b.p.Reset - time.Nanosecond,
		ReadyToTrip: func(gobreaker.Counts) bool {
			return b.trip || b.failures >= b.p.OpenAt // b.mu is held by the caller
		},
		OnStateChange: func(_ string, _, to gobreaker.State) {
			b.gs = to // b.mu is held: every call into cb happens under it
			b.gen++
		},
		IsExcluded: func(err error) bool { return err == errExcluded },
	})
}

// Name returns the breaker's name.
func (b *Breaker) Name() string { return b.name }

// Profile returns the breaker's normalized profile.
func (b *Breaker) Profile() Profile { return b.p }

// Allow asks whether a request may go to the provider now. If so, it returns
// a done func that must be called at most once with the request's outcome
// (see [Classify]); not calling it for a half-open probe holds the probe slot
// until the profile's reset time has passed. If not, it returns a nil done
// and an [*OpenError] that matches [ErrOpen] and carries the time until a
// probe is allowed.
//
// Allow on a closed breaker costs one small allocation (the done func).
func (b *Breaker) Allow() (done func(Outcome), err error) {
	gen, probe, err := b.admit()
	if err != nil {
		return nil, err
	}
	return func(o Outcome) { b.finish(gen, probe, Report{Outcome: o}) }, nil
}

// AllowReport is [Breaker.Allow] whose done func takes a [Report]: the
// outcome with the failure's kind, connection and flags. The report is
// filtered as [Breaker.ReportAt] filters it (queue timeouts, network and
// per-connection deduplication), except that a probe's failure is never
// deduplicated and a probe's queue timeout only frees the probe slot.
func (b *Breaker) AllowReport() (done func(Report), err error) {
	gen, probe, err := b.admit()
	if err != nil {
		return nil, err
	}
	return func(r Report) { b.finish(gen, probe, r) }, nil
}

// admit decides one admission: the generation to report under, whether it
// is the half-open probe, or the refusal.
func (b *Breaker) admit() (gen uint64, probe bool, err error) {
	b.mu.Lock()
	if b.gs == gobreaker.StateClosed && b.p.Window == 0 && !b.restored {
		// Without a counting window nothing in the closed state depends on
		// time: admit at once.
		gen = b.gen
		b.mu.Unlock()
		return gen, false, nil
	}
	now := time.Now()
	b.refreshLocked(now)
	st, retry := b.stateLocked(now)
	switch {
	case st.Admits():
		gen = b.gen
	case st == HalfOpen && b.probeDone == nil:
		gd, gerr := b.probeSlotLocked()
		if gerr != nil {
			err = &OpenError{Provider: b.name, State: HalfOpen, RetryAfter: retry, Kind: b.kind}
			break
		}
		b.probeDone, b.probeStart = gd, now
		gen, probe = b.gen, true
	default:
		err = &OpenError{Provider: b.name, State: st, RetryAfter: retry, Kind: b.kind}
	}
	b.unlockAndNotify(now)
	return gen, probe, err
}

// probeSlotLocked takes the half-open probe slot: cb's, or for a restored
// breaker the restore layer's.
func (b *Breaker) probeSlotLocked() (func(error), error) {
	if b.restored {
		return b.restoredProbe, nil
	}
	return b.cb.Allow()
}

// restoredProbe settles the probe of a restored breaker, whose cb is still
// closed: a success keeps cb closed and starts a new generation, a failure
// trips cb open, an ignored result only frees the slot. b.mu is held.
func (b *Breaker) restoredProbe(err error) {
	switch err {
	case nil:
		b.restored = false
		b.gen++
	case errTripped:
		b.restored = false
		b.tripLocked()
	}
}

// tripLocked opens a closed cb whatever the count.
func (b *Breaker) tripLocked() {
	b.trip = true
	if gd, err := b.cb.Allow(); err == nil {
		gd(errTripped)
	}
	b.trip = false
}

// finish accounts one admitted request's report, issued under generation
// gen.
func (b *Breaker) finish(gen uint64, probe bool, r Report) {
	o := r.Outcome
	if r.QueueTimeout {
		o = Ignored
	}
	if o == Ignored && !probe {
		return
	}
	b.mu.Lock()
	if o == Success && !probe && b.gs == gobreaker.StateClosed && b.p.Window == 0 && !b.restored {
		// Hot path: a success on a closed breaker without a window.
		if gen == b.gen {
			if b.failures > 0 {
				b.failures--
			}
			if r.Conn != "" {
				delete(b.conns, r.Conn)
			}
		}
		b.unlockAndNotify(time.Time{})
		return
	}
	now := time.Now()
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
func (b *Breaker) accountLocked(probe bool, o Outcome, k Kind, now time.Time) {
	if b.gs == gobreaker.StateClosed && !b.restored {
		b.closedLocked(o, k, now)
		return
	}
	if b.gs != gobreaker.StateHalfOpen && !b.restored {
		return
	}
	if !probe || b.probeDone == nil {
		return
	}
	switch o {
	case Success:
		b.closeHalfOpenLocked()
	case Failure:
		b.failHalfOpenLocked(k, now)
	default:
		gd := b.probeDone
		b.probeDone, b.probeStart = nil, time.Time{}
		gd(errExcluded) // frees the probe slot
	}
}

// closedLocked applies an outcome to a closed breaker.
func (b *Breaker) closedLocked(o Outcome, k Kind, now time.Time) {
	switch o {
	case Success:
		b.dropFailureLocked()
	case Failure:
		b.addFailureLocked(k, now)
		// Let gobreaker decide the trip; its ReadyToTrip reads the leaky
		// count, or b.trip when a kind's own threshold is reached. A closed
		// gobreaker always admits.
		if int(k) < NumKinds {
			if at := b.p.Kinds[k].OpenAt; at > 0 && b.kindCounts[k] >= at {
				b.trip = true
			}
		}
		if gd, err := b.cb.Allow(); err == nil {
			gd(errTripped)
		}
		b.trip = false
		if b.gs == gobreaker.StateOpen {
			b.startOpenLocked()
		}
	}
}

// closeHalfOpenLocked closes a half-open breaker after a success, with the
// probe's slot when one is out.
func (b *Breaker) closeHalfOpenLocked() {
	gd := b.takeProbeLocked()
	if gd == nil {
		return
	}
	gd(nil) // closes, new generation
	b.failures, b.times, b.cycles = 0, b.times[:0], 0
	b.kind, b.kindCounts = KindNone, [NumKinds]int{}
}

// failHalfOpenLocked reopens a half-open breaker after a failure, with one
// more cycle.
func (b *Breaker) failHalfOpenLocked(k Kind, now time.Time) {
	gd := b.takeProbeLocked()
	if gd == nil {
		return
	}
	if int(k) >= NumKinds {
		k = KindNone
	}
	b.cycles++
	b.lastFailure, b.kind = now, k
	gd(errTripped) // reopens, new generation
	b.startOpenLocked()
}

// takeProbeLocked returns the done func of the probe in flight, or else a
// fresh probe slot, and clears the probe. It returns nil if no slot can be
// had.
func (b *Breaker) takeProbeLocked() func(error) {
	gd := b.probeDone
	b.probeDone, b.probeStart = nil, time.Time{}
	if gd == nil {
		var err error
		if gd, err = b.probeSlotLocked(); err != nil {
			return nil
		}
	}
	return gd
}

// startOpenLocked starts an open period after cb has opened. The start is
// read after cb's own, so cb is never still open when this period ends.
func (b *Breaker) startOpenLocked() {
	b.openedAt = time.Now()
	b.openFor = b.p.OpenDurationFor(b.kind, b.cycles)
}

func (b *Breaker) addFailureLocked(k Kind, now time.Time) {
	if int(k) >= NumKinds {
		k = KindNone
	}
	b.failures++
	b.lastFailure, b.kind = now, k
	if k != KindNone {
		b.kindCounts[k]++
	}
	if b.p.Window > 0 {
		b.times = append(b.times, now)
	}
}

func (b *Breaker) dropFailureLocked() {
	if b.failures == 0 {
		return
	}
	b.failures--
	if len(b.times) > 0 {
		b.times = b.times[:copy(b.times, b.times[1:])]
	}
}

// refreshLocked applies everything that became due by now: cb's open →
// half-open move, the re-issue of an unreported probe, and the expiry of
// counted failures older than the window.
func (b *Breaker) refreshLocked(now time.Time) {
	if b.gs == gobreaker.StateOpen {
		b.cb.State() // lets cb leave the open state on its clock
	}
	if (b.gs == gobreaker.StateHalfOpen || b.restored) && b.probeDone != nil && now.Sub(b.probeStart) >= b.p.Reset {
		gd := b.probeDone
		b.probeDone, b.probeStart = nil, time.Time{}
		b.gen++ // the lost probe's late result is ignored
		gd(errExcluded)
	}
	if b.p.Window > 0 && b.gs == gobreaker.StateClosed && !b.restored && len(b.times) > 0 {
		cut := now.Add(-b.p.Window)
		i := 0
		for i < len(b.times) && !b.times[i].After(cut) {
			i++
		}
		if i > 0 {
			b.times = b.times[:copy(b.times, b.times[i:])]
			b.failures = len(b.times)
		}
	}
}

// stateLocked derives the visible state and the time until a probe.
func (b *Breaker) stateLocked(now time.Time) (State, time.Duration) {
	gs := b.gs
	if b.restored {
		gs = gobreaker.StateHalfOpen // open until openedAt+openFor, then half-open
	}
	switch gs {
	case gobreaker.StateOpen:
		return Open, b.untilLocked(b.openedAt, b.openFor, now)
	case gobreaker.StateHalfOpen:
		if wait := b.untilLocked(b.openedAt, b.openFor, now); wait > 0 {
			// An escalated open period outlasts cb's base timeout.
			return Open, wait
		}
		if b.probeDone != nil {
			return HalfOpen, b.untilLocked(b.probeStart, b.p.Reset, now)
		}
		return HalfOpen, 0
	}
	if b.failures >= b.p.DegradedAt {
		return Degraded, 0
	}
	return Closed, 0
}

// untilLocked returns the time left of a period of length d that started at
// start, within [0, d] even when the clock stepped backwards.
func (b *Breaker) untilLocked(start time.Time, d time.Duration, now time.Time) time.Duration {
	left := start.Add(d).Sub(now)
	return min(max(left, 0), d)
}

// unlockAndNotify notes the visible state, releases b.mu and then calls the
// hook if the state changed, so that the hook runs outside the lock.
func (b *Breaker) unlockAndNotify(now time.Time) {
	ch, fire := b.noteLocked(now)
	b.mu.Unlock()
	if fire {
		b.hook(ch)
	}
}

// noteLocked records the visible state and reports whether the hook must be
// called with the returned change. now may be zero on paths that did not
// need the clock; it is read only when there is a change.
func (b *Breaker) noteLocked(now time.Time) (Change, bool) {
	var st State
	if b.gs == gobreaker.StateClosed && !b.restored {
		st = Closed
		if b.failures >= b.p.DegradedAt {
			st = Degraded
		}
	} else {
		if now.IsZero() {
			now = time.Now()
		}
		st, _ = b.stateLocked(now)
	}
	if st == b.reported {
		return Change{}, false
	}
	if now.IsZero() {
		now = time.Now()
	}
	ch := Change{Provider: b.name, From: b.reported, To: st, At: now}
	b.reported = st
	return ch, b.hook != nil
}

// State returns the breaker's state and how long until it admits a request
// (zero when it admits one now; for a half-open breaker whose probe is out,
// the time until the probe slot is re-issued). It changes nothing but the
// lazy refreshes every call makes, and it does not allocate.
func (b *Breaker) State() (State, time.Duration) {
	b.mu.Lock()
	if b.gs == gobreaker.StateClosed && b.p.Window == 0 && !b.restored && b.reported < Open {
		// Nothing in a closed breaker without a window depends on time.
		st := Closed
		if b.failures >= b.p.DegradedAt {
			st = Degraded
		}
		if st == b.reported {
			b.mu.Unlock()
			return st, 0
		}
	}
	now := time.Now()
	b.refreshLocked(now)
	st, retry := b.stateLocked(now)
	b.unlockAndNotify(now)
	return st, retry
}

// Status is a breaker's state as plain data, for health and admin APIs.
type Status struct {
	Provider string `json:"provider"`
	State    State  `json:"state"`
	// Failures is the leaky failure count.
	Failures int `json:"failures"`
	// LastFailure is the time of the last counted failure; zero if none.
	LastFailure time.Time `json:"lastFailure"`
	// RetryAfter is the time until the breaker admits a request.
	RetryAfter time.Duration `json:"retryAfter"`
	// OpenCycles is the number of failed probes in a row.
	OpenCycles int `json:"openCycles"`
	// ProbeInFlight reports a half-open probe that has not reported yet.
	ProbeInFlight bool `json:"probeInFlight"`
}

// Status returns the breaker's state as plain data.
func (b *Breaker) Status() Status {
	now := time.Now()
	b.mu.Lock()
	b.refreshLocked(now)
	st, retry := b.stateLocked(now)
	s := Status{
		Provider:      b.name,
		State:         st,
		Failures:      b.failures,
		LastFailure:   b.lastFailure,
		RetryAfter:    retry,
		OpenCycles:    b.cycles,
		ProbeInFlight: b.probeDone != nil,
	}
	b.unlockAndNotify(now)
	return s
}

// Reset closes the breaker and clears its count, cycles and failure time.
// Results of requests admitted before the reset are ignored.
func (b *Breaker) Reset() {
	b.mu.Lock()
	b.resetLocked()
	b.unlockAndNotify(time.Now())
}

func (b *Breaker) resetLocked() {
	b.cb = b.newMachine()
	b.gen++
	b.failures, b.times, b.cycles = 0, nil, 0
	b.kind, b.kindCounts = KindNone, [NumKinds]int{}
	b.lastFailure, b.openedAt, b.openFor = time.Time{}, time.Time{}, 0
	b.probeDone, b.probeStart = nil, time.Time{}
	b.restored, b.conns, b.netAt = false, nil, time.Time{}
}

// idleLocked reports whether the breaker holds nothing worth keeping: closed,
// no counted failure, no probe.
func (b *Breaker) idleLocked() bool {
	return b.gs == gobreaker.StateClosed && !b.restored && b.failures == 0
}

// isClosedLocked reports whether the breaker is closed (Closed or
// Degraded).
func (b *Breaker) isClosedLocked() bool { return b.gs == gobreaker.StateClosed && !b.restored }
