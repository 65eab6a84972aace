/**
 * The stores of this process: opened by the config that names them, shared by every policy and
 * every reload (a reload must not open a second Redis connection), closed once at shutdown.
 *
 * Wiring (the lead's side): pass `openStore` in PolicyEnv (or let policies fall back to it), give
 * `openDeprecationLedger(config)` to the /deprecations report, read `openStores()` for metrics
 * (`errors`, `healthy`), and `await closeStores()` after the drain.
 */
import type { PolicyLog } from '../core/policy.js';
import { MemoryDeprecationLedger, MemoryRateLimitStore } from './memory.js';
import { connectionKey } from './connection.js';
import { RedisStore } from './redis.js';
import type { DeprecationLedger, RateLimitStore, RedisStoreConfig, StoreConfig } from './types.js';

export type { DeprecationLedger, RateLimitStore, StoreConfig } from './types.js';
export { MemoryDeprecationLedger, MemoryRateLimitStore } from './memory.js';
export { RedisStore } from './redis.js';

let memory: MemoryRateLimitStore | undefined;
let memoryLedger: MemoryDeprecationLedger | undefined;
const redis = new Map<string, RedisStore>();
let log: PolicyLog | undefined;

/** Where the stores report connection failures (throttled); set once at startup. */
export function setStoreLog(l: PolicyLog | undefined): void {
  log = l;
}

function redisStore(config: { readonly redis: RedisStoreConfig }): RedisStore {
  // One store per connection config and prefix (two prefixes are two deployments' counters); the
  // first config's timeouts hold until closeStores(). Stores on one Redis share its connection.
  const key = `${connectionKey(config.redis)} ${config.redis.prefix ?? ''}`;
  let store = redis.get(key);
  if (store === undefined) {
    store = new RedisStore(config.redis, { log });
    redis.set(key, store);
  }
  return store;
}

/** The rate-limit store a config names, opened on first use and shared afterwards. */
export function openStore(config: StoreConfig): RateLimitStore {
  if (config === 'memory') return (memory ??= new MemoryRateLimitStore());
  return redisStore(config);
}

/**
 * The deprecation ledger that goes with a store config: in Redis when the rate limit is (so the
 * report covers every instance), in this process otherwise.
 */
export function openDeprecationLedger(config: StoreConfig): DeprecationLedger {
  if (config === 'memory') return (memoryLedger ??= new MemoryDeprecationLedger());
  return redisStore(config).ledger;
}

/** The open stores, for metrics and readiness: kind, where (credentials masked), health, failed commands. */
export function openStores(): Array<{ kind: 'memory' | 'redis'; url: string | undefined; healthy: boolean; errors: number }> {
  const out: Array<{ kind: 'memory' | 'redis'; url: string | undefined; healthy: boolean; errors: number }> = [];
  if (memory !== undefined) out.push({ kind: 'memory', url: undefined, healthy: true, errors: 0 });
  for (const s of redis.values()) out.push({ kind: 'redis', url: s.where, healthy: s.healthy, errors: s.errors });
  return out;
}

/** Waits until every open Redis store has connected once (bounded by `timeoutMs`); true when all did. */
export async function storesReady(timeoutMs = 2000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((r) => (timer = setTimeout(() => r(false), timeoutMs)));
  const all = Promise.all([...redis.values()].map((s) => s.ready)).then(() => true as const);
  try {
    return await Promise.race([all, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Closes every store (shutdown, after the drain). The next open starts afresh. */
export async function closeStores(): Promise<void> {
  const closing: Promise<void>[] = [...redis.values()].map((s) => s.close());
  redis.clear();
  if (memory !== undefined) closing.push(memory.close());
  memory = undefined;
  memoryLedger = undefined;
  await Promise.all(closing);
}
