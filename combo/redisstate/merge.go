package redisstate

import (
	"encoding/hex"
	"strings"
	"time"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lockout"
)

// apply merges the record v of field f into local state: when v is greater
// than what this replica knows of f, it becomes known and the layer is
// brought up to it (never down: a layer already stricter stays). resync
// marks records from the snapshot or a script's reply.
func (r *Replicator) apply(f, v string, lag time.Duration, resync bool) bool {
	kind, key, ok := splitField(f)
	if !ok || r.lay.Load() == nil {
		return false // before Run: the snapshot is read when Run starts
	}
	val, err := decodeValue(v)
	if err != nil {
		return false
	}
	r.mu.Lock()
	old := r.seen[f]
	if v <= old {
		r.mu.Unlock()
		return false
	}
	r.seen[f] = v
	r.mu.Unlock()
	// A record of a higher reset version means a clear or reset happened
	// since the local state was set: it replaces the local state instead
	// of joining it.
	replace := kind != kindPin && resetVersion(v) > resetVersion(old)
	now := r.now()
	var name string
	changed := false
	switch kind {
	case kindBreaker:
		name, changed = "breaker", r.applyBreaker(f, key, val, replace, now)
	case kindGate:
		name, changed = "gate", r.applyGate(f, key, val, now)
	case kindCooling:
		name, changed = "cooldown", r.applyCooling(key, val, replace, now)
	case kindTerminal:
		name, changed = "cooldown", r.applyTerminal(key, val, replace, now)
	case kindLockout:
		name, changed = "lockout", r.applyLockout(f, key, val, replace, now)
	case kindPin:
		name, changed = "pin", r.applyPin(key, val, now)
	}
	if changed {
		r.applied.Add(1)
		if !resync {
			r.lag.Store(int64(lag))
		} else {
			lag = 0
		}
		if h := r.cfg.OnApply; h != nil {
			h(Applied{Kind: name, Key: key, Replica: val.replica, Lag: lag, At: now})
		}
	}
	return changed
}

func orderTime(n uint64) time.Time { return time.Unix(0, int64(n^(1<<63))) }

// applyBreaker makes a remote open period a local one until its end. The
// local profile gives the open time of a restored breaker (its cycles and
// last kind); the cycles are raised until that time covers the rest of the
// remote period (as an escalated breaker's would), and the start is set so
// that the period ends when the remote one does, or as close to it as the
// profile allows. A reset, or a record of a higher reset version (made
// after a reset this replica has not seen), first closes an open or
// half-open local breaker: it was opened before that reset.
func (r *Replicator) applyBreaker(field, provider string, v repValue, replace bool, now time.Time) bool {
	set := r.l().Breakers
	if set == nil {
		return false
	}
	defer r.applying(field)()
	reset := false
	if v.payload.Reset || replace {
		if st, _ := set.StateAt(provider, now); st == breaker.Open || st == breaker.HalfOpen {
			reset = set.ResetAt(provider, now)
		}
		if v.payload.Reset {
			return reset
		}
	}
	until := orderTime(v.n[1])
	if !until.After(now) {
		return reset
	}
	st, retry := set.StateAt(provider, now)
	if st == breaker.Open && now.Add(retry).After(until) {
		return reset
	}
	at := repTime(v.payload.At)
	if at.IsZero() || at.After(now) {
		at = now
	}
	rec := breaker.Record{Provider: provider, State: breaker.Open, Failures: v.payload.Level,
		LastFailure: at, LastKind: breaker.Kind(v.payload.Kind), OpenCycles: int(min(v.n[2], 10000)), OpenedAt: now}
	var open time.Duration // the local open time for rec's cycles
	for flat := 0; flat < 8; rec.OpenCycles++ {
		if set.RestoreAt([]breaker.Record{rec}, now) != nil {
			return false
		}
		st, retry = set.StateAt(provider, now)
		if st != breaker.Open {
			return false
		}
		if retry > open {
			open, flat = retry, 0
		} else {
			flat++
		}
		if open >= until.Sub(now) {
			break
		}
	}
	if open < until.Sub(now) {
		return true // as long as the local profile allows
	}
	rec.OpenedAt = until.Add(-open)
	return set.RestoreAt([]breaker.Record{rec}, now) == nil
}

// applyGate makes a remote gate cooldown a local one until its end,
// unless the local entry cools longer. A provider entry cools until the
// remote end (within its class's cooldown); a connection entry takes the
// remote failure count and last failure, from which its cooldown follows
// as the local profile gives it.
func (r *Replicator) applyGate(field, key string, v repValue, now time.Time) bool {
	g := r.l().Gate
	provider, conn, ok := strings.Cut(key, "\x00")
	if g == nil || !ok || provider == "" {
		return false
	}
	until := orderTime(v.n[1])
	if now.After(until) || conn != "" && !until.After(now) {
		return false
	}
	before := gateUntil(g, provider, conn, now)
	if !before.Before(until) {
		return false
	}
	defer r.applying(field)()
	rec := breaker.Record{Provider: provider, Connection: conn, State: breaker.Open, Until: until,
		Failures: v.payload.Level, LastFailure: repTime(v.payload.At)}
	if g.RestoreAt([]breaker.Record{rec}, now) != nil {
		return false
	}
	return gateUntil(g, provider, conn, now).After(before)
}

// gateUntil returns when the gate entry of provider (conn empty) or of
// one of its connections stops cooling, as of now; zero if it does not
// cool.
func gateUntil(g *breaker.Gate, provider, conn string, now time.Time) time.Time {
	u, blocked := g.BlockedUntilAt(provider, conn, now)
	if !blocked || conn == "" {
		return u
	}
	if pu, cooling := g.BlockedUntilAt(provider, "", now); !cooling || !pu.Equal(u) {
		return u // the connection's own end
	}
	// The provider cools, which hides the connection's own end.
	for _, rec := range g.SnapshotAt(now) {
		if rec.Provider == provider && rec.Connection == conn && rec.State == breaker.Open {
			return rec.Until
		}
	}
	return time.Time{}
}

// applyCooling raises a connection's cooldown to a remote end, or lifts
// it for a remote clear.
func (r *Replicator) applyCooling(conn string, v repValue, replace bool, now time.Time) bool {
	store := r.l().Cooldowns
	if store == nil {
		return false
	}
	changed := false
	if v.payload.Reset {
		store.Update(conn, func(e *cooldown.Entry, found bool) bool {
			if !found || e.State.Terminal() || !e.Until.After(now) {
				return found
			}
			*e = cooldown.Entry{Options: e.Options, EgressIP: e.EgressIP, EgressSeen: e.EgressSeen}
			changed = true
			return true
		})
		return changed
	}
	until := orderTime(v.n[1])
	store.Update(conn, func(e *cooldown.Entry, found bool) bool {
		if replace && found && !e.State.Terminal() && e.Until.After(until) {
			e.Until, e.Reason = until, v.payload.Reason
			changed = true
			return true
		}
		if e.State.Terminal() || e.Until.After(until) || !until.After(now) {
			return found
		}
		e.Until, e.Reason, e.Level = until, v.payload.Reason, max(e.Level, v.payload.Level)
		changed = true
		return true
	})
	return changed
}

var cooldownByName = func() map[string]cooldown.State {
	m := map[string]cooldown.State{}
	for s := cooldown.Available; s <= cooldown.CreditsExhausted; s++ {
		m[s.String()] = s
	}
	return m
}()

// applyTerminal puts a remote terminal state on a connection, or lifts
// the local one for a remote reset.
func (r *Replicator) applyTerminal(conn string, v repValue, replace bool, now time.Time) bool {
	store := r.l().Cooldowns
	if store == nil {
		return false
	}
	changed := false
	if v.payload.Reset {
		store.Update(conn, func(e *cooldown.Entry, found bool) bool {
			if !found || !e.State.Terminal() {
				return found
			}
			*e = cooldown.Entry{Options: e.Options, EgressIP: e.EgressIP, EgressSeen: e.EgressSeen}
			changed = true
			return true
		})
		return changed
	}
	st, ok := cooldownByName[v.payload.State]
	if !ok || !st.Terminal() {
		return false
	}
	until := repTime(v.payload.Until)
	if st == cooldown.CreditsExhausted && !until.IsZero() && !until.After(now) {
		return false
	}
	store.Update(conn, func(e *cooldown.Entry, found bool) bool {
		if !replace && e.State.Terminal() && terminalEnd(e.State, e.Until) > terminalEnd(st, until) {
			return found // the local terminal state lasts longer
		}
		e.State, e.Until, e.Reason = st, until, v.payload.Reason
		e.TerminalAt, e.Level = repTime(v.payload.At), max(e.Level, v.payload.Level)
		if e.TerminalAt.IsZero() || e.TerminalAt.After(now) {
			e.TerminalAt = now
		}
		changed = true
		return true
	})
	return changed
}

// terminalEnd orders terminal states by their end: untimed ones never
// end.
func terminalEnd(st cooldown.State, until time.Time) uint64 {
	if st != cooldown.CreditsExhausted || until.IsZero() {
		return repNever
	}
	return ordNum(until.UnixNano())
}

// lockoutFailure returns the LockAt argument that recreates a listed lock.
func lockoutFailure(key string, scope lockout.Scope, reason lockout.Reason) (lockout.Failure, bool) {
	provider, rest, ok1 := strings.Cut(key, "\x00")
	conn, model, ok2 := strings.Cut(rest, "\x00")
	if !ok1 || !ok2 || model == "" {
		return lockout.Failure{}, false
	}
	f := lockout.Failure{Provider: provider, Connection: conn, Model: model, Reason: reason,
		Scope: lockout.ScopeModel, UpstreamReset: true}
	if m, ok := strings.CutPrefix(model, "exact:"); ok && scope == lockout.ScopeExact {
		f.Model, f.Scope = m, lockout.ScopeExact
	}
	return f, true
}

// applyLockout extends a local lock to a remote end, or clears it for a
// remote clear.
func (r *Replicator) applyLockout(field, key string, v repValue, replace bool, now time.Time) bool {
	lk := r.l().Lockouts
	if lk == nil {
		return false
	}
	f, ok := lockoutFailure(key, lockout.Scope(v.payload.Kind), lockout.Reason(v.payload.State))
	if !ok {
		return false
	}
	defer r.applying(field)()
	changed := false
	if v.payload.Reset || replace {
		changed = lk.ClearAt(f.Provider, f.Connection, stripNUL(key), now)
		if v.payload.Reset {
			return changed
		}
	}
	until := orderTime(v.n[1])
	if !until.After(now) {
		return changed
	}
	if u, _, locked := lk.LockedAt(f.Provider, f.Connection, f.Model, now); locked && u.After(until) {
		return false
	}
	f.Cooldown = until.Sub(now)
	return lk.LockAt(f, now).Locked
}

// stripNUL returns the model part of a lockout key.
func stripNUL(key string) string {
	i := strings.LastIndexByte(key, 0)
	return key[i+1:]
}

// pinKey parses the key part of a pin field.
func pinKey(key string) (affinity.StoreKey, bool) {
	var k affinity.StoreKey
	i := strings.LastIndexByte(key, 0)
	if i < 0 || len(key)-i-1 != 64 {
		return k, false
	}
	if _, err := hex.Decode(k.Session[:], []byte(key[i+1:])); err != nil {
		return k, false
	}
	k.Provider = key[:i]
	return k, true
}

// applyPin stores a remote pin that is newer than the local one, or
// deletes the local pin for a newer remote deletion.
func (r *Replicator) applyPin(key string, v repValue, now time.Time) bool {
	store := r.l().Pins
	if store == nil {
		return false
	}
	if rp, ok := store.(*repPins); ok {
		store = rp.inner
	}
	k, ok := pinKey(key)
	if !ok || v.payload.Conn == "" {
		return false
	}
	// v is the greatest record known of this pin; only a later local use
	// (a slide not shared yet) makes the local pin newer.
	ts := orderTime(v.n[0])
	local, had, _ := store.Load(k, now)
	newer := !had || !local.LastUsed.After(ts)
	if v.payload.Del {
		if !had || local.Connection != v.payload.Conn || !newer {
			return false
		}
		ok, _ := store.DeleteIf(k, v.payload.Conn)
		return ok
	}
	pin := affinity.Pin{Connection: v.payload.Conn, Created: repTime(v.payload.At),
		LastUsed: repTime(v.payload.Used), Expires: repTime(v.payload.Until)}
	if !pin.Live(now) || !newer {
		return false
	}
	if had && local == pin {
		return false
	}
	return store.Save(k, pin, now) == nil
}

// republish queues this replica's live state again (after Redis lost its
// data) and returns how many records it queued.
func (r *Replicator) republish() int {
	now := r.now()
	l := *r.l()
	r.mu.Lock()
	clear(r.seen)
	r.mu.Unlock()
	n := r.ob.len()
	if l.Breakers != nil {
		for _, rec := range l.Breakers.SnapshotAt(now) {
			if rec.State == breaker.Open && rec.RetryAfter > 0 {
				r.OnBreakerChange(breaker.Event{Provider: rec.Provider, To: breaker.Open, At: rec.OpenedAt,
					Until: now.Add(rec.RetryAfter), Failures: rec.Failures, OpenCycles: rec.OpenCycles, Kind: rec.LastKind})
			}
		}
	}
	if l.Gate != nil {
		for _, rec := range l.Gate.SnapshotAt(now) {
			if rec.State == breaker.Open {
				r.OnGateChange(breaker.Event{Provider: rec.Provider, Connection: rec.Connection, To: breaker.Open, At: now,
					Until: rec.Until, Failures: rec.Failures, LastFailure: rec.LastFailure})
			}
		}
	}
	if l.Cooldowns != nil {
		l.Cooldowns.Range(func(conn string, e cooldown.Entry) bool {
			switch {
			case e.State.Terminal():
				r.OnCooldownChange(cooldown.Event{Conn: conn, Action: cooldown.Terminated, At: now,
					State: e.State, Until: e.Until, Reason: e.Reason, Level: e.Level})
			case e.Until.After(now):
				r.OnCooldownChange(cooldown.Event{Conn: conn, Action: cooldown.Episode, At: now,
					State: cooldown.Cooling, Until: e.Until, Reason: e.Reason, Level: e.Level})
			}
			return true
		})
	}
	if l.Lockouts != nil {
		for _, in := range l.Lockouts.SnapshotAt(now) {
			r.OnLockoutChange(lockout.Event{Kind: lockout.EventLocked, Provider: in.Provider, Connection: in.Connection,
				Model: in.Model, Scope: in.Scope, At: now, Reason: in.Reason, FailureCount: in.FailureCount,
				LockedAt: in.LockedAt, Until: in.Until})
		}
	}
	if rp, ok := l.Pins.(*repPins); ok {
		if list, err := rp.inner.List(now); err == nil {
			for _, e := range list {
				v := encodeValue([3]uint64{ordNum(e.Pin.LastUsed.UnixNano()), 0, 0}, r.replica, repPayload{
					Conn: e.Pin.Connection, At: repNanos(e.Pin.Created), Used: repNanos(e.Pin.LastUsed), Until: repNanos(e.Pin.Expires)})
				r.offer(pinField(e.Key), v, r.ttl(e.Pin.Expires, now))
			}
		}
	}
	return r.ob.len() - n
}

// applying marks field as being applied from a remote record, so that the
// layer's change hook does not publish the change back, and returns the
// func that lifts the mark.
func (r *Replicator) applying(field string) (done func()) {
	r.mu.Lock()
	r.echo[field] = struct{}{}
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.echo, field)
		r.mu.Unlock()
	}
}
