package combo

import (
	"cmp"
	crand "crypto/rand"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
	"unsafe"
)

// lockedRand is a random source shared by strategies; mu guards r.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

// newLockedRand wraps src, or a ChaCha8 source seeded from crypto/rand when
// src is nil.
func newLockedRand(src rand.Source) *lockedRand {
	if src == nil {
		var seed [32]byte
		_, _ = crand.Read(seed[:]) // never fails; it aborts the program instead
		src = rand.NewChaCha8(seed)
	}
	return &lockedRand{r: rand.New(src)}
}

// defaultRand is the source of strategies built as zero values.
var defaultRand = sync.OnceValue(func() *lockedRand { return newLockedRand(nil) })

// orDefault returns l, or the process-wide secure source when l is nil.
func (l *lockedRand) orDefault() *lockedRand {
	if l != nil {
		return l
	}
	return defaultRand()
}

// shuffle is a Fisher–Yates shuffle of ts; the caller holds l.mu.
func (l *lockedRand) shuffle(ts []*Target) {
	for i := len(ts) - 1; i > 0; i-- {
		j := l.r.IntN(i + 1)
		ts[i], ts[j] = ts[j], ts[i]
	}
}

// statsOf reads t's statistics, or zero statistics when p has no signals.
func statsOf(p *Pick, t *Target) Stats {
	if p.Signals == nil {
		return Stats{}
	}
	return p.Signals.Stats(t)
}

// toFront moves ts[i] to the front; the targets before it shift back by one,
// the others keep their places.
func toFront(ts []*Target, i int) {
	if i <= 0 || i >= len(ts) {
		return
	}
	t := ts[i]
	copy(ts[1:i+1], ts[:i])
	ts[0] = t
}

// keyed is a target with its sort key.
type keyed struct {
	key float64
	n   int64
	t   *Target
}

// stackKeys is how many targets a strategy sorts in a stack buffer; longer
// lists use pooled buffers.
const stackKeys = 16

var keyedPool = sync.Pool{New: func() any { s := make([]keyed, 0, 64); return &s }}

// keysFor returns a key buffer of length n: buf's storage when it fits, a
// pooled one otherwise (returned as pooled, to give back with putKeys).
func keysFor(buf *[stackKeys]keyed, n int) (ks []keyed, pooled *[]keyed) {
	if n <= stackKeys {
		return buf[:n], nil
	}
	pooled = keyedPool.Get().(*[]keyed)
	if cap(*pooled) < n {
		*pooled = make([]keyed, n)
	}
	return (*pooled)[:n], pooled
}

// putKeys gives a pooled buffer back.
func putKeys(pooled *[]keyed) {
	if pooled == nil {
		return
	}
	clear((*pooled)[:cap(*pooled)])
	keyedPool.Put(pooled)
}

func byKey(a, b keyed) int { return cmp.Compare(a.key, b.key) }

// sortKeyed sorts ks by ascending key (NaN first, as [cmp.Compare] orders
// floats), keeping the order of equal keys, and writes the targets back to
// ts. Short lists, the usual case, are insertion sorted in place.
func sortKeyed(ts []*Target, ks []keyed) {
	if len(ks) <= stackKeys {
		for i := 1; i < len(ks); i++ {
			k := ks[i]
			j := i
			for ; j > 0 && cmp.Less(k.key, ks[j-1].key); j-- {
				ks[j] = ks[j-1]
			}
			ks[j] = k
		}
	} else {
		slices.SortStableFunc(ks, byKey)
	}
	for i := range ks {
		ts[i] = ks[i].t
	}
}

// comboStates keeps one T per combo name, at most max of them: a new combo
// evicts the one created first. The caller synchronises access.
type comboStates[T any] struct {
	m   map[string]*comboState[T]
	seq uint64
	// last is the state asked for most recently, under lastName: a
	// router usually serves one combo many times in a row.
	last     *comboState[T]
	lastName string
}

type comboState[T any] struct {
	v   T
	seq uint64
}

// get returns name's state, creating it.
func (c *comboStates[T]) get(name string, max int) *T {
	if c.last != nil && c.lastName == name {
		return &c.last.v
	}
	if s, ok := c.m[name]; ok {
		c.last, c.lastName = s, name
		return &s.v
	}
	if c.m == nil {
		c.m = make(map[string]*comboState[T])
	}
	if len(c.m) >= max {
		oldest, first := "", true
		var seq uint64
		for k, s := range c.m {
			if first || s.seq < seq {
				oldest, seq, first = k, s.seq, false
			}
		}
		delete(c.m, oldest)
	}
	c.seq++
	s := &comboState[T]{seq: c.seq}
	c.m[name] = s
	c.last, c.lastName = s, name
	return &s.v
}

// comboName is p's combo name, "" when it has none.
func comboName(p *Pick) string {
	if p.Combo == nil {
		return ""
	}
	return p.Combo.Name
}

// maxStrategyCombos bounds the per-combo state of a strategy.
const maxStrategyCombos = 4096

// instant is a time prepared for many subtractions: until(u) equals
// u.Sub(t) without re-deriving t's clock fields on every call.
type instant struct {
	t    time.Time
	sec  int64 // Unix seconds of t
	nsec int64 // nanoseconds within sec
	mono bool  // t carries a monotonic clock reading
}

func newInstant(t time.Time) instant {
	// Round(0) strips the monotonic reading, so it changes t exactly when
	// t has one.
	return instant{t: t, sec: t.Unix(), nsec: int64(t.Nanosecond()), mono: t != t.Round(0)}
}

// maxUntilSecs bounds the seconds difference that until computes itself;
// wider ones (which may saturate) go through time.Time.Sub.
const maxUntilSecs = 1 << 33

// until returns u.Sub(i.t).
func (i *instant) until(u time.Time) time.Duration {
	if i.mono && u != u.Round(0) { // both monotonic: Sub uses those readings
		return u.Sub(i.t)
	}
	d := u.Unix() - i.sec
	if d > maxUntilSecs || d < -maxUntilSecs {
		return u.Sub(i.t)
	}
	return time.Duration(d)*time.Second + time.Duration(int64(u.Nanosecond())-i.nsec)
}

// is reports whether k is t's identity. Strings that share storage (a
// target's fields are usually the very strings its key was built from) are
// equal without comparing their bytes.
func (k *targetKey) is(t *Target) bool {
	return sameString(k.connection, t.Connection) && sameString(k.model, t.Model) &&
		sameString(k.provider, t.Provider)
}

// sameString is a == b, without a call to compare bytes when both strings
// share storage.
func sameString(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}
