package main

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lockout"
	"github.com/routeguard/routeguard/queue"
	"github.com/routeguard/routeguard/watchdog"
)

// timeline prints what each layer did, as it happens. The layers' hooks
// run inside the router before the attempt that caused them is reported,
// so their lines wait in pending and are printed around the attempt's line
// by time.
type timeline struct {
	out   io.Writer
	start time.Time

	mu       sync.Mutex
	req      request
	trail    int    // attempts of the current request that failed or were skipped
	upstream int    // status the upstream sent for the latest attempt
	server   string // target that served the previous request
	pending  []note
}

type note struct {
	at   time.Time
	text string
}

func newTimeline(out io.Writer) *timeline {
	return &timeline{out: out, start: time.Now()}
}

// printf prints one line stamped with the time since the run began.
func (tl *timeline) printf(format string, args ...any) {
	fmt.Fprintf(tl.out, "  %s  %s\n", since(tl.start), fmt.Sprintf(format, args...))
}

func (tl *timeline) phase(p int) {
	tl.printf("── phase %d: %s", p+1, phaseTitles[p])
}

// note keeps a layer's event until the attempt that caused it is printed.
func (tl *timeline) note(format string, args ...any) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.pending = append(tl.pending, note{at: time.Now(), text: fmt.Sprintf(format, args...)})
}

// flush prints the pending notes taken before t (all of them for a zero t).
func (tl *timeline) flush(before time.Time) {
	kept := tl.pending[:0]
	for _, n := range tl.pending {
		if before.IsZero() || n.at.Before(before) {
			tl.printf("          %s", n.text)
		} else {
			kept = append(kept, n)
		}
	}
	tl.pending = kept
}

func (tl *timeline) begin(r request) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.req, tl.trail, tl.upstream = r, 0, 0
}

func (tl *timeline) upstreamStatus(status int) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.upstream = status
}

// attempt is the router's OnAttempt hook.
func (tl *timeline) attempt(a combo.Attempt) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.flush(a.Start)
	tag := fmt.Sprintf("req %-3d", tl.req.n)
	switch a.Outcome {
	case combo.OutcomeSkipped:
		tl.trail++
		tl.printf("%s %s skipped: %s", tag, a.Target.String(), a.Reason)
	case combo.OutcomeFailed:
		tl.trail++
		var cut *watchdog.Error
		switch {
		case errors.As(a.Err, &cut):
			tl.printf("%s stream from %s cut after %v: %s", tag, a.Target.Provider, cut.Elapsed.Round(10*time.Millisecond), cut.Code)
		case tl.upstream != 0 && tl.upstream != a.Status:
			tl.printf("%s %s answered %d, restated to %d%s", tag, a.Target.String(), tl.upstream, a.Status, reason(a.Code))
		default:
			tl.printf("%s %s answered %d%s", tag, a.Target.String(), a.Status, reason(a.Code))
		}
	case combo.OutcomeSucceeded:
		server := a.Target.String()
		switch {
		case tl.trail > 0 && tl.req.stream:
			tl.printf("%s retried on %s: served", tag, a.Target.Provider)
		case tl.trail > 0 || server != tl.server && !tl.req.stream:
			tl.printf("%s served by %s", tag, server)
		}
		if !tl.req.stream {
			tl.server = server
		}
	}
	tl.upstream = 0
	tl.flush(time.Time{})
}

// end closes the current request.
func (tl *timeline) end(ok bool, err error) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.flush(time.Time{})
	if !ok {
		tl.printf("req %-3d FAILED: %v", tl.req.n, err)
	}
}

// reason formats a classifier reason for a failure line.
func reason(code string) string {
	if code == "" || code == "unknown" {
		return ""
	}
	return " (" + code + ")"
}

func (tl *timeline) breakerChange(c breaker.Event) {
	tl.note("breaker %s: %v → %v", c.Provider, c.From, c.To)
}

func (tl *timeline) cooldownChange(e cooldown.Event) {
	switch {
	case e.State == cooldown.Cooling && e.From != cooldown.Cooling:
		tl.note("key %s cooled for %v (%s)", e.Conn, e.Until.Sub(e.At).Round(time.Second), e.Reason)
	case e.State.Terminal() && !e.From.Terminal():
		tl.note("key %s is %v (%s)", e.Conn, e.State, e.Reason)
	case e.State == cooldown.Available && e.From != cooldown.Available:
		tl.note("key %s available again", e.Conn)
	}
}

func (tl *timeline) lockoutChange(e lockout.Event) {
	switch e.Kind {
	case lockout.EventLocked:
		tl.note("model %s locked on %s for %v (%s)", e.Model, e.Connection,
			e.Until.Sub(e.LockedAt).Round(time.Second), e.Reason)
	case lockout.EventDecayed, lockout.EventCleared:
		tl.note("model %s unlocked on %s (%v)", e.Model, e.Connection, e.Kind)
	}
}

func (tl *timeline) queueEvent(e queue.Event) {
	if e.Kind == queue.EventLimiterReset {
		return // every 429 renews the key's limiter: too common to show
	}
	tl.note("queue %s: %v", e.Key, e.Kind)
}
