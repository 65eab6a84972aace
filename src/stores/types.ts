/**
 * The shared state of consumer policies, behind two small interfaces so a policy does not care
 * whether its counters live in this process (lru-cache) or in Redis for several instances.
 */

import type { RateDecision, RateLimitRule, RateLimitStore, RedisStoreConfig, StoreConfig } from '../core/store.js';

// The ports live in the core (the policy contract names them); re-exported for the stores' users.
export type { RateDecision, RateLimitRule, RateLimitStore, RedisStoreConfig, StoreConfig };

/** One row of the deprecation report: who still calls a deprecated operation. */
export interface DeprecationUse {
  readonly operation: string;
  readonly consumer: string;
  readonly count: number;
  /** ISO 8601 instants. */
  readonly firstSeen: string;
  readonly lastSeen: string;
}

export interface DeprecationLedger {
  /** Counts one call; never throws, never waits (a failed write is logged and counted). */
  record(operation: string, consumer: string, atMs: number): void;
  report(): Promise<DeprecationUse[]>;
  close(): Promise<void>;
}
