/** The response cache's vocabulary: its name, its entries, its stores and its events. */
import type { FinishedAnswer } from '../../core/forward/answer.js';

/** The name this cache gives itself in Cache-Status (RFC 9211 section 2). */
export const CACHE_NAME = 'petstore-gateway';

/**
 * The fields the cache writes after a stored answer's, in this order: Age (RFC 9111 section 5.1)
 * and Cache-Status (RFC 9211). Their values are this request's (`SendWrapper.trailing`).
 */
export const TRAILING_FIELDS: readonly string[] = Object.freeze(['age', 'cache-status']);

/** The field that says what the cache did with a call it passed on (`SendWrapper.account`). */
export const ACCOUNT_FIELDS: readonly string[] = Object.freeze(['cache-status']);

/**
 * One stored answer: a finished answer the exchange writes as it is (src/core/forward/answer.ts),
 * with its times. Times are milliseconds since the epoch.
 */
export interface CacheEntry extends FinishedAnswer {
  /** When the upstream produced it (the store time less the upstream's Age): the Age is counted from it. */
  readonly born: number;
  readonly freshUntil: number;
  /** Past it, not even a failing upstream makes it worth serving: the store may drop it. */
  readonly staleUntil: number;
}

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
