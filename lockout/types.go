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
	Provider   string // canonicalised through Config.Aliases
	Connection string // the credential's id
	Model      string // required; an empty model records nothing

	// Status is the upstream status (after any restatement). Only statuses
	// in Settings.ErrorCodes lock; it also picks the scope and reason when
	// those are not given.
	Status int

	// Reason is recorded with the lock; empty means ReasonForStatus(Status).
	Reason Reason

	// Scope overrides the status-derived scope when it is not ScopeAuto.
	Scope Scope

	// Cooldown is an exact lock length (from a retry hint, say). Zero means
	// the escalating cooldown; for ReasonQuotaExhausted zero means "until the
	// next local midnight". An exact length is capped by
	// Settings.MaxCooldown unless UpstreamReset is set.
	Cooldown time.Duration

	// UpstreamReset marks Cooldown as the upstream's own reset time, which
	// is honoured in full.
	UpstreamReset bool

	// ResetAfter is the breaker profile's reset time (60 s for oauth, 30 s
	// for apikey). With Settings.EscalationWindow zero, a failure within
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

// Info describes one active lock, as listed by [Lockout.SnapshotAt] and
// passed to Config.OnChange.
type Info struct {
	Provider   string
	Connection string
	// Model is the locked key's model part: the model name for ScopeModel,
	// the family name for ScopeFamily, and "exact:" followed by the trimmed,
	// lower-cased model for ScopeExact.
	Model        string
	Scope        Scope
	Reason       Reason
	Remaining    time.Duration // Until − now; zero in OnChange events for removed locks
	FailureCount int
	LockedAt     time.Time
	Until        time.Time
}

// ChangeKind says what happened to a lock.
type ChangeKind uint8

// Kinds of lock changes reported to Config.OnChange.
const (
	// ChangeLocked: a failure or LockAt created or extended a lock.
	ChangeLocked ChangeKind = iota + 1
	// ChangeCleared: ClearAt removed a lock.
	ChangeCleared
	// ChangeDecayed: success decay brought the failure count to 0 and removed the
	// lock.
	ChangeDecayed
	// ChangeEvicted: the entry cap pushed a lock out before it expired.
	ChangeEvicted
)

// String returns the kind's lower-case name.
func (k ChangeKind) String() string {
	switch k {
	case ChangeLocked:
		return "locked"
	case ChangeCleared:
		return "cleared"
	case ChangeDecayed:
		return "decayed"
	case ChangeEvicted:
		return "evicted"
	}
	return "change(" + strconv.Itoa(int(k)) + ")"
}

// Change is a lock state change passed to Config.OnChange.
type Change struct {
	Kind ChangeKind
	Lock Info
}

// FamilyFunc maps a model to its quota family, the model part of a family
// key. Models of one connection with the same family share a family lock.
// It must be safe for concurrent use and, to keep lock checks free of
// allocation, should return a constant or a substring of model.
type FamilyFunc func(model string) string

// DefaultFamilies returns the built-in quota families: codex puts every
// gpt-5* model in the "codex" family and every other model in "spark".
// Providers without an entry use the model itself as the family.
func DefaultFamilies() map[string]FamilyFunc {
	return map[string]FamilyFunc{"codex": CodexFamily}
}

// CodexFamily is the codex quota family: "codex" for gpt-5* models (any
// case), "spark" for the rest.
func CodexFamily(model string) string {
	if len(model) >= 5 && strings.EqualFold(model[:5], "gpt-5") {
		return "codex"
	}
	return "spark"
}

// DefaultAliases returns the built-in provider aliases (alias → canonical
// id): "cx" → "codex".
func DefaultAliases() map[string]string {
	return map[string]string{"cx": "codex"}
}
