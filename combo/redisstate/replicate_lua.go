package redisstate

import "github.com/redis/go-redis/v9"

// repPublish merges a batch of record values into the snapshot hash and
// appends each one that raised its field to the stream, with the next
// sequence number, the dataset epoch and the writer's replica id: the
// snapshot and the log cannot diverge. It also creates the epoch when it
// is missing (Redis started empty), prunes a few expired fields, and
// returns {epoch, seq, last stream id, replies}: a reply per item, "" when
// the item was written, else the stronger value already stored.
//
// Values are compared byte by byte (Lua's < on strings follows the
// server's collation locale).
//
// KEYS: epoch, seq, snap, exp, log.
// ARGV: epoch candidate, stream MAXLEN, replica, then per item field,
// value, time to live in ms ("inf": never).
const repPublish = `
local function less(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
local ep = redis.call('GET', KEYS[1])
if not ep then
  ep = ARGV[1]
  redis.call('SET', KEYS[1], ep)
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local dead = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, 32)
for _, f in ipairs(dead) do
  redis.call('HDEL', KEYS[3], f)
  redis.call('ZREM', KEYS[4], f)
end
local out = {}
for i = 4, #ARGV, 3 do
  local f, v, ttl = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local old = redis.call('HGET', KEYS[3], f)
  if old and not less(old, v) then
    out[#out + 1] = old
  else
    redis.call('HSET', KEYS[3], f, v)
    if ttl == 'inf' then
      redis.call('ZADD', KEYS[4], '+inf', f)
    else
      redis.call('ZADD', KEYS[4], now + tonumber(ttl), f)
    end
    local seq = redis.call('INCR', KEYS[2])
    redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[2], '*', 'f', f, 'v', v, 's', seq, 'e', ep, 'r', ARGV[3])
    out[#out + 1] = ''
  end
end
local seq = tonumber(redis.call('GET', KEYS[2]) or '0')
local last = redis.call('XREVRANGE', KEYS[5], '+', '-', 'COUNT', 1)
local lid = '0-0'
if #last > 0 then lid = last[1][1] end
return {ep, seq, lid, out}
`

var repPublishScript = redis.NewScript(repPublish)
