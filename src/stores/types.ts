/**
 * The shared state of consumer policies, behind two small interfaces so a policy does not care
 * whether its counters live in this process (lru-cache) or in Redis for several instances.
 */

/** One limit: `limit` requests per `windowMs`, spread evenly (GCRA: no 2x burst at a boundary). */
export interface RateLimitRule {
  readonly limit: number;
  readonly windowMs: number;
}

export interface RateDecision {
  readonly allowed: boolean;
  /** Requests the consumer may still make at once. */
  readonly remaining: number;
  /** Milliseconds until the consumer's allowance is whole again. */
  readonly resetMs: number;
  /** When refused: milliseconds until one request is allowed (never shorter than the real wait). */
  readonly retryAfterMs: number;
}

export interface RateLimitStore {
  readonly kind: 'memory' | 'redis';
  /** Counts one request of `key` against `rule` and decides, atomically. Rejects when the store fails. */
  take(key: string, rule: RateLimitRule): RateDecision | Promise<RateDecision>;
  /** Whether the store answered its last command (false while Redis is away). */
  readonly healthy: boolean;
  close(): Promise<void>;
}

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

/** Where the counters live, as a policy file names it: this process, or one Redis for every instance. */
export type StoreConfig = 'memory' | { readonly redis: RedisStoreConfig };

export interface RedisStoreConfig {
  /** `redis[s]://[[user][:password]@]host[:port][/db]`. */
  readonly url: string;
  /** Prefix of every key the gateway writes, so several deployments can share one Redis. */
  readonly prefix?: string;
  /** A command that has no answer after this many milliseconds fails (never a hang). */
  readonly commandTimeoutMs?: number;
  /** Longest wait for a TCP connection to Redis. */
  readonly connectTimeoutMs?: number;
  /** Reconnection backs off exponentially up to this many milliseconds between attempts. */
  readonly maxReconnectDelayMs?: number;
}
