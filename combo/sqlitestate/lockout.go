package sqlitestate

import (
	"encoding/json"
	"strings"

	"github.com/routeguard/routeguard/lockout"
)

// OnLockoutChange is the hook for lockout.Config.OnChange:
//
//	lk := lockout.New(lockout.Config{Enabled: true, OnChange: st.OnLockoutChange})
//
// It queues each lock as it is after the change (its key, scope, reason and
// end) and its removal, and returns at once; Run writes it.
func (s *State) OnLockoutChange(e lockout.Event) {
	k := okey{kindLockout, e.Provider + "\x00" + e.Connection + "\x00" + e.Model}
	if e.Removed || e.Until.IsZero() {
		s.ob.put(k, op{del: true})
		return
	}
	s.ob.put(k, op{val: lockoutRow{
		Provider: e.Provider, Connection: e.Connection, Model: e.Model, Scope: uint8(e.Scope),
		Reason: string(e.Reason), FailureCount: e.FailureCount, LockedAt: ns(e.LockedAt), Until: ns(e.Until),
	}})
}

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
}

// exactPrefix marks the listed name of an exact-scope lock.
const exactPrefix = "exact:"

// failure returns the LockAt argument that recreates the lock's key: an
// exact lock by its trimmed, lower-cased model, a family lock by its family
// name written as a model lock (the same key; lockout.Lockout.LockedAt finds
// it for every model of the family).
func (r *lockoutRow) failure() lockout.Failure {
	f := lockout.Failure{
		Provider: r.Provider, Connection: r.Connection, Model: r.Model,
		Reason: lockout.Reason(r.Reason), Scope: lockout.ScopeModel, UpstreamReset: true,
	}
	if lockout.Scope(r.Scope) == lockout.ScopeExact && strings.HasPrefix(r.Model, exactPrefix) {
		f.Model, f.Scope = strings.TrimPrefix(r.Model, exactPrefix), lockout.ScopeExact
	}
	return f
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
			// The model is locked at Until itself.
			return []any{key, r.Until, r.Until + 1, string(b)}, nil
		},
		delArgs: func(key string) []any { return []any{key} },
	}
}
