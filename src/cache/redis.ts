/**
 * The Redis store of the response cache: one cache for every gateway instance. An entry is one
 * string key (`<prefix>e:<cache key>`) holding the entry as JSON with the body in base64 (the same
 * bytes on every instance), expiring with its stale-if-error window (PX). The list generation is
 * one counter (`<prefix>lists`): createPet's invalidation INCRs it and PUBLISHes the new value on
 * `<prefix>invalidate`, so every instance moves to the new generation, and every list entry is
 * unreachable at once, however many there are.
 *
 * Never a hang and never a failure of the request: commands fail at once while disconnected (no
 * offline queue) and within `COMMAND_MS` otherwise; a failed read is a miss, a failed write stores
 * nothing; both are counted and warned about (throttled).
 */
import { createClient } from 'redis';
import type { CacheEntry, CacheStore } from '../core/forward/cache.js';
import type { CacheRedisConfig } from '../policies/cache/index.js';

/** A cache read that takes longer than this is a miss: the upstream is asked instead. */
const COMMAND_MS = 250;
const DEFAULT_PREFIX = 'petstore-gateway:cache:';

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
  return { status: s.s, headers: s.h, body: Buffer.from(s.b, 'base64'), born: s.born, freshUntil: s.fu, staleUntil: s.su };
}

function within<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`Redis did not answer within ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

export interface RedisCacheOptions {
  readonly now?: () => number;
  readonly log?: { warn(fields: Record<string, unknown>, message: string): void } | undefined;
}

export class RedisCacheStore implements CacheStore {
  generation = 0;
  /** Commands that failed (Redis away or slow). */
  errors = 0;
  private readonly client;
  private readonly subscriber;
  private readonly prefix: string;
  private readonly now: () => number;
  private readonly log: RedisCacheOptions['log'];
  private lastWarn = -Infinity;
  /** Resolves once both connections are open and the generation was read (tests wait on it). */
  readonly ready: Promise<void>;

  constructor(config: CacheRedisConfig, options: RedisCacheOptions = {}) {
    this.prefix = config.prefix ?? DEFAULT_PREFIX;
    this.now = options.now ?? Date.now;
    this.log = options.log;
    this.client = createClient({
      url: config.url,
      disableOfflineQueue: true,
      socket: { connectTimeout: 2000, reconnectStrategy: (retries: number) => Math.min(50 * 2 ** Math.min(retries, 16), 5000) },
    });
    this.subscriber = this.client.duplicate();
    this.client.on('error', (err: unknown) => this.failed(err));
    this.subscriber.on('error', (err: unknown) => this.failed(err));
    this.ready = this.start();
    this.ready.catch((err: unknown) => this.failed(err));
  }

  private async start(): Promise<void> {
    await Promise.all([this.client.connect(), this.subscriber.connect()]);
    await this.subscriber.subscribe(this.prefix + 'invalidate', (message: string) => this.moveTo(Number(message)));
    const gen = await this.client.get(this.prefix + 'lists');
    this.moveTo(Number(gen ?? 0));
  }

  /** Generations only move forward: a late message never brings an invalidated list back. */
  private moveTo(gen: number): void {
    if (Number.isSafeInteger(gen) && gen > this.generation) this.generation = gen;
  }

  private failed(err: unknown): void {
    this.errors++;
    const t = this.now();
    if (t - this.lastWarn < 10_000) return;
    this.lastWarn = t;
    this.log?.warn({ store: 'redis', cause: err instanceof Error ? err.message : String(err), errors: this.errors }, 'response cache store failed; answering from the upstream');
  }

  get(key: string): Promise<CacheEntry | undefined> {
    return within(this.client.get(this.prefix + 'e:' + key), COMMAND_MS).then(
      (text) => (text === null ? undefined : decode(text)),
      (err: unknown) => {
        this.failed(err);
        return undefined;
      },
    );
  }

  set(key: string, entry: CacheEntry): void {
    const ms = Math.ceil(entry.staleUntil - this.now());
    if (ms <= 0) return;
    within(this.client.set(this.prefix + 'e:' + key, encode(entry), { expiration: { type: 'PX', value: ms } }), COMMAND_MS).catch((err: unknown) => this.failed(err));
  }

  dropLists(): void {
    // This instance moves at once; the others when the message arrives.
    this.generation++;
    const local = this.generation;
    within(this.client.incr(this.prefix + 'lists'), COMMAND_MS)
      .then((gen) => {
        const next = Math.max(gen, local);
        this.moveTo(next);
        return this.client.publish(this.prefix + 'invalidate', String(next));
      })
      .catch((err: unknown) => this.failed(err));
  }

  async close(): Promise<void> {
    await Promise.allSettled([this.subscriber.close(), this.client.close()]);
  }
}
