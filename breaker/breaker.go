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
	cycles      int           // failed probes in a row since the breaker last closed
	openedAt    time.Time     // start of the current open period
	openFor     time.Duration // length of the current open period

	probeDone  func(error) // cb's done func of the probe in flight, or nil
	probeStart time.Time

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
			return b.failures >= b.p.OpenAt // b.mu is held by the caller
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
	b.mu.Lock()
	if b.gs == gobreaker.StateClosed && b.p.Window == 0 {
		// Without a counting window nothing in the closed state depends on
		// time: admit at once.
		gen := b.gen
		b.mu.Unlock()
		return b.doneFunc(gen, false), nil
	}
	now := time.Now()
	b.refreshLocked(now)
	st, retry := b.stateLocked(now)
	switch {
	case st.Admits():
		done = b.doneFunc(b.gen, false)
	case st == HalfOpen && b.probeDone == nil:
		gd, gerr := b.cb.Allow()
		if gerr != nil {
			err = &OpenError{Provider: b.name, State: HalfOpen, RetryAfter: retry}
			break
		}
		b.probeDone, b.probeStart = gd, now
		done = b.doneFunc(b.gen, true)
	default:
		err = &OpenError{Provider: b.name, State: st, RetryAfter: retry}
	}
	ch, fire := b.noteLocked(now)
	b.mu.Unlock()
	if fire {
		b.hook(ch)
	}
	return done, err
}

func (b *Breaker) doneFunc(gen uint64, probe bool) func(Outcome) {
	return func(o Outcome) { b.report(gen, probe, o) }
}

// report accounts one outcome issued under generation gen.
func (b *Breaker) report(gen uint64, probe bool, o Outcome) {
	if o == Ignored && !probe {
		return
	}
	b.mu.Lock()
	if o == Success && !probe && b.gs == gobreaker.StateClosed && b.p.Window == 0 {
		// Hot path: a success on a closed breaker without a window.
		if gen == b.gen && b.failures > 0 {
			b.failures--
		}
		ch, fire := b.noteLocked(time.Time{})
		b.mu.Unlock()
		if fire {
			b.hook(ch)
		}
		return
	}
	now := time.Now()
	b.refreshLocked(now)
	if gen == b.gen {
		b.accountLocked(probe, o, now)
	}
	ch, fire := b.noteLocked(now)
	b.mu.Unlock()
	if fire {
		b.hook(ch)
	}
}

// accountLocked applies an outcome of the current generation.
func (b *Breaker) accountLocked(probe bool, o Outcome, now time.Time) {
	switch b.gs {
	case gobreaker.StateClosed:
		switch o {
		case Success:
			b.dropFailureLocked()
		case Failure:
			b.addFailureLocked(now)
			// Let gobreaker decide the trip; its ReadyToTrip reads the
			// leaky count. A closed gobreaker always admits.
			if gd, err := b.cb.Allow(); err == nil {
				gd(errTripped)
			}
			if b.gs == gobreaker.StateOpen {
				b.startOpenLocked()
			}
		}
	case gobreaker.StateHalfOpen:
		if !probe || b.probeDone == nil {
			return
		}
		gd := b.probeDone
		b.probeDone, b.probeStart = nil, time.Time{}
		switch o {
		case Success:
			gd(nil) // closes, new generation
			b.failures, b.times, b.cycles = 0, b.times[:0], 0
		case Failure:
			b.cycles++
			b.lastFailure = now
			gd(errTripped) // reopens, new generation
			b.startOpenLocked()
		default:
			gd(errExcluded) // frees the probe slot
		}
	}
}

// startOpenLocked starts an open period after cb has opened. The start is
// read after cb's own, so cb is never still open when this period ends.
func (b *Breaker) startOpenLocked() {
	b.openedAt = time.Now()
	b.openFor = b.p.OpenDuration(b.cycles)
}

func (b *Breaker) addFailureLocked(now time.Time) {
	b.failures++
	b.lastFailure = now
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
	if b.gs == gobreaker.StateHalfOpen && b.probeDone != nil && now.Sub(b.probeStart) >= b.p.Reset {
		gd := b.probeDone
		b.probeDone, b.probeStart = nil, time.Time{}
		b.gen++ // the lost probe's late result is ignored
		gd(errExcluded)
	}
	if b.p.Window > 0 && b.gs == gobreaker.StateClosed && len(b.times) > 0 {
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
	switch b.gs {
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

// noteLocked records the visible state and reports whether the hook must be
// called with the returned change. now may be zero on paths that did not
// need the clock; it is read only when there is a change.
func (b *Breaker) noteLocked(now time.Time) (Change, bool) {
	var st State
	if b.gs == gobreaker.StateClosed {
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
	if b.gs == gobreaker.StateClosed && b.p.Window == 0 && b.reported < Open {
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
	ch, fire := b.noteLocked(now)
	b.mu.Unlock()
	if fire {
		b.hook(ch)
	}
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
	ch, fire := b.noteLocked(now)
	b.mu.Unlock()
	if fire {
		b.hook(ch)
	}
	return s
}

// Reset closes the breaker and clears its count, cycles and failure time.
// Results of requests admitted before the reset are ignored.
func (b *Breaker) Reset() {
	b.mu.Lock()
	b.resetLocked()
	ch, fire := b.noteLocked(time.Now())
	b.mu.Unlock()
	if fire {
		b.hook(ch)
	}
}

func (b *Breaker) resetLocked() {
	b.cb = b.newMachine()
	b.gen++
	b.failures, b.times, b.cycles = 0, nil, 0
	b.lastFailure, b.openedAt, b.openFor = time.Time{}, time.Time{}, 0
	b.probeDone, b.probeStart = nil, time.Time{}
}

// idleLocked reports whether the breaker holds nothing worth keeping: closed,
// no counted failure, no probe.
func (b *Breaker) idleLocked() bool {
	return b.gs == gobreaker.StateClosed && b.failures == 0
}

// closedLocked reports whether cb is closed (Closed or Degraded).
func (b *Breaker) closedLocked() bool { return b.gs == gobreaker.StateClosed }
