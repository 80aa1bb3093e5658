package watchdog

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed is returned by Read after Close.
var ErrClosed = errors.New("watchdog: read on closed body")

// Options are the caller's hooks and clock for one wrapped attempt. All are
// optional.
type Options struct {
	// Now is the clock the Body reads every time from: the timestamp of
	// each chunk, the checks of the idle timeout, the readiness timeout and
	// the attempt deadline, and the Stats handed to Finalize. nil means
	// time.Now. Pass the same clock the caller uses elsewhere (a router's
	// clock, say); the start time given to [WrapAt] must come from it too.
	Now func() time.Time
	// Cancel aborts the upstream attempt, typically the CancelFunc of the
	// context the upstream request was made with. It is called once when a
	// guard aborts the attempt. When the idle timeout or the attempt
	// deadline passes while Read is blocked, it is what unblocks that Read.
	// When Cancel is nil the upstream body is closed instead, from the
	// timer's goroutine, so it must then tolerate a Close concurrent with
	// Read (net/http response bodies and io.Pipe do).
	Cancel func()
	// OnAbort is called once with the [*Error] when a guard aborts the
	// attempt, before Finalize and Cancel.
	OnAbort func(err error)
	// Finalize is called exactly once when the attempt ends, on whichever
	// path comes first: Read returning io.EOF or an error, an abort, or
	// Close.
	Finalize func(Outcome)
}

// Outcome describes how a wrapped attempt ended.
type Outcome struct {
	// Err is nil after io.EOF or when Close came first, the [*Error] of an
	// abort, or the upstream's read error.
	Err error
	// EOF reports that the upstream body was read to its end.
	EOF bool
	// Committed reports that at least one byte was handed to the reader;
	// from then on the attempt must not be replayed.
	Committed bool
	// Delivered is the number of bytes handed to the reader.
	Delivered int64
	// Stats is the Observer's snapshot at the end.
	Stats Stats
}

// Body wraps an upstream streaming body, observes every chunk with an
// [Observer] and aborts the attempt when a guard fails: Read then returns
// the [*Error]. The bytes Read returns are exactly the upstream bytes, in
// order; an abort only cuts the stream short.
//
// Before anything is handed to the reader ([Body.Committed] is false) the
// caller may retry the request elsewhere; after that it must not replay it.
// With Config.HoldHeartbeats, heartbeats before the first real event are
// held back so that an attempt that never starts stays uncommitted.
//
// Every time the Body uses comes from Options.Now (time.Now when nil): the
// Observer sees each chunk stamped with it and judges every guard against
// it, so a clock that is shifted from the wall clock behaves exactly like
// the wall clock itself.
//
// The idle timeout, the readiness timeout and the attempt deadline can
// pass while Read is blocked on the upstream. Body then relies on one
// [time.AfterFunc] timer (no goroutine of its own) used only to wake up:
// its delay is computed on the injected clock, as [Observer.DueAt](now)
// minus now. When it fires, the Body re-checks the guards at the clock's
// current time; if none is due yet (the clock ran slower than the timer),
// it re-arms for the remaining time, and on failure it calls
// Options.Cancel or closes the upstream body. The timer is stopped when the
// attempt ends. Without a time guard pending at the start no timer
// exists; the readiness timeout is on by default, so by default one does.
//
// Read must not be called concurrently with itself; Close may be called
// from any goroutine, and every other method is safe for concurrent use.
type Body struct {
	up   io.ReadCloser
	obs  *Observer
	opts Options
	now  func() time.Time // opts.Now, or time.Now

	mu        sync.Mutex // protects the fields below
	timer     *time.Timer
	closed    bool          // Close was called
	done      bool          // Finalize ran
	abortDone chan struct{} // closed when an abort has been handled
	upClosed  bool          // the upstream body was closed

	delivered atomic.Int64 // bytes handed to the reader

	// Read's own state.
	holding bool   // heartbeats are being held back
	hold    []byte // held bytes
	out     []byte // released bytes not yet returned
	final   error  // error to return once out is drained
}

// Wrap is shorthand for WrapAt(up, cfg, opts, now) where now is read from
// opts.Now (time.Now when nil): the attempt starts now.
func Wrap(up io.ReadCloser, cfg Config, opts Options) *Body {
	return WrapAt(up, cfg, opts, clockOf(opts)())
}

// WrapAt returns a Body reading from up under cfg, for an attempt that
// started at start: its deadline, its readiness timeout and its first idle
// period count from then. start must be read from opts.Now (time.Now when
// nil), the clock the Body reads every later time from.
func WrapAt(up io.ReadCloser, cfg Config, opts Options, start time.Time) *Body {
	b := &Body{up: up, obs: NewObserver(cfg), opts: opts, now: clockOf(opts)}
	b.obs.StartAt(start)
	b.holding = b.obs.s.hold
	now := b.now()
	if due, ok := b.obs.DueAt(now); ok {
		b.mu.Lock()
		b.timer = time.AfterFunc(due.Sub(now), b.fire)
		b.mu.Unlock()
	}
	return b
}

func clockOf(opts Options) func() time.Time {
	if opts.Now != nil {
		return opts.Now
	}
	return time.Now
}

// Observer returns the Observer that judges the stream, for its Stats and
// ErrorEvent.
func (b *Body) Observer() *Observer { return b.obs }

// Committed reports whether any byte has been handed to the reader.
func (b *Body) Committed() bool { return b.delivered.Load() > 0 }

// Delivered returns the number of bytes handed to the reader.
func (b *Body) Delivered() int64 { return b.delivered.Load() }

// Err returns the [*Error] that aborted the attempt, or nil.
func (b *Body) Err() error { return b.obs.Err() }

// Stats returns the Observer's snapshot as of the Body's clock
// (Options.Now).
func (b *Body) Stats() Stats { return b.obs.StatsAt(b.now()) }

// fire runs on the timer's goroutine when a time guard may be due.
func (b *Body) fire() {
	b.mu.Lock()
	over := b.done || b.closed
	b.mu.Unlock()
	if over {
		return
	}
	err := b.obs.CheckAt(b.now())
	if err == nil {
		b.mu.Lock()
		if !b.done && !b.closed {
			now := b.now()
			if due, ok := b.obs.DueAt(now); ok {
				b.timer.Reset(due.Sub(now))
			}
		}
		b.mu.Unlock()
		return
	}
	b.abort(err)
}

// abort stops the attempt once: it calls OnAbort, finalises, then cancels
// the upstream. A second caller waits until the first is done, so Read
// never returns the abort before Finalize has run.
func (b *Body) abort(err error) {
	b.mu.Lock()
	if b.abortDone != nil {
		ch := b.abortDone
		b.mu.Unlock()
		<-ch
		return
	}
	if b.done {
		b.mu.Unlock()
		return
	}
	b.abortDone = make(chan struct{})
	b.stopTimerLocked()
	b.mu.Unlock()
	defer close(b.abortDone)
	if b.opts.OnAbort != nil {
		b.opts.OnAbort(err)
	}
	b.finish(Outcome{Err: err})
	if b.opts.Cancel != nil {
		b.opts.Cancel()
	} else {
		_ = b.closeUpstream()
	}
}

func (b *Body) stopTimerLocked() {
	if b.timer != nil {
		b.timer.Stop()
	}
}

func (b *Body) closeUpstream() error {
	b.mu.Lock()
	if b.upClosed {
		b.mu.Unlock()
		return nil
	}
	b.upClosed = true
	b.mu.Unlock()
	return b.up.Close()
}

// finish runs Finalize once.
func (b *Body) finish(o Outcome) {
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return
	}
	b.done = true
	b.stopTimerLocked()
	b.mu.Unlock()
	if b.opts.Finalize == nil {
		return
	}
	o.Delivered = b.delivered.Load()
	o.Committed = o.Delivered > 0
	o.Stats = b.obs.StatsAt(b.now())
	b.opts.Finalize(o)
}

// deliver records n bytes handed to the reader.
func (b *Body) deliver(n int) int {
	if n > 0 {
		b.delivered.Add(int64(n))
	}
	return n
}

// end reports a terminal error to the reader and finalises.
func (b *Body) end(err error) error {
	if err == io.EOF {
		b.finish(Outcome{EOF: true})
	} else {
		b.finish(Outcome{Err: err})
	}
	return err
}

// Read reads from the upstream body, observes the chunk and returns it
// unchanged, or returns the [*Error] of an abort (the chunk that triggered
// it is not handed over).
func (b *Body) Read(p []byte) (int, error) {
	if len(b.out) > 0 {
		n := copy(p, b.out)
		b.out = b.out[n:]
		if len(b.out) == 0 && b.final != nil {
			err := b.final
			b.out, b.final = nil, nil
			return b.deliver(n), b.end(err)
		}
		return b.deliver(n), nil
	}
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return 0, ErrClosed
	}
	if err := b.obs.Err(); err != nil {
		// A guard failed outside Read (the timer, or a direct check on the
		// Observer): finish the abort before reporting it.
		b.abort(err)
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, err := b.up.Read(p)
		var gerr error
		if n > 0 {
			gerr = b.obs.ObserveAt(p[:n], b.now())
		} else {
			gerr = b.obs.CheckAt(b.now())
		}
		if gerr != nil {
			b.hold = nil
			b.abort(gerr)
			return 0, gerr
		}
		if !b.holding {
			if err != nil {
				return b.deliver(n), b.end(err)
			}
			return b.deliver(n), nil
		}
		if n > 0 {
			if b.obs.sawEvent() || len(b.hold)+n > b.obs.s.maxEventBytes {
				return b.release(p, n, err)
			}
			b.hold = append(b.hold, p[:n]...)
		}
		switch {
		case err == io.EOF:
			return b.release(p, 0, err)
		case err != nil:
			b.hold = nil // heartbeats only: nothing was committed
			return 0, b.end(err)
		case n == 0:
			return 0, nil
		}
	}
}

// release stops holding back: the held bytes, then p[:n], go to the reader,
// as much as fits in p now and the rest on the next Reads; err is returned
// once everything is handed over.
func (b *Body) release(p []byte, n int, err error) (int, error) {
	b.holding = false
	if len(b.hold) > 0 {
		b.hold = append(b.hold, p[:n]...)
		n = copy(p, b.hold)
		b.out, b.hold = b.hold[n:], nil
		if len(b.out) > 0 {
			b.final, err = err, nil
		}
	}
	if err != nil {
		return b.deliver(n), b.end(err)
	}
	return b.deliver(n), nil
}

// Close ends the attempt: it stops the timer, closes the upstream body and
// runs Finalize if nothing else did. Calling Close again returns nil.
func (b *Body) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.stopTimerLocked()
	b.mu.Unlock()
	err := b.closeUpstream()
	b.finish(Outcome{})
	return err
}
