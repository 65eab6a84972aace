/**
 * Failed authentications per client address: GCRA over an lru-cache of at most
 * `maxAddresses` addresses (1,000,000 by default), so a flood of distinct addresses keeps memory
 * flat; the least recently failed address is forgotten first.
 *
 * Only a guess counts: a well-formed bearer token that matches no key. A missing or malformed
 * header guesses nothing, and an expired key is a real key.
 */
import type { LRUCache } from 'lru-cache';
import { gcra, EPSILON_MS } from '../../stores/gcra.js';
import { DEFAULT_MAX_KEYS, lruOfAtMost } from '../../stores/memory.js';
import type { RateLimitRule } from '../../stores/types.js';
import type { BruteForceConfig } from './schema.js';

export class FailureLimiter {
  private readonly rule: RateLimitRule;
  /** Made on the first failure (its storage grows with the addresses it holds: `lruOfAtMost`). */
  private tats: LRUCache<string, number> | undefined;

  constructor(
    config: BruteForceConfig,
    private readonly now: () => number,
    private readonly maxAddresses = DEFAULT_MAX_KEYS,
  ) {
    this.rule = { limit: config.maxFailures, windowMs: config.windowSeconds * 1000 };
  }

  /** Milliseconds until `address` may try again; 0 when it is not locked. */
  lockedFor(address: string): number {
    // Most traffic comes from addresses that never failed: skip the lookup while none has.
    if (this.tats === undefined || this.tats.size === 0) return 0;
    const tat = this.tats.get(address);
    if (tat === undefined) return 0;
    const now = this.now();
    const next = Math.max(tat, now) + this.rule.windowMs / this.rule.limit;
    return next - now > this.rule.windowMs + EPSILON_MS ? next - this.rule.windowMs - now : 0;
  }

  /** Counts one failure of `address`. */
  fail(address: string): void {
    const now = this.now();
    // No TTL per entry (a TAT in the past means no failures left to count): lru-cache clears its
    // whole arrays when its last live entry expires, which one guesser alone would trigger on
    // nearly every failure. Old entries leave by LRU order.
    const tats = (this.tats ??= lruOfAtMost<number>(this.maxAddresses));
    const step = gcra(tats.get(address), now, this.rule);
    if (step.allowed) tats.set(address, step.tat);
  }

  /** Addresses tracked now (at most `maxAddresses`). */
  get size(): number {
    return this.tats?.size ?? 0;
  }
}
