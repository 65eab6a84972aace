/** The response cache's vocabulary: its name, its stores and its events. */
import type { CacheEntry } from '../../core/forward/answer.js';

/** The name this cache gives itself in Cache-Status (RFC 9211 section 2). */
export const CACHE_NAME = 'petstore-gateway';

/** Where entries live: this process (lru-cache) or Redis, shared by every instance. */
export interface CacheStore {
  /** The current list generation: part of every listPets key, moved on by `dropLists`. */
  readonly generation: number;
  /** The entry of `key`, or undefined; a failing shared store answers undefined (a miss), never throws. `now`: the cache's clock when the caller read it already. */
  get(key: string, now?: number): CacheEntry | undefined | Promise<CacheEntry | undefined>;
  /** Stores `entry` under `key` until its `staleUntil`; never throws (a failing store stores nothing). */
  set(key: string, entry: CacheEntry): void;
  /** Every listPets entry becomes unreachable, on every instance sharing the store. */
  dropLists(): void;
  close(): Promise<void>;
}

/** What the cache did with one request; `bypass`: not its to keep (createPet, or an operation with TTL 0). */
export type CacheEvent = 'hit' | 'miss' | 'stale' | 'coalesced' | 'bypass';
