package affinity

import (
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func mustKey(t testing.TB, v string) Key {
	t.Helper()
	k, ok := NewKey("header", v)
	require.True(t, ok)
	return k
}

func cands(ids ...string) []Candidate {
	out := make([]Candidate, len(ids))
	for i, id := range ids {
		out[i] = Candidate{Connection: id, Priority: DefaultPriority}
	}
	return out
}

// sess is the Session an Event gives for k.
func sess(k Key) string {
	d := k.Digest()
	return hex.EncodeToString(d[:])
}

func hourPins(cfg Config) *Pins {
	cfg.TTL = time.Hour
	return New(cfg)
}

// Scenario 8: five requests of one session stay on the first choice, and the
// pin's expiry is a full TTL after its last use.
func TestPinIsSticky(t *testing.T) {
	p := hourPins(Config{})
	k := mustKey(t, "K")
	var first string
	for i := range 5 {
		now := t0.Add(time.Duration(i) * time.Minute)
		got, ok := p.SelectAt("claude", k, cands("A", "B"), now)
		require.True(t, ok)
		if i == 0 {
			first = got
		}
		assert.Equal(t, first, got, "request %d", i)
		// Another session's traffic on the other connection must not move K.
		p.RecordUseAt("B", now)
	}
	pin, ok := p.LookupAt("claude", k, t0.Add(4*time.Minute))
	require.True(t, ok)
	assert.Equal(t, time.Hour, pin.Expires.Sub(pin.LastUsed))
	assert.Equal(t, t0.Add(4*time.Minute), pin.LastUsed)
	assert.Equal(t, t0, pin.Created)
}

// Scenario 9: a pinned connection that is excluded loses the pin for good.
func TestHardRebind(t *testing.T) {
	var changes []Event
	p := hourPins(Config{OnChange: func(e Event) { changes = append(changes, e) }})
	k := mustKey(t, "K")
	require.True(t, p.PinAt(Request{Provider: "claude", Key: k}, "A", t0))

	got, ok := p.SelectAt("claude", k, cands("B"), t0.Add(time.Second))
	require.True(t, ok)
	assert.Equal(t, "B", got)
	pin, _ := p.LookupAt("claude", k, t0.Add(time.Second))
	assert.Equal(t, "B", pin.Connection)

	// A recovers; the session does not go back.
	got, _ = p.SelectAt("claude", k, cands("A", "B"), t0.Add(time.Minute))
	assert.Equal(t, "B", got)

	require.Len(t, changes, 2)
	assert.Equal(t, Event{Reason: "pinned", Provider: "claude", Session: sess(k), Connection: "A", At: t0, Until: t0.Add(time.Hour)}, changes[0])
	assert.Equal(t, Event{Reason: "rebound", Provider: "claude", Session: sess(k), From: "A", Connection: "B", At: t0.Add(time.Second), Until: t0.Add(time.Second + time.Hour)}, changes[1])
}

// Scenario 10: an expired pin is deleted on read and the LRU connection gets
// a new pin created now.
func TestExpiredPinReplaced(t *testing.T) {
	store := NewMemoryStore(0)
	p := hourPins(Config{Store: store})
	k := mustKey(t, "K")
	p.RecordUseAt("A", t0.Add(-time.Hour))
	p.RecordUseAt("B", t0.Add(-2*time.Hour))
	sk := StoreKey{Provider: "claude", Session: k.Digest()}
	now := t0
	require.NoError(t, store.Save(sk, Pin{Connection: "A", Created: now.Add(-2 * time.Hour), LastUsed: now.Add(-time.Hour), Expires: now.Add(-time.Millisecond)}, now))

	_, ok := p.LookupAt("claude", k, now)
	assert.False(t, ok)
	assert.Equal(t, 0, store.Len(), "expired pin deleted on read")

	got, ok := p.SelectAt("claude", k, cands("A", "B"), now)
	require.True(t, ok)
	assert.Equal(t, "B", got, "least recently used")
	pin, ok := p.LookupAt("claude", k, now)
	require.True(t, ok)
	assert.Equal(t, Pin{Connection: "B", Created: now, LastUsed: now, Expires: now.Add(time.Hour)}, pin)
}

// Scenario 11: between never-used connections, the lower priority wins.
func TestNewPinPriority(t *testing.T) {
	p := hourPins(Config{})
	got, ok := p.SelectAt("p", mustKey(t, "K"), []Candidate{{"c3", 3}, {"c1", 1}}, t0)
	require.True(t, ok)
	assert.Equal(t, "c1", got)
}

// Scenario 12: a timeout evicts the pin only when it points at the
// connection that timed out.
func TestEvictOnlyMatchingPin(t *testing.T) {
	var changes []Event
	p := hourPins(Config{OnChange: func(e Event) { changes = append(changes, e) }})
	k := mustKey(t, "K")
	r := Request{Provider: "p", Key: k}
	require.True(t, p.PinAt(r, "B", t0))
	assert.False(t, p.EvictAt("p", k, "A", t0))
	pin, ok := p.LookupAt("p", k, t0)
	require.True(t, ok)
	assert.Equal(t, "B", pin.Connection)

	require.True(t, p.PinAt(r, "A", t0))
	assert.True(t, p.EvictAt("p", k, "A", t0.Add(time.Second)))
	_, ok = p.LookupAt("p", k, t0)
	assert.False(t, ok)
	assert.Equal(t, Event{Reason: "evicted", Provider: "p", Session: sess(k), From: "A", At: t0.Add(time.Second), Removed: true}, changes[len(changes)-1])
	assert.False(t, p.EvictAt("p", k, "A", t0))
	assert.False(t, p.EvictAt("p", Key{}, "A", t0))
	assert.False(t, p.EvictAt("p", k, "", t0))
}

func TestLRUOrder(t *testing.T) {
	tests := []struct {
		name  string
		cands []Candidate
		uses  []struct {
			conn  string
			at    time.Duration
			fresh bool
		}
		want string
	}{
		{name: "candidate order breaks full ties", cands: []Candidate{{"a", 5}, {"b", 5}}, want: "a"},
		{name: "never used first", cands: []Candidate{{"a", 1}, {"b", 9}},
			uses: []struct {
				conn  string
				at    time.Duration
				fresh bool
			}{{"a", 0, false}}, want: "b"},
		{name: "older use first", cands: []Candidate{{"a", 1}, {"b", 9}},
			uses: []struct {
				conn  string
				at    time.Duration
				fresh bool
			}{{"b", 0, false}, {"a", time.Second, false}}, want: "b"},
		{name: "fewer uses on equal time", cands: []Candidate{{"a", 1}, {"b", 9}},
			uses: []struct {
				conn  string
				at    time.Duration
				fresh bool
			}{{"a", 0, false}, {"a", 0, false}, {"b", 0, false}}, want: "b"},
		{name: "priority on equal time and uses", cands: []Candidate{{"a", 2}, {"b", 1}},
			uses: []struct {
				conn  string
				at    time.Duration
				fresh bool
			}{{"a", 0, false}, {"b", 0, false}}, want: "b"},
		{name: "empty ids skipped", cands: []Candidate{{"", 0}, {"b", 9}}, want: "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := hourPins(Config{})
			for _, u := range tt.uses {
				p.usage.record(u.conn, t0.Add(u.at), u.fresh)
			}
			c, ok := p.PlanAt(Request{Provider: "p", Key: mustKey(t, "K")}, tt.cands, t0.Add(time.Hour))
			require.True(t, ok)
			assert.Equal(t, Choice{Connection: tt.want}, c)
		})
	}
}

func TestSelectDisabledOrEmpty(t *testing.T) {
	k := mustKey(t, "K")
	off := New(Config{TTL: time.Hour, ProviderTTL: map[string]time.Duration{"off": 0}})
	tests := []struct {
		name     string
		p        *Pins
		provider string
		key      Key
		c        []Candidate
	}{
		{"zero key", off, "on", Key{}, cands("A")},
		{"no candidates", off, "on", k, nil},
		{"only empty ids", off, "on", k, cands("")},
		{"provider disabled", off, "off", k, cands("A")},
		{"zero config", New(Config{}), "on", k, cands("A")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.p.SelectAt(tt.provider, tt.key, tt.c, t0)
			assert.False(t, ok)
			assert.Equal(t, "", got)
			assert.Empty(t, tt.p.SnapshotAt(t0).Pins)
		})
	}
	// A per-request TTL enables a disabled provider for that request.
	c, ok := off.ChooseAt(Request{Provider: "off", Key: k, TTL: time.Minute}, cands("A"), t0)
	require.True(t, ok)
	assert.Equal(t, Choice{Connection: "A"}, c)
	pin, ok := off.LookupAt("off", k, t0)
	require.True(t, ok)
	assert.Equal(t, t0.Add(time.Minute), pin.Expires)
	assert.False(t, off.PinAt(Request{Provider: "off", Key: k}, "A", t0))
	assert.False(t, off.PinAt(Request{Provider: "on", Key: k}, "", t0))
}

func TestPlanDoesNotCommit(t *testing.T) {
	var changes []Event
	p := hourPins(Config{OnChange: func(e Event) { changes = append(changes, e) }})
	k := mustKey(t, "K")
	r := Request{Provider: "p", Key: k}

	c, ok := p.PlanAt(r, cands("A", "B"), t0)
	require.True(t, ok)
	assert.Equal(t, Choice{Connection: "A"}, c)
	_, ok = p.LookupAt("p", k, t0)
	assert.False(t, ok)
	assert.Empty(t, p.SnapshotAt(t0).Connections)

	// Commit on B (A failed), then plan again: the pin wins.
	require.True(t, p.PinAt(r, "B", t0))
	c, _ = p.PlanAt(r, cands("A", "B"), t0.Add(time.Minute))
	assert.Equal(t, Choice{Connection: "B", Pinned: true}, c)
	pin, _ := p.LookupAt("p", k, t0)
	assert.Equal(t, t0.Add(time.Hour), pin.Expires, "plan does not slide")

	// The pin's connection is not a candidate: reported, not removed.
	c, _ = p.PlanAt(r, cands("A"), t0.Add(time.Minute))
	assert.Equal(t, Choice{Connection: "A", Dropped: "B"}, c)
	pin, ok = p.LookupAt("p", k, t0)
	require.True(t, ok)
	assert.Equal(t, "B", pin.Connection)
	assert.Len(t, changes, 1)

	// Same connection again slides and keeps the creation time.
	require.True(t, p.PinAt(r, "B", t0.Add(30*time.Minute)))
	pin, _ = p.LookupAt("p", k, t0)
	assert.Equal(t, Pin{Connection: "B", Created: t0, LastUsed: t0.Add(30 * time.Minute), Expires: t0.Add(90 * time.Minute)}, pin)
	assert.Len(t, changes, 1)
}

func TestSelectWithNoUsableCandidateDropsPin(t *testing.T) {
	var changes []Event
	p := hourPins(Config{OnChange: func(e Event) { changes = append(changes, e) }})
	k := mustKey(t, "K")
	require.True(t, p.PinAt(Request{Provider: "p", Key: k}, "A", t0))
	c, ok := p.ChooseAt(Request{Provider: "p", Key: k}, cands(""), t0)
	assert.False(t, ok)
	assert.Equal(t, Choice{Dropped: "A"}, c)
	_, ok = p.LookupAt("p", k, t0)
	assert.False(t, ok)
	assert.Equal(t, Event{Reason: "unpinned", Provider: "p", Session: sess(k), From: "A", At: t0, Removed: true}, changes[len(changes)-1])
}

func TestPinsPerProvider(t *testing.T) {
	p := hourPins(Config{})
	k := mustKey(t, "K")
	a, _ := p.SelectAt("openai", k, cands("o1", "o2"), t0)
	b, _ := p.SelectAt("claude", k, cands("c1", "c2"), t0)
	assert.Equal(t, "o1", a)
	assert.Equal(t, "c1", b)
	assert.Len(t, p.SnapshotAt(t0).Pins, 2)
}

func TestUnpin(t *testing.T) {
	var changes []Event
	p := hourPins(Config{OnChange: func(e Event) { changes = append(changes, e) }})
	k := mustKey(t, "K")
	require.True(t, p.PinAt(Request{Provider: "p", Key: k}, "A", t0))
	assert.True(t, p.UnpinAt("p", k, t0))
	assert.False(t, p.UnpinAt("p", k, t0))
	assert.False(t, p.UnpinAt("p", Key{}, t0))
	assert.Equal(t, Event{Reason: "unpinned", Provider: "p", Session: sess(k), From: "A", At: t0, Removed: true}, changes[len(changes)-1])
}

func TestPinTimeJumpsBackwards(t *testing.T) {
	p := hourPins(Config{})
	k := mustKey(t, "K")
	r := Request{Provider: "p", Key: k}
	require.True(t, p.PinAt(r, "A", t0))
	got, ok := p.SelectAt("p", k, cands("A", "B"), t0.Add(-10*time.Minute))
	require.True(t, ok)
	assert.Equal(t, "A", got)
	pin, _ := p.LookupAt("p", k, t0)
	assert.Equal(t, Pin{Connection: "A", Created: t0, LastUsed: t0, Expires: t0.Add(time.Hour)}, pin, "no time passed")
	u := p.SnapshotAt(t0).Connections
	assert.Equal(t, []ConnectionUse{{Connection: "A", LastUsed: t0, Uses: 2}}, u)
}

func TestConsecutiveUses(t *testing.T) {
	p := hourPins(Config{})
	k1, k2 := mustKey(t, "K1"), mustKey(t, "K2")
	p.SelectAt("p", k1, cands("A"), t0) // new pin: 1
	p.SelectAt("p", k1, cands("A"), t0) // hit: 2
	p.RecordUseAt("A", t0)              // 3
	assert.Equal(t, 3, p.SnapshotAt(t0).Connections[0].Uses)
	p.SelectAt("p", k2, cands("A"), t0) // new pin resets to 1
	assert.Equal(t, []ConnectionUse{{Connection: "A", LastUsed: t0, Uses: 1}}, p.SnapshotAt(t0).Connections)
	p.RecordUseAt("", t0)
	assert.Len(t, p.SnapshotAt(t0).Connections, 1)
}

func TestSnapshot(t *testing.T) {
	p := hourPins(Config{})
	k := mustKey(t, "K")
	p.SelectAt("b", k, cands("B1"), t0)
	p.SelectAt("a", k, cands("A1"), t0.Add(time.Minute))
	s := p.SnapshotAt(t0.Add(2 * time.Minute))
	d := k.Digest()
	assert.Equal(t, Snapshot{
		At: t0.Add(2 * time.Minute),
		Pins: []PinInfo{
			{Provider: "a", Session: fmt.Sprintf("%x", d), Connection: "A1", Created: t0.Add(time.Minute), LastUsed: t0.Add(time.Minute), Expires: t0.Add(61 * time.Minute), Remaining: 59 * time.Minute},
			{Provider: "b", Session: fmt.Sprintf("%x", d), Connection: "B1", Created: t0, LastUsed: t0, Expires: t0.Add(time.Hour), Remaining: 58 * time.Minute},
		},
		Connections: []ConnectionUse{{"A1", t0.Add(time.Minute), 1}, {"B1", t0, 1}},
	}, s)
	assert.Empty(t, p.SnapshotAt(t0.Add(2*time.Hour)).Pins)
}

func TestSetTTL(t *testing.T) {
	p := New(Config{})
	assert.Equal(t, time.Duration(0), p.TTLFor("x", 0))
	providers := map[string]time.Duration{"y": 30 * time.Hour, "z": 0, "n": -1}
	p.SetTTL(48*time.Hour, providers)
	assert.Len(t, providers, 3, "the caller's map is untouched")
	assert.Equal(t, maxTTL, p.TTLFor("x", 0))
	assert.Equal(t, maxTTL, p.TTLFor("y", 0))
	assert.Equal(t, time.Duration(0), p.TTLFor("z", 0))
	assert.Equal(t, maxTTL, p.TTLFor("n", 0))
	_, ok := p.SelectAt("x", mustKey(t, "K"), cands("A"), t0)
	assert.True(t, ok)
	p.SetTTL(0, nil)
	_, ok = p.SelectAt("x", mustKey(t, "K"), cands("A"), t0)
	assert.False(t, ok)
}

func TestUsageBounded(t *testing.T) {
	p := New(Config{TTL: time.Hour, MaxConnections: 32})
	for i := range 1000 {
		p.RecordUseAt(fmt.Sprint("c", i), t0.Add(time.Duration(i)*time.Second))
	}
	conns := p.SnapshotAt(t0).Connections
	assert.LessOrEqual(t, len(conns), 32)
	for _, c := range conns {
		assert.GreaterOrEqual(t, c.LastUsed, t0.Add(700*time.Second), "recent uses are kept: %v", c)
	}
}

type failingStore struct{}

var errStore = fmt.Errorf("store down")

func (failingStore) Load(StoreKey, time.Time) (Pin, bool, error) { return Pin{}, false, errStore }
func (failingStore) Save(StoreKey, Pin, time.Time) error         { return errStore }
func (failingStore) Delete(StoreKey) (bool, error)               { return false, errStore }
func (failingStore) DeleteIf(StoreKey, string) (bool, error)     { return false, errStore }
func (failingStore) List(time.Time) ([]Entry, error)             { return nil, errStore }

func TestStoreErrorsMeanNoPin(t *testing.T) {
	var errs []error
	p := hourPins(Config{Store: failingStore{}, OnError: func(err error) { errs = append(errs, err) }})
	k := mustKey(t, "K")
	got, ok := p.SelectAt("p", k, cands("A", "B"), t0)
	assert.True(t, ok)
	assert.Equal(t, "A", got)
	assert.False(t, p.EvictAt("p", k, "A", t0))
	assert.False(t, p.UnpinAt("p", k, t0))
	assert.Empty(t, p.SnapshotAt(t0).Pins)
	assert.Len(t, errs, 5)
	for _, err := range errs {
		assert.ErrorIs(t, err, errStore)
	}
}

func TestSelectHitAllocatesNothing(t *testing.T) {
	p := hourPins(Config{})
	k := mustKey(t, "K")
	c := cands("A", "B", "C")
	_, _ = p.SelectAt("p", k, c, t0)
	now := t0
	allocs := testing.AllocsPerRun(1000, func() {
		now = now.Add(time.Millisecond)
		if _, ok := p.SelectAt("p", k, c, now); !ok {
			t.Fatal("no pin")
		}
	})
	assert.Zero(t, allocs, "SelectAt hit")
	allocs = testing.AllocsPerRun(1000, func() {
		if _, ok := p.PlanAt(Request{Provider: "p", Key: k}, c, now); !ok {
			t.Fatal("no pin")
		}
	})
	assert.Zero(t, allocs, "PlanAt hit")
	allocs = testing.AllocsPerRun(1000, func() {
		if !p.PinAt(Request{Provider: "p", Key: k}, "A", now) {
			t.Fatal("not pinned")
		}
	})
	assert.Zero(t, allocs, "PinAt same connection")
	allocs = testing.AllocsPerRun(1000, func() {
		if p.TTLFor("p", 0) != time.Hour {
			t.Fatal("ttl")
		}
	})
	assert.Zero(t, allocs, "TTLFor")
}

func TestPinsConcurrent(t *testing.T) {
	p := New(Config{TTL: time.Hour, MaxPins: 128, MaxConnections: 4})
	keys := make([]Key, 50)
	for i := range keys {
		keys[i] = mustKey(t, fmt.Sprint("k", i))
	}
	c := cands("A", "B", "C", "D", "E")
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 500 {
				now := t0.Add(time.Duration(i) * time.Second)
				k := keys[(g*7+i)%len(keys)]
				r := Request{Provider: fmt.Sprint("p", i%2), Key: k}
				switch i % 5 {
				case 0:
					if got, ok := p.SelectAt(r.Provider, k, c[i%3:], now); !ok || indexOf(c[i%3:], got) < 0 {
						t.Errorf("select %q %v", got, ok)
					}
				case 1:
					p.PlanAt(r, c, now)
				case 2:
					p.PinAt(r, c[g%5].Connection, now)
				case 3:
					p.EvictAt(r.Provider, k, "A", now)
				default:
					p.SnapshotAt(now)
				}
			}
		})
	}
	wg.Wait()
	s := p.SnapshotAt(t0)
	assert.LessOrEqual(t, len(s.Pins), 128)
	assert.LessOrEqual(t, len(s.Connections), 5)
}

// countingStore counts the writes that reach a MemoryStore.
type countingStore struct {
	*MemoryStore
	saves int
}

func (s *countingStore) Save(k StoreKey, p Pin, now time.Time) error {
	s.saves++
	return s.MemoryStore.Save(k, p, now)
}

// A hit rewrites the stored pin only when it would slide it by at least a
// second (or a sixteenth of a short TTL), so a busy session does not write
// its pin on every request, yet its pin never runs out while it is in use.
func TestHitSlidesInSteps(t *testing.T) {
	store := &countingStore{MemoryStore: NewMemoryStore(0)}
	p := New(Config{TTL: time.Hour, Store: store})
	k := mustKey(t, "K")
	c := cands("A", "B")
	_, ok := p.SelectAt("p", k, c, t0)
	require.True(t, ok)
	require.Equal(t, 1, store.saves)

	for i := 1; i <= 999; i++ {
		got, ok := p.SelectAt("p", k, c, t0.Add(time.Duration(i)*time.Millisecond))
		require.True(t, ok)
		require.Equal(t, "A", got)
	}
	assert.Equal(t, 1, store.saves, "uses within a second of the last write")
	pin, _ := p.LookupAt("p", k, t0)
	assert.Equal(t, Pin{Connection: "A", Created: t0, LastUsed: t0, Expires: t0.Add(time.Hour)}, pin)
	assert.Equal(t, 1000, p.SnapshotAt(t0).Connections[0].Uses, "every use is counted")

	now := t0.Add(time.Second)
	p.SelectAt("p", k, c, now)
	assert.Equal(t, 2, store.saves)
	pin, _ = p.LookupAt("p", k, now)
	assert.Equal(t, Pin{Connection: "A", Created: t0, LastUsed: now, Expires: now.Add(time.Hour)}, pin)

	// PinAt after a success follows the same rule.
	require.True(t, p.PinAt(Request{Provider: "p", Key: k}, "A", now.Add(500*time.Millisecond)))
	assert.Equal(t, 2, store.saves)
	require.True(t, p.PinAt(Request{Provider: "p", Key: k}, "A", now.Add(time.Second)))
	assert.Equal(t, 3, store.saves)

	// A longer per-request TTL slides the expiry at once.
	later := now.Add(time.Second + time.Millisecond)
	c2, ok := p.ChooseAt(Request{Provider: "p", Key: k, TTL: 2 * time.Hour}, c, later)
	require.True(t, ok)
	assert.True(t, c2.Pinned)
	assert.Equal(t, 4, store.saves)
	pin, _ = p.LookupAt("p", k, later)
	assert.Equal(t, later.Add(2*time.Hour), pin.Expires)
}

// With a short TTL the step shrinks to TTL/16: a session used a little more
// often than its TTL keeps its pin.
func TestShortTTLPinStaysAlive(t *testing.T) {
	p := New(Config{TTL: time.Second})
	k := mustKey(t, "K")
	c := cands("A", "B")
	_, ok := p.SelectAt("p", k, c, t0)
	require.True(t, ok)
	now := t0
	for range 20 {
		now = now.Add(900 * time.Millisecond)
		ch, ok := p.ChooseAt(Request{Provider: "p", Key: k}, c, now)
		require.True(t, ok)
		require.True(t, ch.Pinned, "pin lost at %v", now.Sub(t0))
	}
	pin, ok := p.LookupAt("p", k, now)
	require.True(t, ok)
	assert.Equal(t, now.Add(time.Second), pin.Expires)
}
