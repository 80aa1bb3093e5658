package cooldown

import (
	"slices"
	"strings"
	"time"
)

// SeenEgress is shorthand for SeenEgressAt(conn, ip, time.Now()).
func (t *Tracker) SeenEgress(conn, ip string) { t.SeenEgressAt(conn, ip, time.Now()) }

// SeenEgressAt records that conn was used through the egress IP ip at now.
// Only the last IP is kept; it counts for [Config.EgressWindow]. Repeated
// sightings of the same IP refresh the record at most once a minute.
func (t *Tracker) SeenEgressAt(conn, ip string, now time.Time) {
	if ip == "" {
		return
	}
	if e, ok := t.store.Load(conn); ok && e.EgressIP == ip && now.Sub(e.EgressSeen) < time.Minute {
		return
	}
	t.store.Update(conn, func(e *Entry, _ bool) bool {
		if e.EgressIP != ip || now.After(e.EgressSeen) {
			e.EgressIP, e.EgressSeen = ip, now
		}
		return true
	})
	t.afterWrite(conn, now)
}

// InEgressFamily reports whether provider shares an egress-IP quota, that is,
// whether it is in [Config.EgressProviders] and the lockout is enabled.
func (t *Tracker) InEgressFamily(provider string) bool {
	return !t.cfg.DisableEgressLock && provider != "" && containsFold(t.cfg.EgressProviders, provider)
}

// EgressApplies reports whether the failure f of conn triggers the egress-IP
// family lockout: a 429 with reason "rate_limit_exceeded" or
// "quota_exhausted", neither permanent nor credits exhausted, on a connection
// of the family whose cooling is not disabled. The siblings are cooled only
// when conn's egress IP is known within the window.
func (t *Tracker) EgressApplies(conn string, f Failure) bool {
	e, _ := t.store.Load(conn)
	return !e.Options.DisableCooling && terminalOf(&e, f) == Available && t.egressApplies(e.Options.Provider, f)
}

func (t *Tracker) egressApplies(provider string, f Failure) bool {
	if f.Status != 429 || f.Permanent || f.CreditsExhausted || f.RequestRejected {
		return false
	}
	if f.Reason != "rate_limit_exceeded" && f.Reason != "quota_exhausted" {
		return false
	}
	return t.InEgressFamily(provider)
}

// egressLock cools every sibling of conn's family seen on ip within the
// window until until, and returns the siblings it cooled.
func (t *Tracker) egressLock(conn, ip string, f Failure, until, now time.Time) []string {
	var cands []string
	t.store.Range(func(c string, e Entry) bool {
		if c != conn && e.EgressIP == ip && within(e.EgressSeen, now, t.cfg.EgressWindow) && t.InEgressFamily(e.Options.Provider) {
			cands = append(cands, c)
		}
		return true
	})
	slices.Sort(cands)
	var cooled []string
	for _, c := range cands {
		var (
			ok       bool
			from, to Status
			provider string
		)
		t.store.Update(c, func(e *Entry, found bool) bool {
			if !found {
				return false
			}
			from = e.StatusAt(now)
			provider = e.Options.Provider
			if e.EgressIP != ip || !within(e.EgressSeen, now, t.cfg.EgressWindow) || !t.InEgressFamily(provider) ||
				e.Options.DisableCooling || from.Terminal() || !e.Until.Before(until) {
				return true
			}
			e.State, e.Until = Available, until
			e.Reason, e.ErrorStatus, e.ErrorCode, e.LastErrorAt = f.Reason, 429, f.Code, now
			e.LastError = truncate("Shared egress IP quota exhausted ("+strings.ToLower(provider)+")", MaxMessage)
			to = e.StatusAt(now)
			ok = true
			return true
		})
		if ok {
			cooled = append(cooled, c)
			t.emit(Event{Conn: c, Provider: provider, Cause: CauseEgress, From: from, To: to, At: now})
		}
	}
	if len(cooled) > 0 {
		t.afterWrite(conn, now)
	}
	return cooled
}

// within reports whether seen is less than w before now. A time after now
// (the clock went back) counts as within.
func within(seen, now time.Time, w time.Duration) bool {
	return !seen.IsZero() && now.Sub(seen) < w
}
