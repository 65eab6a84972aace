/**
 * The migration counts of a fleet, in Redis (`migration.store`): every instance and worker adds
 * what its tally counted since its last flush, every `flushMs` (2 s) and at close, never on the
 * request path; /migration and `petstore-gateway migration report` then read the fleet's totals.
 *
 * Keys (`<prefix>` is the deployment's, PETSTORE_REDIS_PREFIX; the hash tag puts them in one
 * Cluster slot, as the scripts touch several):
 * - `<prefix>{migration}:meta`     hash: `epoch` (changed by a reset) and `since` (ms);
 * - `<prefix>{migration}:ops`      set of the operations counted (at most 256);
 * - `<prefix>{migration}:op:<op>`  hash of one operation's counts (tally.ts `toFields`), the
 *   distinct paths, rules and kinds bounded as in a tally (`n:<kind>` counts them);
 * - `<prefix>{migration}:samples:<op>` list of the newest samples (JSON), LPUSH + LTRIM;
 * - `<prefix>{migration}:members`  set of the instances whose counts the epoch holds.
 *
 * Redis away: the counts stay in the tally and are sent with the next flush (nothing is lost
 * but what a crash of this process takes), one warning per 10 s with the count, nothing thrown.
 * Redis back empty (restarted without persistence, FLUSHALL): the flush script finds this
 * instance missing from `members` and asks for everything it counted in the epoch, so the fleet's
 * counts come back as the instances flush. A reset (DELETE /migration) starts a new epoch: an
 * instance that flushes with the old one drops what it had not sent (at most one `flushMs`).
 */
import { randomBytes } from 'node:crypto';
import { acquireRedis, describeConnection, redisScript, runScript, type RedisConnectionConfig, type SharedRedis } from '../stores/connection.js';
import { deploymentPrefix } from '../stores/connection-schema.js';
import { withDeadline } from '../stores/redis.js';
import { fromFields, MAX_KINDS, MAX_OPERATIONS, toFields, type MigrationTally, type TallyBounds, type TallySample, type TallySnapshot } from './tally.js';

/** A flush that takes longer is abandoned (and retried with the next). */
const FLUSH_MS = 1000;
/** The report is for operators: a longer deadline, still bounded. */
const READ_MS = 3000;
const WARN_EVERY_MS = 10_000;
/** Every this many flushes, an instance with nothing new still checks that Redis holds its counts (a FLUSHALL). */
const CHECK_EVERY = 15;

const FLUSH = redisScript(`
local p = ARGV[1]
local a = cjson.decode(ARGV[2])
local meta = KEYS[1]
local epoch = redis.call('HGET', meta, 'epoch')
if not epoch then
  -- Empty (a first flush, or a Redis that lost its data): the epoch goes on.
  epoch = a.known
  if epoch == '' then epoch = a.proposed end
  redis.call('HSET', meta, 'epoch', epoch, 'since', a.since)
  redis.call('DEL', p .. 'members')
end
if a.known ~= '' and a.known ~= epoch then
  return {'reset', epoch, redis.call('HGET', meta, 'since') or a.since}
end
if redis.call('SISMEMBER', p .. 'members', a.id) == 0 then
  if not a.full then return {'full', epoch, redis.call('HGET', meta, 'since') or a.since} end
  redis.call('SADD', p .. 'members', a.id)
  local since = tonumber(redis.call('HGET', meta, 'since'))
  if since == nil or tonumber(a.since) < since then redis.call('HSET', meta, 'since', a.since) end
end
local bounded = { path = a.maxPaths, violation = a.maxPaths, error = a.maxKinds, fallback = a.maxKinds, dropped = a.maxKinds }
for _, op in ipairs(a.ops) do
  local name = op[1]
  if redis.call('SISMEMBER', p .. 'ops', name) == 0 then
    if redis.call('SCARD', p .. 'ops') >= a.maxOps then name = '(other)' end
    redis.call('SADD', p .. 'ops', name)
  end
  local key = p .. 'op:' .. name
  for _, f in ipairs(op[2]) do
    local field, n = f[1], f[2]
    local colon = string.find(field, ':', 1, true)
    local kind = field
    if colon then kind = string.sub(field, 1, colon - 1) end
    local max = bounded[kind]
    if max == nil then
      redis.call('HINCRBY', key, field, n)
    else
      local rest = string.sub(field, colon + 1)
      if rest == '(other)' or redis.call('HEXISTS', key, field) == 1 then
        redis.call('HINCRBY', key, field, n)
      elseif redis.call('HINCRBY', key, 'n:' .. kind, 1) <= max then
        redis.call('HINCRBY', key, field, n)
      else
        redis.call('HINCRBY', key, 'n:' .. kind, -1)
        redis.call('HINCRBY', key, kind .. ':(other)', n)
      end
    end
  end
  if #op[3] > 0 and a.maxSamples > 0 then
    local list = p .. 'samples:' .. name
    for _, s in ipairs(op[3]) do redis.call('LPUSH', list, s) end
    redis.call('LTRIM', list, 0, a.maxSamples - 1)
  end
end
return {'ok', epoch, redis.call('HGET', meta, 'since')}
`);

const READ = redisScript(`
local p = ARGV[1]
local n = tonumber(ARGV[2])
local out = { redis.call('HGETALL', KEYS[1]) }
for _, name in ipairs(redis.call('SMEMBERS', p .. 'ops')) do
  local samples = {}
  if n > 0 then samples = redis.call('LRANGE', p .. 'samples:' .. name, 0, n - 1) end
  table.insert(out, { name, redis.call('HGETALL', p .. 'op:' .. name), samples })
end
return out
`);

const RESET = redisScript(`
local p = ARGV[1]
for _, name in ipairs(redis.call('SMEMBERS', p .. 'ops')) do
  redis.call('DEL', p .. 'op:' .. name, p .. 'samples:' .. name)
end
redis.call('DEL', p .. 'ops', p .. 'members')
redis.call('HSET', KEYS[1], 'epoch', ARGV[2], 'since', ARGV[3])
return 1
`);

type Counts = Map<string, Map<string, number>>;

/** Every operation's counts as fields (tally.ts `toFields`). */
function fieldsOf(snapshot: TallySnapshot): Counts {
  return new Map(Object.entries(snapshot.operations).map(([name, c]) => [name, toFields(c)]));
}

/** What grew from `from` to `to`, per operation: [field, count as a string] pairs. */
function grown(to: Counts, from: Counts): Map<string, Array<[string, string]>> {
  const out = new Map<string, Array<[string, string]>>();
  for (const [name, fields] of to) {
    const before = from.get(name);
    const list: Array<[string, string]> = [];
    for (const [field, n] of fields) {
      const d = n - (before?.get(field) ?? 0);
      if (d > 0) list.push([field, String(d)]);
    }
    if (list.length > 0) out.set(name, list);
  }
  return out;
}

/** A flat [k, v, k, v] reply as a map of strings. */
function pairs(reply: unknown): Map<string, string> {
  const out = new Map<string, string>();
  if (Array.isArray(reply)) for (let i = 0; i + 1 < reply.length; i += 2) out.set(String(reply[i]), String(reply[i + 1]));
  return out;
}

function parseSample(text: unknown): TallySample | undefined {
  try {
    const s = JSON.parse(String(text)) as Partial<TallySample>;
    if (typeof s.time === 'string' && typeof s.path === 'string' && typeof s.legacy === 'string' && typeof s.next === 'string') return { time: s.time, path: s.path, legacy: s.legacy, next: s.next };
  } catch {
    // A value someone else wrote: not a sample.
  }
  return undefined;
}

export interface FleetLog {
  warn(fields: Record<string, unknown>, message: string): void;
}

export interface FleetOptions {
  readonly bounds: TallyBounds;
  /** Where `passwordFromEnv` and PETSTORE_REDIS_PREFIX are read (process.env). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly log?: FleetLog | undefined;
  /** Milliseconds since the epoch (`since`); Date.now by default. */
  readonly now?: () => number;
  /** How often the tally's new counts are added to Redis; default 2000 ms. */
  readonly flushMs?: number;
}

/**
 * One process's share of the fleet's counts: flushes `tally` (when given: a reader alone, as the
 * `--workers` primary, has none) and reads and resets the fleet's.
 *
 * @example
 *   const fleet = new MigrationFleet({ url: 'redis://127.0.0.1:6379' }, tally, { bounds: tally.bounds, log });
 *   const whole = await fleet.read(); // every instance's counts, this one's flushed first
 *   await fleet.close();
 */
export class MigrationFleet {
  /** Commands that failed (Redis away or slow). */
  errors = 0;
  private readonly shared: SharedRedis;
  private readonly prefix: string;
  private readonly meta: string;
  private readonly where: string;
  private readonly id = randomBytes(12).toString('base64url');
  private readonly now: () => number;
  private readonly log: FleetLog | undefined;
  private readonly timer: NodeJS.Timeout | undefined;
  /** The epoch this instance's counts belong to ('' before its first flush). */
  private known = '';
  /** The tally's counts when the epoch began for this instance, and when last sent. */
  private base: Counts = new Map();
  private sent: Counts = new Map();
  private baseSeq = 0;
  private sentSeq = 0;
  private baseTime: number;
  /** Whether Redis holds counts of this instance in the epoch (else a flush sends all since `base`). */
  private sentAny = false;
  private generation: number;
  /** Flushes and resets, one at a time. */
  private queue: Promise<unknown> = Promise.resolve();
  private lastWarn = -Infinity;
  private suppressed = 0;
  private closed = false;
  /** Whether the next flush checks that Redis still holds this instance's counts, even with nothing new. */
  private checkDue = false;
  private flushes = 0;

  constructor(
    config: RedisConnectionConfig,
    private readonly tally: MigrationTally | undefined,
    private readonly options: FleetOptions,
  ) {
    const env = options.env ?? process.env;
    this.prefix = `${deploymentPrefix(env)}{migration}:`;
    this.meta = `${this.prefix}meta`;
    this.where = describeConnection(config);
    this.now = options.now ?? Date.now;
    this.log = options.log;
    this.baseTime = this.now();
    this.generation = tally?.generation ?? 0;
    this.shared = acquireRedis(config, env);
    this.shared.conn.on('error', () => undefined);
    // A reconnection may be to a Redis that came back empty: the next flush checks.
    this.shared.conn.on('ready', () => void (this.checkDue = true));
    if (tally !== undefined) {
      this.timer = setInterval(() => void this.flush(), options.flushMs ?? 2000);
      this.timer.unref();
    }
  }

  private run(script: ReturnType<typeof redisScript>, args: readonly string[], ms: number): Promise<unknown> {
    const send = () => runScript(this.shared.conn, script, [this.meta], args);
    return withDeadline(this.shared.connectedOnce ? send() : this.shared.connected.then(send), ms);
  }

  private failed(err: unknown): void {
    this.errors++;
    const t = this.now();
    if (t - this.lastWarn < WARN_EVERY_MS) {
      this.suppressed++;
      return;
    }
    this.lastWarn = t;
    this.log?.warn({ store: 'redis', url: this.where, cause: err instanceof Error ? err.message : String(err), errors: this.errors, suppressed: this.suppressed }, 'migration counts not written to Redis; kept in this process and retried');
    this.suppressed = 0;
  }

  private serial<T>(task: () => Promise<T>): Promise<T> {
    const next = this.queue.then(task, task);
    this.queue = next.catch(() => undefined);
    return next;
  }

  /** Counts from now on belong to `epoch`, starting from the tally's counts now. */
  private restart(epoch: string): void {
    const tally = this.tally;
    this.known = epoch;
    this.base = tally === undefined ? new Map() : fieldsOf(tally.snapshot());
    this.sent = this.base;
    this.baseSeq = this.sentSeq = tally?.sampleSeq.last ?? 0;
    this.baseTime = this.now();
    this.sentAny = false;
    this.generation = tally?.generation ?? 0;
  }

  /** Adds the tally's new counts to Redis; never throws (a failure is counted, warned and retried next time). */
  flush(): Promise<void> {
    return this.serial(() => this.flushOnce()).catch((err: unknown) => this.failed(err));
  }

  private async flushOnce(): Promise<void> {
    const tally = this.tally;
    if (tally === undefined) return;
    if (tally.generation !== this.generation) {
      // Reset here alone: what it counts from now on is added to what the fleet has.
      this.generation = tally.generation;
      this.base = this.sent = new Map();
      this.baseSeq = this.sentSeq = tally.sampleSeq.atReset;
    }
    const now = fieldsOf(tally.snapshot());
    const seq = tally.sampleSeq.last;
    let full = !this.sentAny;
    if (++this.flushes % CHECK_EVERY === 0) this.checkDue = true;
    for (let attempt = 0; attempt < 2; attempt++) {
      const ops = grown(now, full ? this.base : this.sent);
      // Nothing new: no call, unless Redis may have lost what this instance sent (then the script asks for it all).
      if (ops.size === 0 && !(this.checkDue && this.sentAny && !full)) return;
      const samples = new Map<string, string[]>();
      for (const { operation, sample } of tally.samplesAfter(full ? this.baseSeq : this.sentSeq)) {
        const list = samples.get(operation) ?? [];
        list.push(JSON.stringify(sample));
        samples.set(operation, list);
      }
      const payload = {
        known: this.known,
        proposed: randomBytes(12).toString('base64url'),
        id: this.id,
        full,
        since: String(this.baseTime),
        maxPaths: this.options.bounds.maxPaths,
        maxSamples: this.options.bounds.maxSamples,
        maxKinds: MAX_KINDS,
        maxOps: MAX_OPERATIONS,
        ops: [...ops].map(([name, fields]) => [name, fields, samples.get(name) ?? []]),
      };
      const reply = (await this.run(FLUSH, [this.prefix, JSON.stringify(payload)], FLUSH_MS)) as unknown[];
      const [status, epoch] = reply.map(String);
      if (status === 'full') {
        // Redis does not hold this instance's counts (it came back empty): all of them, again.
        this.known = epoch ?? '';
        full = true;
        continue;
      }
      if (status === 'reset') {
        // Another instance reset the fleet's counts: what was not sent belongs to before.
        this.restart(epoch ?? '');
        return;
      }
      this.known = epoch ?? '';
      this.sent = now;
      this.sentSeq = seq;
      this.sentAny = true;
      this.checkDue = false;
      return;
    }
  }

  /** The fleet's counts (this instance's flushed first). Rejects when Redis cannot be read. */
  async read(): Promise<TallySnapshot> {
    await this.flush();
    const reply = (await this.run(READ, [this.prefix, String(this.options.bounds.maxSamples)], READ_MS).catch((err: unknown) => {
      this.failed(err);
      throw err;
    })) as unknown[];
    const meta = pairs(reply[0]);
    const sinceMs = Number(meta.get('since'));
    const operations: Array<[string, ReturnType<typeof fromFields>]> = [];
    for (const entry of reply.slice(1)) {
      if (!Array.isArray(entry)) continue;
      const [name, hash, list] = entry as [unknown, unknown, unknown];
      const fields = [...pairs(hash)].map(([k, v]) => [k, Number(v)] as const);
      const samples = Array.isArray(list) ? list.map(parseSample).filter((s): s is TallySample => s !== undefined) : [];
      operations.push([String(name), fromFields(fields, samples, this.options.bounds)]);
    }
    operations.sort((a, b) => (a[0] < b[0] ? -1 : 1));
    return { since: new Date(Number.isFinite(sinceMs) ? sinceMs : this.baseTime).toISOString(), operations: Object.fromEntries(operations) };
  }

  /**
   * Starts the fleet's counts again from zero, then this process's tally. Rejects when Redis
   * cannot be written (nothing is reset then); other instances drop what they had not flushed.
   */
  reset(): Promise<string> {
    return this.serial(async () => {
      const epoch = randomBytes(12).toString('base64url');
      await this.run(RESET, [this.prefix, epoch, String(this.now())], READ_MS).catch((err: unknown) => {
        this.failed(err);
        throw err;
      });
      this.tally?.reset();
      this.restart(epoch);
      return epoch;
    });
  }

  /** This process's tally was reset with the fleet's (by the `--workers` primary, which hands the new epoch). */
  resetLocal(epoch: string | undefined): Promise<void> {
    return this.serial(async () => {
      this.tally?.reset();
      this.restart(epoch ?? this.known);
    });
  }

  /** The last flush (bounded by its deadline), then the connection goes back. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    await this.flush();
    await this.shared.release();
  }
}
