package lockout

import (
	"strconv"
	"strings"
	"time"
)

// Scope says which key a failure or lock is written under.
type Scope uint8

const (
	// ScopeAuto resolves the scope from the status: 429, 403 and 402 lock
	// the quota family, 404 locks the model, anything else the exact model.
	ScopeAuto Scope = iota
	// ScopeFamily locks every model of the connection that shares the
	// model's quota family (see [FamilyFunc]).
	ScopeFamily
	// ScopeModel locks the model name as given.
	ScopeModel
	// ScopeExact locks the model name trimmed and lower-cased, and nothing
	// else.
	ScopeExact
)

// String returns "auto", "family", "model" or "exact".
func (s Scope) String() string {
	switch s {
	case ScopeAuto:
		return "auto"
	case ScopeFamily:
		return "family"
	case ScopeModel:
		return "model"
	case ScopeExact:
		return "exact"
	}
	return "scope(" + strconv.Itoa(int(s)) + ")"
}

// ResolveScope returns the scope a failure with this status is written
// under when the caller passes explicit (which wins unless it is ScopeAuto).
func ResolveScope(explicit Scope, status int) Scope {
	if explicit >= ScopeFamily && explicit <= ScopeExact {
		return explicit
	}
	switch status {
	case 429, 403, 402:
		return ScopeFamily
	case 404:
		return ScopeModel
	}
	return ScopeExact
}

// Reason says why a model is locked.
type Reason string

// Reasons a lock is recorded with.
const (
	ReasonNotFound       Reason = "not_found"
	ReasonQuotaExhausted Reason = "quota_exhausted"
	ReasonRateLimited    Reason = "rate_limited"
	ReasonServerError    Reason = "server_error"
	ReasonForbidden      Reason = "forbidden"
	ReasonManual         Reason = "manual"
)

// ReasonForStatus returns the reason a failure with this status is recorded
// with when the caller gives none.
func ReasonForStatus(status int) Reason {
	switch {
	case status == 404:
		return ReasonNotFound
	case status == 429:
		return ReasonRateLimited
	case status == 402:
		return ReasonQuotaExhausted
	case status == 401 || status == 403:
		return ReasonForbidden
	}
	return ReasonServerError
}

// Failure describes one model-level failure to [Lockout.RecordFailureAt].
type Failure struct {
	Provider   string // canonicalized through Config.Aliases
	Connection string // the credential's id
	Model      string // required; an empty model records nothing

	// Status is the upstream status (after any restatement). Only statuses
	// in Config.ErrorCodes lock; it also picks the scope and reason when
	// those are not given.
	Status int

	// Reason is recorded with the lock; empty means ReasonForStatus(Status).
	Reason Reason

	// Scope overrides the status-derived scope when it is not ScopeAuto.
	Scope Scope

	// Cooldown is an exact lock length (from a retry hint, say). Zero means
	// the escalating cooldown; for ReasonQuotaExhausted zero means "until the
	// next local midnight". An exact length is capped by
	// Config.MaxCooldown unless UpstreamReset is set.
	Cooldown time.Duration

	// UpstreamReset marks Cooldown as the upstream's own reset time, which
	// is honoured in full.
	UpstreamReset bool

	// ResetAfter is the breaker profile's reset time (60 s for oauth, 30 s
	// for apikey). With Config.EscalationWindow zero, a failure within
	// ResetAfter plus the previous cooldown of the previous failure
	// escalates. Zero means 30 min.
	ResetAfter time.Duration
}

// Result reports what [Lockout.RecordFailureAt] did.
type Result struct {
	// Locked is true when the failure was recorded and the model is locked.
	// It is false when lockout is disabled, the status is not one of the
	// error codes, or the model is empty.
	Locked bool
	// Scope is the scope the failure was written under.
	Scope Scope
	// Cooldown is the lock length this failure asked for. A longer lock that
	// was already in place is kept, so Until may be later than now+Cooldown.
	Cooldown time.Duration
	// Until is the end of the lock (the model is locked at Until itself).
	Until time.Time
	// FailureCount is the consecutive failure count after this failure.
	FailureCount int
	// ResetAfter is the reset time used for the escalation window.
	ResetAfter time.Duration
}

// Info describes one active lock, as listed by [Lockout.SnapshotAt].
type Info struct {
	Provider   string
	Connection string
	// Model is the locked key's model part: the model name for ScopeModel,
	// the family name for ScopeFamily, and "exact:" followed by the trimmed,
	// lower-cased model for ScopeExact.
	Model        string
	Scope        Scope
	Reason       Reason
	Remaining    time.Duration // Until − now
	FailureCount int
	LockedAt     time.Time
	Until        time.Time
}

// EventKind says what happened to a lock.
type EventKind uint8

// Kinds of [Event].
const (
	// EventLocked: a failure or LockAt created or extended a lock.
	EventLocked EventKind = iota + 1
	// EventCleared: ClearAt removed a lock.
	EventCleared
	// EventDecayed: success decay brought the failure count to 0 and removed
	// the lock.
	EventDecayed
	// EventEvicted: the entry cap pushed a lock out before it expired.
	EventEvicted
)

// String returns the kind's lower-case name.
func (k EventKind) String() string {
	switch k {
	case EventLocked:
		return "locked"
	case EventCleared:
		return "cleared"
	case EventDecayed:
		return "decayed"
	case EventEvicted:
		return "evicted"
	}
	return "event(" + strconv.Itoa(int(k)) + ")"
}

// Event is a change of one lock, passed to Config.OnChange. It carries the
// key and the state after the change, so a store can record it without
// reading back. A lock that simply runs out, and [Lockout.Reset], produce
// no event.
//
// OnChange is called synchronously, after the Lockout's locks are
// released, once per change and in the order of the changes a call made.
// Calls made by concurrent writers may interleave. OnChange must not block;
// it may call back into the Lockout.
type Event struct {
	Kind EventKind

	// The key: Model is the listed name, as in [Info].
	Provider   string
	Connection string
	Model      string
	Scope      Scope

	At time.Time // the caller's now of the change

	// Removed is true when the lock is gone (cleared, decayed or evicted);
	// Reason, FailureCount, LockedAt and Until are then zero.
	Removed bool

	// The lock after the change (EventLocked).
	Reason       Reason
	FailureCount int
	LockedAt     time.Time
	Until        time.Time // the model is locked at Until itself
}

// FamilyFunc maps a model to its quota family, the model part of a family
// key. Models of one connection with the same family share a family lock.
// It must be safe for concurrent use and, to keep lock checks free of
// allocation, should return a constant or a substring of model.
type FamilyFunc func(model string) string

// CodexFamily is the built-in codex quota family: "codex" for gpt-5*
// models (any case), "spark" for the rest. Include it when Config.Families
// replaces the built-in table and codex should keep its families.
func CodexFamily(model string) string {
	if len(model) >= 5 && strings.EqualFold(model[:5], "gpt-5") {
		return "codex"
	}
	return "spark"
}
