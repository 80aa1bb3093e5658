package redisstate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/routeguard/routeguard/queue/slotstore"
)

func errLimit(limit int) error {
	return fmt.Errorf("%w: %w: %d", ErrInvalidConfig, slotstore.ErrInvalidLimit, limit)
}

// The slot scripts. KEYS[1] is the connection's sorted set, members are
// holders scored by expiry in Unix ms. ARGV[1] is now in ms or "" for the
// server's TIME, ARGV[2] the TTL in ms.
const slotPrelude = `
local K = KEYS[1]
local ttl = tonumber(ARGV[2])
local now
if ARGV[1] ~= '' then now = tonumber(ARGV[1]) else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
redis.call('ZREMRANGEBYSCORE', K, '-inf', string.format('%.0f', now))
`

// slotAcquire: ARGV[3] limit, ARGV[4] holder. Returns {ok, held, first
// expiry ms}.
const slotAcquire = slotPrelude + `
local limit, holder = tonumber(ARGV[3]), ARGV[4]
local n = redis.call('ZCARD', K)
if not redis.call('ZSCORE', K, holder) and n >= limit then
  local first = redis.call('ZRANGE', K, 0, 0, 'WITHSCORES')
  return {0, n, first[2] or '0'}
end
redis.call('ZADD', K, now + ttl, holder)
redis.call('PEXPIRE', K, 3 * ttl)
return {1, redis.call('ZCARD', K), '0'}
`

// slotRenew: ARGV[3..] holders. Returns the holders that were lost.
const slotRenew = slotPrelude + `
local lost = {}
for i = 3, #ARGV do
  if redis.call('ZSCORE', K, ARGV[i]) then
    redis.call('ZADD', K, now + ttl, ARGV[i])
  else
    table.insert(lost, ARGV[i])
  end
end
if redis.call('ZCARD', K) > 0 then redis.call('PEXPIRE', K, 3 * ttl) end
return lost
`

var (
	scriptSlotAcquire = redis.NewScript(slotAcquire)
	scriptSlotRenew   = redis.NewScript(slotRenew)
)

// redisSlots is the slotstore.Store of [State.Slots].
type redisSlots struct {
	s     *State
	local slotstore.Store // the fallback during an outage

	lmu     sync.Mutex
	granted map[slotstore.Slot]bool // the slots local granted and not yet released or lost

	mu  sync.Mutex
	exp map[slotstore.Slot]time.Time // remote slots held: the expiry of their last confirmed acquire or renewal
}

func newRedisSlots(s *State) *redisSlots {
	return &redisSlots{s: s, local: slotstore.NewMemory(s.cfg.SlotTTL), granted: map[slotstore.Slot]bool{},
		exp: map[slotstore.Slot]time.Time{}}
}

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

// confirm records that sl was acquired or renewed at now.
func (rs *redisSlots) confirm(sl slotstore.Slot, now time.Time) {
	rs.mu.Lock()
	rs.exp[sl] = now.Add(rs.s.cfg.SlotTTL)
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
		if exp, ok := rs.exp[sl]; ok && !now.Before(exp.Add(-rs.s.cfg.ClockSkew)) {
			delete(rs.exp, sl)
			lost = append(lost, sl)
		}
	}
	return lost
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
// Holder ids should be unique per attempt across the fleet, for example
// [State.Holder].
func (s *State) Slots() slotstore.Store { return s.slots }

// Holder returns a slot holder id for attempt, unique across the fleet
// when attempt is unique in this process: "<replica>:<attempt>".
func (s *State) Holder(attempt string) string { return s.cfg.Replica + ":" + attempt }

func (rs *redisSlots) key(conn string) string { return "{" + rs.s.cfg.Namespace + ":sem:" + conn + "}" }

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
	var out []any
	err := rs.s.do(ctx, func(ctx context.Context) error {
		v, err := scriptSlotAcquire.Run(ctx, rs.s.rdb, []string{rs.key(conn)},
			rs.at(now), ms(rs.s.cfg.SlotTTL), strconv.Itoa(limit), holder).Slice()
		out = v
		return err
	})
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
	if len(out) != 3 {
		return false, 0, time.Time{}, fmt.Errorf("redisstate: unexpected slot reply %v", out)
	}
	ok, _ := out[0].(int64)
	held, _ := out[1].(int64)
	if ok == 1 {
		rs.confirm(slotstore.Slot{Conn: conn, Holder: holder}, now)
	}
	var retry time.Time
	if ok == 0 {
		if f, err := strconv.ParseFloat(fmt.Sprint(out[2]), 64); err == nil && f > 0 {
			retry = time.UnixMilli(int64(f)).UTC()
		}
	}
	return ok == 1, int(held), retry, nil
}

func (rs *redisSlots) Release(ctx context.Context, conn, holder string, now time.Time) error {
	if rs.holds(conn, holder) {
		rs.noteLocal(slotstore.Slot{Conn: conn, Holder: holder}, false)
		return rs.local.Release(ctx, conn, holder, now)
	}
	rs.mu.Lock()
	delete(rs.exp, slotstore.Slot{Conn: conn, Holder: holder})
	rs.mu.Unlock()
	return rs.s.do(ctx, func(ctx context.Context) error {
		return rs.s.rdb.ZRem(ctx, rs.key(conn), holder).Err()
	})
}

func (rs *redisSlots) Renew(ctx context.Context, held []slotstore.Slot, now time.Time) ([]slotstore.Slot, error) {
	byConn := map[string][]any{}
	var order []string
	var local []slotstore.Slot
	for _, sl := range held {
		if rs.holds(sl.Conn, sl.Holder) {
			local = append(local, sl)
			continue
		}
		if _, ok := byConn[sl.Conn]; !ok {
			order = append(order, sl.Conn)
			byConn[sl.Conn] = []any{rs.at(now), ms(rs.s.cfg.SlotTTL)}
		}
		byConn[sl.Conn] = append(byConn[sl.Conn], sl.Holder)
	}
	lost, err := rs.local.Renew(ctx, local, now)
	for _, sl := range lost {
		rs.noteLocal(sl, false)
	}
	if err != nil || len(order) == 0 {
		return lost, err
	}
	var cmds []*redis.Cmd
	pipeline := func(ctx context.Context) error {
		pipe := rs.s.rdb.Pipeline()
		cmds = cmds[:0]
		for _, conn := range order {
			cmds = append(cmds, scriptSlotRenew.EvalSha(ctx, pipe, []string{rs.key(conn)}, byConn[conn]...))
		}
		_, err := pipe.Exec(ctx)
		return err
	}
	err = rs.s.do(ctx, func(ctx context.Context) error {
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
		var remote []slotstore.Slot
		for _, sl := range held {
			if _, ok := byConn[sl.Conn]; ok && !rs.holds(sl.Conn, sl.Holder) {
				remote = append(remote, sl)
			}
		}
		return append(lost, rs.expired(remote, now)...), err
	}
	var gone map[slotstore.Slot]bool
	for i, conn := range order {
		hs, err := cmds[i].StringSlice()
		if err != nil && !errors.Is(err, redis.Nil) {
			return lost, err
		}
		for _, h := range hs {
			sl := slotstore.Slot{Conn: conn, Holder: h}
			lost = append(lost, sl)
			if gone == nil {
				gone = map[slotstore.Slot]bool{}
			}
			gone[sl] = true
		}
	}
	rs.mu.Lock()
	for conn, args := range byConn {
		for _, h := range args[2:] {
			sl := slotstore.Slot{Conn: conn, Holder: h.(string)}
			if gone[sl] {
				delete(rs.exp, sl)
			} else {
				rs.exp[sl] = now.Add(rs.s.cfg.SlotTTL)
			}
		}
	}
	rs.mu.Unlock()
	return lost, nil
}
