package breaker

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// Record is a breaker's durable state as plain data: what a store keeps so
// that a restarted process resumes where the last one stopped. It is
// JSON-ready (states and kinds encode as their names). Thresholds are not
// part of it: a restored breaker keeps the profile it was created with.
// Deduplication entries and the probe in flight are not kept either.
type Record struct {
	// Provider is the breaker's name.
	Provider string `json:"provider"`
	// State is the state when the record was taken. A Degraded record
	// restores as a closed breaker with its count, so the state follows
	// the count and the profile.
	State State `json:"state"`
	// Failures is the leaky failure count.
	Failures int `json:"failures"`
	// LastFailure is the time of the last failure; zero if none.
	LastFailure time.Time `json:"lastFailure,omitzero"`
	// LastKind is the kind of the last failure.
	LastKind Kind `json:"lastKind,omitempty"`
	// KindFailures counts failures by kind since the breaker last closed;
	// kinds with no failure are left out.
	KindFailures map[Kind]int `json:"kindFailures,omitempty"`
	// OpenCycles is the number of failed probes in a row.
	OpenCycles int `json:"openCycles"`
	// OpenedAt is when the current open period started, for Open and
	// HalfOpen records; zero otherwise. When it is zero in an Open record,
	// LastFailure stands for it.
	OpenedAt time.Time `json:"openedAt,omitzero"`
}

// ErrInvalidRecord is matched by every error of [Breaker.Restore] and
// [Set.Restore]: the record was refused and nothing was changed.
var ErrInvalidRecord = errors.New("breaker: invalid record")

// RecordError is a refused [Record]. It matches [ErrInvalidRecord].
type RecordError struct {
	// Provider is the record's provider.
	Provider string
	// Reason says what is wrong.
	Reason string
}

// Error returns "breaker: record <provider>: <reason>".
func (e *RecordError) Error() string {
	return "breaker: record " + strconv.Quote(e.Provider) + ": " + e.Reason
}

// Is reports whether target is [ErrInvalidRecord].
func (e *RecordError) Is(target error) bool { return target == ErrInvalidRecord }

// Code returns "invalid_record".
func (e *RecordError) Code() string { return "invalid_record" }

// Record limits applied by Restore.
const maxRestoredCycles = 10_000

// ParseState maps a state name to its State: the String forms in any case,
// with "-" or "_" between words ("half-open", "HALF_OPEN"). Anything else is
// an error.
func ParseState(s string) (State, error) {
	n := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "_", "-")
	for i, name := range stateNames {
		if n == name {
			return State(i), nil
		}
	}
	return Closed, errors.New("breaker: unknown state " + strconv.Quote(s))
}

// UnmarshalText decodes a state with [ParseState].
func (s *State) UnmarshalText(b []byte) error {
	v, err := ParseState(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Export returns the breaker's durable state. It makes the same lazy
// refreshes as [Breaker.State] first, so an open period that has ended is
// exported as HalfOpen.
func (b *Breaker) Export() Record {
	now := time.Now()
	b.mu.Lock()
	b.refreshLocked(now)
	st, _ := b.stateLocked(now)
	r := Record{
		Provider:    b.name,
		State:       st,
		Failures:    b.failures,
		LastFailure: b.lastFailure,
		LastKind:    b.kind,
		OpenCycles:  b.cycles,
	}
	if !st.Admits() {
		r.OpenedAt = b.openedAt
	}
	for k, n := range b.kindCounts {
		if n > 0 {
			if r.KindFailures == nil {
				r.KindFailures = make(map[Kind]int)
			}
			r.KindFailures[Kind(k)] = n
		}
	}
	b.unlockAndNotify(now)
	return r
}

// Restore replaces the breaker's state with r, as if the breaker had lived
// through it: requests admitted before are reported under an older
// generation and ignored.
//
// An Open record stays open until OpenedAt (or LastFailure) plus the open
// time its profile gives for its cycles and last kind (see
// [Profile.OpenDurationFor]), measured on the wall clock, then turns
// half-open; an Open record with no time at all is half-open at once. A
// HalfOpen record is half-open with its probe slot free. A Closed or
// Degraded record is closed with its count.
//
// Restore refuses (with an error matching [ErrInvalidRecord], changing
// nothing) a record of another provider (an empty Provider is accepted) or
// with an unknown State. It clamps the rest: counts below zero to zero; the
// count to [0, OpenAt], and for a closed record to OpenAt−1 (so that only a
// new failure opens it); cycles to [0, 10000] and to 0 for a closed record;
// times after now to now; an unknown kind to KindNone; kind counts to
// [0, 1000]. With a counting window, restored failures count as if they
// all happened at LastFailure.
func (b *Breaker) Restore(r Record) error {
	if r.Provider != "" && r.Provider != b.name {
		return &RecordError{Provider: r.Provider, Reason: "belongs to another breaker (" + strconv.Quote(b.name) + ")"}
	}
	if r.State > HalfOpen {
		return &RecordError{Provider: r.Provider, Reason: "unknown state " + r.State.String()}
	}
	now := time.Now()
	b.mu.Lock()
	b.restoreLocked(r, now)
	b.unlockAndNotify(now)
	return nil
}

func (b *Breaker) restoreLocked(r Record, now time.Time) {
	b.resetLocked()
	notAfter := func(t time.Time) time.Time {
		if t.After(now) {
			return now
		}
		return t
	}
	last := notAfter(r.LastFailure)
	b.lastFailure = last
	if int(r.LastKind) < NumKinds {
		b.kind = r.LastKind
	}
	for k, n := range r.KindFailures {
		if k > KindNone && int(k) < NumKinds {
			b.kindCounts[k] = clampInt(n, 0, maxOpenAt)
		}
	}
	b.failures = clampInt(r.Failures, 0, b.p.OpenAt)
	if r.State.Admits() {
		b.failures = min(b.failures, b.p.OpenAt-1)
		if b.p.Window > 0 && b.failures > 0 {
			at := last
			if at.IsZero() {
				at = now
			}
			for range b.failures {
				b.times = append(b.times, at)
			}
		}
		return
	}
	b.cycles = clampInt(r.OpenCycles, 0, maxRestoredCycles)
	b.restored = true
	start := notAfter(r.OpenedAt)
	if start.IsZero() {
		start = last
	}
	if r.State == Open && !start.IsZero() {
		b.openedAt, b.openFor = start, b.p.OpenDurationFor(b.kind, b.cycles)
	} else {
		b.openedAt, b.openFor = now, 0
	}
}
