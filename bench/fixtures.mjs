// What every bench script shares of the gateway: the "every policy on" policy, the seeded reference
// backend and the bodies. Imports only dist (run `npm run build` first).
import { ReferenceBackend, createGateway, parsePolicy } from '../dist/index.js';

export const KEY = 'bench_' + 'k'.repeat(32);
export const STATUSES = ['available', 'pending', 'sold'];
/** Animals served by every upstream and built-in backend: more than 100, so limit=100 returns 100. */
export const SEED_PETS = 150;
/** Room for every createPet of a long run (the reference backend's default is 100,000). */
export const MAX_PETS = 5_000_000;

/** The rate limits a bench gateway can run (`rateLimit` of policyText and benchGateway). */
export const RATE_LIMITS = ['off', 'memory', 'redis'];

/**
 * Every policy on: auth (keys from PETSTORE_API_KEYS), route, deprecation (getPet headers, sunset
 * 2030), list-pets with response enforcement, new-pet (unknown fields rejected), upstream-errors,
 * response-contract (`off` unless `contract` says `monitor` or `enforce`), and a rate limit that
 * never trips: `rateLimit` `memory` (the default), `redis` (store {redis: {url: redisUrl}}, one
 * EVALSHA per request) or `off` (no rate-limit section: the policy limits nobody). With the
 * defaults of the product: header allowlists, request ids, trace context. `shadow` (a URL): the
 * migration lane with that `next`, listPets and getPet in shadow mode, `shadow:` at its defaults
 * (maxInFlight 64, timeoutMs 2000: bench/shadow.mjs).
 */
export function policyText(upstream, contract = 'off', { rateLimit = 'memory', redisUrl, cache = false, cacheTtl, consumerBound = true, shadow } = {}) {
  if (!RATE_LIMITS.includes(rateLimit)) throw new Error(`rate limit must be one of ${RATE_LIMITS.join(', ')}, not '${rateLimit}'`);
  if (rateLimit === 'redis' && !redisUrl) throw new Error('the redis rate limit needs a Redis URL (redis://127.0.0.1:PORT)');
  const policies = {
    // The brute-force lock is off: the memory phases send 200,000 distinct unknown keys from one
    // address to measure the key lookup, which the lock would cut short after 100 (with 429s).
    auth: { keys: [], keysFromEnv: 'PETSTORE_API_KEYS', upstreamAuthorization: 'drop', bruteForce: null },
    route: {},
    deprecation: { deprecatedAt: '2026-01-01T00:00:00Z', sunset: '2030-12-05T00:00:00Z', removeAfterSunset: true },
    'list-pets': { outOfRange: 'reject', unknownParams: 'drop', enforceResponse: true },
    'new-pet': { maxBytes: 16384, unknownFields: 'reject' },
    'upstream-errors': {},
    'response-contract': { mode: contract },
  };
  // A rate limit that never trips: its cost is measured, its 429s are not.
  if (rateLimit !== 'off') {
    policies['rate-limit'] = { limit: 1_000_000_000, windowSeconds: 60, store: rateLimit === 'memory' ? 'memory' : { redis: { url: redisUrl } } };
  }
  // The example cache (memory store): a bench route repeats one request, so all but the first are hits.
  // `cacheTtl` (seconds, both operations): a target under valgrind serves a few hundred requests a
  // second, so a 5 s entry would expire inside a counted window and add a miss to it.
  if (cache) policies.cache = { ttlSeconds: cacheTtl === undefined ? { listPets: 5, getPet: 30 } : { listPets: cacheTtl, getPet: cacheTtl }, maxBytes: 67108864, staleIfErrorSeconds: 300, store: 'memory' };
  // The per-consumer in-flight bound is on by default (server.maxInFlightPerConsumer, 128); off: null.
  const server = consumerBound ? undefined : { maxInFlightPerConsumer: null };
  const migration = shadow === undefined ? undefined : { next: { url: shadow }, operations: { listPets: { mode: 'shadow' }, getPet: { mode: 'shadow' } } };
  return JSON.stringify({ version: 1, upstream: { url: upstream }, ...(server === undefined ? {} : { server }), policies, ...(migration === undefined ? {} : { migration }) });
}

/**
 * A gateway (dist's createGateway) with every policy on; `keys` is PETSTORE_API_KEYS; `rateLimit`
 * and `redisUrl` as policyText. A Redis store is opened by createGateway (dist/stores): close it
 * with dist/stores/index.js closeStores().
 */
export function benchGateway({ upstream = 'builtin', contract = 'off', keys = KEY, backend, rateLimit = 'memory', redisUrl, cache = false, cacheTtl, consumerBound = true, shadow } = {}) {
  const env = { env: { PETSTORE_API_KEYS: keys } };
  const loaded = parsePolicy(policyText(upstream, contract, { rateLimit, redisUrl, cache, cacheTtl, consumerBound, shadow }), env);
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
  return createGateway(loaded.config, env, upstream === 'builtin' ? (backend ?? seededBackend()) : undefined);
}

export function petText(i) {
  return `{"name":"pet ${i}","categoryId":${i},"status":"${STATUSES[i % 3]}"}`;
}

export function seededBackend(n = SEED_PETS) {
  const backend = new ReferenceBackend({ maxPets: MAX_PETS });
  for (let i = 0; i < n; i++) {
    const r = backend.handle({ operation: 'createPet', query: '', body: Buffer.from(petText(i)) });
    if (r.status !== 201) throw new Error(`seeding: ${r.status} ${r.body}`);
  }
  return backend;
}

/** A valid NewPet of exactly `bytes` bytes (the name is padded). */
export function newPetOfSize(bytes) {
  const shell = '{"name":"","categoryId":9223372036854775807,"status":"available"}';
  if (bytes < shell.length) throw new Error(`a NewPet needs at least ${shell.length} bytes`);
  const body = `{"name":"${'n'.repeat(bytes - shell.length)}","categoryId":9223372036854775807,"status":"available"}`;
  return body;
}

/** A JSON array of `n` Pets as an upstream sends it (ids above 2^53, int64 categoryId). */
export function petList(n) {
  const items = [];
  for (let i = 0; i < n; i++) items.push(`{"id":${9007199254740993n + BigInt(i)},"name":"pet number ${i}","categoryId":9223372036854775807,"status":"${STATUSES[i % 3]}"}`);
  return Buffer.from('[' + items.join(',') + ']');
}
