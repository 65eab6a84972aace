/**
 * The Redis store of the response cache: one cache for every gateway instance. An entry is one
 * string key (`<prefix>e:<SHA-256 of the cache key>`: the key holds the values of forwarded
 * request fields, a Cookie or a tenant's id among them, which Redis need not see) holding the entry as JSON with the body in base64 (the same
 * bytes on every instance), expiring with its stale-if-error window (PX). The list generation is
 * one counter (`<prefix>lists`): createPet's invalidation INCRs it and PUBLISHes the new value on
 * `<prefix>invalidate`, so every instance moves to the new generation, and every list entry is
 * unreachable at once, however many there are.
 *
 * Never a hang and never a failure of the request: commands fail at once while disconnected (no
 * offline queue) and within `COMMAND_MS` otherwise (not counting time this process's own event loop
 * was busy, as the rate-limit store does); a failed read is a miss, a failed write stores nothing;
 * both are counted (`errors`, the metric petstore_gateway_cache_store_errors_total) and warned
 * about, at most once per 10 s with the count.
 *
 * The connection is the shared one of src/stores/connection.ts (one server, Sentinel or Cluster):
 * each command touches one key, so a Cluster needs no hash tag here.
 */
import { createHash } from 'node:crypto';
import { flatFields } from '../../core/forward/answer.js';
import type { CacheEntry, CacheStore } from './types.js';
import type { CacheRedisConfig } from './schema.js';
import { acquireRedis, describeConnection, type SharedRedis } from '../../stores/connection.js';
import { deploymentPrefix } from '../../stores/connection-schema.js';
import { withDeadline } from '../../stores/redis.js';

/** A cache read that takes longer than this is a miss: the upstream is asked instead. */
const COMMAND_MS = 250;

interface Stored {
  readonly s: number;
  readonly h: Record<string, string | string[]>;
  readonly b: string;
  readonly born: number;
  readonly fu: number;
  readonly su: number;
}

function encode(entry: CacheEntry): string {
  const s: Stored = { s: entry.status, h: entry.headers, b: entry.body.toString('base64'), born: entry.born, fu: entry.freshUntil, su: entry.staleUntil };
  return JSON.stringify(s);
}

function decode(text: string): CacheEntry {
  const s = JSON.parse(text) as Stored;
  return { status: s.s, headers: s.h, body: Buffer.from(s.b, 'base64'), fields: flatFields(s.h), born: s.born, freshUntil: s.fu, staleUntil: s.su };
}

/** The Redis key of a cache key: a digest, of fixed length, that names no field value. */
function entryKey(prefix: string, key: string): string {
  return prefix + 'e:' + createHash('sha256').update(key).digest('base64url');
}

export interface RedisCacheOptions {
  readonly now?: () => number;
  readonly log?: { warn(fields: Record<string, unknown>, message: string): void } | undefined;
  /** Where `passwordFromEnv` and PETSTORE_REDIS_PREFIX are read (process.env). */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

/**
 * The highest list generation taken from Redis: a trillion createPets, which no deployment makes.
 * Beyond it the counter was set by hand (or by an attacker who may write to the Redis), and
 * following it would bring the generation near 2^53, where adding one no longer changes a number.
 */
const MAX_GENERATION = 2 ** 40;

/** How far past its generation an instance follows a message at once: createPets on other instances in a row. */
const MAX_STEP = 1000;

/** The counter's value as a generation, or undefined when it is none createPets made (not an integer, or past `MAX_GENERATION`). */
function counter(value: unknown): number | undefined {
  const text = typeof value === 'number' ? String(value) : value;
  if (typeof text !== 'string' || !/^\d{1,16}$/.test(text)) return undefined;
  const n = Number(text);
  return n <= MAX_GENERATION ? n : undefined;
}

export class RedisCacheStore implements CacheStore {
  generation = 0;
  /** How often the generation moved forward: a read of the counter older than a move does not take the generation back. */
  private moves = 0;
  private reading = false;
  private readAgain = false;
  /** Commands that failed (Redis away or slow); the metric petstore_gateway_cache_store_errors_total. */
  errors = 0;
  private readonly shared: SharedRedis;
  private readonly prefix: string;
  private readonly where: string;
  private readonly now: () => number;
  private readonly log: RedisCacheOptions['log'];
  private lastWarn = -Infinity;
  private suppressed = 0;
  /** Resolves once connected, subscribed and the generation was read (tests wait on it). */
  readonly ready: Promise<void>;

  constructor(config: CacheRedisConfig, options: RedisCacheOptions = {}) {
    const env = options.env ?? process.env;
    this.prefix = config.prefix ?? `${deploymentPrefix(env)}cache:`;
    this.where = describeConnection(config);
    this.now = options.now ?? Date.now;
    this.log = options.log;
    this.shared = acquireRedis(config, env);
    this.shared.conn.on('error', (err) => this.failed(err));
    // A reconnection may have missed invalidations: read the generation again.
    this.shared.conn.on('ready', () => void this.readGeneration());
    this.ready = this.start();
    this.ready.catch((err: unknown) => this.failed(err));
  }

  private command(key: string, args: readonly string[]): Promise<unknown> {
    const send = () => this.shared.conn.command(key, args);
    return withDeadline(this.shared.connectedOnce ? send() : this.shared.connected.then(send), COMMAND_MS);
  }

  private async start(): Promise<void> {
    await this.shared.connected;
    await this.shared.conn.subscribe(this.prefix + 'invalidate', (message: string) => this.heard(message));
    await this.readGeneration();
  }

  /**
   * A message on the invalidation channel. Anyone who may PUBLISH on the Redis can send one, so its
   * value is a hint, not a fact: the next generation or a few past it (other instances' createPets
   * in a row) is taken at once; anything else sends this instance to read the counter itself.
   */
  private heard(message: string): void {
    const gen = /^\d{1,16}$/.test(message) ? Number(message) : NaN;
    if (gen > this.generation && gen <= this.generation + MAX_STEP) this.forward(gen);
    else if (gen !== this.generation) void this.readGeneration();
  }

  /**
   * Reads the counter (at start, after a reconnection that may have missed messages, and for a
   * message out of bounds), one read at a time. A counter past `MAX_GENERATION` is not one
   * createPets made: it is set back just past this instance's generation. One that went back
   * (Redis restarted empty, or someone set it) is followed, unless this instance moved on while
   * the read was under way (its own createPet, a message): the read is older than that.
   */
  private async readGeneration(): Promise<void> {
    if (this.reading) {
      this.readAgain = true;
      return;
    }
    this.reading = true;
    try {
      do {
        this.readAgain = false;
        const moves = this.moves;
        const text = await this.command(this.prefix + 'lists', ['GET', this.prefix + 'lists']).catch((err: unknown) => this.failed(err));
        if (text === undefined) continue;
        const gen = text === null ? 0 : counter(text);
        if (gen === undefined) await this.repair(text);
        else if (gen > this.generation) this.forward(gen);
        else if (gen < this.generation && moves === this.moves) this.generation = gen;
      } while (this.readAgain);
    } finally {
      this.reading = false;
    }
  }

  /** Moves to a later generation: every list entry of the earlier ones is unreachable here. */
  private forward(gen: number): void {
    this.generation = gen;
    this.moves++;
  }

  /** Sets a counter no createPet made (past `MAX_GENERATION`, or not a number) back just past this instance's generation, and tells the others. */
  private async repair(found: unknown): Promise<void> {
    const next = this.generation + 1;
    const k = this.prefix + 'lists';
    this.log?.warn({ store: 'redis', url: this.where, key: k, found: String(found).slice(0, 32), setTo: next }, 'response cache list generation in Redis is out of bounds; set back');
    this.forward(next);
    await this.command(k, ['SET', k, String(next)])
      .then(() => this.command(k, ['PUBLISH', this.prefix + 'invalidate', String(next)]))
      .catch((err: unknown) => this.failed(err));
  }

  private failed(err: unknown): undefined {
    this.errors++;
    const t = this.now();
    if (t - this.lastWarn < 10_000) {
      this.suppressed++;
      return undefined;
    }
    this.lastWarn = t;
    this.log?.warn({ store: 'redis', url: this.where, cause: err instanceof Error ? err.message : String(err), errors: this.errors, suppressed: this.suppressed }, 'response cache store failed; answering from the upstream');
    this.suppressed = 0;
    return undefined;
  }

  get(key: string): Promise<CacheEntry | undefined> {
    const k = entryKey(this.prefix, key);
    return this.command(k, ['GET', k]).then(
      (text) => (text == null ? undefined : decode(String(text))),
      (err: unknown) => this.failed(err),
    );
  }

  set(key: string, entry: CacheEntry): void {
    const ms = Math.ceil(entry.staleUntil - this.now());
    if (ms <= 0) return;
    const k = entryKey(this.prefix, key);
    this.command(k, ['SET', k, encode(entry), 'PX', String(ms)]).catch((err: unknown) => this.failed(err));
  }

  dropLists(): void {
    // This instance moves at once; the others when the message arrives.
    this.forward(this.generation + 1);
    const local = this.generation;
    const k = this.prefix + 'lists';
    this.command(k, ['INCR', k])
      .then((reply) => {
        const gen = counter(reply);
        // INCR fails on a counter that is no integer, and one past the bound was set by no createPet.
        if (gen === undefined) return this.repair(reply);
        const next = Math.max(gen, local);
        if (next > this.generation) this.forward(next);
        return this.command(k, ['PUBLISH', this.prefix + 'invalidate', String(next)]);
      })
      .catch((err: unknown) => {
        this.failed(err);
        // A counter INCR refuses (not an integer, or at its int64 end) is set back.
        if (err instanceof Error && /not an integer|overflow/i.test(err.message)) return this.repair('not an integer');
        return undefined;
      })
      .catch((err: unknown) => this.failed(err));
  }

  async close(): Promise<void> {
    await this.shared.release();
  }
}
