package cooldown

import (
	"fmt"
	"time"
)

// State is what a connection may be used for at one instant.
type State uint8

const (
	// Available means the connection may be used.
	Available State = iota
	// Cooling means a transient failure keeps the connection out until
	// [Status.Until].
	Cooling
	// Banned is terminal: the upstream refused the account for good.
	Banned
	// Expired is terminal: the credential was rejected (401).
	Expired
	// CreditsExhausted is terminal until [Status.Until] when that is known,
	// and until an explicit reset otherwise.
	CreditsExhausted
)

var stateNames = [...]string{"available", "cooling", "banned", "expired", "credits_exhausted"}

// String returns the state's stable name: "available", "cooling", "banned",
// "expired" or "credits_exhausted".
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// Terminal reports whether s is Banned, Expired or CreditsExhausted.
func (s State) Terminal() bool { return s >= Banned && s <= CreditsExhausted }

// Status is the state of one connection at one instant.
type Status struct {
	// State is the connection's state.
	State State
	// Until is the end of a cooldown ([Cooling]) or the known recovery
	// time of [CreditsExhausted]; zero otherwise.
	Until time.Time
	// Reason is the classified reason of the failure behind a cooling or
	// terminal state; empty when available.
	Reason string
	// Level is the backoff level, in [0, profile steps].
	Level int
}

// Available reports whether the connection may be used.
func (s Status) Available() bool { return s.State == Available }

// Terminal reports whether the connection is in a terminal state.
func (s Status) Terminal() bool { return s.State.Terminal() }

// String renders the status for logs, for example "available (level 1)"
// or "cooling until 2026-03-01T12:00:03Z (rate_limit_exceeded, level 1)".
func (s Status) String() string {
	switch {
	case s.State == Available:
		return fmt.Sprintf("available (level %d)", s.Level)
	case s.Until.IsZero():
		return fmt.Sprintf("%s (%s, level %d)", s.State, s.Reason, s.Level)
	}
	return fmt.Sprintf("%s until %s (%s, level %d)", s.State, s.Until.Format(time.RFC3339), s.Reason, s.Level)
}

// Wait returns how long after now the connection becomes available: 0 when
// it is available, the remaining cooldown when cooling or credits exhausted
// with a known recovery time, and -1 when only a reset can lift it.
func (s Status) Wait(now time.Time) time.Duration {
	switch s.State {
	case Available:
		return 0
	case Cooling:
		return max(s.Until.Sub(now), 0)
	case CreditsExhausted:
		if !s.Until.IsZero() {
			return max(s.Until.Sub(now), 0)
		}
	}
	return -1
}

// Failure describes one failed attempt on a connection, as classified by
// the caller. Exactly which length a cooldown gets is decided, in order, by:
// a terminal flag (no cooldown); RetryAfter when the connection's profile
// honours hints; Cooldown; the profile's backoff when Backoff is set; the
// profile's base cooldown when Base is set; else no cooldown (the error is
// only recorded).
type Failure struct {
	// Status is the HTTP status, after any restatement.
	Status int
	// Reason is the classified reason, such as "rate_limit_exceeded",
	// "quota_exhausted", "server_error" or "auth_error".
	Reason string
	// Code is an optional error code to record (for example a provider's
	// error code string).
	Code string
	// Message is the error text; its first [MaxMessage] bytes are recorded.
	Message string

	// RetryAfter is the upstream retry hint, if any (> 0). It decides the
	// cooldown when the connection's profile honours hints, bounded by
	// [Config.MaxHint], and leaves the backoff level unchanged.
	RetryAfter time.Duration
	// Cooldown is a fixed cooldown given by the classification (> 0),
	// bounded by [Config.MaxHint]; it leaves the backoff level unchanged.
	Cooldown time.Duration
	// Backoff asks for the profile's exponential backoff when neither a
	// hint nor a fixed cooldown applies; it raises the level by one.
	Backoff bool
	// Base asks for the profile's base cooldown, without escalation, when
	// no hint, fixed cooldown or backoff applies; the level is unchanged.
	Base bool

	// Permanent marks a ban (deactivated or suspended account, or a
	// forbidden answer the classifier deems permanent): the connection
	// becomes [Banned].
	Permanent bool
	// CreditsExhausted marks an empty balance; a 402 status implies it.
	// The connection becomes [CreditsExhausted].
	CreditsExhausted bool
	// RecoverAt is the known time the credits come back, if any; after it
	// the connection is selectable again.
	RecoverAt time.Time
	// Expired marks a rejected credential; a 401 status implies it. The
	// connection becomes [Expired], unless it has extra keys
	// ([Options.ExtraKeys]).
	Expired bool
	// RequestRejected marks a refusal of the request-rejected kind: the
	// streak rules (5 min, 15 min, then ban, by default) decide the
	// cooldown instead of the fields above.
	RequestRejected bool
}

// MaxMessage is the number of bytes of [Failure.Message] that are recorded.
const MaxMessage = 100

// Action is what a failure did to a connection.
type Action uint8

const (
	// Recorded means the error fields were written but no cooldown began
	// (no cooldown length, or cooling disabled for the connection).
	Recorded Action = iota
	// Episode means a new cooldown episode began.
	Episode
	// Absorbed means the connection was already cooling or terminal and
	// nothing changed.
	Absorbed
	// Terminated means the connection entered a terminal state.
	Terminated
)

var actionNames = [...]string{"recorded", "episode", "absorbed", "terminated"}

// String returns the action's name.
func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "unknown"
}

// Result tells the caller of [Tracker.FailAt] what happened.
type Result struct {
	// Action is what the failure did.
	Action Action
	// Status is the connection's status after the failure.
	Status Status
	// Cooldown is the length of the new episode (Episode), or the time left
	// of the current one (Absorbed while cooling); zero otherwise.
	Cooldown time.Duration
	// Hinted reports that the episode's length came from the retry hint.
	Hinted bool
	// Streak is the request-rejected streak after the failure (0 when the
	// failure was not a refusal or the streak ended in a ban).
	Streak int
	// Egress lists the sibling connections cooled by the egress-IP family
	// lockout, if any.
	Egress []string
}

// Options are the per-connection settings and tags, set with
// [Tracker.Register].
type Options struct {
	// Provider tags the connection with its provider; it is needed by the
	// egress-IP family lockout and by provider-wide clearing.
	Provider string
	// Class selects the cooldown profile.
	Class Class
	// DisableCooling records errors without ever starting a cooldown;
	// terminal states still apply.
	DisableCooling bool
	// ExtraKeys marks a connection that has further keys to rotate to: a
	// 401 is then recorded without marking the connection expired.
	ExtraKeys bool
}

// Entry is the stored state of one connection. It is exported for [Store]
// implementations; callers read state with [Tracker.StatusAt] and
// [Tracker.SnapshotAt].
type Entry struct {
	// Options are the connection's settings.
	Options Options

	// State is Available or a terminal state; cooling is derived from Until.
	State State
	// Until is the cooldown end, or the credits recovery time.
	Until time.Time
	// Level is the backoff level.
	Level int
	// TerminalAt is when the terminal state was entered.
	TerminalAt time.Time

	// Reason, ErrorStatus, ErrorCode, LastError and LastErrorAt describe
	// the last recorded failure.
	Reason      string
	ErrorStatus int
	ErrorCode   string
	LastError   string
	LastErrorAt time.Time

	// Streak is the request-rejected streak, StreakLast its last counted
	// refusal and StreakUntil the end of its current episode.
	Streak      int
	StreakLast  time.Time
	StreakUntil time.Time

	// Rechecks counts the re-checks of an expired connection and
	// LastRecheck is the latest one.
	Rechecks    int
	LastRecheck time.Time

	// EgressIP is the last egress IP the connection was seen on, at
	// EgressSeen.
	EgressIP   string
	EgressSeen time.Time
}

// StatusAt derives the connection's status at now.
func (e *Entry) StatusAt(now time.Time) Status {
	var s Status
	e.statusInto(now, &s)
	return s
}

// statusInto writes the status at now into the zero Status s. Writing the
// fields in place avoids copying the struct through each call.
func (e *Entry) statusInto(now time.Time, s *Status) {
	switch e.State {
	case Banned, Expired:
		s.State, s.Reason, s.Level = e.State, e.Reason, e.Level
		return
	case CreditsExhausted:
		if e.Until.IsZero() || now.Before(e.Until) {
			s.State, s.Until, s.Reason, s.Level = CreditsExhausted, e.Until, e.Reason, e.Level
			return
		}
		s.Level = e.Level
		return
	}
	if now.Before(e.Until) {
		s.State, s.Until, s.Reason = Cooling, e.Until, e.Reason
	}
	s.Level = e.Level
}

// Info is one connection's state as listed by [Tracker.SnapshotAt].
type Info struct {
	// Conn is the connection id.
	Conn string
	// Provider and Class are the connection's tags.
	Provider string
	Class    Class
	// Status is the connection's status at the snapshot time.
	Status Status
	// LastError, Reason, ErrorStatus, ErrorCode and LastErrorAt describe
	// the last recorded failure.
	LastError   string
	Reason      string
	ErrorStatus int
	ErrorCode   string
	LastErrorAt time.Time
	// Streak is the current request-rejected streak.
	Streak int
	// Rechecks counts re-checks of an expired connection.
	Rechecks int
	// EgressIP is the last recorded egress IP.
	EgressIP string
}

// Cause names what changed a connection's status in an [Event].
type Cause uint8

const (
	// CauseFailure is a failure reported with FailAt.
	CauseFailure Cause = iota
	// CauseEgress is the egress-IP family lockout of a sibling.
	CauseEgress
	// CauseSuccess is a success reported with SucceedAt.
	CauseSuccess
	// CauseClear is an explicit Clear.
	CauseClear
	// CauseReset is an explicit Reset.
	CauseReset
)

var causeNames = [...]string{"failure", "egress", "success", "clear", "reset"}

// String returns the cause's name.
func (c Cause) String() string {
	if int(c) < len(causeNames) {
		return causeNames[c]
	}
	return "unknown"
}

// Event reports a change of one connection's status to [Config.OnChange].
type Event struct {
	// Conn is the connection whose status changed, and Provider its tag.
	Conn     string
	Provider string
	// Cause is what changed it.
	Cause Cause
	// From and To are the statuses before and after the change.
	From, To Status
	// At is the time of the change.
	At time.Time
}
