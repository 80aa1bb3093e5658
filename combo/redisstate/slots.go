package redisstate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/routeguard/routeguard/queue/slotstore"
)

func errLimit(limit int) error {
	return fmt.Errorf("%w: %w: %d", ErrInvalidConfig, slotstore.ErrInvalidLimit, limit)
}

// The slot scripts. KEYS[1] is the connection's sorted set, members are
// holders scored by expiry in Unix ms; KEYS[2] its marker, a hash under
// the same hash tag: e, the dataset epoch the set belongs to, and hold,
// the time (Unix ms) until which new holders are refused after the set
// was lost. ARGV[1] is now in ms or "" for the server's TIME, ARGV[2] the
// TTL in ms, ARGV[3] the epoch the caller knows ("" before its first
// reply), ARGV[4] how long the marker outlives its last use, in ms.
//
// A missing marker means the set is new or was lost (Redis restarted
// empty): the script changes nothing and replies {'NOMARK'}; the caller
// asks the dataset's epoch key (slotEpoch) which of the two it is before
// it creates the marker. A marker of another epoch than the caller's
// replies {'EPOCH', e}: the caller has not yet seen the loss. Every other
// reply is a list of strings.
const slotPrelude = `
local K, M = KEYS[1], KEYS[2]
local ttl, E, RET = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local now
if ARGV[1] ~= '' then now = tonumber(ARGV[1]) else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function str(n) return string.format('%.0f', n) end
redis.call('ZREMRANGEBYSCORE', K, '-inf', str(now))
`

// slotAcquire: ARGV[5] limit, ARGV[6] holder, ARGV[7] "" or the hold
// (Unix ms, "0" for none) of the marker to create when it is missing.
// Returns {ok (0 or 1), held, retry at or this slot's expiry (Unix ms),
// epoch}, numbers as integers. While
// the marker's hold lasts only holders already in the set are served.
const slotAcquire = slotPrelude + `
local e = redis.call('HGET', M, 'e')
if not e then
  if ARGV[7] == '' then return {'NOMARK'} end
  redis.call('HSET', M, 'e', E, 'hold', ARGV[7])
  e = E
elseif E ~= '' and e ~= E then
  return {'EPOCH', e}
end
redis.call('PEXPIRE', M, RET)
local limit, holder = tonumber(ARGV[5]), ARGV[6]
local n = redis.call('ZCARD', K)
if not redis.call('ZSCORE', K, holder) then
  local hold = tonumber(redis.call('HGET', M, 'hold')) or 0
  if n >= limit then
    local first = tonumber(redis.call('ZRANGE', K, 0, 0, 'WITHSCORES')[2]) or 0
    return {0, n, math.max(first, hold), e}
  end
  if now < hold then return {0, n, hold, e} end
end
redis.call('ZADD', K, now + ttl, holder)
redis.call('PEXPIRE', K, 3 * ttl)
return {1, redis.call('ZCARD', K), now + ttl, e}
`

// slotRenew: ARGV[5..] holders. Returns {new expiry (ms), the holders
// that were lost...}.
const slotRenew = slotPrelude + `
local e = redis.call('HGET', M, 'e')
if not e then return {'NOMARK'} end
if E ~= '' and e ~= E then return {'EPOCH', e} end
redis.call('PEXPIRE', M, RET)
local out = {str(now + ttl)}
for i = 5, #ARGV do
  if redis.call('ZSCORE', K, ARGV[i]) then
    redis.call('ZADD', K, now + ttl, ARGV[i])
  else
    table.insert(out, ARGV[i])
  end
end
if redis.call('ZCARD', K) > 0 then redis.call('PEXPIRE', K, 3 * ttl) end
return out
`

// slotReseed stores again, after a loss, slots the caller held: ARGV[5]
// the hold (ms from now) of the marker to create when it is missing,
// ARGV[6] the limit, ARGV[7..] pairs of holder and expiry (ms). A holder
// is added with its old expiry while the set is below the limit; one that
// expired or does not fit is lost. Returns {'RESEEDED', lost...}.
const slotReseed = slotPrelude + `
local e = redis.call('HGET', M, 'e')
if not e then
  redis.call('HSET', M, 'e', E, 'hold', str(now + tonumber(ARGV[5])))
elseif e ~= E then
  return {'EPOCH', e}
end
redis.call('PEXPIRE', M, RET)
local limit = tonumber(ARGV[6])
local out = {'RESEEDED'}
for i = 7, #ARGV - 1, 2 do
  local h, x = ARGV[i], tonumber(ARGV[i + 1])
  if not redis.call('ZSCORE', K, h) then
    if x > now and redis.call('ZCARD', K) < limit then
      redis.call('ZADD', K, x, h)
    else
      table.insert(out, h)
    end
  end
end
if redis.call('ZCARD', K) > 0 then redis.call('PEXPIRE', K, 3 * ttl) end
return out
`

// slotEpoch: KEYS[1] the slot dataset's epoch key (a hash: epoch, hold);
// ARGV[1] now ("" for TIME), ARGV[2] the epoch the caller knows or "",
// ARGV[3] the epoch it proposes, ARGV[4] the hold in ms. A caller that
// knew another epoch (or none is stored) has seen the dataset lost: new
// holders are then refused until now + hold, long enough for every slot
// held before the loss to be re-seeded or to have expired. Returns
// {epoch, hold (ms)}.
const slotEpoch = `
local K = KEYS[1]
local now
if ARGV[1] ~= '' then now = tonumber(ARGV[1]) else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local known = ARGV[2]
local e = redis.call('HGET', K, 'epoch')
local lost = false
if not e then
  e = ARGV[3]
  redis.call('HSET', K, 'epoch', e)
  lost = known ~= ''
elseif known ~= '' and known ~= e then
  lost = true
end
local hold = tonumber(redis.call('HGET', K, 'hold')) or 0
if lost and now + tonumber(ARGV[4]) > hold then
  hold = now + tonumber(ARGV[4])
  redis.call('HSET', K, 'hold', string.format('%.0f', hold))
end
return {e, string.format('%.0f', hold)}
`

var (
	scriptSlotAcquire = redis.NewScript(slotAcquire)
	scriptSlotRenew   = redis.NewScript(slotRenew)
	scriptSlotReseed  = redis.NewScript(slotReseed)
	scriptSlotEpoch   = redis.NewScript(slotEpoch)
)

// redisSlots is the slotstore.Store of [State.Slots].
type redisSlots struct {
	s     *State
	local slotstore.Store // the fallback during an outage

	lmu     sync.Mutex
	granted map[slotstore.Slot]bool // the slots local granted and not yet released or lost

	mu   sync.Mutex
	held map[slotstore.Slot]heldSlot // remote slots held, as last confirmed
	gone map[slotstore.Slot]bool     // remote slots a re-seed could not store again: lost, reported by the next Renew

	epochMu  sync.Mutex   // serializes epoch checks and re-seeds
	epoch    atomic.Value // string: the slot dataset's epoch as this process knows it, "" before the first reply
	epochArg atomic.Value // the same as a script argument (any), boxed once
	epochKey string

	ttlArg, retArg any // SlotTTL and Retention in ms, script arguments boxed once
}

// heldSlot is what this process knows of a remote slot it holds.
type heldSlot struct {
	exp   time.Time // the caller's now of the last confirmation + SlotTTL
	score int64     // the expiry stored on the server (Unix ms)
	limit int       // the limit it was acquired under
}

func newRedisSlots(s *State) *redisSlots {
	rs := &redisSlots{s: s, local: slotstore.NewMemory(s.cfg.SlotTTL), granted: map[slotstore.Slot]bool{},
		held: map[slotstore.Slot]heldSlot{}, gone: map[slotstore.Slot]bool{},
		epochKey: "{" + s.cfg.Namespace + ":slots}:epoch",
		ttlArg:   ms(s.cfg.SlotTTL), retArg: ms(s.cfg.Retention)}
	rs.setEpoch("")
	return rs
}

func (rs *redisSlots) knownEpoch() string { return rs.epoch.Load().(string) }

// setEpoch records e as the known epoch; it requires rs.epochMu once
// the store is shared.
func (rs *redisSlots) setEpoch(e string) {
	rs.epochArg.Store(any(e))
	rs.epoch.Store(e)
}

// hold is how long new holders are refused after the slot dataset was
// lost: every slot held before the loss expires within SlotTTL of it,
// unless its holder stores it again first.
func (rs *redisSlots) hold() time.Duration { return rs.s.cfg.SlotTTL + rs.s.cfg.ClockSkew }

// holds reports whether the slot of holder on conn was granted by the local
// fallback (and not released or reported lost since).
func (rs *redisSlots) holds(conn, holder string) bool {
	rs.lmu.Lock()
	defer rs.lmu.Unlock()
	return rs.granted[slotstore.Slot{Conn: conn, Holder: holder}]
}

// noteLocal records what the local fallback granted (ok) or let go.
func (rs *redisSlots) noteLocal(sl slotstore.Slot, ok bool) {
	rs.lmu.Lock()
	if ok {
		rs.granted[sl] = true
	} else {
		delete(rs.granted, sl)
	}
	rs.lmu.Unlock()
}

// confirm records that sl, held under limit, was acquired or renewed at
// now with the server's expiry score.
func (rs *redisSlots) confirm(sl slotstore.Slot, limit int, score int64, now time.Time) {
	rs.mu.Lock()
	if limit == 0 {
		limit = rs.held[sl].limit
	}
	rs.held[sl] = heldSlot{exp: now.Add(rs.s.cfg.SlotTTL), score: score, limit: limit}
	rs.mu.Unlock()
}

// expired drops and returns the slots of held whose last confirmed expiry,
// less ClockSkew, has passed at now: after a failed renewal they are lost
// for sure, or soon, and another process may take them.
func (rs *redisSlots) expired(held []slotstore.Slot, now time.Time) []slotstore.Slot {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var lost []slotstore.Slot
	for _, sl := range held {
		if h, ok := rs.held[sl]; ok && !now.Before(h.exp.Add(-rs.s.cfg.ClockSkew)) {
			delete(rs.held, sl)
			lost = append(lost, sl)
		}
	}
	return lost
}

// adoptEpoch records e as the dataset's epoch if this process knew none.
func (rs *redisSlots) adoptEpoch(e string) {
	if e == "" || rs.knownEpoch() != "" {
		return
	}
	rs.epochMu.Lock()
	if rs.knownEpoch() == "" {
		rs.setEpoch(e)
	}
	rs.epochMu.Unlock()
}

// checkEpoch asks the dataset's epoch key which epoch the slot sets
// belong to, after a script found a set's marker missing or of another
// epoch. When the epoch is not the one this process knew, the dataset was
// lost: the slots this process holds are stored again (reseed) before the
// new epoch is adopted, so that they count before any new holder does.
// It returns the epoch, the hold of the dataset (Unix ms, "0" for none)
// and whether a loss was seen.
func (rs *redisSlots) checkEpoch(ctx context.Context, now time.Time) (string, string, bool, error) {
	rs.epochMu.Lock()
	defer rs.epochMu.Unlock()
	known := rs.knownEpoch()
	// A new proposal every time: an epoch must never come back after a
	// loss.
	var b [8]byte
	rand.Read(b[:])
	proposal := hex.EncodeToString(b[:])
	var out []string
	err := rs.s.do(ctx, func(ctx context.Context) error {
		v, err := scriptSlotEpoch.Run(ctx, rs.s.rdb, []string{rs.epochKey},
			rs.at(now), known, proposal, ms(rs.hold())).StringSlice()
		out = v
		return err
	})
	if err != nil {
		return "", "", false, err
	}
	if len(out) != 2 || out[0] == "" {
		return "", "", false, fmt.Errorf("redisstate: unexpected slot epoch reply %v", out)
	}
	lost := known != "" && out[0] != known
	if lost {
		if err := rs.reseed(ctx, out[0], nil, now); err != nil {
			return "", "", false, err
		}
	}
	rs.setEpoch(out[0])
	return out[0], out[1], lost, nil
}

// reseed stores the remote slots this process holds (on conns only, or
// on every connection when conns is nil) again in the dataset of epoch e,
// with their holder ids and expiries, one script per connection. Those
// that no longer fit are dropped and reported lost by the next Renew. It
// requires rs.epochMu.
func (rs *redisSlots) reseed(ctx context.Context, e string, conns map[string]bool, now time.Time) error {
	type part struct {
		limit int
		args  []any
		slots []slotstore.Slot
	}
	rs.mu.Lock()
	parts := map[string]*part{}
	for sl, h := range rs.held {
		if conns != nil && !conns[sl.Conn] {
			continue
		}
		p := parts[sl.Conn]
		if p == nil {
			p = &part{limit: h.limit}
			parts[sl.Conn] = p
		}
		if h.limit > 0 && (p.limit == 0 || h.limit < p.limit) {
			p.limit = h.limit
		}
		p.args = append(p.args, sl.Holder, strconv.FormatInt(h.score, 10))
		p.slots = append(p.slots, sl)
	}
	rs.mu.Unlock()
	for conn, p := range parts {
		args := append([]any{rs.at(now), rs.ttlArg, e, rs.retArg, ms(rs.hold()), strconv.Itoa(max(p.limit, 1))}, p.args...)
		var out []string
		err := rs.s.do(ctx, func(ctx context.Context) error {
			v, err := scriptSlotReseed.Run(ctx, rs.s.rdb, rs.keys(conn), args...).StringSlice()
			out = v
			return err
		})
		if err != nil {
			return err
		}
		if len(out) == 0 || out[0] != "RESEEDED" {
			return &unavailableError{errDataset}
		}
		rs.mu.Lock()
		for _, h := range out[1:] {
			sl := slotstore.Slot{Conn: conn, Holder: h}
			if _, ok := rs.held[sl]; ok {
				delete(rs.held, sl)
				rs.gone[sl] = true
			}
		}
		rs.mu.Unlock()
	}
	return nil
}

// Slots returns the shared concurrency slot store: one sorted set per
// connection, {ns:sem:<conn>}, scored by expiry (Config.SlotTTL), each
// acquire one script that reclaims expired holders, counts and adds;
// Renew is one pipelined round trip for any number of slots.
//
// While Redis is unreachable, TryAcquire answers from a local store with
// the same limit (each process then enforces the cap on its own), or,
// with Config.FailClosed, refuses with an error matching ErrUnavailable;
// Degraded reports it. Slots granted locally are released and renewed
// locally. A renewal that fails also reports as lost the slots whose last
// confirmed expiry (less ClockSkew) has passed, so that their requests
// are cancelled before another process can take them.
//
// After Redis lost the slots (restarted empty, or failed over to a
// replica without them) a call finds the set's marker missing or of
// another epoch and checks the dataset's epoch key {ns:slots}:epoch (one
// more round trip, once per loss and per connection). A process that knew
// the old epoch then stores the remote slots it holds again, with their
// holder ids and expiries, before anything else; a slot that expired
// meanwhile or no longer fits under its limit is reported lost by the next
// Renew. New holders (of this process and every other) are refused until
// SlotTTL + ClockSkew after the loss was first noticed, with that time as
// retryAt; this hold-off, not a count of re-seeded holders, is what makes
// it safe: a slot held when the data was lost expires at most SlotTTL
// after its last renewal, so once the hold-off ends every such slot is
// either stored again or gone for good. Holders already in a set keep
// renewing through the hold-off. A process that starts after the loss and
// is the first to call cannot tell a lost dataset from a new one; a
// holder whose slot it took reports it lost on its next renewal.
//
// Holder ids should be unique per attempt across the fleet, for example
// [State.Holder].
func (s *State) Slots() slotstore.Store { return s.slots }

// Holder returns a slot holder id for attempt, unique across the fleet
// when attempt is unique in this process: "<replica>:<attempt>".
func (s *State) Holder(attempt string) string { return s.cfg.Replica + ":" + attempt }

func (rs *redisSlots) key(conn string) string { return "{" + rs.s.cfg.Namespace + ":sem:" + conn + "}" }

// keys returns the keys of conn's scripts: its sorted set and its marker
// (the set's key is a prefix of the marker's: one string is built).
func (rs *redisSlots) keys(conn string) []string {
	m := "{" + rs.s.cfg.Namespace + ":sem:" + conn + "}:m"
	return []string{m[:len(m)-2], m}
}

func (rs *redisSlots) at(now time.Time) string {
	if rs.s.cfg.CallerClock {
		return strconv.FormatInt(now.UnixMilli(), 10)
	}
	return ""
}

func (rs *redisSlots) TryAcquire(ctx context.Context, conn string, limit int, holder string, now time.Time) (bool, int, time.Time, error) {
	if limit <= 0 {
		return false, 0, time.Time{}, errLimit(limit)
	}
	keys := rs.keys(conn)
	args := []any{rs.at(now), rs.ttlArg, nil, rs.retArg, strconv.Itoa(limit), holder, ""}
	var out []any
	run := func(ctx context.Context) error {
		v, err := scriptSlotAcquire.Run(ctx, rs.s.rdb, keys, args...).Slice()
		out = v
		return err
	}
	var err error
	for range 4 {
		args[2] = rs.epochArg.Load()
		out = nil
		err = rs.s.do(ctx, run)
		if err != nil || len(out) == 0 {
			break
		}
		flag, _ := out[0].(string)
		if flag != "NOMARK" && flag != "EPOCH" {
			break
		}
		// A new or lost set, or a dataset this process has not seen
		// yet: learn the dataset's epoch (re-seeding after a loss), then
		// try again, creating the marker under that epoch's hold.
		_, hold, _, cerr := rs.checkEpoch(ctx, now)
		if cerr != nil {
			err = cerr
			break
		}
		args[6] = ""
		if flag == "NOMARK" {
			args[6] = hold
		}
	}
	if errors.Is(err, ErrUnavailable) {
		if rs.s.cfg.FailClosed {
			return false, 0, time.Time{}, err
		}
		ok, n, retry, err := rs.local.TryAcquire(ctx, conn, limit, holder, now)
		if ok && err == nil {
			rs.noteLocal(slotstore.Slot{Conn: conn, Holder: holder}, true)
		}
		return ok, n, retry, err
	}
	if err != nil {
		return false, 0, time.Time{}, err
	}
	var ok, held, at int64
	var e string
	if len(out) == 4 {
		ok, _ = out[0].(int64)
		held, _ = out[1].(int64)
		at, _ = out[2].(int64)
		e, _ = out[3].(string)
	}
	if e == "" {
		return false, 0, time.Time{}, fmt.Errorf("redisstate: unexpected slot reply %v", out)
	}
	rs.adoptEpoch(e)
	if ok == 1 {
		rs.confirm(slotstore.Slot{Conn: conn, Holder: holder}, limit, at, now)
		return true, int(held), time.Time{}, nil
	}
	var retry time.Time
	if at > 0 {
		retry = time.UnixMilli(at).UTC()
	}
	return false, int(held), retry, nil
}

func (rs *redisSlots) Release(ctx context.Context, conn, holder string, now time.Time) error {
	if rs.holds(conn, holder) {
		rs.noteLocal(slotstore.Slot{Conn: conn, Holder: holder}, false)
		return rs.local.Release(ctx, conn, holder, now)
	}
	rs.mu.Lock()
	delete(rs.held, slotstore.Slot{Conn: conn, Holder: holder})
	delete(rs.gone, slotstore.Slot{Conn: conn, Holder: holder})
	rs.mu.Unlock()
	return rs.s.do(ctx, func(ctx context.Context) error {
		return rs.s.rdb.ZRem(ctx, rs.key(conn), holder).Err()
	})
}

// renewPipeline renews the holders of byConn on the connections of order
// in one pipelined round trip, and returns each connection's reply.
func (rs *redisSlots) renewPipeline(ctx context.Context, order []string, byConn map[string][]any) ([][]string, error) {
	e := rs.knownEpoch()
	var cmds []*redis.Cmd
	pipeline := func(ctx context.Context) error {
		pipe := rs.s.rdb.Pipeline()
		cmds = cmds[:0]
		for _, conn := range order {
			cmds = append(cmds, scriptSlotRenew.EvalSha(ctx, pipe, rs.keys(conn), renewArgs(byConn[conn], e, rs.retArg)...))
		}
		_, err := pipe.Exec(ctx)
		return err
	}
	err := rs.s.do(ctx, func(ctx context.Context) error {
		err := pipeline(ctx)
		if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			if err := scriptSlotRenew.Load(ctx, rs.s.rdb).Err(); err != nil {
				return err
			}
			err = pipeline(ctx)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	replies := make([][]string, len(order))
	for i := range order {
		v, err := cmds[i].StringSlice()
		if err != nil || len(v) == 0 {
			return nil, fmt.Errorf("redisstate: unexpected slot renew reply %v, %v", v, err)
		}
		replies[i] = v
	}
	return replies, nil
}

// renewArgs returns the renew script's arguments: now and the TTL (the
// first two of held), the epoch, the retention, then the holders.
func renewArgs(held []any, e string, ret any) []any {
	args := make([]any, 0, len(held)+2)
	args = append(args, held[0], held[1], e, ret)
	return append(args, held[2:]...)
}

func (rs *redisSlots) Renew(ctx context.Context, held []slotstore.Slot, now time.Time) ([]slotstore.Slot, error) {
	byConn := map[string][]any{}
	var order []string
	var local, lost []slotstore.Slot
	rs.mu.Lock()
	for _, sl := range held {
		if rs.gone[sl] {
			// A re-seed found no room for it.
			delete(rs.gone, sl)
			lost = append(lost, sl)
		}
	}
	rs.mu.Unlock()
	for _, sl := range held {
		if rs.holds(sl.Conn, sl.Holder) {
			local = append(local, sl)
			continue
		}
		if len(lost) > 0 && slices.Contains(lost, sl) {
			continue
		}
		if _, ok := byConn[sl.Conn]; !ok {
			order = append(order, sl.Conn)
			byConn[sl.Conn] = []any{rs.at(now), rs.ttlArg}
		}
		byConn[sl.Conn] = append(byConn[sl.Conn], sl.Holder)
	}
	llost, err := rs.local.Renew(ctx, local, now)
	for _, sl := range llost {
		rs.noteLocal(sl, false)
	}
	lost = append(lost, llost...)
	if err != nil || len(order) == 0 {
		return lost, err
	}
	replies, err := rs.renewPipeline(ctx, order, byConn)
	if err == nil {
		// Sets whose marker is missing or of another epoch: the dataset
		// (or this set) was lost. Learn the epoch, store this process's
		// slots again, and renew those sets once more.
		var again []string
		for i, conn := range order {
			if replies[i][0] == "NOMARK" || replies[i][0] == "EPOCH" {
				again = append(again, conn)
			}
		}
		if len(again) > 0 {
			replies, err = rs.renewAgain(ctx, order, again, replies, byConn, now)
		}
	}
	if err != nil {
		var remote []slotstore.Slot
		for _, sl := range held {
			if _, ok := byConn[sl.Conn]; ok && !rs.holds(sl.Conn, sl.Holder) {
				remote = append(remote, sl)
			}
		}
		return append(lost, rs.expired(remote, now)...), err
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for i, conn := range order {
		score, _ := strconv.ParseInt(replies[i][0], 10, 64)
		gone := replies[i][1:]
		for _, h := range gone {
			sl := slotstore.Slot{Conn: conn, Holder: h}
			lost = append(lost, sl)
			delete(rs.held, sl)
			delete(rs.gone, sl)
		}
		for _, h := range byConn[conn][2:] {
			sl := slotstore.Slot{Conn: conn, Holder: h.(string)}
			if slices.Contains(gone, sl.Holder) {
				continue
			}
			if rs.gone[sl] {
				delete(rs.gone, sl)
				lost = append(lost, sl)
				continue
			}
			old := rs.held[sl]
			rs.held[sl] = heldSlot{exp: now.Add(rs.s.cfg.SlotTTL), score: score, limit: old.limit}
		}
	}
	return lost, nil
}

// renewAgain handles the connections of again, whose renewal found their
// set lost: it checks the dataset's epoch (a loss re-seeds every slot this
// process holds), re-seeds these sets when the dataset itself was not
// lost, and renews them again. It returns replies with theirs replaced.
func (rs *redisSlots) renewAgain(ctx context.Context, order, again []string, replies [][]string, byConn map[string][]any, now time.Time) ([][]string, error) {
	e, _, lost, err := rs.checkEpoch(ctx, now)
	if err != nil {
		return nil, err
	}
	if !lost {
		conns := map[string]bool{}
		for _, c := range again {
			conns[c] = true
		}
		rs.epochMu.Lock()
		err = rs.reseed(ctx, e, conns, now)
		rs.epochMu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	second, err := rs.renewPipeline(ctx, again, byConn)
	if err != nil {
		return nil, err
	}
	for j, conn := range again {
		if second[j][0] == "NOMARK" || second[j][0] == "EPOCH" {
			return nil, &unavailableError{errDataset}
		}
		replies[slices.Index(order, conn)] = second[j]
	}
	return replies, nil
}
