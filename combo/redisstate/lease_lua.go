package redisstate

// The lease scripts. Every script takes
//
//	KEYS[1]  <prefix>meta   (hash: clock, gmax, floor, snapv, snapt)
//	KEYS[2]  <prefix>act    (sorted set: owner hex scored by expiry, ms)
//	KEYS[3]  <prefix>o:<owner hex>  (when the script has an owner)
//	KEYS[4]  <prefix>c:<connection> (when the script has a connection)
//	ARGV[1]  now in Unix ms, or "" for the server's TIME
//	ARGV[2]  release quarantine, ms
//	ARGV[3]  retention, ms
//	ARGV[4]  stream length (0: no events)
//	ARGV[5]  the dataset epoch the caller knows, or "" on its first call
//	ARGV[6]  the epoch the caller proposes when the dataset has none
//
// Every script first checks the epoch (field epoch of meta): when it is
// missing (Redis lost its data, or never had any) the script stores the
// proposal; when it differs from the caller's, the script changes nothing
// and replies {'EPOCH', epoch}. A caller that knew an older epoch has
// seen its dataset lost: it re-seeds the leases it holds (leaseRestore)
// before anything else. New leases are refused until meta's hold (the
// detection time + Q) so that holders have time to re-seed theirs.
//
// and further arguments of its own. Every key starts with the same hash
// tag, so one script touches one Cluster slot; keys read from a record
// (an occupant's owner record) share that tag too.
//
// An owner record is a JSON object {m: highest generation, a: active
// lease, h: ended leases, newest last, at most 4}; a lease is {c, k, p, g,
// s, a, r, x, e, w} (connection, API key, provider, generation, state,
// acquired, renewed, expires, ended, end reason), every number a decimal
// string so that no precision is lost in Lua. A connection record is {o:
// owner hex, e: when its last lease there ended, or absent}.
const leasePrelude = `
local META, ACT = KEYS[1], KEYS[2]
local P = string.sub(META, 1, -5)
local Q, RET, EVLEN = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local function num(s) return tonumber(s) or 0 end
local function str(n) return string.format('%.0f', n) end
local function okey(o) return P .. 'o:' .. o end
local function ckey(c) return P .. 'c:' .. c end
local function clock(write)
  local now
  if ARGV[1] ~= '' then
    now = tonumber(ARGV[1])
  else
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  local last = num(redis.call('HGET', META, 'clock'))
  if now < last then
    now = last
  elseif write and now > last then
    redis.call('HSET', META, 'clock', str(now))
  end
  return now
end
local function load(o)
  local v = redis.call('GET', okey(o))
  if not v then return nil end
  local r = cjson.decode(v)
  if type(r.h) ~= 'table' then r.h = {} end
  return r
end
local function save(o, r, now)
  local until_ = now
  if r.a then until_ = math.max(now, num(r.a.x)) end
  if #r.h == 0 then r.h = nil end
  local v = cjson.encode(r)
  if r.h == nil then r.h = {} end
  redis.call('SET', okey(o), v, 'PX', str(until_ - now + RET))
end
local function setconn(c, o, ended, now, exp)
  local v
  if ended then v = cjson.encode({o = o, e = str(ended)}) else v = cjson.encode({o = o}) end
  local until_ = math.max(now, exp or now)
  redis.call('SET', ckey(c), v, 'PX', str(until_ - now + Q + RET))
end
local function event(op, o, l, now)
  if EVLEN <= 0 then return end
  local seq = redis.call('INCR', P .. 'seq')
  redis.call('XADD', P .. 'ev', 'MAXLEN', '~', str(EVLEN), '*',
    'seq', str(seq), 'op', op, 'o', o, 'at', str(now), 'l', cjson.encode(l))
end
local function push(r, l)
  table.insert(r.h, l)
  while #r.h > 4 do table.remove(r.h, 1) end
end
-- ends r's active lease l as state s at t with reason w; frees its
-- connection (keeping the end time for the quarantine).
local function finish(o, r, s, t, w, now)
  local l = r.a
  l.s, l.e, l.w = s, str(t), w
  push(r, l)
  r.a = nil
  redis.call('ZREM', ACT, o)
  local cv = redis.call('GET', ckey(l.c))
  if cv and cjson.decode(cv).o == o then setconn(l.c, o, t, now) end
  event('end', o, l, now)
  return l
end
-- expire ends r's active lease if it has expired at now, and reports
-- whether r changed.
local function expire(o, r, now)
  if r and r.a and num(r.a.x) <= now then
    finish(o, r, 'EXPIRED', num(r.a.x), 'TTL_EXPIRED', now)
    return true
  end
  return false
end
-- live returns r's active lease when it has not expired at now.
local function live(r, now)
  if r and r.a and num(r.a.x) > now then return r.a end
  return nil
end
-- occupant returns who holds connection c at now: the owner hex and its
-- live lease, or the owner hex of the last lease there and when it
-- ended. With write set, an expired occupant is ended.
local function occupant(c, now, write)
  local v = redis.call('GET', ckey(c))
  if not v then return nil end
  local cv = cjson.decode(v)
  local r = load(cv.o)
  if r and r.a and r.a.c == c then
    if num(r.a.x) > now then return cv.o, r.a, nil end
    local ended = num(r.a.x)
    if write then
      expire(cv.o, r, now)
      save(cv.o, r, now)
    end
    return cv.o, nil, ended
  end
  if cv.e then return cv.o, nil, num(cv.e) end
  return cv.o, nil, nil
end
-- epoch checks the dataset epoch (see above) at now; it returns the
-- reply to give instead of running the script, or nil.
local function epoch(now)
  local known, mine = ARGV[5], ARGV[6]
  local e = redis.call('HGET', META, 'epoch')
  if not e then
    redis.call('HSET', META, 'epoch', mine)
    e = mine
  end
  if e == known then return nil end
  if known ~= '' then
    local hold = num(redis.call('HGET', META, 'hold'))
    if now + Q > hold then redis.call('HSET', META, 'hold', str(now + Q)) end
  end
  return {'EPOCH', e}
end
-- held returns the time until which new leases are refused after a lost
-- dataset, or nil.
local function held(now)
  local hold = num(redis.call('HGET', META, 'hold'))
  if now < hold then return hold end
  return nil
end
-- busy returns the time until which c is refused to owner o, or nil.
local function busy(c, o, now)
  local occ, l, ended = occupant(c, now, true)
  if not occ or occ == o then return nil end
  if l then return num(l.x) + Q end
  if ended and now < ended + Q then return ended + Q end
  return nil
end
`

// leaseAcquire: KEYS meta act o c; ARGV[7..10] API key, provider, ttl ms,
// max generation.
const leaseAcquire = leasePrelude + `
local O = string.sub(KEYS[3], #P + 3)
local key, prov, ttl, maxgen = ARGV[7], ARGV[8], tonumber(ARGV[9]), tonumber(ARGV[10])
local conn = string.sub(KEYS[4], #P + 3)
local now = clock(true)
local EP = epoch(now)
if EP then return EP end
local r = load(O)
local fresh = r == nil
if fresh then r = {m = '0', h = {}} end
local changed = expire(O, r, now)
if r.a then
  if r.a.k == key and r.a.c == conn then
    r.a.p, r.a.r, r.a.x = prov, str(now), str(now + ttl)
    save(O, r, now)
    setconn(conn, O, nil, now, now + ttl)
    redis.call('ZADD', ACT, now + ttl, O)
    event('renew', O, r.a, now)
    return {'REUSED', cjson.encode(r.a)}
  end
  return {'OWNER_ACTIVE'}
end
local b = held(now) or busy(conn, O, now)
if b then
  if changed then save(O, r, now) end
  return {'BUSY', str(b)}
end
-- The generation floor: owners forgotten after RET started below it.
local m = redis.call('HMGET', META, 'gmax', 'floor', 'snapv', 'snapt')
local gmax, floor, period = num(m[1]), num(m[2]), math.floor(RET / 3)
if not m[4] then
  redis.call('HSET', META, 'snapv', str(gmax), 'snapt', str(now))
elseif now >= num(m[4]) + period then
  if now < num(m[4]) + 2 * period then floor = math.max(floor, num(m[3])) else floor = math.max(floor, gmax) end
  redis.call('HSET', META, 'floor', str(floor), 'snapv', str(gmax), 'snapt', str(now))
end
local base = num(r.m)
if fresh then base = math.max(base, floor) end
if base >= maxgen then
  if changed then save(O, r, now) end
  return {'EXHAUSTED'}
end
local g = base + 1
r.m = str(g)
r.a = {c = conn, k = key, p = prov, g = str(g), s = 'ACTIVE', a = str(now), r = str(now), x = str(now + ttl)}
save(O, r, now)
setconn(conn, O, nil, now, now + ttl)
redis.call('ZADD', ACT, now + ttl, O)
if g > gmax then redis.call('HSET', META, 'gmax', str(g)) end
event('acquire', O, r.a, now)
return {'ACQUIRED', cjson.encode(r.a)}
`

// leaseTransition: KEYS meta act o c; ARGV[7..10] API key, generation,
// provider, ttl ms; ARGV[11] reason.
const leaseTransition = leasePrelude + `
local O = string.sub(KEYS[3], #P + 3)
local conn = string.sub(KEYS[4], #P + 3)
local key, gen, prov, ttl, why = ARGV[7], tonumber(ARGV[8]), ARGV[9], tonumber(ARGV[10]), ARGV[11]
local now = clock(true)
local EP = epoch(now)
if EP then return EP end
local r = load(O)
if not r then return {'STALE'} end
local changed = expire(O, r, now)
local a = r.a
if not a or a.k ~= key or num(a.g) ~= gen then
  if changed then save(O, r, now) end
  return {'STALE'}
end
if a.c == conn then return {'SAME', cjson.encode(a)} end
local b = held(now) or busy(conn, O, now)
if b then return {'BUSY', str(b)} end
local g = a.g
local prev = finish(O, r, 'INVALIDATED', now, why, now)
r.a = {c = conn, k = key, p = prov, g = g, s = 'ACTIVE', a = str(now), r = str(now), x = str(now + ttl)}
save(O, r, now)
setconn(conn, O, nil, now, now + ttl)
redis.call('ZADD', ACT, now + ttl, O)
event('acquire', O, r.a, now)
return {'TRANSITIONED', cjson.encode(r.a), cjson.encode(prev)}
`

// leaseRenew: KEYS meta act o; ARGV[7..9] API key, generation, ttl ms.
const leaseRenew = leasePrelude + `
local O = string.sub(KEYS[3], #P + 3)
local key, gen, ttl = ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9])
local now = clock(true)
local EP = epoch(now)
if EP then return EP end
local r = load(O)
if not r then return {'STALE'} end
local changed = expire(O, r, now)
local a = r.a
if not a or a.k ~= key or num(a.g) ~= gen then
  if changed then save(O, r, now) end
  return {'STALE'}
end
a.r, a.x = str(now), str(now + ttl)
save(O, r, now)
setconn(a.c, O, nil, now, now + ttl)
redis.call('ZADD', ACT, now + ttl, O)
event('renew', O, a, now)
return {'RENEWED', cjson.encode(a)}
`

// leaseRelease: KEYS meta act o; ARGV[7..9] API key, generation, reason.
const leaseRelease = leasePrelude + `
local O = string.sub(KEYS[3], #P + 3)
local key, gen, why = ARGV[7], tonumber(ARGV[8]), ARGV[9]
local now = clock(true)
local EP = epoch(now)
if EP then return EP end
local r = load(O)
if not r then return {'STALE'} end
local changed = expire(O, r, now)
local a = r.a
if a and a.k == key and num(a.g) == gen then
  local l = finish(O, r, 'RELEASED', now, why, now)
  save(O, r, now)
  return {'RELEASED', cjson.encode(l)}
end
if changed then save(O, r, now) end
if not a or num(a.g) ~= gen then
  for i = #r.h, 1, -1 do
    local l = r.h[i]
    if num(l.g) == gen then
      if l.s == 'RELEASED' and l.k == key then return {'AGAIN', cjson.encode(l)} end
      break
    end
  end
end
return {'STALE'}
`

// leaseInvalidate: KEYS meta act o; ARGV[7..8] generation, reason.
const leaseInvalidate = leasePrelude + `
local O = string.sub(KEYS[3], #P + 3)
local gen, why = tonumber(ARGV[7]), ARGV[8]
local now = clock(true)
local EP = epoch(now)
if EP then return EP end
local r = load(O)
if not r then return {'STALE'} end
local changed = expire(O, r, now)
local a = r.a
if not a or num(a.g) ~= gen then
  if changed then save(O, r, now) end
  return {'STALE'}
end
local l = finish(O, r, 'INVALIDATED', now, why, now)
save(O, r, now)
return {'INVALIDATED', cjson.encode(l)}
`

// leaseStatus (read only): KEYS meta act o. The owner's live lease.
const leaseStatus = leasePrelude + `
local O = string.sub(KEYS[3], #P + 3)
local now = clock(false)
local EP = epoch(now)
if EP then return EP end
local a = live(load(O), now)
if not a then return {'NONE'} end
return {'ACTIVE', cjson.encode(a)}
`

// leaseOccupant (read only): KEYS meta act c. The live lease on c.
const leaseOccupant = leasePrelude + `
local conn = string.sub(KEYS[3], #P + 3)
local now = clock(false)
local EP = epoch(now)
if EP then return EP end
local occ, l = occupant(conn, now, false)
if not l then return {'NONE'} end
return {'ACTIVE', cjson.encode(l), occ}
`

// leaseReconcile: KEYS meta act; ARGV[7] batch size. Ends expired leases
// and returns {count, lease, owner, lease, owner, ...}.
const leaseReconcile = leasePrelude + `
local now = clock(true)
local EP = epoch(now)
if EP then return EP end
local out = {'0'}
local owners = redis.call('ZRANGEBYSCORE', ACT, '-inf', str(now), 'LIMIT', 0, tonumber(ARGV[7]))
local n = 0
for _, o in ipairs(owners) do
  local r = load(o)
  if r and r.a and num(r.a.x) <= now then
    local l = finish(o, r, 'EXPIRED', num(r.a.x), 'TTL_EXPIRED', now)
    save(o, r, now)
    table.insert(out, cjson.encode(l))
    table.insert(out, o)
    n = n + 1
  else
    redis.call('ZREM', ACT, o)
  end
end
out[1] = tostring(#owners)
return out
`

// leaseList (read only): KEYS meta act; ARGV[7] offset, ARGV[8] batch
// size. Returns {scanned, lease, owner, ...} for the live leases.
const leaseList = leasePrelude + `
local now = clock(false)
local EP = epoch(now)
if EP then return EP end
local owners = redis.call('ZRANGEBYSCORE', ACT, '(' .. str(now), '+inf', 'LIMIT', tonumber(ARGV[7]), tonumber(ARGV[8]))
local out = {tostring(#owners)}
for _, o in ipairs(owners) do
  local a = live(load(o), now)
  if a then
    table.insert(out, cjson.encode(a))
    table.insert(out, o)
  end
end
return out
`

// leaseRestore: KEYS meta act; ARGV[7] a generation floor, ARGV[8..]
// pairs of owner hex and lease. Re-seeds leases a replica held before its
// dataset was lost: each one still live at now whose owner has no live
// lease and whose connection is free to it is stored as it was (same
// generation and expiry). Returns {'RESTORED', restored, conflicts}.
const leaseRestore = leasePrelude + `
local now = clock(true)
local EP = epoch(now)
if EP then return EP end
local floor = math.max(num(redis.call('HGET', META, 'floor')), num(ARGV[7]))
local gmax = math.max(num(redis.call('HGET', META, 'gmax')), floor)
redis.call('HSET', META, 'floor', str(floor), 'gmax', str(gmax))
local n, bad = 0, 0
for i = 8, #ARGV - 1, 2 do
  local o, l = ARGV[i], cjson.decode(ARGV[i + 1])
  if num(l.x) > now then
    local r = load(o)
    if not r then r = {m = '0', h = {}} end
    expire(o, r, now)
    local a = live(r, now)
    if a then
      if not (a.c == l.c and a.g == l.g) then bad = bad + 1 end
    elseif busy(l.c, o, now) then
      bad = bad + 1
    else
      r.m = str(math.max(num(r.m), num(l.g)))
      r.a = l
      save(o, r, now)
      setconn(l.c, o, nil, now, num(l.x))
      redis.call('ZADD', ACT, num(l.x), o)
      if num(l.g) > gmax then gmax = num(l.g) redis.call('HSET', META, 'gmax', str(gmax)) end
      event('restore', o, l, now)
      n = n + 1
    end
  end
end
return {'RESTORED', tostring(n), tostring(bad)}
`
