package cooldown

import (
	"fmt"
	"time"

	"github.com/routeguard/routeguard"
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
// only recorded). On a connection that is already cooling, only the first
// two (the explicit cooldowns) count, and only to extend the episode when
// they end later (see [Tracker.FailAt]).
type Failure struct {
	// Status is the HTTP status, after any restatement.
	Status int
	// Reason is the classified reason, such as "rate_limit_exceeded",
	// "quota_exhausted", "server_error" or "auth_error".
	Reason string
	// Code is an optional error code to record (for example a provider's
	// error code string).
	Code string
	// Message is the error text; its first 100 bytes are recorded.
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

// maxMessage is the number of bytes of [Failure.Message] that are recorded.
const maxMessage = 100

// Action is what happened to a connection: what a failure did to it (in
// [Result] and [Event]), or what else changed it (in [Event]).
type Action uint8

const (
	// Recorded means a failure's error fields were written but no
	// cooldown began (no cooldown length, or cooling disabled for the
	// connection); the backoff level may have risen.
	Recorded Action = iota
	// Episode means a new cooldown episode began.
	Episode
	// Absorbed means the connection was already cooling (and the failure
	// did not extend the cooldown) or terminal, and nothing changed. No
	// [Event] reports it.
	Absorbed
	// Terminated means the connection entered a terminal state.
	Terminated
	// Extended means the connection was cooling and the failure's explicit
	// cooldown (retry hint or fixed cooldown) ends later, so the episode
	// now ends there; the backoff level is unchanged.
	Extended
	// Succeeded means a success cleared the connection's error state
	// ([Tracker.SucceedAt]).
	Succeeded
	// Cleared means [Tracker.ClearAt] lifted the connection's cooldown.
	Cleared
	// Reset means [Tracker.ResetAt] cleared every state of the connection,
	// terminal states included.
	Reset
	// Dropped means the Tracker dropped the connection's entry:
	// [Tracker.ForgetAt], [Tracker.RegisterAt] with zero Options on an
	// entry that carries nothing else, the pruning of such an entry, or
	// the eviction of one to keep [Config.MaxEntries] or
	// [Config.MaxTerminal] (From then says the state it was in).
	Dropped
)

var actionNames = [...]string{"recorded", "episode", "absorbed", "terminated", "extended", "succeeded", "cleared", "reset", "dropped"}

// String returns the action's name: "recorded", "episode", "absorbed",
// "terminated", "extended", "succeeded", "cleared", "reset" or "dropped".
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
	// Cooldown is the length of the new episode (Episode), the time left of
	// the extended one (Extended), or the time left of the current one
	// (Absorbed while cooling); zero otherwise.
	Cooldown time.Duration
	// Hinted reports that the episode's length (or its extension) came
	// from the retry hint.
	Hinted bool
	// Streak is the request-rejected streak after the failure (0 when the
	// failure was not a refusal or the streak ended in a ban).
	Streak int
	// Egress lists the sibling connections cooled by the egress-IP family
	// lockout, if any.
	Egress []string
}

// Options are the per-connection settings and tags, set with
// [Tracker.RegisterAt].
type Options struct {
	// Provider tags the connection with its provider; it is needed by the
	// egress-IP family lockout and by provider-wide clearing.
	Provider string
	// Class selects the cooldown profile: [routeguard.OAuth] the OAuth
	// profile, every other class (Unknown included) the APIKey profile.
	Class routeguard.Class
	// DisableCooling records errors without ever starting a cooldown;
	// terminal states still apply.
	DisableCooling bool
	// ExtraKeys marks a connection that has further keys to rotate to: a
	// 401 is then recorded without marking the connection expired.
	ExtraKeys bool
}

// Entry is the stored state of one connection. It is exported for [Store]
// implementations; callers read state with [Tracker.StatusAt] and
// [Tracker.SnapshotAt]. The zero Entry is a connection that is available at
// level 0.
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

// status derives the connection's status at now.
func (e *Entry) status(now time.Time) Status {
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
	Class    routeguard.Class
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

// Event reports one change of a connection to [Config.OnChange]: a change
// of its status, or the removal of its entry. It carries the state after the
// change, so that a store kept beside the Tracker can follow it without
// reading back.
type Event struct {
	// Conn is the connection, Provider its tag.
	Conn     string
	Provider string
	// At is the time of the change: the now given to the call that made
	// it.
	At time.Time
	// Action is what changed the connection.
	Action Action
	// State, Until, Reason and Level are the connection's status after the
	// change, as [Tracker.StatusAt] reports it at At; Until is zero when
	// the state is untimed.
	State  State
	Until  time.Time
	Reason string
	Level  int
	// From is the connection's state before the change.
	From State
	// Source is, for a sibling cooled by the egress-IP family lockout, the
	// connection whose failure cooled it; empty otherwise.
	Source string
	// Removed reports that the connection's entry is gone (see [Dropped];
	// a success, clear or reset that leaves nothing to keep removes it
	// too). The status after a removal is available at level 0.
	Removed bool
	// Cause says why the Tracker dropped the entry on its own (Action
	// [Dropped]): "idle" (the entry carried no information any more, see
	// the package doc), "max_entries" (evicted to keep [Config.MaxEntries])
	// or "max_terminal" (a terminal entry evicted to keep
	// [Config.MaxTerminal]: the connection's terminal state is forgotten,
	// and the next request through it learns it again from the upstream).
	// It is empty for every other event, and for a drop a call asked for
	// ([Tracker.ForgetAt], [Tracker.RegisterAt]).
	Cause string
}

// The causes of a drop the Tracker made on its own (Event.Cause).
const (
	causeIdle        = "idle"
	causeMaxEntries  = "max_entries"
	causeMaxTerminal = "max_terminal"
)

// event returns the event of a change of conn to the status to.
func event(conn, provider string, a Action, from State, to Status, now time.Time) Event {
	return Event{Conn: conn, Provider: provider, At: now, Action: a,
		State: to.State, Until: to.Until, Reason: to.Reason, Level: to.Level, From: from}
}
