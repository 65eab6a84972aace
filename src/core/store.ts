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

export interface RedisNodeAddress {
  readonly host: string;
  readonly port: number;
}

/**
 * Where a Redis is, in the forms operators run it: one server (`url`), Redis Sentinel or Redis
 * Cluster, with TLS and an ACL user. Every `redis:` section of a policy file takes it
 * (src/stores/connection-schema.ts holds its JSON Schema).
 */
export interface RedisConnectionConfig {
  /** One server: `redis[s]://[[user][:password]@]host[:port][/db]`; null with `sentinel` or `cluster`. */
  readonly url?: string | null;
  /** Redis Sentinel: the master's name and some sentinels. */
  readonly sentinel?: { readonly masterName: string; readonly nodes: readonly string[] } | null;
  /** Redis Cluster: some of its nodes (the rest are discovered). */
  readonly cluster?: { readonly nodes: readonly string[] } | null;
  /** ACL user (Redis 6+); for `url`, the URL's user when absent. */
  readonly username?: string | null;
  /** The environment variable that holds the password, so it stays out of the policy file. */
  readonly passwordFromEnv?: string | null;
  /** TLS for Sentinel and Cluster nodes (`rediss://` says it for `url`). */
  readonly tls?: boolean;
  /** A PEM file of the CA(s) to trust instead of Node's store (which honours NODE_EXTRA_CA_CERTS). */
  readonly caFile?: string | null;
  readonly connectTimeoutMs?: number;
  readonly maxReconnectDelayMs?: number;
}

/** The rate-limit store's Redis: a connection, and the store's own key prefix and deadline. */
export interface RedisStoreConfig extends RedisConnectionConfig {
  /** Prefix of every key the store writes; null or absent: the deployment's (PETSTORE_REDIS_PREFIX). */
  readonly prefix?: string | null;
  /** A command that has no answer after this many milliseconds fails (never a hang). */
  readonly commandTimeoutMs?: number;
}
