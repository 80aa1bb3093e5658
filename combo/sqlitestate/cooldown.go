package sqlitestate

import (
	"encoding/json"
	"fmt"
	"math"
	"sync"

	"github.com/routeguard/routeguard"
	"github.com/routeguard/routeguard/cooldown"
)

// Cooldowns returns the cooldown store, for cooldown.Config.Store:
//
//	cd := cooldown.New(cooldown.Config{Store: st.Cooldowns()})
//
// It is an in-memory store restored from the file by Open, so every read
// (Tracker.StatusAt, CheckAt) is a map lookup with no SQL. Every change
// the Tracker makes through Update, and every entry a sweep drops, is
// queued in the outbox and written by Run. Restored entries keep their
// absolute times: a connection cooling until T is cooling until T after a
// restart, a terminal connection stays terminal, and an entry with nothing
// live left (not terminal, its cooldown and request-rejected episode over)
// is not restored, so such a connection restarts at backoff level 0.
func (s *State) Cooldowns() cooldown.Store { return s.cooldowns }

// cooldownShards is the number of shards of the cooldown store: a read
// takes one shard's read lock.
const cooldownShards = 64

// cooldownStore is a sharded map of entries that reports its writes to the
// outbox. A Load copies the entry once, and only when there is one.
type cooldownStore struct {
	shards [cooldownShards]cooldownShard
	ob     *outbox
}

type cooldownShard struct {
	mu sync.RWMutex
	m  map[string]*cooldown.Entry
	_  [40]byte // keeps shards on separate cache lines
}

var (
	_ cooldown.Store   = (*cooldownStore)(nil)
	_ cooldown.Sweeper = (*cooldownStore)(nil)
)

func newCooldownStore(ob *outbox) *cooldownStore {
	c := &cooldownStore{ob: ob}
	for i := range c.shards {
		c.shards[i].m = map[string]*cooldown.Entry{}
	}
	return c
}

// shard picks conn's shard by an FNV-1a hash of its id.
func (c *cooldownStore) shard(conn string) *cooldownShard {
	h := uint32(2166136261)
	for i := 0; i < len(conn); i++ {
		h = (h ^ uint32(conn[i])) * 16777619
	}
	return &c.shards[h%cooldownShards]
}

// Load implements cooldown.Store. It reads memory only.
func (c *cooldownStore) Load(conn string) (cooldown.Entry, bool) {
	sh := c.shard(conn)
	sh.mu.RLock()
	p := sh.m[conn]
	if p == nil {
		sh.mu.RUnlock()
		return cooldown.Entry{}, false
	}
	e := *p
	sh.mu.RUnlock()
	return e, true
}

// Range implements cooldown.Store. fn runs on a copy of each entry, with
// no lock held.
func (c *cooldownStore) Range(fn func(string, cooldown.Entry) bool) {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.RLock()
		type kv struct {
			conn string
			e    cooldown.Entry
		}
		list := make([]kv, 0, len(sh.m))
		for conn, p := range sh.m {
			list = append(list, kv{conn, *p})
		}
		sh.mu.RUnlock()
		for _, x := range list {
			if !fn(x.conn, x.e) {
				return
			}
		}
	}
}

// Update implements cooldown.Store: it runs fn under conn's shard lock and
// queues the entry as fn leaves it (or its deletion), unless fn changed
// nothing. The queueing happens under that lock, so the outbox sees the
// changes of one connection in the order they were made.
func (c *cooldownStore) Update(conn string, fn func(e *cooldown.Entry, found bool) bool) {
	sh := c.shard(conn)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p, found := sh.m[conn]
	var e cooldown.Entry
	if found {
		e = *p
	}
	keep := fn(&e, found)
	switch {
	case keep && found && e == *p:
	case keep:
		if !found {
			p = new(cooldown.Entry)
			sh.m[conn] = p
		}
		*p = e
		c.ob.put(okey{kindCooldown, conn}, op{val: e})
	case found:
		delete(sh.m, conn)
		c.ob.put(okey{kindCooldown, conn}, op{del: true})
	}
}

// Len implements cooldown.Sweeper.
func (c *cooldownStore) Len() int {
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.RLock()
		n += len(sh.m)
		sh.mu.RUnlock()
	}
	return n
}

// Sweep implements cooldown.Sweeper; dropped entries are deleted from the
// file too.
func (c *cooldownStore) Sweep(drop func(conn string, e *cooldown.Entry) bool) int {
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		for conn, p := range sh.m {
			if drop(conn, p) {
				delete(sh.m, conn)
				c.ob.put(okey{kindCooldown, conn}, op{del: true})
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}

// restore puts an entry read from the file into memory, without queueing.
func (c *cooldownStore) restore(conn string, e cooldown.Entry) {
	sh := c.shard(conn)
	sh.mu.Lock()
	sh.m[conn] = &e
	sh.mu.Unlock()
}

// never is the expires_at of a row that only an explicit reset ends.
const never = math.MaxInt64

// cooldownExpiry is the instant from which e carries nothing worth
// restoring.
func cooldownExpiry(e *cooldown.Entry) int64 {
	switch e.State {
	case cooldown.Banned, cooldown.Expired:
		return never
	case cooldown.CreditsExhausted:
		if e.Until.IsZero() {
			return never
		}
		return ns(e.Until)
	}
	return max(ns(e.Until), ns(e.StreakUntil))
}

// cooldownRow is the JSON form of a cooldown.Entry in the file. States are
// stored by name, times as Unix nanoseconds.
type cooldownRow struct {
	Provider       string           `json:"provider,omitempty"`
	Class          routeguard.Class `json:"class"`
	DisableCooling bool             `json:"disableCooling,omitempty"`
	ExtraKeys      bool             `json:"extraKeys,omitempty"`
	State          string           `json:"state"`
	Until          int64            `json:"until,omitempty"`
	Level          int              `json:"level,omitempty"`
	TerminalAt     int64            `json:"terminalAt,omitempty"`
	Reason         string           `json:"reason,omitempty"`
	ErrorStatus    int              `json:"errorStatus,omitempty"`
	ErrorCode      string           `json:"errorCode,omitempty"`
	LastError      string           `json:"lastError,omitempty"`
	LastErrorAt    int64            `json:"lastErrorAt,omitempty"`
	Streak         int              `json:"streak,omitempty"`
	StreakLast     int64            `json:"streakLast,omitempty"`
	StreakUntil    int64            `json:"streakUntil,omitempty"`
	Rechecks       int              `json:"rechecks,omitempty"`
	LastRecheck    int64            `json:"lastRecheck,omitempty"`
	EgressIP       string           `json:"egressIP,omitempty"`
	EgressSeen     int64            `json:"egressSeen,omitempty"`
}

var cooldownStates = map[string]cooldown.State{}

func init() {
	for s := cooldown.Available; s <= cooldown.CreditsExhausted; s++ {
		cooldownStates[s.String()] = s
	}
	tables[kindCooldown] = table{
		upsert: `INSERT INTO cooldowns (connection_id, state, until_at, expires_at, entry) VALUES (?1, ?2, ?3, ?4, ?5)
		         ON CONFLICT (connection_id) DO UPDATE SET state = excluded.state, until_at = excluded.until_at,
		         expires_at = excluded.expires_at, entry = excluded.entry`,
		del: `DELETE FROM cooldowns WHERE connection_id = ?1`,
		encode: func(key string, v any) ([]any, error) {
			e := v.(cooldown.Entry)
			b, err := encodeCooldown(&e)
			if err != nil {
				return nil, err
			}
			return []any{key, e.State.String(), ns(e.Until), cooldownExpiry(&e), string(b)}, nil
		},
		delArgs: func(key string) []any { return []any{key} },
	}
}

func encodeCooldown(e *cooldown.Entry) ([]byte, error) {
	return json.Marshal(cooldownRow{
		Provider: e.Options.Provider, Class: e.Options.Class,
		DisableCooling: e.Options.DisableCooling, ExtraKeys: e.Options.ExtraKeys,
		State: e.State.String(), Until: ns(e.Until), Level: e.Level, TerminalAt: ns(e.TerminalAt),
		Reason: e.Reason, ErrorStatus: e.ErrorStatus, ErrorCode: e.ErrorCode,
		LastError: e.LastError, LastErrorAt: ns(e.LastErrorAt),
		Streak: e.Streak, StreakLast: ns(e.StreakLast), StreakUntil: ns(e.StreakUntil),
		Rechecks: e.Rechecks, LastRecheck: ns(e.LastRecheck),
		EgressIP: e.EgressIP, EgressSeen: ns(e.EgressSeen),
	})
}

func decodeCooldown(b []byte) (cooldown.Entry, error) {
	var r cooldownRow
	if err := json.Unmarshal(b, &r); err != nil {
		return cooldown.Entry{}, err
	}
	st, ok := cooldownStates[r.State]
	if !ok {
		return cooldown.Entry{}, fmt.Errorf("unknown cooldown state %q", r.State)
	}
	return cooldown.Entry{
		Options: cooldown.Options{Provider: r.Provider, Class: r.Class, DisableCooling: r.DisableCooling, ExtraKeys: r.ExtraKeys},
		State:   st, Until: tm(r.Until), Level: r.Level, TerminalAt: tm(r.TerminalAt),
		Reason: r.Reason, ErrorStatus: r.ErrorStatus, ErrorCode: r.ErrorCode,
		LastError: r.LastError, LastErrorAt: tm(r.LastErrorAt),
		Streak: r.Streak, StreakLast: tm(r.StreakLast), StreakUntil: tm(r.StreakUntil),
		Rechecks: r.Rechecks, LastRecheck: tm(r.LastRecheck),
		EgressIP: r.EgressIP, EgressSeen: tm(r.EgressSeen),
	}, nil
}
