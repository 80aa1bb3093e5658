package sqlitestate

import (
	"encoding/json"
	"time"

	"github.com/routeguard/routeguard/lockout"
)

// OnLockoutChange is the hook for lockout.Config.OnChange:
//
//	lk := lockout.New(lockout.Config{Enabled: true, OnChange: st.OnLockoutChange})
//
// It queues each lock as it is after the change (its key, scope, reason,
// start and end, and its failure count with the time of the change as the
// last failure, from which the next failure escalates) and its removal,
// and returns at once; Run writes it. A row outlives its lock by the
// escalation window (at most 24 h), so that a failure after a restart
// still escalates; lockout.Lockout.RestoreAt drops what its own window has
// ended.
func (s *State) OnLockoutChange(e lockout.Event) {
	k := okey{kindLockout, e.Provider + "\x00" + e.Connection + "\x00" + e.Model}
	if e.Removed || e.Until.IsZero() {
		s.ob.put(k, op{del: true})
		return
	}
	s.ob.put(k, op{val: lockoutRow{
		Provider: e.Provider, Connection: e.Connection, Model: e.Model, Scope: uint8(e.Scope),
		Reason: string(e.Reason), FailureCount: e.FailureCount, LockedAt: ns(e.LockedAt), Until: ns(e.Until),
		LastFailure: ns(e.At),
	}})
}

// lockoutRetention bounds how long a row outlives its lock: the longest
// escalation window (lockout.Config.EscalationWindow) plus the lock's
// length.
const lockoutRetention = 24 * time.Hour

// lockoutRow is one lock in the file. Model is the listed name of the
// lock's key (lockout.Info.Model).
type lockoutRow struct {
	Provider     string `json:"provider"`
	Connection   string `json:"connection"`
	Model        string `json:"model"`
	Scope        uint8  `json:"scope"`
	Reason       string `json:"reason,omitempty"`
	FailureCount int    `json:"failureCount,omitempty"`
	LockedAt     int64  `json:"lockedAt,omitempty"`
	Until        int64  `json:"until"`
	// LastFailure is the time of the change that wrote the row; zero in
	// rows of schema version 1, which restore as locks without escalation.
	LastFailure int64 `json:"lastFailure,omitempty"`
}

// record returns the row as lockout.Lockout.RestoreAt takes it.
func (r *lockoutRow) record() lockout.Record {
	rec := lockout.Record{
		Provider: r.Provider, Connection: r.Connection, Model: r.Model, Scope: lockout.Scope(r.Scope),
		Reason: lockout.Reason(r.Reason), FailureCount: r.FailureCount, Until: tm(r.Until),
	}
	if r.LockedAt != 0 {
		rec.LockedAt = tm(r.LockedAt)
	}
	if r.LastFailure != 0 {
		rec.LastFailure = tm(r.LastFailure)
	}
	return rec
}

// expires is the row's expiry: the end of its escalation window, or the
// instant after its lock.
func (r *lockoutRow) expires() int64 {
	exp := r.Until + 1
	if r.LastFailure != 0 && r.Until > r.LastFailure {
		exp = max(exp, r.Until+int64(lockoutRetention)+1)
	}
	return exp
}

func init() {
	tables[kindLockout] = table{
		upsert: `INSERT INTO lockouts (lockout_key, until_at, expires_at, record) VALUES (?1, ?2, ?3, ?4)
		         ON CONFLICT (lockout_key) DO UPDATE SET until_at = excluded.until_at, expires_at = excluded.expires_at, record = excluded.record`,
		del: `DELETE FROM lockouts WHERE lockout_key = ?1`,
		encode: func(key string, v any) ([]any, error) {
			r := v.(lockoutRow)
			b, err := json.Marshal(r)
			if err != nil {
				return nil, err
			}
			return []any{key, r.Until, r.expires(), string(b)}, nil
		},
		delArgs: func(key string) []any { return []any{key} },
	}
}
