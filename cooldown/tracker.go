package cooldown

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Tracker keeps the cooldown and terminal state of every connection it has
// heard of. A connection it has never heard of is available.
//
// Most callers use three methods: [Tracker.StatusAt] (or
// [Tracker.SelectAt] for a list of candidates) before dispatch, then
// [Tracker.FailAt] or [Tracker.SucceedAt] with the outcome. [Tracker.Register]
// tags a connection with its provider and settings.
//
// A Tracker is safe for concurrent use by multiple goroutines. Its zero value
// is not usable; create one with [New].
type Tracker struct {
	cfg     Config
	store   Store
	sweeper Sweeper      // nil when the store cannot sweep
	mem     *MemoryStore // the store when it is a MemoryStore, for the hot path

	sinceSweep atomic.Int64
	sweeping   atomic.Bool
}

// New returns a Tracker configured by cfg, normalized first.
func New(cfg Config) *Tracker {
	cfg.Normalize()
	t := &Tracker{cfg: cfg, store: cfg.Store}
	if t.store == nil {
		t.store = NewMemoryStore()
	}
	t.sweeper, _ = t.store.(Sweeper)
	t.mem, _ = t.store.(*MemoryStore)
	return t
}

// Config returns the Tracker's normalized configuration.
func (t *Tracker) Config() Config {
	c := t.cfg
	c.EgressProviders = slices.Clone(c.EgressProviders)
	return c
}

// Register is shorthand for RegisterAt(conn, o, time.Now()).
func (t *Tracker) Register(conn string, o Options) { t.RegisterAt(conn, o, time.Now()) }

// RegisterAt sets conn's tags and settings at now, keeping its state. With
// zero Options, an entry that carries no other information at now is
// dropped.
func (t *Tracker) RegisterAt(conn string, o Options, now time.Time) {
	t.store.Update(conn, func(e *Entry, _ bool) bool {
		e.Options = o
		return !t.idle(e, now)
	})
	t.afterWrite(conn, now)
}

// Forget drops everything known about conn, its tags included.
func (t *Tracker) Forget(conn string) {
	t.store.Update(conn, func(*Entry, bool) bool { return false })
}

// Status is shorthand for StatusAt(conn, time.Now()).
func (t *Tracker) Status(conn string) Status { return t.StatusAt(conn, time.Now()) }

// StatusAt returns conn's status at now. It does not allocate (with the
// in-memory store).
func (t *Tracker) StatusAt(conn string, now time.Time) Status {
	var s Status
	t.statusInto(conn, now, &s)
	return s
}

// statusInto writes conn's status at now into the zero Status s.
func (t *Tracker) statusInto(conn string, now time.Time, s *Status) {
	if t.mem != nil {
		t.mem.statusAt(conn, now, s)
		return
	}
	if e, ok := t.store.Load(conn); ok {
		e.statusInto(now, s)
	}
}

// Check is shorthand for CheckAt(conn, time.Now()).
func (t *Tracker) Check(conn string) error { return t.CheckAt(conn, time.Now()) }

// CheckAt returns nil when conn is available at now, and an [*Error]
// matching [ErrCooling] or [ErrUnavailable] otherwise.
func (t *Tracker) CheckAt(conn string, now time.Time) error {
	if s := t.StatusAt(conn, now); !s.Available() {
		return &Error{Conn: conn, Status: s}
	}
	return nil
}

// Fail is shorthand for FailAt(conn, f, time.Now()).
func (t *Tracker) Fail(conn string, f Failure) Result { return t.FailAt(conn, f, time.Now()) }

// FailAt records the failure f of conn at now and returns what it did.
//
// A terminal connection absorbs every failure. A terminal verdict (ban,
// credits exhausted, expired) applies even while the connection is cooling;
// any other failure on a cooling connection is absorbed, so concurrent
// failures start one episode. Otherwise the error is recorded and, when the
// failure yields a cooldown and cooling is not disabled for the connection,
// a new episode begins. See [Failure] for how the length is chosen.
func (t *Tracker) FailAt(conn string, f Failure, now time.Time) Result {
	// Fast path: a failure that will be absorbed needs no write.
	if e, ok := t.store.Load(conn); ok {
		if from := e.StatusAt(now); from.Terminal() || (from.State == Cooling && terminalOf(&e, f) == Available) {
			r := Result{Action: Absorbed, Status: from}
			if from.State == Cooling {
				r.Cooldown, r.Streak = from.Until.Sub(now), e.Streak
			}
			return r
		}
	}
	var (
		res      Result
		from     Status
		provider string
		egressIP string
	)
	t.store.Update(conn, func(e *Entry, _ bool) bool {
		from = e.StatusAt(now)
		provider = e.Options.Provider
		if t.fail(e, f, now, from, &res) && within(e.EgressSeen, now, t.cfg.EgressWindow) {
			egressIP = e.EgressIP
		}
		return !t.idle(e, now)
	})
	t.afterWrite(conn, now)
	if !sameStatus(from, res.Status) {
		t.emit(Event{Conn: conn, Provider: provider, Cause: CauseFailure, From: from, To: res.Status, At: now})
	}
	if egressIP != "" {
		res.Egress = t.egressLock(conn, egressIP, f, res.Status.Until, now)
	}
	return res
}

// fail applies f to e and fills res. It reports whether the egress-IP family
// lockout must run.
func (t *Tracker) fail(e *Entry, f Failure, now time.Time, from Status, res *Result) (egress bool) {
	res.Status = from
	if from.Terminal() {
		res.Action = Absorbed
		return false
	}
	term := terminalOf(e, f)
	if term == Available && from.State == Cooling {
		res.Action = Absorbed
		res.Cooldown = from.Until.Sub(now)
		res.Streak = e.Streak
		return false
	}
	var d time.Duration
	level := min(e.Level, t.profile(e.Options.Class).Steps)
	msg := f.Message
	if term == Available && f.RequestRejected {
		if now.Before(e.StreakUntil) {
			// Same refusal episode on a connection that does not cool.
			res.Action = Absorbed
			res.Cooldown = e.StreakUntil.Sub(now)
			res.Streak = e.Streak
			return false
		}
		if e.Streak > 0 && now.Sub(e.StreakLast) < t.cfg.RequestRejectedMemory {
			e.Streak++
		} else {
			e.Streak = 1
		}
		e.StreakLast = now
		if e.Streak >= t.cfg.RequestRejectedBanAt {
			msg = fmt.Sprintf("%d consecutive refusals: %s", e.Streak, f.Message)
			term = Banned
		} else {
			d = t.cfg.RequestRejected
			if e.Streak > 1 {
				d = t.cfg.RequestRejectedRepeat
			}
			e.StreakUntil = now.Add(d)
			res.Streak = e.Streak
		}
	} else if term == Available {
		d, level, res.Hinted = t.length(e, f, level)
	}

	e.Reason, e.ErrorStatus, e.ErrorCode, e.LastErrorAt = f.Reason, f.Status, f.Code, now
	e.LastError = truncate(msg, MaxMessage)

	if term != Available {
		e.State, e.TerminalAt = term, now
		e.Until = time.Time{}
		if term == CreditsExhausted {
			e.Until = f.RecoverAt
		}
		if term == Banned {
			e.Streak, e.StreakLast, e.StreakUntil = 0, time.Time{}, time.Time{}
		}
		e.Rechecks, e.LastRecheck = 0, time.Time{}
		res.Action = Terminated
		res.Status = e.StatusAt(now)
		return false
	}

	e.State = Available
	e.Level = level
	if !e.Options.DisableCooling && t.egressApplies(e.Options.Provider, f) {
		egress = true
		if d <= 0 {
			d = t.cfg.EgressCooldown
		}
		e.LastError = truncate("Shared egress IP quota exhausted ("+strings.ToLower(e.Options.Provider)+")", MaxMessage)
	}
	if d > 0 && !e.Options.DisableCooling {
		e.Until = now.Add(d)
		res.Action, res.Cooldown = Episode, d
	} else {
		e.Until = time.Time{}
		res.Action, res.Hinted, egress = Recorded, false, false
	}
	res.Status = e.StatusAt(now)
	return egress
}

// terminalOf returns the terminal state f puts e in, or Available.
func terminalOf(e *Entry, f Failure) State {
	switch {
	case f.CreditsExhausted || f.Status == 402:
		return CreditsExhausted
	case f.Permanent:
		return Banned
	case (f.Expired || f.Status == 401) && !e.Options.ExtraKeys:
		return Expired
	}
	return Available
}

// length returns the cooldown f asks for, the new level and whether the
// length came from the upstream hint.
func (t *Tracker) length(e *Entry, f Failure, level int) (time.Duration, int, bool) {
	p := t.profile(e.Options.Class)
	switch {
	case f.RetryAfter > 0 && p.Hints == HintsOn:
		return min(f.RetryAfter, t.cfg.MaxHint), level, true
	case f.Cooldown > 0:
		return min(f.Cooldown, t.cfg.MaxHint), level, false
	case f.Backoff:
		return Backoff(p, level), min(level+1, p.Steps), false
	case f.Base:
		return min(p.Base, p.Max), level, false
	}
	return 0, level, false
}

// Backoff returns the backoff cooldown of p at level: p.Base·2^min(level,
// p.Steps), capped by p.Max. p should be normalized.
func Backoff(p Profile, level int) time.Duration {
	d := p.Base
	for range min(max(level, 0), p.Steps) {
		if d >= p.Max/2 {
			return p.Max
		}
		d *= 2
	}
	return min(d, p.Max)
}

func (t *Tracker) profile(c Class) Profile {
	if c == OAuth {
		return t.cfg.OAuth
	}
	return t.cfg.APIKey
}

// Succeed is shorthand for SucceedAt(conn, time.Now()).
func (t *Tracker) Succeed(conn string) { t.SucceedAt(conn, time.Now()) }

// SucceedAt records a success of conn at now: the error fields, the cooldown,
// the backoff level and the request-rejected streak are cleared. A success
// never lifts Banned or Expired, nor credits exhausted before its recovery
// time (such a success is a late answer to an earlier request); only
// [Tracker.Reset] does. It does not allocate when there is nothing to clear.
func (t *Tracker) SucceedAt(conn string, now time.Time) {
	e, ok := t.store.Load(conn)
	if !ok || e.clean() {
		return
	}
	t.clear(conn, now, CauseSuccess, false)
}

// clear clears conn's error state; terminal states only when reset is set.
// It reports whether anything changed.
func (t *Tracker) clear(conn string, now time.Time, cause Cause, reset bool) bool {
	var (
		changed  bool
		from     Status
		to       Status
		provider string
	)
	t.store.Update(conn, func(e *Entry, found bool) bool {
		if !found {
			return false
		}
		from = e.StatusAt(now)
		provider = e.Options.Provider
		if from.Terminal() && !reset {
			return true
		}
		changed = !e.clean()
		e.reset()
		to = e.StatusAt(now)
		return !t.idle(e, now)
	})
	if changed {
		t.afterWrite(conn, now)
		if !sameStatus(from, to) {
			t.emit(Event{Conn: conn, Provider: provider, Cause: cause, From: from, To: to, At: now})
		}
	}
	return changed
}

// clean reports whether e carries no error state.
func (e *Entry) clean() bool {
	return e.State == Available && e.Until.IsZero() && e.Level == 0 &&
		e.Reason == "" && e.ErrorStatus == 0 && e.ErrorCode == "" && e.LastError == "" && e.LastErrorAt.IsZero() &&
		e.Streak == 0 && e.StreakUntil.IsZero()
}

// reset clears every error field, keeping the tags and the egress record.
func (e *Entry) reset() {
	*e = Entry{Options: e.Options, EgressIP: e.EgressIP, EgressSeen: e.EgressSeen}
}

// Selector picks connections for [Tracker.ClearAt] and [Tracker.ResetAt].
// With IDs it picks those connections; otherwise it picks every tracked
// connection when All is set or Provider is not empty. Provider, when set,
// narrows the pick to connections tagged with that provider (compared
// case-insensitively). The zero Selector picks nothing.
type Selector struct {
	IDs      []string
	Provider string
	All      bool
}

func (s Selector) match(e *Entry) bool {
	return s.Provider == "" || strings.EqualFold(e.Options.Provider, s.Provider)
}

// Clear is shorthand for ClearAt(sel, time.Now()).
func (t *Tracker) Clear(sel Selector) int { return t.ClearAt(sel, time.Now()) }

// ClearAt lifts the cooldowns of the selected connections as a success would
// (error fields, level and streak cleared) and returns how many changed. It
// never lifts a terminal state; use [Tracker.ResetAt] for that.
func (t *Tracker) ClearAt(sel Selector, now time.Time) int {
	return t.each(sel, func(conn string) bool { return t.clear(conn, now, CauseClear, false) })
}

// Reset is shorthand for ResetAt(sel, time.Now()).
func (t *Tracker) Reset(sel Selector) int { return t.ResetAt(sel, time.Now()) }

// ResetAt clears every state of the selected connections, terminal states
// included (for example after their credentials changed), and returns how
// many changed. Tags and egress records are kept.
func (t *Tracker) ResetAt(sel Selector, now time.Time) int {
	return t.each(sel, func(conn string) bool { return t.clear(conn, now, CauseReset, true) })
}

func (t *Tracker) each(sel Selector, fn func(conn string) bool) int {
	var ids []string
	if len(sel.IDs) > 0 {
		for _, id := range sel.IDs {
			if e, ok := t.store.Load(id); ok && sel.match(&e) {
				ids = append(ids, id)
			}
		}
	} else if sel.All || sel.Provider != "" {
		t.store.Range(func(conn string, e Entry) bool {
			if sel.match(&e) {
				ids = append(ids, conn)
			}
			return true
		})
	}
	n := 0
	for _, id := range ids {
		if fn(id) {
			n++
		}
	}
	return n
}

// Snapshot is shorthand for SnapshotAt(time.Now()).
func (t *Tracker) Snapshot() []Info { return t.SnapshotAt(time.Now()) }

// SnapshotAt lists every tracked connection at now, sorted by id. Filter on
// Info.Status to list only the connections that are not available.
func (t *Tracker) SnapshotAt(now time.Time) []Info {
	var out []Info
	t.store.Range(func(conn string, e Entry) bool {
		out = append(out, Info{
			Conn: conn, Provider: e.Options.Provider, Class: e.Options.Class,
			Status:    e.StatusAt(now),
			LastError: e.LastError, Reason: e.Reason, ErrorStatus: e.ErrorStatus, ErrorCode: e.ErrorCode, LastErrorAt: e.LastErrorAt,
			Streak: e.Streak, Rechecks: e.Rechecks, EgressIP: e.EgressIP,
		})
		return true
	})
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Conn, b.Conn) })
	return out
}

// Unavailable is shorthand for UnavailableAt(time.Now()).
func (t *Tracker) Unavailable() []Info { return t.UnavailableAt(time.Now()) }

// UnavailableAt lists the connections that are cooling or terminal at now,
// sorted by id: the content of a cooldowns API.
func (t *Tracker) UnavailableAt(now time.Time) []Info {
	all := t.SnapshotAt(now)
	return slices.DeleteFunc(all, func(i Info) bool { return i.Status.Available() })
}

// RecheckDue is shorthand for RecheckDueAt(conn, time.Now()).
func (t *Tracker) RecheckDue(conn string) (due bool, at time.Time) {
	return t.RecheckDueAt(conn, time.Now())
}

// RecheckDueAt answers whether the expired connection conn may be re-checked
// (for example by refreshing its OAuth token) at now, and when. Re-check n
// (counting from 0) comes [Config.RecheckBase]·2ⁿ after the previous one, or
// after the expiry for the first; after [Config.RecheckMax] re-checks the
// answer is never (at is zero), as it is for a connection that is not
// expired. The Tracker runs no re-check itself: the caller does it, reports
// it with [Tracker.RecheckedAt], and calls [Tracker.ResetAt] when the
// credential works again.
func (t *Tracker) RecheckDueAt(conn string, now time.Time) (due bool, at time.Time) {
	e, ok := t.store.Load(conn)
	if !ok || e.State != Expired || e.Rechecks >= t.cfg.RecheckMax {
		return false, time.Time{}
	}
	from := e.LastRecheck
	if from.IsZero() {
		from = e.TerminalAt
	}
	at = from.Add(t.cfg.RecheckBase << e.Rechecks)
	return !now.Before(at), at
}

// Rechecked is shorthand for RecheckedAt(conn, time.Now()).
func (t *Tracker) Rechecked(conn string) int { return t.RecheckedAt(conn, time.Now()) }

// RecheckedAt records a failed re-check of the expired connection conn at
// now and returns the number of re-checks so far (0 when conn is not
// expired).
func (t *Tracker) RecheckedAt(conn string, now time.Time) int {
	n := 0
	t.store.Update(conn, func(e *Entry, found bool) bool {
		if !found {
			return false
		}
		if e.State == Expired {
			e.Rechecks++
			e.LastRecheck = now
			n = e.Rechecks
		}
		return true
	})
	return n
}

// truncate returns the first n bytes of s, cut at a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

func sameStatus(a, b Status) bool {
	return a.State == b.State && a.Until.Equal(b.Until) && a.Reason == b.Reason && a.Level == b.Level
}

func (t *Tracker) emit(ev Event) {
	if t.cfg.OnChange != nil {
		t.cfg.OnChange(ev)
	}
}
