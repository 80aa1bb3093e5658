package sqlitestate

import (
	"encoding/json"
	"maps"
	"sync"
	"time"

	"github.com/routeguard/routeguard/breaker"
)

// OnBreakerChange is the hook for breaker.Config.OnChange of one Set:
//
//	set := breaker.NewSet(breaker.Config{OnChange: st.OnBreakerChange})
//
// It queues the breaker's state after each transition (state, failure
// count, open cycles, last failure and its kind, and for an open breaker
// the start of its open period, the event's At) and returns at once; Run
// writes it. A breaker that closes with no failures, or that the Set drops,
// loses its row. The failure counts that change without a transition (a
// failure below the threshold, a kind's count) reach the file through the
// Set handed to Restore, which the writer reads every interval. Wire it to
// a Set only; a Gate has OnGateChange.
func (s *State) OnBreakerChange(e breaker.Event) {
	s.polled.forget(kindBreaker, e.Provider)
	r := breaker.Record{
		Provider:    e.Provider,
		State:       e.To,
		Failures:    e.Failures,
		LastFailure: e.LastFailure,
		LastKind:    e.Kind,
		OpenCycles:  e.OpenCycles,
	}
	if e.To == breaker.Open {
		r.OpenedAt = e.At
	}
	s.ob.put(okey{kindBreaker, e.Provider}, breakerOp(r, e.Until, e.Removed))
}

// breakerOp is the outbox change of a breaker's record; until is the end of
// an open period.
func breakerOp(r breaker.Record, until time.Time, removed bool) op {
	if removed || (r.State == breaker.Closed && r.Failures == 0) {
		return op{del: true}
	}
	var exp int64 = never
	if r.State == breaker.Open && !until.IsZero() {
		exp = ns(until)
	}
	r.RetryAfter, r.ProbeInFlight = 0, false
	return op{val: breakerRow{rec: r, expires: exp}}
}

// breakerRow is a breaker's record and the row's expiry: the end of the
// open period for an open breaker (a restart after it starts the breaker
// closed), never for the other states (the next transition replaces the
// row).
type breakerRow struct {
	rec     breaker.Record
	expires int64
}

// OnGateChange is the hook for breaker.GateConfig.OnChange:
//
//	gate := breaker.NewGate(breaker.GateConfig{Enabled: true, OnChange: st.OnGateChange})
//
// It queues the entry after each change of its cooldown (its failures,
// last failure and cooldown end) and returns at once; Run writes it. An
// entry the gate drops, or that a success left with no failures, loses its
// row. The gate handed to Restore is also read by the writer every
// interval, so the failure counts that change without a cooldown change
// (a provider's window below its threshold) reach the file too.
func (s *State) OnGateChange(e breaker.Event) {
	k := e.Provider + "\x00" + e.Connection
	s.polled.forget(kindGate, k)
	r := breaker.Record{Provider: e.Provider, Connection: e.Connection, State: e.To,
		Failures: e.Failures, LastFailure: e.LastFailure, Until: e.Until}
	s.ob.put(okey{kindGate, k}, gateOp(r, e.Removed))
}

// gateRetention bounds how long any gate keeps an entry after its last
// failure (the longest window, cooldown or retry it allows): the row's
// expiry when the entry is not cooling. breaker.Gate.RestoreAt drops what
// its own, shorter, retention has ended.
const gateRetention = 24 * time.Hour

func gateOp(r breaker.Record, removed bool) op {
	cooling := r.State == breaker.Open && !r.Until.IsZero()
	if removed || (!cooling && r.Failures == 0) {
		return op{del: true}
	}
	exp := ns(r.LastFailure.Add(gateRetention)) + 1
	if cooling {
		// A provider cools at Until itself.
		exp = max(exp, ns(r.Until)+1)
	}
	return op{val: gateRow{rec: r, expires: exp}}
}

type gateRow struct {
	rec     breaker.Record
	expires int64
}

// polled holds the layers the writer reads every interval (handed over by
// Restore) and the record it last queued of each of their keys, so that
// only what changed is queued again.
type polled struct {
	mu    sync.Mutex
	set   *breaker.Set
	gate  *breaker.Gate
	last  [numKinds]map[string]breaker.Record
	inUse bool
	// epoch counts the reads; dirty holds the keys a hook queued, with the
	// epoch it queued them in: a read skips the keys queued since it began
	// (its snapshot may be older than the hook's change).
	epoch uint64
	dirty [numKinds]map[string]uint64
}

// attach makes the writer read set and gate (either may be nil).
func (p *polled) attach(set *breaker.Set, gate *breaker.Gate) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if set != nil {
		p.set, p.last[kindBreaker] = set, map[string]breaker.Record{}
	}
	if gate != nil {
		p.gate, p.last[kindGate] = gate, map[string]breaker.Record{}
	}
	p.inUse = p.set != nil || p.gate != nil
}

// forget drops what the writer last queued of key, so that its next read
// queues the key again (a hook has queued a change in between).
func (p *polled) forget(k kind, key string) {
	p.mu.Lock()
	if p.inUse && p.last[k] != nil {
		delete(p.last[k], key)
		if p.dirty[k] == nil {
			p.dirty[k] = map[string]uint64{}
		}
		p.dirty[k][key] = p.epoch
	}
	p.mu.Unlock()
}

// poll reads the attached layers at now and queues every record that
// differs from the one last queued for its key, and the deletion of keys
// that are gone.
func (s *State) poll(now time.Time) {
	p := &s.polled
	p.mu.Lock()
	set, gate := p.set, p.gate
	p.epoch++
	epoch := p.epoch
	p.mu.Unlock()
	if set != nil {
		// The snapshot may call the hook (lazy transitions): take it
		// without p.mu.
		recs := set.SnapshotAt(now)
		s.queueChanged(kindBreaker, epoch, recs, func(r breaker.Record) (string, op) {
			var until time.Time
			if r.State == breaker.Open {
				until = now.Add(r.RetryAfter)
			}
			return r.Provider, breakerOp(r, until, false)
		})
	}
	if gate != nil {
		recs := gate.SnapshotAt(now)
		s.queueChanged(kindGate, epoch, recs, func(r breaker.Record) (string, op) {
			return r.Provider + "\x00" + r.Connection, gateOp(r, false)
		})
	}
}

func (s *State) queueChanged(k kind, epoch uint64, recs []breaker.Record, opOf func(breaker.Record) (string, op)) {
	p := &s.polled
	p.mu.Lock()
	defer p.mu.Unlock()
	last, dirty := p.last[k], p.dirty[k]
	p.dirty[k] = nil
	seen := make(map[string]struct{}, len(recs))
	for _, r := range recs {
		key, o := opOf(r)
		r.RetryAfter, r.ProbeInFlight = 0, false
		seen[key] = struct{}{}
		if e, ok := dirty[key]; ok && e == epoch {
			continue // a hook queued a newer change during the read
		}
		if old, ok := last[key]; ok && sameRecord(old, r) {
			continue
		}
		last[key] = r
		s.ob.put(okey{k, key}, o)
	}
	for key := range last {
		if _, ok := seen[key]; !ok {
			delete(last, key)
			s.ob.put(okey{k, key}, op{del: true})
		}
	}
}

func sameRecord(a, b breaker.Record) bool {
	return a.Provider == b.Provider && a.Connection == b.Connection && a.State == b.State &&
		a.Failures == b.Failures && a.LastFailure.Equal(b.LastFailure) && a.LastKind == b.LastKind &&
		a.OpenCycles == b.OpenCycles && a.OpenedAt.Equal(b.OpenedAt) && a.Until.Equal(b.Until) &&
		maps.Equal(a.KindFailures, b.KindFailures)
}

func init() {
	tables[kindBreaker] = table{
		upsert: `INSERT INTO breakers (provider, state, expires_at, record) VALUES (?1, ?2, ?3, ?4)
		         ON CONFLICT (provider) DO UPDATE SET state = excluded.state, expires_at = excluded.expires_at, record = excluded.record`,
		del: `DELETE FROM breakers WHERE provider = ?1`,
		encode: func(key string, v any) ([]any, error) {
			r := v.(breakerRow)
			b, err := json.Marshal(r.rec)
			if err != nil {
				return nil, err
			}
			return []any{key, r.rec.State.String(), r.expires, string(b)}, nil
		},
		delArgs: func(key string) []any { return []any{key} },
	}
	tables[kindGate] = table{
		upsert: `INSERT INTO gate_entries (entry_key, expires_at, record) VALUES (?1, ?2, ?3)
		         ON CONFLICT (entry_key) DO UPDATE SET expires_at = excluded.expires_at, record = excluded.record`,
		del: `DELETE FROM gate_entries WHERE entry_key = ?1`,
		encode: func(key string, v any) ([]any, error) {
			r := v.(gateRow)
			b, err := json.Marshal(r.rec)
			if err != nil {
				return nil, err
			}
			return []any{key, r.expires, string(b)}, nil
		},
		delArgs: func(key string) []any { return []any{key} },
	}
}
