/**
 * The response cache of one upstream, built once from the `cache` policy's section (a reload that
 * changes it is refused, as for the upstream section: the cache outlives reloads). The layer is
 * layer.ts; the stores are memory.ts and redis.ts. The gateway (src/gateway.ts) hands the layer to
 * the exchange as a wrapper of the composed send: the core does not know the cache.
 */
import { createHash } from 'node:crypto';
import type { ResponseCache } from './flight.js';
import { KeyMemo } from './key.js';
import type { CacheEvent, CacheStore } from './types.js';
import type { CacheConfig } from './schema.js';
import { MemoryCacheStore } from './memory.js';
import { RedisCacheStore } from './redis.js';

export type { ResponseCache } from './flight.js';
export { responseCache } from './layer.js';
export type { CacheEvent, CacheStore } from './types.js';
export { MemoryCacheStore } from './memory.js';
export { RedisCacheStore } from './redis.js';

export interface CacheOptions {
  /** Whether the upstream sees the gateway's own credential (or none) rather than the client's. */
  readonly sharedCredential: boolean;
  /** Most body bytes held to store one answer (the upstream's maxBufferedBytes). */
  readonly maxEntryBytes: number;
  readonly now?: () => number;
  /** Where the Redis store reports failures (throttled). */
  readonly log?: { warn(fields: Record<string, unknown>, message: string): void };
}

/**
 * Forwarded request fields never part of a key: the request's own ids (X-Request-Id and W3C Trace
 * Context: one value per request, so keying them would store nothing worth finding), the client's
 * address (X-Forwarded-For, Forwarded: one entry per client), Authorization, which the
 * `sharedCredential` rule covers, and Content-Length (a GET forwards no body). An upstream whose
 * answer depends on one of them says so in Vary, and that answer is not stored.
 */
export const UNKEYED_FIELDS = ['x-request-id', 'traceparent', 'tracestate', 'x-forwarded-for', 'forwarded', 'authorization', 'content-length'] as const;

/** The cache a config asks for, or undefined when it caches nothing. */
export function openResponseCache(config: CacheConfig, options: CacheOptions): ResponseCache | undefined {
  // A TTL of 0 for both operations (the default) caches nothing: no store is opened.
  if (config.ttlSeconds.listPets <= 0 && config.ttlSeconds.getPet <= 0) return undefined;
  const now = options.now ?? Date.now;
  const store: CacheStore = config.store === 'memory' ? new MemoryCacheStore(config.maxBytes, now) : new RedisCacheStore(config.store.redis, { now, log: options.log });
  const counts: Record<CacheEvent, number> = { hit: 0, miss: 0, stale: 0, coalesced: 0, bypass: 0 };
  // Lower-case, sorted, once each: the same list in any spelling is the same tag.
  const ignored = [...new Set(config.ignoreRequestFields.map((n) => n.toLowerCase()))].sort();
  return {
    store,
    ttlMs: { listPets: config.ttlSeconds.listPets * 1000, getPet: config.ttlSeconds.getPet * 1000 },
    staleMs: config.staleIfErrorSeconds * 1000,
    sharedCredential: options.sharedCredential,
    unkeyed: new Set([...UNKEYED_FIELDS, ...ignored]),
    keyTag: ignored.length === 0 ? '' : `i:${createHash('sha256').update(ignored.join(' ')).digest('base64url').slice(0, 8)} `,
    // Held whole up to the upstream's buffering cap; the memory store refuses what exceeds maxBytes.
    maxEntryBytes: options.maxEntryBytes,
    now,
    flights: new Map(),
    keys: new KeyMemo(),
    counts,
  };
}
