package sqlitestate

import (
	"time"

	"github.com/routeguard/routeguard/affinity"
)

// Pins returns the session pin store, for affinity.Config.Store:
//
//	pins := affinity.New(affinity.Config{TTL: time.Hour, Store: st.Pins()})
//
// It is an affinity.MemoryStore restored from the file by Open (live pins
// only, with their creation, last use and expiry), so a pin lookup is a map
// lookup with no SQL. Every pin saved (made, moved, or slid, which Pins
// does at most about once a second per busy session) and every pin deleted
// is queued in the outbox and written by Run. Pins the memory store drops to
// stay within its bound, or because they died, are not deleted from the
// file one by one; the retention sweep deletes rows once they expire.
func (s *State) Pins() affinity.Store { return s.pins }

// pinStore wraps an affinity.MemoryStore and reports its writes to the
// outbox.
type pinStore struct {
	inner *affinity.MemoryStore
	ob    *outbox
}

var _ affinity.Store = (*pinStore)(nil)

func newPinStore(ob *outbox) *pinStore {
	return &pinStore{inner: affinity.NewMemoryStore(0), ob: ob}
}

// pinKey is the outbox key of a pin: the provider, a NUL, the digest.
func pinKey(k affinity.StoreKey) okey {
	return okey{kindPin, k.Provider + "\x00" + string(k.Session[:])}
}

func splitPinKey(key string) (provider string, session []byte) {
	n := len(key) - 32 - 1
	return key[:n], []byte(key[n+1:])
}

// Load implements affinity.Store. It reads memory only.
func (p *pinStore) Load(key affinity.StoreKey, now time.Time) (affinity.Pin, bool, error) {
	return p.inner.Load(key, now)
}

// Save implements affinity.Store.
func (p *pinStore) Save(key affinity.StoreKey, pin affinity.Pin, now time.Time) error {
	if err := p.inner.Save(key, pin, now); err != nil {
		return err
	}
	p.ob.put(pinKey(key), op{val: pin})
	return nil
}

// Delete implements affinity.Store.
func (p *pinStore) Delete(key affinity.StoreKey) (bool, error) {
	ok, err := p.inner.Delete(key)
	if ok {
		p.ob.put(pinKey(key), op{del: true})
	}
	return ok, err
}

// DeleteIf implements affinity.Store.
func (p *pinStore) DeleteIf(key affinity.StoreKey, connection string) (bool, error) {
	ok, err := p.inner.DeleteIf(key, connection)
	if ok {
		p.ob.put(pinKey(key), op{del: true})
	}
	return ok, err
}

// List implements affinity.Store.
func (p *pinStore) List(now time.Time) ([]affinity.Entry, error) { return p.inner.List(now) }

func init() {
	tables[kindPin] = table{
		upsert: `INSERT INTO pins (provider, session, connection_id, created_at, last_used_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
		         ON CONFLICT (provider, session) DO UPDATE SET connection_id = excluded.connection_id,
		         created_at = excluded.created_at, last_used_at = excluded.last_used_at, expires_at = excluded.expires_at`,
		del: `DELETE FROM pins WHERE provider = ?1 AND session = ?2`,
		encode: func(key string, v any) ([]any, error) {
			pin := v.(affinity.Pin)
			prov, sess := splitPinKey(key)
			return []any{prov, sess, pin.Connection, ns(pin.Created), ns(pin.LastUsed), ns(pin.Expires)}, nil
		},
		delArgs: func(key string) []any {
			prov, sess := splitPinKey(key)
			return []any{prov, sess}
		},
	}
}
