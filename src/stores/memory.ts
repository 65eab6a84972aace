/**
 * The embedded store: counters of this process only (one gateway, or one worker of `--workers N`).
 * Bounded by lru-cache: at most `max` keys, the least recently used dropped first (an expired TAT
 * means the same as no entry), so a flood of distinct keys keeps memory flat.
 */
import { LRUCache } from 'lru-cache';
import { gcra } from './gcra.js';
import type { DeprecationLedger, DeprecationUse, RateDecision, RateLimitRule, RateLimitStore } from './types.js';

export interface MemoryStoreOptions {
  /** Most keys held; the least recently used goes first. Default 1,000,000. */
  readonly max?: number;
  /** Milliseconds since the epoch; Date.now when absent (tests pass a fake clock). */
  readonly now?: () => number;
}

export const DEFAULT_MAX_KEYS = 1_000_000;

const ONE = (): number => 1;

/**
 * An lru-cache of at most `max` string keys whose storage grows with the keys it holds: bounded by
 * count through `maxSize` (each entry counts 1), not `max`. With `max`, lru-cache allocates its
 * arrays for every entry up front: a million entries are 15 MB of the old generation for a table
 * that holds a few keys, marked by every full collection (bench/gc.mjs), allocated by the first
 * failure for a brute-force table. lru-cache's README, "Storage Bounds Safety".
 */
export function lruOfAtMost<V extends NonNullable<unknown>>(max: number): LRUCache<string, V> {
  return new LRUCache<string, V>({ maxSize: max, sizeCalculation: ONE });
}

export class MemoryRateLimitStore implements RateLimitStore {
  readonly kind = 'memory' as const;
  /** Nothing to lose: the store is this process' memory. */
  readonly healthy = true;
  private readonly now: () => number;
  private readonly tats: LRUCache<string, number>;

  constructor(options: MemoryStoreOptions = {}) {
    this.now = options.now ?? Date.now;
    // No TTL per entry: a TAT in the past means the same as no entry (GCRA starts from `now`), so
    // stale entries are harmless and leave by LRU order when `max` is reached. A TTL would cost
    // more than it saves: lru-cache clears its whole preallocated arrays (max entries) when the
    // last live entry expires, which a single consumer calling every few ms triggers on nearly
    // every request, a cost that grows with `max`.
    this.tats = lruOfAtMost<number>(options.max ?? DEFAULT_MAX_KEYS);
  }

  /** Synchronous: the policy's memory path makes no promise. */
  take(key: string, rule: RateLimitRule): RateDecision {
    const now = this.now();
    const step = gcra(this.tats.get(key), now, rule);
    if (step.allowed) this.tats.set(key, step.tat);
    return step;
  }

  /** Keys held now (bounded by `max`). */
  get size(): number {
    return this.tats.size;
  }

  close(): Promise<void> {
    this.tats.clear();
    return Promise.resolve();
  }
}

interface Use {
  count: number;
  firstSeen: number;
  lastSeen: number;
}

/**
 * The deprecation report of one process. Bounded by construction: operations are the interface's
 * (three) and consumers are key ids of the policy file (an unauthenticated call has no consumer).
 */
export class MemoryDeprecationLedger implements DeprecationLedger {
  private readonly uses = new Map<string, Map<string, Use>>();

  record(operation: string, consumer: string, atMs: number): void {
    let byConsumer = this.uses.get(operation);
    if (byConsumer === undefined) this.uses.set(operation, (byConsumer = new Map()));
    const use = byConsumer.get(consumer);
    if (use === undefined) byConsumer.set(consumer, { count: 1, firstSeen: atMs, lastSeen: atMs });
    else {
      use.count++;
      if (atMs < use.firstSeen) use.firstSeen = atMs;
      if (atMs > use.lastSeen) use.lastSeen = atMs;
    }
  }

  report(): Promise<DeprecationUse[]> {
    const rows: DeprecationUse[] = [];
    for (const [operation, byConsumer] of this.uses) {
      for (const [consumer, u] of byConsumer) {
        rows.push({ operation, consumer, count: u.count, firstSeen: new Date(u.firstSeen).toISOString(), lastSeen: new Date(u.lastSeen).toISOString() });
      }
    }
    return Promise.resolve(sortUses(rows));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** One order for every ledger: by operation, then most calls first, then consumer. */
export function sortUses(rows: DeprecationUse[]): DeprecationUse[] {
  return rows.sort((a, b) => (a.operation < b.operation ? -1 : a.operation > b.operation ? 1 : b.count - a.count || (a.consumer < b.consumer ? -1 : a.consumer > b.consumer ? 1 : 0)));
}
