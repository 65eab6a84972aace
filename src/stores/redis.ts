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
 */
import { createClient, defineScript, type CommandParser } from 'redis';
import type { PolicyLog } from '../core/policy.js';
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

const GCRA = defineScript({
  SCRIPT: GCRA_LUA,
  NUMBER_OF_KEYS: 1,
  parseCommand(parser: CommandParser, key: string, limit: number, windowMs: number) {
    parser.pushKey(key);
    parser.push(String(limit), String(windowMs));
  },
  transformReply: (reply: unknown) => reply as [number, number, number, number],
});

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

const RECORD = defineScript({
  SCRIPT: RECORD_LUA,
  NUMBER_OF_KEYS: 2,
  parseCommand(parser: CommandParser, hashKey: string, setKey: string, use: PendingUse) {
    parser.pushKey(hashKey);
    parser.pushKey(setKey);
    parser.push(use.consumer, String(use.first), String(use.last), String(use.count), use.operation);
  },
  transformReply: (reply: unknown) => reply as number,
});

const OPERATIONS_KEY = 'deprecations';
const operationKey = (operation: string): string => `deprecations:${operation}`;

function connect(config: RedisStoreConfig) {
  const maxDelay = config.maxReconnectDelayMs ?? REDIS_DEFAULTS.maxReconnectDelayMs;
  return createClient({
    url: config.url,
    keyPrefix: config.prefix ?? REDIS_DEFAULTS.prefix,
    // Fail fast while disconnected: a queued command would wait for the reconnect (a hang).
    disableOfflineQueue: true,
    // Covers the wait to be written only, and only as a backstop that drops a command from the
    // queue: withDeadline below is the deadline a decision waits for, and it does not count the
    // gateway's own event-loop lag, which this plain timer would.
    commandOptions: { timeout: (config.commandTimeoutMs ?? REDIS_DEFAULTS.commandTimeoutMs) * MAX_DEADLINES },
    socket: {
      connectTimeout: config.connectTimeoutMs ?? REDIS_DEFAULTS.connectTimeoutMs,
      // 50 ms, 100 ms, 200 ms, ... capped: never gives up, never hammers a Redis that is restarting.
      reconnectStrategy: (retries: number) => Math.min(50 * 2 ** Math.min(retries, 16), maxDelay),
    },
    scripts: { gcra: GCRA, record: RECORD },
  });
}

type Client = ReturnType<typeof connect>;

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
function withDeadline<T>(p: Promise<T>, ms: number): Promise<T> {
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

/** The URL without its password, for logs. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    return u.toString();
  } catch {
    return 'redis://(invalid url)';
  }
}

export interface RedisStoreOptions {
  readonly log?: PolicyLog | undefined;
  /** How often the deprecation ledger writes its counts to Redis (REDIS_DEFAULTS.ledgerFlushMs). */
  readonly ledgerFlushMs?: number;
}

/**
 * A rate-limit store and a deprecation ledger on one Redis connection. Open it once per process
 * and URL (src/stores/index.ts does): a reload must not open a second connection.
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
  private readonly client: Client;
  private readonly warning: ThrottledWarning;
  private readonly url: string;
  private readonly timeoutMs: number;
  private closed = false;
  /** Set once the first connection is ready; until then a command waits for it (see `whenReady`). */
  private connectedOnce = false;

  constructor(config: RedisStoreConfig, options: RedisStoreOptions = {}) {
    this.url = redactUrl(config.url);
    this.timeoutMs = config.commandTimeoutMs ?? REDIS_DEFAULTS.commandTimeoutMs;
    this.warning = new ThrottledWarning(options.log);
    this.client = connect(config);
    // Without an 'error' listener an EventEmitter error would crash the process.
    this.client.on('error', (err: Error) => {
      this.healthy = false;
      this.warning.warn({ store: 'redis', url: this.url, err: err.message }, 'Redis connection failed; reconnecting');
    });
    this.client.on('ready', () => {
      this.healthy = true;
    });
    this.client.on('end', () => {
      this.healthy = false;
    });
    this.client.on('reconnecting', () => {
      this.healthy = false;
    });
    this.ready = this.client.connect().then(
      () => {
        this.connectedOnce = true;
      },
      () => undefined,
    );
    this.ledger = new RedisDeprecationLedger(this.client, this.failed, this.timeoutMs, this.whenReady, options.ledgerFlushMs ?? REDIS_DEFAULTS.ledgerFlushMs);
  }

  /**
   * Runs `command` now, or, before the first connection is up, once it is. Without this, the
   * requests a gateway serves in the milliseconds between listening and Redis' first `ready` would
   * fail at once (the offline queue is off) and, with onStoreError open, go unlimited: a start or a
   * restart would let a burst through. The caller's deadline still bounds the wait.
   */
  private readonly whenReady = <T>(command: () => Promise<T>): Promise<T> => (this.connectedOnce ? command() : this.ready.then(command));

  take(key: string, rule: RateLimitRule): Promise<RateDecision> {
    return withDeadline(this.whenReady(() => this.client.gcra(`rl:${key}`, rule.limit, rule.windowMs)), this.timeoutMs).then((reply) => {
      this.healthy = true;
      const [allowed, remaining, resetMs, retryAfterMs] = reply as [number, number, number, number];
      return { allowed: allowed === 1, remaining, resetMs, retryAfterMs };
    }, this.failed);
  }

  /** Counts, logs (throttled) and rethrows: the caller decides (fail open or closed). */
  readonly failed = (err: unknown): never => {
    this.errors++;
    this.healthy = false;
    this.warning.warn({ store: 'redis', url: this.url, err: err instanceof Error ? err.message : String(err) }, 'Redis command failed');
    throw err;
  };

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // The ledger's last counts go out before the connection closes (bounded by the command deadline).
    await this.ledger.flush();
    // close() waits for the answers of commands in flight; destroy() when the connection is down,
    // as there is nothing to wait for. A frozen Redis never answers, and node-redis' close() has no
    // deadline of its own (our withDeadline only stops the request waiting), so a shutdown would hang
    // on it: wait a few command timeouts at most, then destroy.
    if (this.client.isReady) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>((r) => (timer = setTimeout(() => r('late'), this.timeoutMs * 4)));
      const outcome = await Promise.race([this.client.close().then(() => 'closed' as const, () => 'failed' as const), late]);
      clearTimeout(timer);
      if (outcome !== 'closed' && this.client.isOpen) this.client.destroy();
    } else if (this.client.isOpen) this.client.destroy();
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
class RedisDeprecationLedger implements DeprecationLedger {
  private pending = new Map<string, PendingUse>();
  private timer: NodeJS.Timeout | undefined = undefined;

  constructor(
    private readonly client: Client,
    private readonly failed: (err: unknown) => never,
    private readonly timeoutMs: number,
    private readonly whenReady: <T>(command: () => Promise<T>) => Promise<T>,
    private readonly flushMs: number,
  ) {}

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
      this.timer = setTimeout(() => void this.flush(), this.flushMs);
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
    await Promise.all(
      uses.map((use) =>
        withDeadline(this.whenReady(() => this.client.record(operationKey(use.operation), OPERATIONS_KEY, use)), this.timeoutMs)
          .catch(this.failed)
          .catch(() => undefined),
      ),
    );
  }

  async report(): Promise<DeprecationUse[]> {
    // This instance's own calls are in the report at once; another instance's within its flushMs.
    await this.flush();
    const client = this.client;
    // The report is for operators, not the request path: a longer deadline, still bounded.
    const deadline = this.timeoutMs * 8;
    const operations = await withDeadline(this.whenReady(() => client.sMembers(OPERATIONS_KEY)), deadline).catch(this.failed);
    const rows: DeprecationUse[] = [];
    for (const operation of [...operations].map(String).sort()) {
      const hash = (await withDeadline(client.hGetAll(operationKey(operation)), deadline).catch(this.failed)) as Record<string, string>;
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
