/**
 * The shared-state ports a policy may use, declared in the core so that the policy contract
 * (`PolicyEnv.openStore`) names no implementation: src/stores implements them (lru-cache in this
 * process, or Redis for several instances).
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
