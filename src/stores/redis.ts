/**
 * The shared store: one Redis for every gateway instance and every worker, so a consumer has one
 * limit however many processes serve it, and the /deprecations report covers them all.
 *
 * node-redis 6 with our own Lua GCRA (src/stores/gcra.ts in Lua) rather than rate-limiter-flexible:
 * one EVALSHA per decision that reads and writes one key atomically and takes the time from Redis
 * (TIME), so instances with skewed clocks still share one clock; node-redis pipelines commands of
 * the same tick on one connection by itself. Envoy's ratelimit service makes the same trade.
 *
 * Never a hang: every command has a short timeout, the offline queue is off (while disconnected a
 * command fails at once instead of waiting for a reconnect), and the client reconnects by itself
 * with a capped exponential backoff. The policy decides what a failure means (`onStoreError`).
 *
 * The connection is the shared one of src/stores/connection.ts (one server, Sentinel or Cluster).
 * Key names: `<prefix>rl:<consumer>` (one key per script call), and for the report
 * `<prefix>deprecations` (the set of operations) and `<prefix>deprecations:<operation>` (one hash
 * each); on a Cluster the two report keys carry the hash tag `{deprecations}` so the script that
 * writes both touches one slot (Redis Cluster specification, "Hash tags").
 */
import type { PolicyLog } from '../core/policy.js';
import { acquireRedis, describeConnection, maskUrl, redisScript, runScript, type RedisConnection, type SharedRedis } from './connection.js';
import { deploymentPrefix } from './connection-schema.js';
import { REDIS_DEFAULTS } from './defaults.js';
import { sortUses } from './memory.js';
import type { DeprecationLedger, DeprecationUse, RateDecision, RateLimitRule, RateLimitStore, RedisStoreConfig } from './types.js';

export { REDIS_DEFAULTS };

/**
 * GCRA in Lua: the arithmetic of gcra.ts, in microseconds from Redis' TIME (integers below 2^53,
 * exact). Returns {allowed, remaining, resetMs, retryAfterMs}, milliseconds rounded up so a
 * Retry-After is never shorter than the real wait. Redis 5+ replicates the effects of a script,
 * so reading TIME before a write is allowed.
 */
const GCRA_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2]) * 1000
local interval = window / limit
local tat = tonumber(redis.call('GET', KEYS[1]))
if tat == nil or tat < now then tat = now end
local nxt = tat + interval
if nxt - now > window + 10 then
  return {0, 0, math.ceil((tat - now) / 1000), math.ceil((nxt - window - now) / 1000)}
end
redis.call('SET', KEYS[1], string.format('%.17g', nxt), 'PX', math.ceil((nxt - now) / 1000) + 1)
local remaining = math.floor((window + 10 - (nxt - now)) / interval)
if remaining > limit - 1 then remaining = limit - 1 end
if remaining < 0 then remaining = 0 end
return {1, remaining, math.ceil((nxt - now) / 1000), 0}
`;

const GCRA = redisScript(GCRA_LUA);

/**
 * One hash per deprecated operation: `c:<consumer>` count, `f:`/`l:` first and last seen (epoch
 * ms, min and max across instances), and a set of the operations seen, all in one atomic call.
 * ARGV: consumer, first seen, last seen, count (an instance's calls since its last flush), operation.
 */
const RECORD_LUA = `
redis.call('SADD', KEYS[2], ARGV[5])
redis.call('HINCRBY', KEYS[1], 'c:' .. ARGV[1], tonumber(ARGV[4]))
local first = tonumber(ARGV[2])
local f = tonumber(redis.call('HGET', KEYS[1], 'f:' .. ARGV[1]))
if f == nil or first < f then redis.call('HSET', KEYS[1], 'f:' .. ARGV[1], ARGV[2]) end
local last = tonumber(ARGV[3])
local l = tonumber(redis.call('HGET', KEYS[1], 'l:' .. ARGV[1]))
if l == nil or last > l then redis.call('HSET', KEYS[1], 'l:' .. ARGV[1], ARGV[3]) end
return 1
`;

const RECORD = redisScript(RECORD_LUA);

/** The report's keys: on a Cluster in one hash slot (the script writes both). */
function reportKeys(prefix: string, cluster: boolean) {
  const base = `${prefix}${cluster ? '{deprecations}' : 'deprecations'}`;
  return { operations: base, operation: (name: string) => `${base}:${name}` };
}
type ReportKeys = ReturnType<typeof reportKeys>;

/** A hash as a command returns it: RESP2 a flat [field, value, ...] list, RESP3 a map. */
function hashOf(reply: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (Array.isArray(reply)) for (let i = 0; i + 1 < reply.length; i += 2) out[String(reply[i])] = String(reply[i + 1]);
  else if (reply instanceof Map) for (const [k, v] of reply) out[String(k)] = String(v);
  else if (reply !== null && typeof reply === 'object') for (const [k, v] of Object.entries(reply)) out[k] = String(v);
  return out;
}

export class RedisDeadlineError extends Error {
  constructor(ms: number) {
    super(`Redis did not answer within ${ms} ms`);
    this.name = 'RedisDeadlineError';
  }
}

/**
 * A timer that fires later than asked by more than this was held up by this process's own event
 * loop (a flood of requests parsed in one go, a long synchronous task), not by Redis.
 */
const LAG_TOLERANCE_MS = 10;
/** However busy the loop, a command fails after about this many deadlines of wall time at most. */
const MAX_DEADLINES = 8;

/**
 * node-redis' command `timeout` only covers the wait to be written: once a command is on the wire
 * its timer is dropped, so a Redis that accepts bytes but never answers (frozen, overloaded, a
 * half-open connection) would hang the request. This deadline covers the whole round trip. A late
 * answer is ignored (the take may still have been counted: erring towards the limit).
 *
 * Only time the gateway could have read an answer counts against Redis. While the event loop is
 * busy, the command may not even be written yet, and an answer that did arrive sits unread in the
 * socket; the timer then fires late. The lateness is the gateway's, so Redis gets a whole deadline
 * again from the moment the loop is free (while less than `MAX_DEADLINES` x `ms` have passed in
 * all, so a frozen Redis still fails in bounded time under load), and the final check runs after
 * pending I/O (setImmediate runs after the poll phase), so an answer that came during the lag is
 * read before the command is declared failed. Without this, a flood's own lag made every take
 * fail and the limit switched itself off.
 */
export function withDeadline<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const start = performance.now();
    let due = start + ms;
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    const fail = () => {
      if (settled) return;
      settled = true;
      reject(new RedisDeadlineError(ms));
    };
    const check = () => {
      const t = performance.now();
      const late = t - due;
      if (late > LAG_TOLERANCE_MS && t - start < ms * MAX_DEADLINES) {
        // The loop is free again: the command may only now be written; Redis gets a whole deadline.
        due = t + ms;
        timer = setTimeout(check, ms);
        return;
      }
      setImmediate(fail);
    };
    timer = setTimeout(check, ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        if (settled) return;
        settled = true;
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        if (settled) return;
        settled = true;
        reject(err);
      },
    );
  });
}

/** Logs a recurring failure at most once per `everyMs`, with the number of failures since. */
export class ThrottledWarning {
  private last = -Infinity;
  private suppressed = 0;
  constructor(
    private readonly log: PolicyLog | undefined,
    private readonly everyMs = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  warn(fields: Record<string, unknown>, message: string): void {
    const t = this.now();
    if (t - this.last < this.everyMs) {
      this.suppressed++;
      return;
    }
    this.log?.warn({ ...fields, suppressed: this.suppressed }, message);
    this.last = t;
    this.suppressed = 0;
  }
}

/** The URL without its user and password, for logs. */
export function redactUrl(url: string): string {
  return maskUrl(url);
}

export interface RedisStoreOptions {
  readonly log?: PolicyLog | undefined;
  /** Where `passwordFromEnv` and PETSTORE_REDIS_PREFIX are read (process.env). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** How often the deprecation ledger writes its counts to Redis (REDIS_DEFAULTS.ledgerFlushMs). */
  readonly ledgerFlushMs?: number;
}

/**
 * A rate-limit store and a deprecation ledger on one Redis connection. Open it once per process
 * and connection config (src/stores/index.ts does): a reload must not open a second connection.
 */
export class RedisStore implements RateLimitStore {
  readonly kind = 'redis' as const;
  /** True once connected and while the last command succeeded. */
  healthy = false;
  /** Failed commands (timeouts, refused connections, script errors): the metrics layer reads it. */
  errors = 0;
  readonly ledger: RedisDeprecationLedger;
  /** Resolves once the first connection is ready (never rejects: the client keeps retrying). */
  readonly ready: Promise<void>;
  /** Where the store is, for logs: user and password masked. */
  readonly where: string;
  private readonly shared: SharedRedis;
  private readonly conn: RedisConnection;
  private readonly warning: ThrottledWarning;
  private readonly timeoutMs: number;
  private readonly prefix: string;
  private closed = false;

  constructor(config: RedisStoreConfig, options: RedisStoreOptions = {}) {
    const env = options.env ?? process.env;
    this.where = describeConnection(config);
    this.timeoutMs = config.commandTimeoutMs ?? REDIS_DEFAULTS.commandTimeoutMs;
    this.prefix = config.prefix ?? deploymentPrefix(env);
    this.warning = new ThrottledWarning(options.log);
    this.shared = acquireRedis(config, env);
    this.conn = this.shared.conn;
    this.conn.on('error', (err: Error) => {
      this.healthy = false;
      this.warning.warn({ store: 'redis', url: this.where, err: err.message }, 'Redis connection failed; reconnecting');
    });
    this.conn.on('ready', () => (this.healthy = true));
    this.conn.on('down', () => (this.healthy = false));
    this.healthy = this.conn.isReady;
    this.ready = this.shared.connected.then(() => void (this.healthy = this.conn.isReady));
    const run = (keys: readonly string[], args: readonly string[]) => runScript(this.conn, RECORD, keys, args);
    const read = (key: string, args: readonly string[]) => this.conn.command(key, args);
    const keys = reportKeys(this.prefix, this.conn.form === 'cluster');
    this.ledger = new RedisDeprecationLedger({ run, read, keys, failed: this.failed, timeoutMs: this.timeoutMs, whenReady: this.whenReady, flushMs: options.ledgerFlushMs ?? REDIS_DEFAULTS.ledgerFlushMs });
  }

  /**
   * Runs `command` now, or, before the first connection is up, once it is. Without this, the
   * requests a gateway serves in the milliseconds between listening and Redis' first `ready` would
   * fail at once (the offline queue is off) and, with onStoreError open, go unlimited: a start or a
   * restart would let a burst through. The caller's deadline still bounds the wait.
   */
  private readonly whenReady = <T>(command: () => Promise<T>): Promise<T> => (this.shared.connectedOnce ? command() : this.ready.then(command));

  take(key: string, rule: RateLimitRule): Promise<RateDecision> {
    const command = () => runScript(this.conn, GCRA, [`${this.prefix}rl:${key}`], [String(rule.limit), String(rule.windowMs)]);
    return withDeadline(this.whenReady(command), this.timeoutMs).then((reply) => {
      this.healthy = true;
      const [allowed, remaining, resetMs, retryAfterMs] = (reply as unknown[]).map(Number) as [number, number, number, number];
      return { allowed: allowed === 1, remaining, resetMs, retryAfterMs };
    }, this.failed);
  }

  /** Counts, logs (throttled) and rethrows: the caller decides (fail open or closed). */
  readonly failed = (err: unknown): never => {
    this.errors++;
    this.healthy = false;
    this.warning.warn({ store: 'redis', url: this.where, err: err instanceof Error ? err.message : String(err) }, 'Redis command failed');
    throw err;
  };

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // The ledger's last counts go out before the connection closes (bounded by the command deadline).
    await this.ledger.flush();
    // The last use of the shared connection closes it (at once: a frozen Redis would never answer
    // a polite QUIT, and every command of ours has had its deadline).
    await this.shared.release();
  }
}

/** One consumer's calls of one operation since the last flush. */
interface PendingUse {
  readonly operation: string;
  readonly consumer: string;
  count: number;
  first: number;
  last: number;
}

/**
 * The deprecation report in Redis, shared by every instance. Calls are counted in the process and
 * written once per `flushMs` (one script call per operation and consumer seen since), not one
 * Redis round trip per request: a getPet costs the rate-limit decision only, and the report of
 * another instance lags by `flushMs` at most. The pending map is bounded by the configured key
 * ids times the deprecated operations.
 */
interface LedgerWiring {
  /** Runs the RECORD script on the report's two keys. */
  readonly run: (keys: readonly string[], args: readonly string[]) => Promise<unknown>;
  /** One read command routed by `key`. */
  readonly read: (key: string, args: readonly string[]) => Promise<unknown>;
  readonly keys: ReportKeys;
  readonly failed: (err: unknown) => never;
  readonly timeoutMs: number;
  readonly whenReady: <T>(command: () => Promise<T>) => Promise<T>;
  readonly flushMs: number;
}

class RedisDeprecationLedger implements DeprecationLedger {
  private pending = new Map<string, PendingUse>();
  private timer: NodeJS.Timeout | undefined = undefined;

  constructor(private readonly w: LedgerWiring) {}

  record(operation: string, consumer: string, atMs: number): void {
    const key = `${operation}\n${consumer}`;
    const use = this.pending.get(key);
    if (use === undefined) this.pending.set(key, { operation, consumer, count: 1, first: atMs, last: atMs });
    else {
      use.count++;
      if (atMs < use.first) use.first = atMs;
      if (atMs > use.last) use.last = atMs;
    }
    if (this.timer === undefined) {
      this.timer = setTimeout(() => void this.flush(), this.w.flushMs);
      this.timer.unref();
    }
  }

  /**
   * Writes the pending counts (never throws: a failed write is counted and logged by the store,
   * and its counts are lost, as a lost single write was).
   */
  async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending.size === 0) return;
    const uses = [...this.pending.values()];
    this.pending = new Map();
    const { keys, run } = this.w;
    await Promise.all(
      uses.map((use) =>
        withDeadline(this.w.whenReady(() => run([keys.operation(use.operation), keys.operations], [use.consumer, String(use.first), String(use.last), String(use.count), use.operation])), this.w.timeoutMs)
          .catch(this.w.failed)
          .catch(() => undefined),
      ),
    );
  }

  async report(): Promise<DeprecationUse[]> {
    // This instance's own calls are in the report at once; another instance's within its flushMs.
    await this.flush();
    const { keys, read, failed } = this.w;
    // The report is for operators, not the request path: a longer deadline, still bounded.
    const deadline = this.w.timeoutMs * 8;
    const operations = (await withDeadline(this.w.whenReady(() => read(keys.operations, ['SMEMBERS', keys.operations])), deadline).catch(failed)) as unknown[];
    const rows: DeprecationUse[] = [];
    for (const operation of operations.map(String).sort()) {
      const key = keys.operation(operation);
      const hash = hashOf(await withDeadline(read(key, ['HGETALL', key]), deadline).catch(failed));
      for (const [field, value] of Object.entries(hash)) {
        if (!field.startsWith('c:')) continue;
        const consumer = field.slice(2);
        const first = Number(hash[`f:${consumer}`]);
        const last = Number(hash[`l:${consumer}`]);
        rows.push({ operation, consumer, count: Number(value), firstSeen: new Date(first).toISOString(), lastSeen: new Date(last).toISOString() });
      }
    }
    return sortUses(rows);
  }

  close(): Promise<void> {
    // The connection belongs to the store.
    return Promise.resolve();
  }
}
