package redisstate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/internal/config"
	"github.com/routeguard/routeguard/lockout"
)

// ReplicatorConfig configures a [Replicator]. The zero value gives the
// defaults.
type ReplicatorConfig struct {
	// OutboxSize bounds the records waiting to be written, one per key
	// (a later change of a key replaces the waiting one). A change of a
	// new key while the outbox is full is dropped and counted. Default
	// 10 000; range 16..1 000 000.
	OutboxSize int
	// MaxBatch is how many records one script call writes. Default 128;
	// range 1..1000.
	MaxBatch int
	// StreamLen is roughly how many events the stream {<ns>:ev}:log keeps
	// (XADD MAXLEN ~). A replica that falls further behind resyncs from
	// the snapshot. Default 100 000; range 1000..10 000 000.
	StreamLen int
	// Block is how long one XREAD waits for events; the reader also checks
	// the dataset epoch and the stream's end about once a second while
	// idle. Default 500 ms; range 10 ms..5 s.
	Block time.Duration
	// Retention is how long a record outlives its end in the snapshot
	// (terminal cooldowns have no end and stay until reset). Default 1 h;
	// range 1 min..7 days.
	Retention time.Duration
	// PinScan is how often the writer looks for pins that slid into a
	// new quarter of their lifetime, for pins shared through
	// [Replicator.OnPinChange] (a pin store wrapped by [Replicator.Pins]
	// shares its slides as they happen). Default 15 s; range 1 s..10 min.
	PinScan time.Duration
	// OnApply, if set, is called after each record from another replica
	// changed local state, on the reader's goroutine; it must not block.
	OnApply func(Applied)
	// OnResync, if set, is called after each resync from the snapshot, on
	// the reader's goroutine; it must not block.
	OnResync func(Resync)
}

// Normalize returns a copy of c with every default filled in and every
// field clamped into its range.
func (c ReplicatorConfig) Normalize() ReplicatorConfig {
	c.OutboxSize = config.Int(c.OutboxSize, 10000, 16, 1000000)
	c.MaxBatch = config.Int(c.MaxBatch, 128, 1, 1000)
	c.StreamLen = config.Int(c.StreamLen, 100000, 1000, 10000000)
	c.Block = config.Dur(c.Block, 500*time.Millisecond, 10*time.Millisecond, 5*time.Second)
	c.Retention = config.Dur(c.Retention, time.Hour, time.Minute, 7*24*time.Hour)
	c.PinScan = config.Dur(c.PinScan, 15*time.Second, time.Second, 10*time.Minute)
	return c
}

// Applied describes one record of another replica that changed local
// state.
type Applied struct {
	// Kind is "breaker", "cooldown", "lockout" or "pin".
	Kind string
	// Key is the breaker's provider, the cooldown's connection, the
	// lockout's provider, connection and model joined by NUL, or the pin's
	// provider and hex session digest joined by NUL.
	Key string
	// Replica is the writer's replica id.
	Replica string
	// Lag is the apply time minus the time the server logged the record
	// (the stream id's milliseconds); zero for records from a resync.
	Lag time.Duration
	// At is the apply time.
	At time.Time
}

// Resync describes one resync from the snapshot.
type Resync struct {
	// Reason is "start", "epoch" (Redis lost its data or another dataset
	// took over), "gap" (events were missed: a sequence gap) or "trim"
	// (the stream lost the events this replica read).
	Reason string
	// Records is the number of snapshot records read, Republished the
	// number of local records queued again after an epoch change.
	Records, Republished int
	At                   time.Time
}

// ReplicationStats is the replicator's state for metrics.
type ReplicationStats struct {
	// Published counts records written, Applied records of other replicas
	// that changed local state, Dropped changes lost to a full outbox,
	// Errors failed remote calls, Resyncs resyncs from the snapshot.
	Published, Applied, Dropped, Errors, Resyncs int64
	// Pending is the number of records in the outbox.
	Pending int
	// Lag is the lag of the last applied record (see [Applied]).
	Lag time.Duration
	// Staleness is the time since the last successful read of the stream
	// (what this replica may have missed at most, plus the propagation
	// lag); zero before the first read.
	Staleness time.Duration
	// Degraded reports that the last remote call failed ([State.Degraded]).
	Degraded bool
}

// Layers names the local state a [Replicator] applies records of other
// replicas to, and republishes after Redis lost its data. Nil fields are
// neither applied to nor republished.
type Layers struct {
	Breakers *breaker.Set
	// Gate is the provider cooldown gate (breaker.NewGate) whose OnChange
	// is [Replicator.OnGateChange].
	Gate *breaker.Gate
	// Cooldowns is the store of the cooldown Tracker (cooldown.Config.Store),
	// written directly, so that applied records raise no Tracker event.
	Cooldowns cooldown.Store
	Lockouts  *lockout.Lockout
	// Pins is the pin store: the one given to affinity.Config.Store of a
	// Pins whose OnChange is [Replicator.OnPinChange], or the wrapper
	// [Replicator.Pins] returns.
	Pins affinity.Store
}

// Replicator shares breaker open periods, cooldowns and terminal states,
// model lockouts and session pins between the replicas of one Redis. Each
// replica applies a change locally first (the layers' OnChange hooks call
// the replicator), then the replicator writes it in the background: one
// script merges it into the snapshot hash and appends it to the stream.
// Every replica reads the stream and merges what the others wrote into its
// own layers, which the hot path reads; no request ever waits on Redis.
//
// The merge is per key and deterministic: the greater of two records
// wins, whatever the order or the number of times they arrive. A breaker
// opened elsewhere is open here until the end of that open period, then
// the local half-open probe decides; a breaker reset (Set.ResetAt)
// anywhere closes it everywhere, unless it opened again after the reset. A
// provider or connection cooling in a gate (breaker.Gate) cools here until
// the later of the two ends, never shorter. A cooldown takes the later end, a
// terminal state stays until a reset (Tracker.ResetAt) anywhere, a
// cooldown clear (Tracker.ClearAt) lifts cooldowns everywhere, a lockout
// never shortens (a ClearAt lifts it everywhere), and pins follow the last
// writer by (last use, replica).
//
// Wire the hooks, then call Run with the layers:
//
//	rep := st.Replicator(redisstate.ReplicatorConfig{})
//	set := breaker.NewSet(breaker.Config{OnChange: rep.OnBreakerChange})
//	gate := breaker.NewGate(breaker.GateConfig{Enabled: true, OnChange: rep.OnGateChange})
//	store := cooldown.NewMemoryStore()
//	cd := cooldown.New(cooldown.Config{Store: store, OnChange: rep.OnCooldownChange})
//	lk := lockout.New(lockout.Config{Enabled: true, OnChange: rep.OnLockoutChange})
//	pinStore := affinity.NewMemoryStore(0)
//	pins := affinity.New(affinity.Config{Store: pinStore, OnChange: rep.OnPinChange})
//	go rep.Run(ctx, redisstate.Layers{Breakers: set, Gate: gate, Cooldowns: store, Lockouts: lk, Pins: pinStore})
//	defer rep.Close()
type Replicator struct {
	s       *State
	cfg     ReplicatorConfig
	replica string
	keys    []string

	mu   sync.Mutex
	seen map[string]string   // field → the greatest value known
	echo map[string]struct{} // fields whose local clear is being applied
	// epochKnown is the dataset epoch of the last resync.
	epochKnown string

	ob repOutbox

	lay    atomic.Pointer[Layers] // set by Run
	runMu  sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}

	resyncReq atomic.Bool // the writer saw another epoch
	wakeRead  chan struct{}

	published, applied, dropped, errs, resyncs atomic.Int64
	lag, lastRead                              atomic.Int64
}

// Replicator returns the replicator of this State's namespace. It makes no
// remote call and starts nothing; see [Replicator.Run].
func (s *State) Replicator(c ReplicatorConfig) *Replicator {
	c = c.Normalize()
	p := "{" + s.cfg.Namespace + ":ev}:"
	r := &Replicator{
		s: s, cfg: c,
		replica:  cleanReplica(s.cfg.Replica),
		keys:     []string{p + "epoch", p + "seq", p + "snap", p + "exp", p + "log"},
		seen:     make(map[string]string),
		echo:     make(map[string]struct{}),
		wakeRead: make(chan struct{}, 1),
	}
	r.ob.init(c.OutboxSize, &r.dropped)
	return r
}

// Stats returns the replicator's counters and lag.
func (r *Replicator) Stats() ReplicationStats {
	st := ReplicationStats{
		Published: r.published.Load(), Applied: r.applied.Load(), Dropped: r.dropped.Load(),
		Errors: r.errs.Load(), Resyncs: r.resyncs.Load(), Pending: r.ob.len(),
		Lag: time.Duration(r.lag.Load()), Degraded: r.s.Degraded(),
	}
	if w := r.lastRead.Load(); w != 0 {
		st.Staleness = max(r.s.cfg.Now().Sub(time.Unix(0, w)), 0)
	}
	return st
}

func (r *Replicator) now() time.Time { return r.s.cfg.Now() }

// l returns the layers given to Run (none before).
func (r *Replicator) l() *Layers {
	if l := r.lay.Load(); l != nil {
		return l
	}
	return &Layers{}
}

// ---- publishing -------------------------------------------------------

// offer queues v for field f if it raises what this replica knows of f
// (local changes that another replica's record already covers are not
// written). ttl is the record's time to live past now in the snapshot
// ("inf": until replaced).
func (r *Replicator) offer(f, v, ttl string) {
	r.mu.Lock()
	if v <= r.seen[f] {
		r.mu.Unlock()
		return
	}
	r.seen[f] = v
	r.mu.Unlock()
	r.ob.put(f, v, ttl)
}

// version returns the reset version of what this replica knows of f.
func (r *Replicator) version(f string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return resetVersion(r.seen[f])
}

func (r *Replicator) ttl(end time.Time, now time.Time) string {
	d := max(end.Sub(now), 0) + r.cfg.Retention
	return strconv.FormatInt(d.Milliseconds(), 10)
}

func (r *Replicator) reset(f string, now time.Time) {
	v := encodeValue([3]uint64{r.version(f) + 1, 0, 0}, r.replica, repPayload{Reset: true})
	r.offer(f, v, r.ttl(now, now))
}

// breakerReset is the breaker.Event.Cause of a change made by a reset.
const breakerReset = "reset"

// OnBreakerChange is the hook for breaker.Config.OnChange of one Set. It
// queues every transition to Open (the end of the open period, the open
// cycles, the last failure's kind) and every reset (Set.ResetAt: the
// breaker closes everywhere, unless it opened again after the reset), and
// returns at once; other transitions, a closing probe among them, stay
// local.
func (r *Replicator) OnBreakerChange(e breaker.Event) {
	if e.Removed || e.Provider == "" {
		return
	}
	f := kindBreaker + ":" + e.Provider
	r.mu.Lock()
	_, applying := r.echo[f]
	r.mu.Unlock()
	switch {
	case applying:
	case e.Cause == breakerReset:
		r.reset(f, e.At)
	case e.To == breaker.Open && !e.Until.IsZero():
		v := encodeValue([3]uint64{r.version(f), ordNum(e.Until.UnixNano()), uint64(max(e.OpenCycles, 0))}, r.replica,
			repPayload{Kind: int(e.Kind), Level: e.Failures, At: repNanos(e.At)})
		r.offer(f, v, r.ttl(e.Until, e.At))
	}
}

// OnGateChange is the hook for breaker.GateConfig.OnChange. It queues
// every cooldown of a provider or connection that starts or is extended
// (its end, the failures behind it) and returns at once; the end of a
// cooldown and removals stay local: a cooldown ends by itself.
func (r *Replicator) OnGateChange(e breaker.Event) {
	if e.Removed || e.To != breaker.Open || e.Until.IsZero() || e.Provider == "" {
		return
	}
	f := kindGate + ":" + e.Provider + "\x00" + e.Connection
	r.mu.Lock()
	_, applying := r.echo[f]
	r.mu.Unlock()
	if applying {
		return
	}
	v := encodeValue([3]uint64{r.version(f), ordNum(e.Until.UnixNano()), 0}, r.replica,
		repPayload{Level: e.Failures, At: repNanos(e.LastFailure)})
	r.offer(f, v, r.ttl(e.Until, e.At))
}

// OnCooldownChange is the hook for cooldown.Config.OnChange. It queues
// each cooldown that starts or is extended, each terminal state, each
// clear (Tracker.ClearAt: the cooldown is lifted everywhere) and reset
// (Tracker.ResetAt: terminal states too), and returns at once. Successes
// and drops stay local: a cooldown ends by itself.
func (r *Replicator) OnCooldownChange(e cooldown.Event) {
	if e.Conn == "" {
		return
	}
	switch e.Action {
	case cooldown.Reset:
		r.reset(kindCooling+":"+e.Conn, e.At)
		r.reset(kindTerminal+":"+e.Conn, e.At)
	case cooldown.Cleared:
		r.reset(kindCooling+":"+e.Conn, e.At)
	case cooldown.Episode, cooldown.Extended, cooldown.Terminated:
		switch {
		case e.State.Terminal():
			f := kindTerminal + ":" + e.Conn
			end, ttl := uint64(repNever), "inf"
			if !e.Until.IsZero() {
				end, ttl = ordNum(e.Until.UnixNano()), r.ttl(e.Until, e.At)
			}
			v := encodeValue([3]uint64{r.version(f), 1, end}, r.replica,
				repPayload{State: e.State.String(), Reason: e.Reason, Level: e.Level, At: repNanos(e.At), Until: repNanos(e.Until)})
			r.offer(f, v, ttl)
		case e.State == cooldown.Cooling && e.Until.After(e.At):
			f := kindCooling + ":" + e.Conn
			v := encodeValue([3]uint64{r.version(f), ordNum(e.Until.UnixNano()), 0}, r.replica,
				repPayload{Reason: e.Reason, Level: e.Level})
			r.offer(f, v, r.ttl(e.Until, e.At))
		}
	}
}

// OnLockoutChange is the hook for lockout.Config.OnChange. It queues each
// lock made or extended and each ClearAt (lifted everywhere), and returns
// at once; decay and eviction stay local.
func (r *Replicator) OnLockoutChange(e lockout.Event) {
	f := kindLockout + ":" + e.Provider + "\x00" + e.Connection + "\x00" + e.Model
	r.mu.Lock()
	_, applying := r.echo[f]
	r.mu.Unlock()
	switch {
	case applying: // the echo of a remote record being applied
	case e.Kind == lockout.EventCleared:
		r.reset(f, e.At)
	case e.Kind == lockout.EventLocked && !e.Removed && !e.Until.IsZero():
		v := encodeValue([3]uint64{r.version(f), ordNum(e.Until.UnixNano()), 0}, r.replica,
			repPayload{State: string(e.Reason), Level: e.FailureCount, Kind: int(e.Scope), At: repNanos(e.LockedAt)})
		r.offer(f, v, r.ttl(e.Until, e.At))
	}
}

// OnPinChange is the hook for affinity.Config.OnChange, for pins whose
// store is given to Layers.Pins unwrapped (an *affinity.MemoryStore keeps
// its lock-free lookup path). It queues each pin made or moved and each
// removal, and returns at once; slides are found by a scan every
// ReplicatorConfig.PinScan. Use it or [Replicator.Pins], not both.
func (r *Replicator) OnPinChange(e affinity.Event) {
	f := kindPin + ":" + e.Provider + "\x00" + e.Session
	k, ok := pinKey(e.Provider + "\x00" + e.Session)
	if !ok {
		return
	}
	if e.Removed {
		if e.From == "" {
			return
		}
		old := affinity.Pin{Connection: e.From}
		r.mu.Lock()
		if d, err := decodeValue(r.seen[f]); err == nil {
			old.LastUsed = orderTime(d.n[0])
		}
		r.mu.Unlock()
		r.pinTombstone(k, old, e.At)
		return
	}
	if e.Connection == "" || e.Until.IsZero() {
		return
	}
	r.offerPin(k, affinity.Pin{Connection: e.Connection, Created: e.At, LastUsed: e.At, Expires: e.Until}, e.At)
}

func (r *Replicator) offerPin(k affinity.StoreKey, pin affinity.Pin, now time.Time) {
	ts := pin.LastUsed
	if ts.IsZero() {
		ts = now
	}
	v := encodeValue([3]uint64{ordNum(ts.UnixNano()), 0, 0}, r.replica, repPayload{
		Conn: pin.Connection, At: repNanos(pin.Created), Used: repNanos(pin.LastUsed), Until: repNanos(pin.Expires)})
	r.offer(pinField(k), v, r.ttl(pin.Expires, now))
}

// pinTombstone queues the deletion of old at now; a deletion is later
// than the pin it deletes, even on a clock that has not moved.
func (r *Replicator) pinTombstone(k affinity.StoreKey, old affinity.Pin, now time.Time) {
	ts := now
	if !ts.After(old.LastUsed) {
		ts = old.LastUsed.Add(time.Nanosecond)
	}
	v := encodeValue([3]uint64{ordNum(ts.UnixNano()), 0, 0}, r.replica, repPayload{Conn: old.Connection, Del: true})
	r.offer(pinField(k), v, r.ttl(ts, ts))
}

// scanPins queues the pins of an unwrapped pin store that this replica
// used since it last shared them (a slide into a new quarter of their
// lifetime, or a pin this replica has and the others do not know).
func (r *Replicator) scanPins(now time.Time) {
	store := r.l().Pins
	if _, wrapped := store.(*repPins); wrapped || store == nil {
		return
	}
	list, err := store.List(now)
	if err != nil {
		return
	}
	for _, e := range list {
		f := pinField(e.Key)
		r.mu.Lock()
		sv := r.seen[f]
		r.mu.Unlock()
		if d, err := decodeValue(sv); err == nil {
			known := affinity.Pin{Connection: d.payload.Conn, Created: repTime(d.payload.At),
				LastUsed: repTime(d.payload.Used), Expires: repTime(d.payload.Until)}
			if !e.Pin.LastUsed.After(orderTime(d.n[0])) ||
				(known.Connection == e.Pin.Connection && !quarterCrossed(known, e.Pin)) {
				continue
			}
		}
		r.offerPin(e.Key, e.Pin, now)
	}
}

// Pins wraps a pin store: pins made, moved or deleted through it are
// queued for the other replicas, and a sliding pin at most about four
// times per lifetime (each quarter of its TTL). Reads go to inner alone,
// but Pins cannot take an *affinity.MemoryStore's faster lookup through a
// wrapper: for that store prefer [Replicator.OnPinChange]. Give the
// wrapper to affinity.Config.Store and to Layers.Pins.
func (r *Replicator) Pins(inner affinity.Store) affinity.Store {
	if inner == nil {
		inner = affinity.NewMemoryStore(0)
	}
	return &repPins{inner: inner, r: r}
}

type repPins struct {
	inner affinity.Store
	r     *Replicator
}

var _ affinity.Store = (*repPins)(nil)

func pinField(k affinity.StoreKey) string {
	return kindPin + ":" + k.Provider + "\x00" + hex.EncodeToString(k.Session[:])
}

func (p *repPins) Load(k affinity.StoreKey, now time.Time) (affinity.Pin, bool, error) {
	return p.inner.Load(k, now)
}

func (p *repPins) Save(k affinity.StoreKey, pin affinity.Pin, now time.Time) error {
	old, had, _ := p.inner.Load(k, now)
	if err := p.inner.Save(k, pin, now); err != nil {
		return err
	}
	if had && old.Connection == pin.Connection && !quarterCrossed(old, pin) {
		return nil
	}
	p.r.offerPin(k, pin, now)
	return nil
}

// quarterCrossed reports whether a slide from old to pin moved its expiry
// into another quarter of its lifetime, counted from its creation.
func quarterCrossed(old, pin affinity.Pin) bool {
	q := pin.Expires.Sub(pin.LastUsed) / 4
	if q <= 0 {
		return true
	}
	return old.Expires.Sub(pin.Created)/q != pin.Expires.Sub(pin.Created)/q
}

func (p *repPins) tombstone(k affinity.StoreKey, old affinity.Pin) {
	p.r.pinTombstone(k, old, p.r.now())
}

func (p *repPins) Delete(k affinity.StoreKey) (bool, error) {
	old, had, _ := p.inner.Load(k, p.r.now())
	ok, err := p.inner.Delete(k)
	if ok && had {
		p.tombstone(k, old)
	}
	return ok, err
}

func (p *repPins) DeleteIf(k affinity.StoreKey, conn string) (bool, error) {
	old, had, _ := p.inner.Load(k, p.r.now())
	ok, err := p.inner.DeleteIf(k, conn)
	if ok {
		if !had || old.Connection != conn {
			old = affinity.Pin{Connection: conn}
		}
		p.tombstone(k, old)
	}
	return ok, err
}

func (p *repPins) List(now time.Time) ([]affinity.Entry, error) { return p.inner.List(now) }

// ---- the outbox ---------------------------------------------------------

type repItem struct{ v, ttl string }

// repOutbox holds the records not written yet, one per field: a later
// record of a field replaces the waiting one when it is greater. It holds
// at most limit fields, counting those being written.
type repOutbox struct {
	mu      sync.Mutex
	pending map[string]repItem
	fly     map[string]struct{} // fields taken and not finished
	held    int                 // fields in pending or fly
	limit   int
	wake    chan struct{}
	dropped *atomic.Int64
}

func (o *repOutbox) init(limit int, dropped *atomic.Int64) {
	o.pending, o.fly, o.limit, o.wake, o.dropped = make(map[string]repItem), make(map[string]struct{}), limit, make(chan struct{}, 1), dropped
}

func (o *repOutbox) put(f, v, ttl string) {
	o.mu.Lock()
	old, inP := o.pending[f]
	_, inF := o.fly[f]
	switch {
	case inP && old.v >= v:
	case !inP && !inF && o.held >= o.limit:
		o.mu.Unlock()
		o.dropped.Add(1)
		return
	default:
		if !inP && !inF {
			o.held++
		}
		o.pending[f] = repItem{v, ttl}
	}
	o.mu.Unlock()
	o.put0()
}

func (o *repOutbox) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.held
}

// take removes up to n records for writing; finish must follow.
func (o *repOutbox) take(n int) (fields []string, items []repItem) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for f, it := range o.pending {
		if len(fields) == n {
			break
		}
		fields, items = append(fields, f), append(items, it)
		delete(o.pending, f)
		o.fly[f] = struct{}{}
	}
	return fields, items
}

// finish ends the write of records taken: written, they are gone (unless
// a newer record of the field is waiting); not written, they wait again
// unless a greater record of the same field arrived meanwhile.
func (o *repOutbox) finish(fields []string, items []repItem, written bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, f := range fields {
		delete(o.fly, f)
		old, inP := o.pending[f]
		switch {
		case written && !inP:
			o.held--
		case !written && (!inP || old.v < items[i].v):
			o.pending[f] = items[i]
		}
	}
}

// ---- running ----------------------------------------------------------

// ErrRunning reports a second concurrent [Replicator.Run].
var ErrRunning = errors.New("redisstate: replicator already running")

// Run replicates until ctx ends or Close is called: one goroutine writes
// the outbox, one reads the stream (it first resyncs from the snapshot).
// It returns nil when stopped, ErrRunning if Run is already running. Redis
// trouble never ends it: failed calls are retried with backoff (through the
// State's breaker) and the outbox keeps the latest record per key.
func (r *Replicator) Run(ctx context.Context, l Layers) error {
	r.runMu.Lock()
	if r.cancel != nil {
		r.runMu.Unlock()
		return ErrRunning
	}
	ctx, cancel := context.WithCancel(ctx)
	r.cancel, r.done = cancel, make(chan struct{})
	r.lay.Store(&l)
	done := r.done
	r.runMu.Unlock()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.readLoop(ctx)
	}()
	r.writeLoop(ctx)
	wg.Wait()
	cancel()
	r.runMu.Lock()
	r.cancel = nil
	r.runMu.Unlock()
	close(done)
	return nil
}

// Close stops Run and waits for it to return. Records still in the
// outbox then are written by one last attempt bounded by the State's
// Timeout, or lost.
func (r *Replicator) Close() error {
	r.runMu.Lock()
	cancel, done := r.cancel, r.done
	r.runMu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return nil
}

// Flush writes the outbox now, from the caller's goroutine, and returns
// the first error (what could not be written stays queued).
func (r *Replicator) Flush(ctx context.Context) error {
	for {
		n, err := r.flushOnce(ctx)
		if err != nil || n == 0 {
			return err
		}
	}
}

// repSleep waits d or until ctx ends; it reports whether ctx is still live.
func repSleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func repBackoff(n int) time.Duration {
	return min(50*time.Millisecond<<min(n, 6), 2*time.Second)
}

func (r *Replicator) writeLoop(ctx context.Context) {
	fails := 0
	scan := time.NewTicker(r.cfg.PinScan)
	defer scan.Stop()
	for {
		select {
		case <-scan.C:
			r.scanPins(r.now())
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), r.s.cfg.Timeout)
			r.Flush(fctx)
			cancel()
			return
		case <-r.ob.wake:
		}
		if err := r.Flush(ctx); err != nil {
			fails++
			if !repSleep(ctx, repBackoff(fails)) {
				continue
			}
			r.ob.put0()
			continue
		}
		fails = 0
	}
}

// put0 wakes the writer without adding anything.
func (o *repOutbox) put0() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// repReply is a script's answer: the dataset epoch, the last sequence
// number, the last stream id and, per item, "" or the stronger value.
type repReply struct {
	epoch string
	seq   int64
	last  string
	olds  []string
}

func (r *Replicator) script(ctx context.Context, fields []string, items []repItem) (repReply, error) {
	args := make([]any, 0, 3+3*len(fields))
	// A fresh epoch each time: a dataset lost and recreated must never
	// come back with the epoch it had.
	b := make([]byte, 12)
	rand.Read(b)
	args = append(args, hex.EncodeToString(b), r.cfg.StreamLen, r.replica)
	for i, f := range fields {
		args = append(args, f, items[i].v, items[i].ttl)
	}
	var res any
	err := r.s.do(ctx, func(ctx context.Context) error {
		var err error
		res, err = repPublishScript.Run(ctx, r.s.rdb, r.keys, args...).Result()
		return err
	})
	if err != nil {
		r.errs.Add(1)
		return repReply{}, err
	}
	return parseReply(res)
}

func parseReply(res any) (repReply, error) {
	a, ok := res.([]any)
	if !ok || len(a) != 4 {
		return repReply{}, errValue
	}
	var rp repReply
	rp.epoch, _ = a[0].(string)
	rp.seq, _ = a[1].(int64)
	rp.last, _ = a[2].(string)
	olds, _ := a[3].([]any)
	for _, o := range olds {
		s, _ := o.(string)
		rp.olds = append(rp.olds, s)
	}
	return rp, nil
}

// flushOnce writes one batch and returns its size.
func (r *Replicator) flushOnce(ctx context.Context) (int, error) {
	fields, items := r.ob.take(r.cfg.MaxBatch)
	if len(fields) == 0 {
		return 0, nil
	}
	rp, err := r.script(ctx, fields, items)
	r.ob.finish(fields, items, err == nil)
	if err != nil {
		return 0, err
	}
	written := 0
	for i, old := range rp.olds {
		if old == "" {
			written++
		} else if i < len(fields) {
			r.apply(fields[i], old, 0, true) // another replica's record is stronger
		}
	}
	r.published.Add(int64(written))
	r.mu.Lock()
	known := r.epochKnown
	r.mu.Unlock()
	if known != "" && rp.epoch != known {
		r.resyncReq.Store(true)
		select {
		case r.wakeRead <- struct{}{}:
		default:
		}
	}
	return len(fields), nil
}

// ---- reading ------------------------------------------------------------

// readState is the reader's position.
type readState struct {
	epoch string
	seq   int64
	id    string
	check time.Time // last idle check, on the local clock
}

func (r *Replicator) readLoop(ctx context.Context) {
	st := readState{}
	need := "start"
	fails := 0
	pruned := time.Now()
	for ctx.Err() == nil {
		if need == "" && r.resyncReq.Swap(false) {
			need = "epoch"
		}
		if need != "" {
			if err := r.resync(ctx, &st, need); err != nil {
				fails++
				repSleep(ctx, repBackoff(fails))
				continue
			}
			need, fails = "", 0
		}
		issued := r.now()
		msgs, err := r.read(ctx, st.id)
		switch {
		case errors.Is(err, redis.Nil):
			r.lastRead.Store(issued.UnixNano())
			if time.Since(st.check) >= time.Second {
				need = r.check(ctx, &st)
			}
			if time.Since(pruned) >= time.Minute {
				r.prune(r.now())
				pruned = time.Now()
			}
			continue
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			fails++
			repSleep(ctx, repBackoff(fails))
			st.check = time.Time{} // check epoch and stream on return
			continue
		}
		fails = 0
		r.lastRead.Store(issued.UnixNano())
		need = r.consume(&st, msgs)
	}
}

// prune forgets the records known of keys whose state ended more than
// Retention before now (terminal states and resets are kept). A record
// forgotten too early heals itself: the script answers a weaker write
// with the stored record, which is applied again.
func (r *Replicator) prune(now time.Time) {
	cut := now.Add(-r.cfg.Retention)
	r.mu.Lock()
	defer r.mu.Unlock()
	for f, v := range r.seen {
		kind, _, _ := splitField(f)
		d, err := decodeValue(v)
		if err != nil {
			delete(r.seen, f)
			continue
		}
		var end time.Time
		switch {
		case d.payload.Reset:
			continue
		case kind == kindBreaker || kind == kindGate || kind == kindCooling || kind == kindLockout:
			end = orderTime(d.n[1])
		case kind == kindPin && d.payload.Del:
			end = orderTime(d.n[0])
		case kind == kindPin:
			end = repTime(d.payload.Until)
		case kind == kindTerminal && d.n[2] != repNever:
			end = orderTime(d.n[2])
		default:
			continue
		}
		if end.Before(cut) {
			delete(r.seen, f)
		}
	}
}

// read is one XREAD BLOCK from id.
func (r *Replicator) read(ctx context.Context, id string) ([]redis.XMessage, error) {
	var out []redis.XMessage
	block := r.cfg.Block
	err := r.s.do(withTimeout(ctx, block+r.s.cfg.Timeout), func(ctx context.Context) error {
		res, err := r.s.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{r.keys[4], id}, Count: 512, Block: block}).Result()
		if err != nil {
			return err
		}
		for _, s := range res {
			out = append(out, s.Messages...)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		r.errs.Add(1)
	}
	return out, err
}

// consume applies messages and returns the reason to resync, if any.
func (r *Replicator) consume(st *readState, msgs []redis.XMessage) string {
	now := r.now()
	for _, m := range msgs {
		f, _ := m.Values["f"].(string)
		v, _ := m.Values["v"].(string)
		e, _ := m.Values["e"].(string)
		rep, _ := m.Values["r"].(string)
		seq, _ := strconv.ParseInt(repStr(m.Values["s"]), 10, 64)
		if e != st.epoch {
			return "epoch"
		}
		if seq != st.seq+1 {
			return "gap"
		}
		st.seq, st.id = seq, m.ID
		if rep == r.replica {
			continue
		}
		var lag time.Duration
		if ms, ok := idMillis(m.ID); ok {
			lag = now.Sub(time.UnixMilli(ms))
		}
		r.apply(f, v, lag, false)
	}
	return ""
}

func repStr(v any) string {
	s, _ := v.(string)
	return s
}

// idMillis returns the milliseconds part of a stream id.
func idMillis(id string) (int64, bool) {
	ms, _, ok := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	return n, ok && err == nil
}

// idLess compares two stream ids.
func idLess(a, b string) bool {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	x, _ := strconv.ParseUint(am, 10, 64)
	y, _ := strconv.ParseUint(bm, 10, 64)
	if x != y {
		return x < y
	}
	x, _ = strconv.ParseUint(as, 10, 64)
	y, _ = strconv.ParseUint(bs, 10, 64)
	return x < y
}

// check compares the dataset epoch and the stream's end with the reader's
// position while idle, and returns the reason to resync, if any.
func (r *Replicator) check(ctx context.Context, st *readState) string {
	st.check = time.Now()
	rp, err := r.script(ctx, nil, nil)
	if err != nil {
		return ""
	}
	switch {
	case rp.epoch != st.epoch:
		return "epoch"
	case idLess(rp.last, st.id):
		return "trim"
	case rp.seq > st.seq && rp.last == st.id:
		return "gap"
	}
	return ""
}

// resync reads the snapshot and merges it, then positions the reader at
// the stream's end as of before the read (records written meanwhile are
// read again from the stream; merging them twice is harmless). After an
// epoch change it queues the local live state again.
func (r *Replicator) resync(ctx context.Context, st *readState, reason string) error {
	rp, err := r.script(ctx, nil, nil)
	if err != nil {
		return err
	}
	n := 0
	var cursor uint64
	for {
		var kv []string
		err := r.s.do(ctx, func(ctx context.Context) error {
			var err error
			kv, cursor, err = r.s.rdb.HScan(ctx, r.keys[2], cursor, "", 1000).Result()
			return err
		})
		if err != nil {
			r.errs.Add(1)
			return err
		}
		for i := 0; i+1 < len(kv); i += 2 {
			r.apply(kv[i], kv[i+1], 0, true)
			n++
		}
		if cursor == 0 {
			break
		}
	}
	r.mu.Lock()
	prev := r.epochKnown
	r.epochKnown = rp.epoch
	r.mu.Unlock()
	if reason == "start" && prev != "" && prev != rp.epoch {
		reason = "epoch"
	}
	republished := 0
	if prev != "" && prev != rp.epoch {
		reason = "epoch"
		republished = r.republish()
	}
	st.epoch, st.seq, st.id, st.check = rp.epoch, rp.seq, rp.last, time.Now()
	r.resyncs.Add(1)
	if h := r.cfg.OnResync; h != nil {
		h(Resync{Reason: reason, Records: n, Republished: republished, At: r.now()})
	}
	return nil
}

// withTimeout marks ctx so that State.do bounds the call by d instead of
// Config.Timeout (a blocking read).
func withTimeout(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, timeoutKey{}, d)
}

type timeoutKey struct{}

// callTimeout returns the bound of one remote call made with ctx.
func (s *State) callTimeout(ctx context.Context) time.Duration {
	if d, ok := ctx.Value(timeoutKey{}).(time.Duration); ok {
		return d
	}
	return s.cfg.Timeout
}
