package breaker

import (
	"strconv"
	"strings"
	"time"
)

// Record is a breaker's state, or a window gate entry's, as plain data:
// what a health page shows, and what a store keeps so that a restarted
// process resumes where the last one stopped ([Set.SnapshotAt] and
// [Gate.SnapshotAt] give the records, [Set.RestoreAt] and [Gate.RestoreAt]
// put them back). It is JSON-ready (states and kinds encode as their
// names). Thresholds are not part of it: a restored breaker gets the
// profile of its provider. Deduplication entries and the probe in flight
// are not restored.
//
// A gate entry fills Provider, Connection (empty for a provider entry),
// State (Open while cooling at the snapshot's now, Closed otherwise),
// Failures, LastFailure and Until; the other fields are zero.
type Record struct {
	// Provider is the breaker's name, or the gate entry's provider.
	Provider string `json:"provider"`
	// Connection is the connection of a gate connection entry; empty for a
	// breaker and for a gate provider entry.
	Connection string `json:"connection,omitempty"`
	// State is the state when the record was taken. A Closed or Degraded
	// record restores as that state where its count allows it (see
	// [Set.RestoreAt]).
	State State `json:"state"`
	// Failures is the leaky failure count; for a gate entry, the failures
	// in the window (provider) or since the last success (connection).
	Failures int `json:"failures"`
	// LastFailure is the time of the last counted failure; zero if none.
	LastFailure time.Time `json:"lastFailure,omitzero"`
	// LastKind is the kind of the last failure.
	LastKind Kind `json:"lastKind,omitempty"`
	// KindFailures counts failures by kind since the breaker last closed;
	// kinds with no failure are left out.
	KindFailures map[Kind]int `json:"kindFailures,omitempty"`
	// OpenCycles is the number of failed probes in a row.
	OpenCycles int `json:"openCycles"`
	// OpenedAt is when the current open period started, for Open and
	// HalfOpen records (a HalfOpen record keeps the start of the period
	// that ended); zero otherwise. When it is zero, LastFailure stands for
	// it.
	OpenedAt time.Time `json:"openedAt,omitzero"`
	// RetryAfter is the time, from the snapshot's now, until the breaker
	// admits a request (as [Set.StateAt] gives it). Restore does not read
	// it.
	RetryAfter time.Duration `json:"retryAfter,omitzero"`
	// ProbeInFlight reports a half-open probe that had not reported yet.
	// Restore does not read it: a restored half-open breaker has its probe
	// slot free.
	ProbeInFlight bool `json:"probeInFlight,omitzero"`
	// Until is, for a gate entry, the end of its cooldown (for a provider
	// entry its last instant, as in [Gate.BlockedUntilAt]; for a connection
	// entry the first instant after it); zero when not cooling at the
	// snapshot's now, and for a breaker.
	Until time.Time `json:"until,omitzero"`
}

// Record limits applied by Restore.
const maxRestoredCycles = 10_000

// parseState maps a state name to its State: the String forms in any case,
// with "-" or "_" between words ("half-open", "HALF_OPEN"). Anything else is
// an [*Error] with code [CodeInvalidRecord].
func parseState(s string) (State, error) {
	n := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "_", "-")
	for i, name := range stateNames {
		if n == name {
			return State(i), nil
		}
	}
	return Closed, nameError(s, "unknown state")
}

// UnmarshalText decodes a state: the String forms and the MarshalText forms
// in any case, with "-" or "_" between words ("half-open", "HALF_OPEN").
// Anything else is an [*Error] with code [CodeInvalidRecord] (matching
// [ErrInvalidRecord]).
func (s *State) UnmarshalText(b []byte) error {
	v, err := parseState(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// SnapshotAt returns the breaker's state at now as a [Record]; see
// [Set.SnapshotAt].
func (b *circuit) SnapshotAt(now time.Time) Record {
	b.mu.Lock()
	now = b.clockLocked(now)
	b.refreshLocked(now)
	st, retry := b.stateLocked(now)
	r := Record{
		Provider:      b.name,
		State:         st,
		Failures:      b.failures,
		LastFailure:   b.lastFailure,
		LastKind:      b.kind,
		OpenCycles:    b.cycles,
		RetryAfter:    retry,
		ProbeInFlight: b.probe,
	}
	if !st.admits() {
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

// RestoreAt replaces the breaker's state with r at now; see
// [Set.RestoreAt]. It refuses (with an [*Error] of code [CodeInvalidRecord],
// changing nothing) a record of another provider (an empty Provider is
// accepted) or with an unknown State.
func (b *circuit) RestoreAt(r Record, now time.Time) error {
	if r.Provider != "" && r.Provider != b.name {
		return recordError(r.Provider, "belongs to another breaker ("+strconv.Quote(b.name)+")")
	}
	if r.State > HalfOpen {
		return recordError(r.Provider, "unknown state "+r.State.String())
	}
	b.mu.Lock()
	now = b.clockLocked(now)
	b.restoreLocked(r, now)
	b.refreshLocked(now)
	b.unlockAndNotify(now)
	return nil
}

func (b *circuit) restoreLocked(r Record, now time.Time) {
	b.resetLocked()
	notAfter := func(t time.Time) time.Time {
		if t.After(now) {
			return now
		}
		return t
	}
	last := notAfter(r.LastFailure)
	b.lastFailure = last
	if int(r.LastKind) < numKinds {
		b.kind = r.LastKind
	}
	for k, n := range r.KindFailures {
		if k > KindNone && int(k) < numKinds {
			b.kindCounts[k] = min(max(n, 0), maxOpenAt)
		}
	}
	b.failures = min(max(r.Failures, 0), b.p.OpenAt)
	if r.State.admits() {
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
		if b.failures > b.p.DegradedAt || (b.failures == b.p.DegradedAt && r.State == Degraded) {
			b.state = Degraded
		}
		return
	}
	b.cycles = min(max(r.OpenCycles, 0), maxRestoredCycles)
	start := notAfter(r.OpenedAt)
	if start.IsZero() {
		start = last
	}
	if r.State == Open && !start.IsZero() {
		b.state = Open
		b.openedAt, b.openFor = start, b.p.openDurationFor(b.kind, b.cycles)
		return
	}
	if start.IsZero() {
		start = now
	}
	b.state = HalfOpen
	b.openedAt, b.openFor = start, 0
}
