package cooldown

import "time"

// Selection is the answer of [Tracker.SelectAt].
type Selection struct {
	// Available are the candidates that may be used, in candidate order.
	Available []string
	// Until is the earliest time an unavailable candidate becomes available
	// again (cooling, or credits exhausted with a known recovery time); zero
	// when none is known.
	Until time.Time
	// Conn and Reason name the candidate that recovers first.
	Conn   string
	Reason string
	// Cooling and Terminal count the candidates in each kind of state.
	Cooling  int
	Terminal int
}

// AllCooling reports whether no candidate is available but one recovers at
// a known time ([Selection.Until]).
func (s Selection) AllCooling() bool { return len(s.Available) == 0 && !s.Until.IsZero() }

// RetryAfter returns how long after now the first candidate recovers: 0
// when one is available or none will recover by itself.
func (s Selection) RetryAfter(now time.Time) time.Duration {
	if len(s.Available) > 0 || s.Until.IsZero() {
		return 0
	}
	return max(s.Until.Sub(now), 0)
}

// Human returns the wait in human form, such as "reset after 2m 5s" (see
// [FormatWait]); empty when the selection is not [Selection.AllCooling].
func (s Selection) Human(now time.Time) string {
	if !s.AllCooling() {
		return ""
	}
	return "reset after " + FormatWait(s.RetryAfter(now))
}

// Select is shorthand for SelectAt(dst, candidates, time.Now()).
func (t *Tracker) Select(dst, candidates []string) Selection {
	return t.SelectAt(dst, candidates, time.Now())
}

// SelectAt filters candidates at now: the available ones are appended to
// dst[:0] and returned in [Selection.Available]; for the others it reports
// the earliest recovery. It does not allocate when dst has room for the
// candidates (with the in-memory store).
func (t *Tracker) SelectAt(dst, candidates []string, now time.Time) Selection {
	sel := Selection{Available: dst[:0]}
	var s Status
	for _, c := range candidates {
		s = Status{}
		t.statusInto(c, now, &s)
		switch {
		case s.State == Available:
			sel.Available = append(sel.Available, c)
			continue
		case s.State == Cooling:
			sel.Cooling++
		default:
			sel.Terminal++
		}
		if !s.Until.IsZero() && (sel.Until.IsZero() || s.Until.Before(sel.Until)) {
			sel.Until, sel.Conn, sel.Reason = s.Until, c, s.Reason
		}
	}
	return sel
}
