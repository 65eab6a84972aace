/**
 * The Lua scripts of the console's fleet rollup (fleet.ts, which documents the keys). Every key
 * a script touches is `<prefix>{console}:...` (one hash tag: one Cluster slot); KEYS[1] is the
 * `meta` hash, which routes the call.
 */
import { redisScript } from '../../stores/connection.js';

/**
 * Adds one batch (ARGV[2], JSON) of an instance's counts, once:
 * - `meta` has no epoch (a first flush ever, or a Redis that lost its data): a new one, and
 *   `members` starts empty;
 * - a batch that is not `full` from an instance whose known epoch is not Redis's: `full`
 *   (Redis does not hold what it sent before: it must send all it holds), nothing added;
 * - a batch whose sequence number `members` already holds for the instance: `dup` (its reply
 *   was lost, Redis added it), nothing added;
 * - else added: slot numbers added one by one in comma-separated values (trailing zeros left
 *   out), daily counts HINCRBY, first/last seen min/max, violation rules added (at most
 *   `maxRules` per operation: a new rule past them takes the place of the least counted if it
 *   counts more), samples in a sorted set by time (the newest `maxSamples` kept).
 * Every key expires a little after its window (computed from the batch's `now`). Numbers that
 * reach a Redis command travel as strings (a Lua number could be written as `1.9e+12`).
 */
export const FLUSH = redisScript(`
local p = ARGV[1]
local a = cjson.decode(ARGV[2])
local meta = KEYS[1]
local members = p .. 'members'
local epoch = redis.call('HGET', meta, 'epoch')
if not epoch then
  epoch = a.proposed
  redis.call('HSET', meta, 'epoch', epoch)
  redis.call('DEL', members)
end
if not a.full and a.known ~= epoch then return {'full', epoch} end
local last = redis.call('HGET', members, a.id)
if last and tonumber(string.match(last, '^(%d+)')) >= tonumber(a.seq) then return {'dup', epoch} end
redis.call('HSET', members, a.id, a.seq .. ':' .. a.now)
redis.call('PEXPIRE', members, a.keep.members)
local now = tonumber(a.now)
local function add(old, new)
  local v = {}
  for x in string.gmatch(old, '[^,]+') do v[#v + 1] = tonumber(x) end
  local i = 0
  for x in string.gmatch(new, '[^,]+') do
    i = i + 1
    v[i] = (v[i] or 0) + tonumber(x)
  end
  local n = #v
  while n > 1 and v[n] == 0 do
    v[n] = nil
    n = n - 1
  end
  return table.concat(v, ',')
end
local d = a.data
for _, s in ipairs(d.slots) do
  local ttl = s[2] + a.keep[string.sub(s[1], 1, 1)] - now
  if ttl > 0 then
    local key = p .. s[1]
    local f = s[3]
    for i = 1, #f, 2 do
      local old = redis.call('HGET', key, f[i])
      if old then redis.call('HSET', key, f[i], add(old, f[i + 1])) else redis.call('HSET', key, f[i], f[i + 1]) end
    end
    redis.call('PEXPIRE', key, string.format('%d', ttl))
  end
end
for _, s in ipairs(d.daily) do
  local ttl = s[3] + a.keep.d - now
  if ttl > 0 then
    local key = p .. 'd:' .. s[1] .. ':' .. s[2]
    local f = s[4]
    for i = 1, #f, 2 do redis.call('HINCRBY', key, f[i], f[i + 1]) end
    redis.call('PEXPIRE', key, string.format('%d', ttl))
    redis.call('SADD', p .. 'dops', s[1])
  end
end
if #d.seen > 0 then
  local key = p .. 'seen'
  for i = 1, #d.seen, 3 do
    local c, first, lst = d.seen[i], d.seen[i + 1], d.seen[i + 2]
    local old = redis.call('HGET', key, c)
    if old then
      local f0, l0 = string.match(old, '^(%d+),(%d+)$')
      if f0 and tonumber(f0) < tonumber(first) then first = f0 end
      if l0 and tonumber(l0) > tonumber(lst) then lst = l0 end
    end
    redis.call('HSET', key, c, first .. ',' .. lst)
  end
  redis.call('PEXPIRE', key, a.keep.d)
end
if #d.rules > 0 then
  local key = p .. 'v'
  for _, r in ipairs(d.rules) do
    local op, field, n, at = r[1], r[2], tonumber(r[3]), r[4]
    local old = redis.call('HGET', key, field)
    if old then
      local c0, l0 = string.match(old, '^(%d+),(%d+)$')
      if l0 and tonumber(l0) > tonumber(at) then at = l0 end
      redis.call('HSET', key, field, string.format('%d', (tonumber(c0) or 0) + n) .. ',' .. at)
    else
      local prefix = op .. '\\31'
      local count, least, leastField = 0, nil, nil
      local all = redis.call('HGETALL', key)
      for i = 1, #all, 2 do
        if string.sub(all[i], 1, #prefix) == prefix then
          count = count + 1
          local c = tonumber(string.match(all[i + 1], '^(%d+)')) or 0
          if least == nil or c < least then least, leastField = c, all[i] end
        end
      end
      if count < a.maxRules or (least ~= nil and n > least) then
        if count >= a.maxRules then redis.call('HDEL', key, leastField) end
        redis.call('HSET', key, field, string.format('%d', n) .. ',' .. at)
      end
    end
  end
  redis.call('PEXPIRE', key, a.keep.d)
end
if #d.samples > 0 then
  local key = p .. 'vs'
  for i = 1, #d.samples, 2 do redis.call('ZADD', key, d.samples[i], d.samples[i + 1]) end
  redis.call('ZREMRANGEBYRANK', key, 0, string.format('%d', -(a.maxSamples + 1)))
  redis.call('PEXPIRE', key, a.keep.d)
end
return {'ok', epoch}
`);

/**
 * One slot hash (KEYS[1]) as one string: fields and values alternate, joined by `\x1e` ('' when
 * absent). A reply of thousands of fields costs the client microseconds each to decode; one
 * string, a loop. A field or value holding `\x1e` itself (never written by a gateway: key ids
 * cannot hold it) is left out, or it would shift every pair after it.
 */
export const READ_HASH = redisScript(`
local all = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #all, 2 do
  if not string.find(all[i], '\\30', 1, true) and not string.find(all[i + 1], '\\30', 1, true) then
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
return table.concat(out, '\\30')`);

/**
 * What is not in the slot hashes: ARGV[1] the prefix, ARGV[2] the days to read (comma-separated
 * starts), ARGV[3] how many samples. Answers [seen, rules, samples, daily], daily as
 * [operation, day, [consumer, count, ...]] for each day with a count.
 */
export const READ = redisScript(`
local p = ARGV[1]
local days = {}
for d in string.gmatch(ARGV[2], '[^,]+') do days[#days + 1] = d end
local daily = {}
for _, op in ipairs(redis.call('SMEMBERS', p .. 'dops')) do
  local any = false
  for _, day in ipairs(days) do
    local h = redis.call('HGETALL', p .. 'd:' .. op .. ':' .. day)
    if #h > 0 then
      any = true
      daily[#daily + 1] = {op, day, h}
    end
  end
  if not any then redis.call('SREM', p .. 'dops', op) end
end
return {
  redis.call('HGETALL', p .. 'seen'),
  redis.call('HGETALL', p .. 'v'),
  redis.call('ZREVRANGE', p .. 'vs', 0, string.format('%d', tonumber(ARGV[3]) - 1)),
  daily,
}
`);

/**
 * The heartbeat, and the fleet's list: ARGV[1] the prefix, ARGV[2] the instance, ARGV[3] its
 * beat (JSON; '' writes none), ARGV[4] now (ms), ARGV[5] how old a beat is kept, ARGV[6] how
 * long an instance that no longer flushes stays in `members`. Beats older than that (or not
 * JSON with an `atMs`) are removed. Answers [the epoch or '', [beat, ...]].
 */
export const BEAT = redisScript(`
local p = ARGV[1]
local key = p .. 'fleet'
local now = tonumber(ARGV[4])
local maxAge = tonumber(ARGV[5])
if ARGV[3] ~= '' then
  redis.call('HSET', key, ARGV[2], ARGV[3])
  redis.call('PEXPIRE', key, ARGV[5])
end
local out = {}
local all = redis.call('HGETALL', key)
for i = 1, #all, 2 do
  local ok, b = pcall(cjson.decode, all[i + 1])
  if ok and type(b) == 'table' and type(b.atMs) == 'number' and now - b.atMs <= maxAge then
    out[#out + 1] = all[i + 1]
  else
    redis.call('HDEL', key, all[i])
  end
end
local m = redis.call('HGETALL', p .. 'members')
for i = 1, #m, 2 do
  local at = tonumber(string.match(m[i + 1], ':(%d+)$'))
  if at == nil or now - at > tonumber(ARGV[6]) then redis.call('HDEL', p .. 'members', m[i]) end
end
return {redis.call('HGET', KEYS[1], 'epoch') or '', out}
`);
