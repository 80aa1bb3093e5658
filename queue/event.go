package queue

import (
	"strconv"
	"time"
)

// EventKind says what an [Event] reports.
type EventKind int

// Event kinds.
const (
	// EventQueueFull: a request was refused because the queue was full
	// (Event.Err is the refusal).
	EventQueueFull EventKind = iota + 1
	// EventQueueTimeout: a waiter ran out of its wait budget (Event.Err is
	// the timeout).
	EventQueueTimeout
	// EventFailOpen: AcquireMany proceeded without slots; Event.Err says
	// why.
	EventFailOpen
	// EventLimitsLearned: upstream headers changed a key's limits.
	EventLimitsLearned
	// EventLimiterReset: a 429 gave the key a fresh limiter.
	EventLimiterReset
	// EventBlocked: a key was blocked until Event.Until.
	EventBlocked
	// EventUnblocked: a key's block was lifted by UnblockAt.
	EventUnblocked
	// EventReset: a key was reset and its waiters rejected.
	EventReset
	// EventRemoved: an idle key was dropped, with its learned limits
	// (Event.Removed is set).
	EventRemoved
)

var eventNames = [...]string{"", "queue_full", "queue_timeout", "fail_open", "limits_learned", "limiter_reset", "blocked", "unblocked", "reset", "removed"}

// String returns the event kind in snake case, e.g. "queue_full".
func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "event(" + strconv.Itoa(int(k)) + ")"
}

// Event is a change of one key, handed to Config.OnChange. An
// [Queue.AcquireMany] that times out or fails open reports one event per
// key it needed.
type Event struct {
	// Kind is what happened.
	Kind EventKind
	// Key is the key concerned.
	Key string
	// At is the time of the change: the now given to the call that made
	// it, or the wall clock for the blocking calls.
	At time.Time
	// Running and Waiting are the key's slots in use and waiters after
	// the change.
	Running, Waiting int
	// Until is the end of the key's block after the change; zero when the
	// key is not blocked at At.
	Until time.Time
	// Removed reports that the key's entry is gone (EventRemoved).
	Removed bool
	// Err is the refusal or timeout, for EventQueueFull,
	// EventQueueTimeout and EventFailOpen.
	Err error
}
