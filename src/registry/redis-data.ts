/**
 * What the key registry keeps in Redis, and the atomic steps that change it: the Lua scripts, the
 * epoch that tells a change from a data loss (src/registry/registry.ts), and the bounded command.
 *
 * Redis data, all under one hash tag so each script touches one Cluster slot:
 * `<prefix>{keys}:records` (hash id -> JSON KeyRecord), `<prefix>{keys}:version` (counter),
 * `<prefix>{keys}:lastused` (hash id -> epoch ms), `<prefix>{keys}:epoch` (the epoch),
 * `<prefix>{keys}:revoked` (a list of the last revocations, JSON, newest first); channel
 * `<prefix>keys:changed` (message: an id, or `*` for everything).
 */
import { randomBytes } from 'node:crypto';
import { RegistryError } from './types.js';

/** The Redis keys and the channel of a registry under `prefix`. */
export interface RegistryKeys {
  readonly records: string;
  readonly version: string;
  readonly lastused: string;
  readonly epoch: string;
  readonly revoked: string;
  readonly channel: string;
}

export function registryKeys(p: string): RegistryKeys {
  return { records: `${p}{keys}:records`, version: `${p}{keys}:version`, lastused: `${p}{keys}:lastused`, epoch: `${p}{keys}:epoch`, revoked: `${p}{keys}:revoked`, channel: `${p}keys:changed` };
}

/**
 * Compare-and-set of one record: the write happens only when the stored text is still the one the
 * caller read ('' = absent), so two admins changing one key at once cannot lose a change. The
 * version moves and the change is announced in the same atomic step.
 * The first write of a registry (or the first after its data was lost) stamps an implicit epoch.
 * A revocation is remembered in the same step (LPUSH, then LTRIM to the last ARGV[7]).
 * KEYS: records, version, lastused, epoch, revoked. ARGV: id, expected, new ('' = delete), channel,
 * epoch, the revocation's entry ('' = none), how many revocations to keep.
 */
export const CAS_LUA = `
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then cur = '' end
if cur ~= ARGV[2] then return -1 end
if redis.call('EXISTS', KEYS[4]) == 0 then redis.call('SET', KEYS[4], ARGV[5]) end
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[3], ARGV[1])
  if ARGV[6] ~= '' then
    redis.call('LPUSH', KEYS[5], ARGV[6])
    redis.call('LTRIM', KEYS[5], 0, tonumber(ARGV[7]) - 1)
  end
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
end
local v = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[4], ARGV[1])
return v
`;

/**
 * A full read in one atomic step: the version, the epoch and every record. Records without an
 * epoch (written before epochs existed) get an implicit one, so a later loss of them is seen.
 * KEYS: records, version, epoch. ARGV: an implicit epoch. Returns {version, epoch, flat records}.
 */
export const READ_LUA = `
local all = redis.call('HGETALL', KEYS[1])
local e = redis.call('GET', KEYS[3])
if (not e) and #all > 0 then
  -- pcall: a user allowed to read only still gets its copy (unstamped: the next write stamps it).
  local r = redis.pcall('SET', KEYS[3], ARGV[1])
  if type(r) == 'table' and r.err then e = '' else e = ARGV[1] end
end
return {redis.call('GET', KEYS[2]) or '', e or '', all}
`;

/**
 * An operator's act after a data loss: the records of a backup (none for reset-epoch), a new
 * explicit epoch, the version moved, and everything announced.
 * KEYS: records, version, epoch. ARGV: epoch, channel, id, record, id, record, ...
 */
export const RESTORE_LUA = `
for i = 3, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
local e = ARGV[1]
local cur = redis.call('GET', KEYS[3])
if cur then
  -- Newer than the epoch in place even when this host's clock is behind the one that wrote it.
  local ct = tonumber(string.match(cur, '^(%d+)-'))
  local nt = tonumber(string.match(e, '^(%d+)-'))
  if ct and nt and ct >= nt then e = string.format('%.0f', ct + 1) .. string.sub(e, string.find(e, '-', 1, true), -1) end
end
redis.call('SET', KEYS[3], e)
local v = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[2], '*')
return v
`;

/** An epoch no process adopts over one it knows (`0-`), or an operator's (`<ms>-`, newer wins). */
export function newEpoch(explicitAtMs: number | undefined): string {
  return `${explicitAtMs === undefined ? 0 : Math.max(1, Math.floor(explicitAtMs))}-${randomBytes(8).toString('hex')}`;
}

/** When an operator wrote the epoch (epoch ms); 0 for an implicit one or none. */
export function epochTime(epoch: string): number {
  const n = Number(epoch.slice(0, epoch.indexOf('-')));
  return Number.isSafeInteger(n) && n > 0 ? n : 0;
}

/** lastUsed only moves forward, whichever instance writes last. ARGV: id, ms, id, ms, ... */
export const TOUCH_LUA = `
for i = 1, #ARGV, 2 do
  local old = tonumber(redis.call('HGET', KEYS[1], ARGV[i]))
  if old == nil or old < tonumber(ARGV[i + 1]) then redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
return 1
`;

export function deadline<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new RegistryError('unavailable', `Redis did not answer within ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof RegistryError ? err : new RegistryError('unavailable', 'Redis is not available'));
      },
    );
  });
}

/** RESP2 flat [k, v, k, v] to pairs (RESP3 gives an object). */
export function pairsOf(flat: readonly unknown[]): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([String(flat[i]), String(flat[i + 1])]);
  return out;
}
