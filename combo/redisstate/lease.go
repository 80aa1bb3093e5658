package redisstate

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/routeguard/routeguard/lease"
)

var (
	scriptAcquire    = redis.NewScript(leaseAcquire)
	scriptTransition = redis.NewScript(leaseTransition)
	scriptRenew      = redis.NewScript(leaseRenew)
	scriptRelease    = redis.NewScript(leaseRelease)
	scriptInvalidate = redis.NewScript(leaseInvalidate)
	scriptStatus     = redis.NewScript(leaseStatus)
	scriptOccupant   = redis.NewScript(leaseOccupant)
	scriptReconcile  = redis.NewScript(leaseReconcile)
	scriptList       = redis.NewScript(leaseList)
	scriptRestore    = redis.NewScript(leaseRestore)
)

// batch is how many leases one Reconcile or List script handles.
const batch = 1000

// maxMirror bounds the fence mirror's entries.
const maxMirror = 100000

// leaseStore is the lease.Store of [State.Leases].
type leaseStore struct {
	s              *State
	pfx, meta, act string

	mu     sync.RWMutex
	mirror map[lease.OwnerHash]verified
	kept   map[lease.OwnerHash]lease.Lease // live leases this process's lifecycle calls returned
	maxGen uint64                          // the highest generation seen

	// epoch is the dataset epoch this process knows ("" before its first
	// call); proposal the one it stores when Redis has none. epochMu
	// serialises the handling of a changed epoch.
	epoch    atomic.Value
	proposal string
	epochMu  sync.Mutex
}

// verified is a lease as this process last learned it, and when the
// request that learned it was issued (its caller's now).
type verified struct {
	l    lease.Lease
	live bool // false: the owner had no active lease
	at   time.Time
}

func newLeaseStore(s *State) *leaseStore {
	pfx := "{" + s.cfg.Namespace + ":lease}:"
	ls := &leaseStore{s: s, pfx: pfx, meta: pfx + "meta", act: pfx + "act",
		mirror: map[lease.OwnerHash]verified{}, kept: map[lease.OwnerHash]lease.Lease{}}
	var b [8]byte
	rand.Read(b[:])
	ls.proposal = hex.EncodeToString(b[:])
	ls.epoch.Store("")
	return ls
}

// Leases returns the authoritative lease store, for lease.Config.Store.
//
// Every lifecycle call is one Lua script, one round trip, atomic on the
// server: it reads the clock (the server's TIME, or the caller's now with
// Config.CallerClock, never earlier than a time already seen), ends the
// expired leases it touches, applies the lease contract's decision and
// appends the change to the stream {ns:lease}:ev. Validity is always the
// stored expiry, checked in the script; key TTLs only collect garbage.
// Generations are kept per owner in Redis. An owner forgotten after
// Config.Retention starts above a fleet-wide floor that the scripts raise
// as owners age out, so no owner gets a generation twice while Redis keeps
// its data. Only owner digests are stored.
//
// Fence, Owned and Occupant run read-only scripts. With
// Config.FenceStaleness S > 0, Fence answers from leases this process
// verified less than S ago (by its own lifecycle calls or an earlier
// Fence) without a remote call, and asks Redis otherwise, or when the
// answer would be a refusal; while Redis is unreachable it admits the
// leases it verified until their local expiry (expiry − ClockSkew), then
// fails closed. That is safe because a connection freed at t goes to
// another owner only at t + Config.ReleaseQuarantine.
//
// Every script checks the dataset's epoch first: when Redis lost its data
// (a restart without persistence, a failover to a replica without it),
// the first call of each process that notices re-seeds the leases its
// lifecycle calls returned and that are still live (same generation and
// expiry, unless the owner or connection was taken meanwhile), drops its
// fence mirror, and reports Config.OnDataLoss; new leases are refused for
// ReleaseQuarantine after the loss is noticed, for the other processes to
// re-seed theirs. The generation floor is raised above every generation
// the re-seeding process saw.
//
// When Redis is unreachable (timeout, breaker open) every call fails with
// a *lease.Error of CodeServiceUnavailable (503).
func (s *State) Leases() lease.Store { return s.leases }

var _ lease.Store = (*leaseStore)(nil)

// wire is a lease as the scripts encode it.
type wire struct {
	C string `json:"c"`
	K string `json:"k"`
	P string `json:"p"`
	G string `json:"g"`
	S string `json:"s"`
	A string `json:"a"`
	R string `json:"r"`
	X string `json:"x"`
	E string `json:"e"`
	W string `json:"w"`
}

func msTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.UnixMilli(n).UTC()
}

func decodeLease(owner lease.OwnerHash, js string) (lease.Lease, error) {
	var w wire
	if err := json.Unmarshal([]byte(js), &w); err != nil {
		return lease.Lease{}, fmt.Errorf("redisstate: bad lease record: %w", err)
	}
	g, _ := strconv.ParseUint(w.G, 10, 64)
	return lease.Lease{
		Owner: owner, APIKeyID: w.K, Provider: w.P, Connection: w.C, Generation: g,
		State: lease.State(w.S), AcquiredAt: msTime(w.A), RenewedAt: msTime(w.R), ExpiresAt: msTime(w.X),
		EndedAt: msTime(w.E), EndReason: lease.Reason(w.W),
	}, nil
}

func parseOwner(h string) (lease.OwnerHash, error) {
	var o lease.OwnerHash
	if len(h) != 2*len(o) {
		return o, fmt.Errorf("redisstate: bad owner key %q", h)
	}
	_, err := hex.Decode(o[:], []byte(h))
	return o, err
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// args returns the common script arguments for now, with the dataset
// epoch this process knows.
func (ls *leaseStore) args(now time.Time, extra ...any) []any {
	ep, _ := ls.epoch.Load().(string)
	return ls.argsIn(ep, now, extra...)
}

// argsIn is args with the epoch ep.
func (ls *leaseStore) argsIn(ep string, now time.Time, extra ...any) []any {
	c := ls.s.cfg
	at := ""
	if c.CallerClock {
		at = strconv.FormatInt(now.UnixMilli(), 10)
	}
	streamLen := max(c.StreamLen, 0)
	return append([]any{at, ms(c.ReleaseQuarantine), ms(c.Retention), strconv.Itoa(streamLen), ep, ls.proposal}, extra...)
}

func (ls *leaseStore) okey(o lease.OwnerHash) string { return ls.pfx + "o:" + o.String() }
func (ls *leaseStore) ckey(c string) string          { return ls.pfx + "c:" + c }

// run evaluates script at now and returns its reply as strings. A reply
// that the dataset's epoch is not the one this process knows is handled
// here (see adopt), and the script run again.
func (ls *leaseStore) run(ctx context.Context, script *redis.Script, keys []string, now time.Time, extra ...any) ([]string, error) {
	for range 4 {
		out, err := ls.eval(ctx, script, keys, ls.args(now, extra...))
		if err != nil {
			return nil, err
		}
		if out[0] != "EPOCH" {
			return out, nil
		}
		if err := ls.adopt(ctx, out[1], now); err != nil {
			return nil, err
		}
	}
	return nil, leaseFailure(&unavailableError{errDataset})
}

// eval evaluates script once.
func (ls *leaseStore) eval(ctx context.Context, script *redis.Script, keys []string, args []any) ([]string, error) {
	var out []string
	err := ls.s.do(ctx, func(ctx context.Context) error {
		v, err := script.Run(ctx, ls.s.rdb, keys, args...).StringSlice()
		out = v
		return err
	})
	if err != nil {
		return nil, leaseFailure(err)
	}
	if len(out) == 0 || out[0] == "EPOCH" && len(out) < 2 {
		return nil, errors.New("redisstate: empty script reply")
	}
	return out, nil
}

// leaseFailure turns a remote failure into the lease contract's 503.
func leaseFailure(err error) error {
	if errors.Is(err, ErrUnavailable) {
		return &lease.Error{Code: lease.CodeServiceUnavailable, Status: 503, Detail: strings.TrimPrefix(err.Error(), "redisstate: ")}
	}
	return err
}

func (ls *leaseStore) Acquire(ctx context.Context, h lease.Holder, provider, connection string, ttl time.Duration, now time.Time) (lease.Lease, bool, error) {
	out, err := ls.run(ctx, scriptAcquire,
		[]string{ls.meta, ls.act, ls.okey(h.Owner), ls.ckey(connection)},
		now, h.APIKeyID, provider, ms(ttl), strconv.FormatUint(lease.MaxGeneration, 10))
	if err != nil {
		return lease.Lease{}, false, err
	}
	switch out[0] {
	case "ACQUIRED", "REUSED":
		l, err := decodeLease(h.Owner, out[1])
		if err == nil {
			ls.keep(h.Owner, l, now)
		}
		return l, out[0] == "REUSED", err
	case "OWNER_ACTIVE":
		return lease.Lease{}, false, lease.ErrOwnerAlreadyActive
	case "BUSY":
		return lease.Lease{}, false, &lease.Error{Code: lease.CodeCapacityUnavailable, Until: msTime(out[1])}
	case "EXHAUSTED":
		return lease.Lease{}, false, &lease.Error{Code: lease.CodeServiceUnavailable, Detail: "lease generation exhausted"}
	}
	return lease.Lease{}, false, fmt.Errorf("redisstate: unexpected acquire reply %q", out[0])
}

func (ls *leaseStore) Transition(ctx context.Context, h lease.Holder, provider, connection string, reason lease.Reason, ttl time.Duration, now time.Time) (lease.Lease, lease.Lease, error) {
	out, err := ls.run(ctx, scriptTransition,
		[]string{ls.meta, ls.act, ls.okey(h.Owner), ls.ckey(connection)},
		now, h.APIKeyID, strconv.FormatUint(h.Generation, 10), provider, ms(ttl), string(reason))
	if err != nil {
		return lease.Lease{}, lease.Lease{}, err
	}
	switch out[0] {
	case "SAME":
		l, err := decodeLease(h.Owner, out[1])
		return l, lease.Lease{}, err
	case "TRANSITIONED":
		l, err := decodeLease(h.Owner, out[1])
		if err != nil {
			return lease.Lease{}, lease.Lease{}, err
		}
		prev, err := decodeLease(h.Owner, out[2])
		ls.keep(h.Owner, l, now)
		return l, prev, err
	case "STALE":
		ls.forget(h.Owner)
		return lease.Lease{}, lease.Lease{}, lease.ErrFenceStale
	case "BUSY":
		return lease.Lease{}, lease.Lease{}, &lease.Error{Code: lease.CodeCapacityUnavailable, Until: msTime(out[1])}
	}
	return lease.Lease{}, lease.Lease{}, fmt.Errorf("redisstate: unexpected transition reply %q", out[0])
}

func (ls *leaseStore) Renew(ctx context.Context, h lease.Holder, ttl time.Duration, now time.Time) (lease.Lease, error) {
	out, err := ls.run(ctx, scriptRenew, []string{ls.meta, ls.act, ls.okey(h.Owner)},
		now, h.APIKeyID, strconv.FormatUint(h.Generation, 10), ms(ttl))
	if err != nil {
		return lease.Lease{}, err
	}
	switch out[0] {
	case "RENEWED":
		l, err := decodeLease(h.Owner, out[1])
		if err == nil {
			ls.keep(h.Owner, l, now)
		}
		return l, err
	case "STALE":
		ls.forget(h.Owner)
		return lease.Lease{}, lease.ErrFenceStale
	}
	return lease.Lease{}, fmt.Errorf("redisstate: unexpected renew reply %q", out[0])
}

func (ls *leaseStore) Release(ctx context.Context, h lease.Holder, reason lease.Reason, now time.Time) (lease.Lease, bool, error) {
	out, err := ls.run(ctx, scriptRelease, []string{ls.meta, ls.act, ls.okey(h.Owner)},
		now, h.APIKeyID, strconv.FormatUint(h.Generation, 10), string(reason))
	if err != nil {
		return lease.Lease{}, false, err
	}
	switch out[0] {
	case "RELEASED", "AGAIN":
		ls.remember(h.Owner, lease.Lease{}, false, now)
		l, err := decodeLease(h.Owner, out[1])
		return l, out[0] == "AGAIN", err
	case "STALE":
		ls.forget(h.Owner)
		return lease.Lease{}, false, lease.ErrFenceStale
	}
	return lease.Lease{}, false, fmt.Errorf("redisstate: unexpected release reply %q", out[0])
}

func (ls *leaseStore) Invalidate(ctx context.Context, h lease.Holder, reason lease.Reason, now time.Time) (lease.Lease, error) {
	out, err := ls.run(ctx, scriptInvalidate, []string{ls.meta, ls.act, ls.okey(h.Owner)},
		now, strconv.FormatUint(h.Generation, 10), string(reason))
	if err != nil {
		return lease.Lease{}, err
	}
	switch out[0] {
	case "INVALIDATED":
		ls.remember(h.Owner, lease.Lease{}, false, now)
		return decodeLease(h.Owner, out[1])
	case "STALE":
		ls.forget(h.Owner)
		return lease.Lease{}, lease.ErrFenceStale
	}
	return lease.Lease{}, fmt.Errorf("redisstate: unexpected invalidate reply %q", out[0])
}

// status asks Redis for owner's live lease, and records the answer in the
// mirror as of now.
func (ls *leaseStore) status(ctx context.Context, owner lease.OwnerHash, now time.Time) (lease.Lease, bool, error) {
	out, err := ls.run(ctx, scriptStatus, []string{ls.meta, ls.act, ls.okey(owner)}, now)
	if err != nil {
		return lease.Lease{}, false, err
	}
	if out[0] != "ACTIVE" {
		ls.remember(owner, lease.Lease{}, false, now)
		return lease.Lease{}, false, nil
	}
	l, err := decodeLease(owner, out[1])
	if err != nil {
		return lease.Lease{}, false, err
	}
	ls.remember(owner, l, true, now)
	return l, true, nil
}

// errAuthMismatch is the lease package's refusal for the right owner and
// generation presented through another API key, built once.
var errAuthMismatch = &lease.Error{Code: lease.CodeFenceStale, Detail: "lease held under another api key"}

// fence compares an active lease with what a request presents, as the
// lease package's stores do.
func fence(a *lease.Lease, h *lease.Holder, connection string) error {
	switch {
	case a.Generation != h.Generation:
		return lease.ErrFenceStale
	case a.APIKeyID != h.APIKeyID:
		return errAuthMismatch
	case a.Connection != connection:
		return lease.ErrConnectionMismatch
	}
	return nil
}

// Fence implements lease.Store. With the mirror on, an admission by a
// lease verified less than FenceStaleness ago makes no remote call and
// does not allocate.
func (ls *leaseStore) Fence(ctx context.Context, h lease.Holder, connection string, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var v verified
	if ls.s.cfg.FenceStaleness > 0 {
		ls.mu.RLock()
		v = ls.mirror[h.Owner]
		ls.mu.RUnlock()
		if v.live && now.Sub(v.at) < ls.s.cfg.FenceStaleness && now.Before(v.l.ExpiresAt) &&
			fence(&v.l, &h, connection) == nil {
			return nil
		}
	}
	l, ok, err := ls.status(ctx, h.Owner, now)
	if err != nil {
		// Redis is unreachable: a mirrored lease is honoured until its
		// local expiry (its expiry less ClockSkew). Nobody can take its
		// connection meanwhile: that needs the lease ended, and then Q.
		if v.live && errors.Is(err, lease.ErrServiceUnavailable) &&
			now.Before(v.l.ExpiresAt.Add(-ls.s.cfg.ClockSkew)) && fence(&v.l, &h, connection) == nil {
			return nil
		}
		return err
	}
	if !ok {
		return lease.ErrRequired
	}
	return fence(&l, &h, connection)
}

// keep records a live lease a lifecycle call of this process returned:
// in the fence mirror, and among the leases re-seeded after a lost
// dataset.
func (ls *leaseStore) keep(owner lease.OwnerHash, l lease.Lease, now time.Time) {
	ls.mu.Lock()
	if len(ls.kept) >= maxMirror {
		for o, k := range ls.kept {
			if !now.Before(k.ExpiresAt) {
				delete(ls.kept, o)
			}
		}
	}
	if len(ls.kept) < maxMirror {
		ls.kept[owner] = l
	}
	ls.maxGen = max(ls.maxGen, l.Generation)
	ls.mu.Unlock()
	ls.remember(owner, l, true, now)
}

// remember records what this process learned of owner's lease at now.
func (ls *leaseStore) remember(owner lease.OwnerHash, l lease.Lease, live bool, now time.Time) {
	if !live {
		ls.mu.Lock()
		delete(ls.kept, owner)
		ls.mu.Unlock()
	}
	if ls.s.cfg.FenceStaleness <= 0 {
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if v, ok := ls.mirror[owner]; ok && v.at.After(now) {
		return
	}
	if len(ls.mirror) >= maxMirror {
		for o, v := range ls.mirror {
			if now.Sub(v.at) >= ls.s.cfg.FenceStaleness {
				delete(ls.mirror, o)
			}
		}
		if len(ls.mirror) >= maxMirror {
			clear(ls.mirror)
		}
	}
	ls.mirror[owner] = verified{l: l, live: live, at: now}
}

func (ls *leaseStore) forget(owner lease.OwnerHash) {
	ls.mu.Lock()
	delete(ls.kept, owner)
	delete(ls.mirror, owner)
	ls.mu.Unlock()
}

func (ls *leaseStore) Owned(ctx context.Context, owner lease.OwnerHash, now time.Time) (lease.Lease, bool, error) {
	return ls.status(ctx, owner, now)
}

func (ls *leaseStore) Occupant(ctx context.Context, connection string, now time.Time) (lease.Lease, bool, error) {
	out, err := ls.run(ctx, scriptOccupant, []string{ls.meta, ls.act, ls.ckey(connection)}, now)
	if err != nil {
		return lease.Lease{}, false, err
	}
	if out[0] != "ACTIVE" || len(out) < 3 {
		return lease.Lease{}, false, nil
	}
	o, err := parseOwner(out[2])
	if err != nil {
		return lease.Lease{}, false, err
	}
	l, err := decodeLease(o, out[1])
	return l, err == nil, err
}

// pairs decodes a {count, lease, owner, …} reply.
func pairs(out []string) ([]lease.Lease, error) {
	var ls []lease.Lease
	for i := 1; i+1 < len(out); i += 2 {
		o, err := parseOwner(out[i+1])
		if err != nil {
			return nil, err
		}
		l, err := decodeLease(o, out[i])
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
	}
	return ls, nil
}

func (ls *leaseStore) Reconcile(ctx context.Context, now time.Time) ([]lease.Lease, error) {
	var all []lease.Lease
	for {
		out, err := ls.run(ctx, scriptReconcile, []string{ls.meta, ls.act}, now, strconv.Itoa(batch))
		if err != nil {
			return all, err
		}
		got, err := pairs(out)
		if err != nil {
			return all, err
		}
		for _, l := range got {
			ls.forget(l.Owner)
		}
		all = append(all, got...)
		if n, _ := strconv.Atoi(out[0]); n < batch {
			return all, nil
		}
	}
}

func (ls *leaseStore) List(ctx context.Context, now time.Time) ([]lease.Lease, error) {
	var all []lease.Lease
	for off := 0; ; off += batch {
		out, err := ls.run(ctx, scriptList, []string{ls.meta, ls.act}, now, strconv.Itoa(off), strconv.Itoa(batch))
		if err != nil {
			return nil, err
		}
		got, err := pairs(out)
		if err != nil {
			return nil, err
		}
		all = append(all, got...)
		if n, _ := strconv.Atoi(out[0]); n < batch {
			break
		}
	}
	slices.SortFunc(all, func(a, b lease.Lease) int { return cmp.Compare(a.Connection, b.Connection) })
	return all, nil
}
