/**
 * The key registry: keys issued at run time, kept in Redis (hashes only) and shared by every
 * gateway instance and worker, beside the keys of the policy file and the environment.
 *
 * Authentication never waits on Redis: each process holds a local copy (digest -> grant) and the
 * auth policy reads only that, so a request costs no Redis round trip. The copy is kept current by
 * publish/subscribe (a change is announced on a channel; each process re-reads that one record,
 * within milliseconds) and by a periodic sync (`syncIntervalMs`: a version counter is read, and
 * the whole set when it moved), which also catches messages lost while a subscriber reconnected.
 * A (re)connection always starts with a full sync, so a revocation made while this process could
 * not reach Redis applies as soon as it can again.
 *
 * While Redis is away the local copy keeps answering for `maxStaleSeconds` after the last time it
 * was confirmed current; past that, registry keys are refused (a revocation this process cannot
 * learn of must not stay unheard for ever). Changes (create, rotate, revoke) need Redis and fail
 * with `RegistryUnavailable` while it is away.
 *
 * Redis data, all under one hash tag so each script touches one Cluster slot:
 * `<prefix>{keys}:records` (hash id -> JSON KeyRecord), `<prefix>{keys}:version` (counter),
 * `<prefix>{keys}:lastused` (hash id -> epoch ms); channel `<prefix>keys:changed` (message: id).
 */
import { hash } from 'node:crypto';
import type { PolicyLog } from '../core/policy.js';
import { hashKey, type KeyGrant } from '../policies/auth/keys.js';
import { acquireRedis, deploymentPrefix, describeConnection, type RedisConnection, type RedisConnectionConfig, type SharedRedis } from '../stores/connection.js';
import { newRegistryKey } from './format.js';
import { infoOf, localSecrets, parseRecord, type KeyInfo, type KeyRecord, type LocalSecret, type SecretRecord } from './records.js';

export interface RegistryConfig {
  readonly redis: RedisConnectionConfig;
  /** Prefix of every Redis key and channel of the registry; null: the deployment's (PETSTORE_REDIS_PREFIX). */
  readonly prefix: string | null;
  /** How often the local copy is checked against Redis (a safety net under pub/sub). */
  readonly syncIntervalMs: number;
  /** How long the local copy answers after it was last confirmed current; null: for ever. */
  readonly maxStaleSeconds: number | null;
  /** Longest wait for one Redis command (a change, a sync, a list). */
  readonly commandTimeoutMs: number;
}

export const REGISTRY_DEFAULTS = {
  prefix: 'petstore-gateway:',
  syncIntervalMs: 5000,
  maxStaleSeconds: 86400,
  commandTimeoutMs: 1000,
  overlapSeconds: 86400,
  lastUsedFlushMs: 1000,
} as const;

/** A change the registry refused; `reason` maps to an HTTP status in one place (admin-keys.ts). */
export class RegistryError extends Error {
  constructor(
    readonly reason: 'exists' | 'unknown' | 'unavailable' | 'conflict',
    message: string,
  ) {
    super(message);
    this.name = 'RegistryError';
  }
}

/**
 * Compare-and-set of one record: the write happens only when the stored text is still the one the
 * caller read ('' = absent), so two admins changing one key at once cannot lose a change. The
 * version moves and the change is announced in the same atomic step.
 * KEYS: records, version, lastused. ARGV: id, expected, new ('' = delete), channel.
 */
const CAS_LUA = `
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then cur = '' end
if cur ~= ARGV[2] then return -1 end
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[3], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
end
local v = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[4], ARGV[1])
return v
`;

/** lastUsed only moves forward, whichever instance writes last. ARGV: id, ms, id, ms, ... */
const TOUCH_LUA = `
for i = 1, #ARGV, 2 do
  local old = tonumber(redis.call('HGET', KEYS[1], ARGV[i]))
  if old == nil or old < tonumber(ARGV[i + 1]) then redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
return 1
`;

function deadline<T>(p: Promise<T>, ms: number): Promise<T> {
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

export interface RegistryOptions {
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly log?: PolicyLog | undefined;
  readonly now?: () => number;
  /** Whether to keep a live local copy (a gateway) or only make changes (the CLI). */
  readonly follow?: boolean;
}

export interface NewKeyInput {
  readonly id: string;
  readonly operations?: readonly string[] | undefined;
  readonly expires?: string | undefined;
}

export class KeyRegistry {
  private local = new Map<string, LocalSecret>();
  private version = '';
  private confirmedMs = -Infinity;
  private lastUsed = new Map<string, number>();
  private syncTimer: NodeJS.Timeout | undefined;
  private flushTimer: NodeJS.Timeout | undefined;
  private subscribed = false;
  private subscription: Promise<boolean> | undefined;
  private closed = false;
  /** Changes announced so far: a full read that overlapped one is read again (it may predate it). */
  private announced = 0;
  private readonly conn: RedisConnection;
  private readonly keys: { records: string; version: string; lastused: string; channel: string };
  private readonly now: () => number;
  private readonly log: PolicyLog | undefined;
  /** Resolves once the first full sync is done, or the connection failed once (never rejects). */
  readonly ready: Promise<void>;
  private readonly connected: Promise<void>;
  private connectedOnce = false;
  private readonly shared: SharedRedis;

  constructor(
    readonly config: RegistryConfig,
    options: RegistryOptions = {},
  ) {
    const p = config.prefix ?? deploymentPrefix(options.env ?? process.env);
    this.keys = { records: `${p}{keys}:records`, version: `${p}{keys}:version`, lastused: `${p}{keys}:lastused`, channel: `${p}keys:changed` };
    this.now = options.now ?? Date.now;
    this.log = options.log;
    // The process's connection to this Redis, shared with the rate-limit store and the cache when
    // they name the same one.
    this.shared = acquireRedis(config.redis, options.env ?? process.env);
    this.conn = this.shared.conn;
    let warned = false;
    this.conn.on('error', (err) => {
      // Once per outage: the client retries with backoff and would repeat it on every attempt.
      if (!warned) this.log?.warn({ registry: describeConnection(config.redis), err: err.message }, 'key registry: Redis unreachable; the local copy answers meanwhile');
      warned = true;
    });
    const follow = options.follow ?? true;
    this.conn.on('ready', () => {
      warned = false;
      if (follow) void this.resync();
    });
    // Settles on the first connection, or on the first failure to make one (node-redis keeps
    // retrying, and its connect() would wait for a success that may be minutes away).
    const connecting = new Promise<void>((resolve) => {
      this.conn.on('error', () => resolve());
      void this.shared.connected.then(() => {
        this.connectedOnce = this.shared.connectedOnce;
        resolve();
      });
    });
    this.connected = connecting;
    this.ready = connecting.then(() => (follow ? this.resync() : undefined));
    if (follow) {
      this.syncTimer = setInterval(() => void this.sync(), config.syncIntervalMs);
      this.syncTimer.unref();
    }
  }

  /** Keys in the local copy (secrets, the overlap's old ones included). */
  get size(): number {
    return this.local.size;
  }

  /** Whether the local copy may answer now (it was confirmed current recently enough). */
  get fresh(): boolean {
    const max = this.config.maxStaleSeconds;
    return max === null || this.now() - this.confirmedMs <= max * 1000;
  }

  /**
   * The grant of a presented key's SHA-256 digest (base64), from the local copy only: no Redis.
   * Undefined when unknown, past its rotation overlap, or when the copy is too stale to trust.
   */
  grant(digest: string, nowMs: number): KeyGrant | undefined {
    const s = this.local.get(digest);
    if (s === undefined) return undefined;
    if (s.untilMs !== undefined && nowMs >= s.untilMs) return undefined;
    if (!this.fresh) return undefined;
    return s.grant;
  }

  /** Notes a use of `id` (written to Redis once per flush interval, never per request). */
  touch(id: string, nowMs: number): void {
    this.lastUsed.set(id, nowMs);
    if (this.flushTimer === undefined) {
      this.flushTimer = setTimeout(() => void this.flushLastUsed(), REGISTRY_DEFAULTS.lastUsedFlushMs);
      this.flushTimer.unref();
    }
  }

  private async flushLastUsed(): Promise<void> {
    this.flushTimer = undefined;
    if (this.lastUsed.size === 0) return;
    const args = [...this.lastUsed].flatMap(([id, ms]) => [id, String(ms)]);
    this.lastUsed = new Map();
    // A lost write loses a last-used time, never a key: not worth a retry.
    await deadline(this.run(['EVAL', TOUCH_LUA, '1', this.keys.lastused, ...args]), this.config.commandTimeoutMs).catch(() => undefined);
  }

  /**
   * One command; before the first connection is up, once it is (the offline queue is off, so it
   * would fail at once): a registry opened by the first admin request must not answer 503 for
   * the milliseconds of its connection. The callers' deadline bounds the wait.
   */
  private run(args: readonly string[]): Promise<unknown> {
    if (this.connectedOnce) return this.conn.command(this.keys.records, args);
    return this.connected.then(() => this.conn.command(this.keys.records, args));
  }

  /** Reads every record and replaces the local copy; subscribes on the first success. */
  private async resync(): Promise<void> {
    // Bounded: a full read that raced an announced change is repeated, at most three times.
    for (let i = 0; i < 3; i++) {
      const before = this.announced;
      await this.readAll();
      if (this.announced === before) return;
    }
  }

  private async readAll(): Promise<void> {
    try {
      const t = this.config.commandTimeoutMs;
      const version = String((await deadline(this.run(['GET', this.keys.version]), t)) ?? '');
      const all = (await deadline(this.run(['HGETALL', this.keys.records]), t)) as Record<string, string> | string[];
      const next = new Map<string, LocalSecret>();
      const pairs: Array<[string, string]> = Array.isArray(all) ? pairsOf(all) : Object.entries(all);
      for (const [, text] of pairs) {
        const record = parseRecord(String(text));
        if (record !== undefined) for (const [digest, s] of localSecrets(record)) next.set(digest, s);
      }
      this.local = next;
      this.version = version;
      this.confirmedMs = this.now();
      // Shared by concurrent syncs (the first connection runs two), so `ready` means subscribed.
      this.subscription ??= this.conn.subscribe(this.keys.channel, (id) => void this.refresh(id)).then(
        () => true,
        () => {
          this.subscription = undefined;
          return false;
        },
      );
      this.subscribed = await this.subscription;
    } catch {
      // Redis away: the copy stays as it was; the next sync or reconnection tries again.
    }
  }

  /** The periodic check: a full sync only when the version moved (or was never read). */
  async sync(): Promise<void> {
    if (this.closed) return;
    try {
      const version = String((await deadline(this.run(['GET', this.keys.version]), this.config.commandTimeoutMs)) ?? '');
      if (version === this.version && this.subscribed) this.confirmedMs = this.now();
      else await this.resync();
    } catch {
      // Away: not confirmed; `fresh` runs out after maxStaleSeconds.
    }
  }

  /** A change announced on the channel: re-read that record alone. */
  private async refresh(id: string): Promise<void> {
    this.announced++;
    try {
      const text = (await deadline(this.run(['HGET', this.keys.records, id]), this.config.commandTimeoutMs)) as string | null;
      const next = new Map([...this.local].filter(([, s]) => s.grant.consumer.id !== id));
      const record = text === null ? undefined : parseRecord(String(text));
      if (record !== undefined) for (const [digest, s] of localSecrets(record)) next.set(digest, s);
      this.local = next;
    } catch {
      // Missed: the periodic sync sees the version moved and reads everything.
    }
  }

  private async read(id: string): Promise<{ text: string; record: KeyRecord | undefined }> {
    const text = (await deadline(this.run(['HGET', this.keys.records, id]), this.config.commandTimeoutMs)) as string | null;
    return { text: text === null ? '' : String(text), record: text === null ? undefined : parseRecord(String(text)) };
  }

  private async write(id: string, expected: string, next: KeyRecord | undefined): Promise<void> {
    const r = await deadline(
      this.run(['EVAL', CAS_LUA, '3', this.keys.records, this.keys.version, this.keys.lastused, id, expected, next === undefined ? '' : JSON.stringify(next), this.keys.channel]),
      this.config.commandTimeoutMs,
    );
    if (Number(r) < 0) throw new RegistryError('conflict', `key '${id}' was changed by someone else at the same time; try again`);
    // This process sees its own change at once, not a message later.
    await this.refresh(id);
  }

  /** Issues a key for a new id; the secret is returned once and stored only as its hash. */
  async create(input: NewKeyInput): Promise<{ info: KeyInfo; key: string }> {
    const key = newRegistryKey();
    const record: KeyRecord = {
      id: input.id,
      created: new Date(this.now()).toISOString(),
      ...(input.expires === undefined ? {} : { expires: input.expires }),
      ...(input.operations === undefined ? {} : { operations: [...input.operations] }),
      secrets: [{ hash: hashKey(key) }],
    };
    const { text } = await this.read(input.id);
    if (text !== '') throw new RegistryError('exists', `a key with id '${input.id}' exists`);
    await this.write(input.id, '', record).catch((err: unknown) => {
      throw err instanceof RegistryError && err.reason === 'conflict' ? new RegistryError('exists', `a key with id '${input.id}' exists`) : err;
    });
    return { info: infoOf(record, undefined), key };
  }

  /**
   * A new secret for an existing id. Every older secret ends at `now + overlapSeconds` at the
   * latest: the current one then, and one still in an earlier overlap at its own end or then,
   * whichever comes first (0: every older secret ends now, the answer to a leaked key; an overlap
   * shorter than an earlier one caps it). Ended ones are dropped. `previousValidUntil` is the
   * latest end of the older secrets that remain (now when none does): what the gateway enforces.
   */
  async rotate(id: string, overlapSeconds: number): Promise<{ info: KeyInfo; key: string; previousValidUntil: string; previousSecrets: number }> {
    const { text, record } = await this.read(id);
    if (record === undefined) throw new RegistryError('unknown', `no key with id '${id}'`);
    const now = this.now();
    const until = now + overlapSeconds * 1000;
    const key = newRegistryKey();
    const kept: SecretRecord[] = record.secrets
      .map((s) => ({ hash: s.hash, until: s.until === undefined ? until : Math.min(s.until, until) }))
      .filter((s) => s.until > now);
    const next: KeyRecord = { ...record, secrets: [...kept, { hash: hashKey(key) }] };
    await this.write(id, text, next);
    const latest = kept.reduce((m, s) => Math.max(m, s.until ?? now), now);
    return { info: infoOf(next, undefined), key, previousValidUntil: new Date(latest).toISOString(), previousSecrets: kept.length };
  }

  /** Removes the key and every one of its secrets. */
  async revoke(id: string): Promise<void> {
    const { text, record } = await this.read(id);
    if (record === undefined) throw new RegistryError('unknown', `no key with id '${id}'`);
    await this.write(id, text, undefined);
  }

  /** Every key as Redis has it now (never a secret or a hash), sorted by id. */
  async list(): Promise<KeyInfo[]> {
    const t = this.config.commandTimeoutMs;
    const all = (await deadline(this.run(['HGETALL', this.keys.records]), t)) as Record<string, string> | string[];
    const used = (await deadline(this.run(['HGETALL', this.keys.lastused]), t)) as Record<string, string> | string[];
    const usedMap = new Map((Array.isArray(used) ? pairsOf(used) : Object.entries(used)).map(([k, v]) => [k, Number(v)]));
    const out: KeyInfo[] = [];
    for (const [, text] of Array.isArray(all) ? pairsOf(all) : Object.entries(all)) {
      const r = parseRecord(String(text));
      if (r !== undefined) out.push(infoOf(r, usedMap.get(r.id)));
    }
    return out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  /** Whether the presented key's digest is in the local copy (tests, `check`). */
  knows(presented: string): boolean {
    return this.local.has(hash('sha256', presented, 'base64'));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.syncTimer);
    clearTimeout(this.flushTimer);
    if (this.conn.isReady) await this.flushLastUsed();
    await this.shared.release();
  }
}

/** RESP2 flat [k, v, k, v] to pairs (RESP3 gives an object). */
function pairsOf(flat: readonly unknown[]): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([String(flat[i]), String(flat[i + 1])]);
  return out;
}
