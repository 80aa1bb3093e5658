package cooldown

import (
	"slices"
	"strings"
	"time"
)

// SeenEgressAt records that conn was used through the egress IP ip at now.
// Only the last IP is kept; it counts for [Config.EgressWindow]. Repeated
// sightings of the same IP refresh the record at most once a minute. Only
// connections of the egress family ([Config.EgressProviders]) need it.
func (t *Tracker) SeenEgressAt(conn, ip string, now time.Time) {
	if ip == "" {
		return
	}
	if e, ok := t.store.Load(conn); ok && e.EgressIP == ip && now.Sub(e.EgressSeen) < time.Minute {
		return
	}
	evicted := t.write(conn, now, func(e *Entry, _ bool) bool {
		if e.EgressIP != ip || now.After(e.EgressSeen) {
			e.EgressIP, e.EgressSeen = ip, now
		}
		return true
	})
	t.afterWrite(conn, now, evicted)
}

// inEgressFamily reports whether provider shares an egress-IP quota, that is,
// whether it is in [Config.EgressProviders] and the lockout is enabled.
func (t *Tracker) inEgressFamily(provider string) bool {
	return !t.cfg.DisableEgressLock && provider != "" && containsFold(t.cfg.EgressProviders, provider)
}

func (t *Tracker) egressApplies(provider string, f Failure) bool {
	if f.Status != 429 || f.Permanent || f.CreditsExhausted || f.RequestRejected {
		return false
	}
	if f.Reason != "rate_limit_exceeded" && f.Reason != "quota_exhausted" {
		return false
	}
	return t.inEgressFamily(provider)
}

// egressLock cools every sibling of conn's family seen on ip within the
// window until until, and returns the siblings it cooled. Each sibling's
// event has Action Episode (Extended when it was cooling already) and
// Source conn.
func (t *Tracker) egressLock(conn, ip string, f Failure, until, now time.Time) []string {
	var cands []string
	t.store.Range(func(c string, e Entry) bool {
		if c != conn && e.EgressIP == ip && within(e.EgressSeen, now, t.cfg.EgressWindow) && t.inEgressFamily(e.Options.Provider) {
			cands = append(cands, c)
		}
		return true
	})
	slices.Sort(cands)
	var cooled []string
	var evicted []Event
	for _, c := range cands {
		var (
			ok       bool
			from, to Status
			provider string
		)
		evicted = append(evicted, t.write(c, now, func(e *Entry, found bool) bool {
			if !found {
				return false
			}
			from = e.status(now)
			provider = e.Options.Provider
			if e.EgressIP != ip || !within(e.EgressSeen, now, t.cfg.EgressWindow) || !t.inEgressFamily(provider) ||
				e.Options.DisableCooling || from.State.Terminal() || !e.Until.Before(until) {
				return true
			}
			e.State, e.Until = Available, until
			e.Reason, e.ErrorStatus, e.ErrorCode, e.LastErrorAt = f.Reason, 429, f.Code, now
			e.LastError = truncate("Shared egress IP quota exhausted ("+strings.ToLower(provider)+")", maxMessage)
			to = e.status(now)
			ok = true
			return true
		})...)
		if ok {
			cooled = append(cooled, c)
			a := Episode
			if from.State == Cooling {
				a = Extended
			}
			ev := event(c, provider, a, from.State, to, now)
			ev.Source = conn
			t.emit(ev)
		}
	}
	if len(cooled) > 0 {
		t.afterWrite(conn, now, evicted)
	} else {
		t.emitAll(evicted)
	}
	return cooled
}

// within reports whether seen is less than w before now. A time after now
// (the clock went back) counts as within.
func within(seen, now time.Time, w time.Duration) bool {
	return !seen.IsZero() && now.Sub(seen) < w
}
