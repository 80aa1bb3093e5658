package sqlitestate

import (
	"encoding/json"

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
// loses its row. Wire it to a Set only: a Gate's events look alike and
// would overwrite breaker rows (the window gate is not persisted; see the
// package documentation).
func (s *State) OnBreakerChange(e breaker.Event) {
	k := okey{kindBreaker, e.Provider}
	if e.Removed || (e.To == breaker.Closed && e.Failures == 0) {
		s.ob.put(k, op{del: true})
		return
	}
	r := breaker.Record{
		Provider:    e.Provider,
		State:       e.To,
		Failures:    e.Failures,
		LastFailure: e.LastFailure,
		LastKind:    e.Kind,
		OpenCycles:  e.OpenCycles,
	}
	var until int64 = never
	if e.To == breaker.Open {
		r.OpenedAt = e.At
		if !e.Until.IsZero() {
			until = ns(e.Until)
		}
	}
	s.ob.put(k, op{val: breakerRow{rec: r, expires: until}})
}

// breakerRow is a breaker's record and the row's expiry: the end of the
// open period for an open breaker (a restart after it starts the breaker
// closed), never for the other states (the next transition replaces the
// row).
type breakerRow struct {
	rec     breaker.Record
	expires int64
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
}
