package cooldown

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/routeguard/routeguard"
)

// Tracker keeps the cooldown and terminal state of every connection it has
// heard of. A connection it has never heard of is available.
//
// Most callers use three methods: [Tracker.StatusAt] before dispatch, then
// [Tracker.FailAt] or [Tracker.SucceedAt] with the outcome.
// [Tracker.RegisterAt] tags a connection with its provider and settings.
//
// A Tracker is safe for concurrent use by multiple goroutines. Its zero value
// is not usable; create one with [New].
type Tracker struct {
	cfg     Config
	oauth   shape // cfg.OAuth as values
	apikey  shape // cfg.APIKey as values
	store   Store
	sweeper Sweeper      // nil when the store cannot sweep
	mem     *memoryStore // the store when it is the in-memory one, for the hot path

	sinceSweep atomic.Int64
	// swept is the number of entries the last sweep of a Sweeper store
	// left; the next sweep for the cap waits until a tenth of MaxEntries
	// (or of swept, when larger) more were written, so that terminal
	// entries that keep the store over MaxEntries do not make every few
	// writes sweep it: a sweep visits the store a few times, once every
	// tenth of its size in writes, O(1) amortised.
	swept    atomic.Int64
	sweeping atomic.Bool
}

// New returns a Tracker configured by cfg.Normalize().
func New(cfg Config) *Tracker {
	cfg = cfg.Normalize()
	t := &Tracker{cfg: cfg, store: cfg.Store,
		oauth: shapeOf(cfg.OAuth, routeguard.OAuth), apikey: shapeOf(cfg.APIKey, routeguard.APIKey)}
	if t.store == nil {
		t.store = NewMemoryStore()
	}
	t.sweeper, _ = t.store.(Sweeper)
	if t.mem, _ = t.store.(*memoryStore); t.mem != nil {
		t.mem.attach(t)
	}
	return t
}

// RegisterAt sets conn's tags and settings at now, keeping its state. With
// zero Options, an entry that carries no other information at now is
// dropped (an [Event] with Action [Dropped] reports it).
func (t *Tracker) RegisterAt(conn string, o Options, now time.Time) {
	var (
		found, kept bool
		from        State
		provider    string
	)
	evicted := t.write(conn, now, func(e *Entry, ok bool) bool {
		found, from, provider = ok, e.status(now).State, e.Options.Provider
		e.Options = o
		kept = !t.idle(e, now)
		return kept
	})
	if found && !kept {
		t.emit(dropped(conn, provider, from, now, ""))
	}
	t.afterWrite(conn, now, evicted)
}

// ForgetAt drops, at now, everything known about conn, its tags included.
func (t *Tracker) ForgetAt(conn string, now time.Time) {
	var (
		found    bool
		from     State
		provider string
	)
	evicted := t.write(conn, now, func(e *Entry, ok bool) bool {
		found, from, provider = ok, e.status(now).State, e.Options.Provider
		return false
	})
	if found {
		t.emit(dropped(conn, provider, from, now, ""))
	}
	t.emitAll(evicted)
}

// dropped returns the event of the removal of conn's entry for cause.
func dropped(conn, provider string, from State, now time.Time, cause string) Event {
	return Event{Conn: conn, Provider: provider, At: now, Action: Dropped, From: from, Removed: true, Cause: cause}
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
	if m := t.mem; m != nil {
		// memoryStore.statusAt, its shortcut written out here: a
		// connection whose shard holds no entry costs no further call.
		if sh := m.shard(conn); sh.n.Load() != 0 {
			m.statusIn(sh, conn, now, s)
		}
		return
	}
	if e, ok := t.store.Load(conn); ok {
		e.statusInto(now, s)
	}
}

// CheckAt returns nil when conn is available at now, and otherwise an
// [*Error] with [CodeCooling] (status 429) for a cooling connection or
// [CodeUnavailable] (status 503) for a terminal one, matching [ErrCooling]
// or [ErrUnavailable]. It does not allocate when conn is available (with
// the in-memory store).
func (t *Tracker) CheckAt(conn string, now time.Time) error {
	if s := t.StatusAt(conn, now); s.State != Available {
		return refusal(conn, s, now)
	}
	return nil
}

// FailAt records the failure f of conn at now and returns what it did.
//
// A terminal connection absorbs every failure. A terminal verdict (ban,
// credits exhausted, expired) applies even while the connection is cooling.
// Any other failure on a cooling connection never shortens the cooldown and
// never raises the backoff level, so concurrent failures make one episode:
// it is absorbed, unless it carries an explicit cooldown (the retry hint,
// when the profile honours hints, else a fixed [Failure.Cooldown]) that
// ends later than the current one. Then the episode is extended to that
// end, bounded by [Config.MaxHint], the error is recorded, the level stays,
// and the result's Action is [Extended]; OnChange reports the new end. A
// request-rejected refusal never extends. Otherwise the error is recorded
// and, when the failure yields a cooldown and cooling is not disabled for
// the connection, a new episode begins. See [Failure] for how the length is
// chosen.
func (t *Tracker) FailAt(conn string, f Failure, now time.Time) Result {
	// Fast path: a failure that will be absorbed needs no write.
	if e, ok := t.store.Load(conn); ok {
		if from := e.status(now); from.State.Terminal() || (from.State == Cooling && terminalOf(&e, f) == Available &&
			!t.extendsLater(&e, f, from.Until, now)) {
			r := Result{Action: Absorbed, Status: from}
			if from.State == Cooling {
				r.Cooldown, r.Streak = from.Until.Sub(now), e.Streak
			}
			return r
		}
	}
	// One variable holds what the write learns, so that the closure (which
	// the store may keep) moves one object to the heap, not six.
	var w struct {
		res         Result
		from        Status
		provider    string
		egressIP    string
		found, kept bool
	}
	evicted := t.write(conn, now, func(e *Entry, ok bool) bool {
		w.found = ok
		w.from = e.status(now)
		w.provider = e.Options.Provider
		if t.fail(e, f, now, w.from, &w.res) && within(e.EgressSeen, now, t.cfg.EgressWindow) {
			w.egressIP = e.EgressIP
		}
		w.kept = !t.idle(e, now)
		return w.kept
	})
	res := w.res
	if removed := w.found && !w.kept; removed || !sameStatus(w.from, res.Status) {
		ev := event(conn, w.provider, res.Action, w.from.State, res.Status, now)
		ev.Removed = removed
		t.emit(ev)
	}
	t.afterWrite(conn, now, evicted)
	if w.egressIP != "" {
		res.Egress = t.egressLock(conn, w.egressIP, f, res.Status.Until, now)
	}
	return res
}

// fail applies f to e and fills res. It reports whether the egress-IP family
// lockout must run.
func (t *Tracker) fail(e *Entry, f Failure, now time.Time, from Status, res *Result) (egress bool) {
	res.Status = from
	if from.State.Terminal() {
		res.Action = Absorbed
		return false
	}
	term := terminalOf(e, f)
	if term == Available && from.State == Cooling {
		if end, d, hinted, later := t.extends(e, f, from.Until, now); later {
			// D13: an explicit upstream cooldown that ends later extends
			// the episode; the level stays, as for any absorbed failure.
			e.Reason, e.ErrorStatus, e.ErrorCode, e.LastErrorAt = f.Reason, f.Status, f.Code, now
			e.LastError = truncate(f.Message, maxMessage)
			egress = t.egressApplies(e.Options.Provider, f)
			if egress {
				e.LastError = truncate("Shared egress IP quota exhausted ("+strings.ToLower(e.Options.Provider)+")", maxMessage)
			}
			e.Until = end
			res.Action, res.Cooldown, res.Hinted, res.Streak = Extended, d, hinted, e.Streak
			res.Status = e.status(now)
			return egress
		}
		res.Action = Absorbed
		res.Cooldown = from.Until.Sub(now)
		res.Streak = e.Streak
		return false
	}
	var d time.Duration
	level := min(e.Level, t.profile(e.Options.Class).steps)
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
	e.LastError = truncate(msg, maxMessage)

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
		res.Status = e.status(now)
		return false
	}

	e.State = Available
	e.Level = level
	if !e.Options.DisableCooling && t.egressApplies(e.Options.Provider, f) {
		egress = true
		if d <= 0 {
			d = t.cfg.EgressCooldown
		}
		e.LastError = truncate("Shared egress IP quota exhausted ("+strings.ToLower(e.Options.Provider)+")", maxMessage)
	}
	if d > 0 && !e.Options.DisableCooling {
		e.Until = now.Add(d)
		res.Action, res.Cooldown = Episode, d
	} else {
		e.Until = time.Time{}
		res.Action, res.Hinted, egress = Recorded, false, false
	}
	res.Status = e.status(now)
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
	if d, hinted, ok := t.explicit(p, f); ok {
		return d, level, hinted
	}
	switch {
	case f.Backoff:
		return p.backoff(level), min(level+1, p.steps), false
	case f.Base:
		return min(p.base, p.max), level, false
	}
	return 0, level, false
}

// explicit returns the cooldown an upstream answer states for f: the retry
// hint when the profile honours hints, else the fixed cooldown, bounded by
// MaxHint. ok is false when f states none (a backoff or base cooldown, or
// none at all).
func (t *Tracker) explicit(p shape, f Failure) (d time.Duration, hinted, ok bool) {
	switch {
	case f.RetryAfter > 0 && p.hints:
		return min(f.RetryAfter, t.cfg.MaxHint), true, true
	case f.Cooldown > 0:
		return min(f.Cooldown, t.cfg.MaxHint), false, true
	}
	return 0, false, false
}

// extends returns the end an explicit cooldown of f would give a connection
// cooling until until, when that end is later (D13).
func (t *Tracker) extends(e *Entry, f Failure, until, now time.Time) (time.Time, time.Duration, bool, bool) {
	if f.RequestRejected || e.Options.DisableCooling {
		return time.Time{}, 0, false, false
	}
	d, hinted, ok := t.explicit(t.profile(e.Options.Class), f)
	if !ok {
		return time.Time{}, 0, false, false
	}
	end := now.Add(d)
	return end, d, hinted, end.After(until)
}

// extendsLater reports whether f would extend a cooldown ending at until.
func (t *Tracker) extendsLater(e *Entry, f Failure, until, now time.Time) bool {
	_, _, _, later := t.extends(e, f, until, now)
	return later
}

// backoff returns the backoff cooldown of p at level: Base·2^min(level,
// Steps), capped by Max. Unset fields of p take the APIKey defaults and
// every value is clamped as [Config.Normalize] does, so any Profile is
// safe to pass.
func backoff(p Profile, level int) time.Duration {
	return shapeOf(p, routeguard.APIKey).backoff(level)
}

func (p shape) backoff(level int) time.Duration {
	d := p.base
	for range min(max(level, 0), p.steps) {
		if d >= p.max/2 {
			return p.max
		}
		d *= 2
	}
	return min(d, p.max)
}

// profile returns the shape of class c: OAuth's for OAuth, APIKey's for
// every other class.
func (t *Tracker) profile(c routeguard.Class) shape {
	if c == routeguard.OAuth {
		return t.oauth
	}
	return t.apikey
}

// SucceedAt records a success of conn at now: the error fields, the cooldown,
// the backoff level and the request-rejected streak are cleared. A success
// never lifts Banned or Expired, nor credits exhausted before its recovery
// time (such a success is a late answer to an earlier request); only
// [Tracker.ResetAt] does. It does not allocate when there is nothing to clear.
func (t *Tracker) SucceedAt(conn string, now time.Time) {
	if t.mem != nil {
		if !t.mem.dirty(conn) {
			return
		}
	} else if e, ok := t.store.Load(conn); !ok || e.clean() {
		return
	}
	t.clear(conn, now, Succeeded)
}

// clear clears conn's error state, and its terminal state when a is Reset.
// It reports whether anything changed.
func (t *Tracker) clear(conn string, now time.Time, a Action) bool {
	var (
		changed, found, kept bool
		from, to             Status
		provider             string
	)
	evicted := t.write(conn, now, func(e *Entry, ok bool) bool {
		if !ok {
			return false
		}
		found = true
		from = e.status(now)
		provider = e.Options.Provider
		if from.State.Terminal() && a != Reset {
			kept = true
			return true
		}
		changed = !e.clean()
		e.reset()
		to = e.status(now)
		kept = !t.idle(e, now)
		return kept
	})
	if removed := found && !kept; removed || (changed && !sameStatus(from, to)) {
		ev := event(conn, provider, a, from.State, to, now)
		ev.Removed = removed
		t.emit(ev)
	}
	if changed {
		t.afterWrite(conn, now, evicted)
	} else {
		t.emitAll(evicted)
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

// ClearAt lifts the cooldowns of the selected connections as a success would
// (error fields, level and streak cleared) and returns how many changed. It
// never lifts a terminal state; use [Tracker.ResetAt] for that.
func (t *Tracker) ClearAt(sel Selector, now time.Time) int {
	return t.each(sel, func(conn string) bool { return t.clear(conn, now, Cleared) })
}

// ResetAt clears every state of the selected connections, terminal states
// included (for example after their credentials changed), and returns how
// many changed. Tags and egress records are kept.
func (t *Tracker) ResetAt(sel Selector, now time.Time) int {
	return t.each(sel, func(conn string) bool { return t.clear(conn, now, Reset) })
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

// SnapshotAt lists every tracked connection at now, sorted by id. Filter on
// Info.Status.State to list only the connections that are not available
// (the content of a cooldowns API).
func (t *Tracker) SnapshotAt(now time.Time) []Info {
	var out []Info
	t.store.Range(func(conn string, e Entry) bool {
		out = append(out, Info{
			Conn: conn, Provider: e.Options.Provider, Class: e.Options.Class,
			Status:    e.status(now),
			LastError: e.LastError, Reason: e.Reason, ErrorStatus: e.ErrorStatus, ErrorCode: e.ErrorCode, LastErrorAt: e.LastErrorAt,
			Streak: e.Streak, Rechecks: e.Rechecks, EgressIP: e.EgressIP,
		})
		return true
	})
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Conn, b.Conn) })
	return out
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

// RecheckedAt records a failed re-check of the expired connection conn at
// now and returns the number of re-checks so far (0 when conn is not
// expired).
func (t *Tracker) RecheckedAt(conn string, now time.Time) int {
	n := 0
	t.emitAll(t.write(conn, now, func(e *Entry, found bool) bool {
		if !found {
			return false
		}
		if e.State == Expired {
			e.Rechecks++
			e.LastRecheck = now
			n = e.Rechecks
		}
		return true
	}))
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

func (t *Tracker) emitAll(evs []Event) {
	for _, ev := range evs {
		t.emit(ev)
	}
}

// write runs fn on conn's entry as [Store.Update] does. With the in-memory
// store it also keeps the entry caps, sparing conn, and returns the events
// of the entries it dropped for them (when OnChange is set), for the caller
// to hand on after its own.
func (t *Tracker) write(conn string, now time.Time, fn func(e *Entry, found bool) bool) []Event {
	if t.mem != nil {
		return t.mem.updateAt(conn, now, fn)
	}
	t.store.Update(conn, fn)
	return nil
}
