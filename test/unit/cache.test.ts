// The response cache's pure parts: Cache-Control directives, keys, and the memory store's bound.
import t from 'tap';
import { MemoryCacheStore } from '../../src/cache/memory.js';
import { openResponseCache } from '../../src/cache/index.js';
import { cacheKey, directives, type CacheEntry } from '../../src/core/forward/cache.js';
import type { UpstreamRequest } from '../../src/core/upstream.js';

function entry(body: Buffer, now: number): CacheEntry {
  return { status: 200, headers: { 'content-type': 'application/json' }, body, born: now, freshUntil: now + 60_000, staleUntil: now + 120_000 };
}

t.test('Cache-Control directives (RFC 9111 section 5.2.2)', async (t) => {
  t.match(directives('no-store'), { noStore: true });
  t.match(directives('private, max-age=60'), { unshared: true, maxAge: 60 });
  t.match(directives('No-Cache'), { unshared: true });
  t.match(directives('public, max-age=10'), { shareable: true, maxAge: 10 });
  t.match(directives('max-age=100, s-maxage=5'), { shareable: true, maxAge: 5 }, 's-maxage wins in a shared cache');
  t.match(directives(['max-age="30"']), { maxAge: 30 });
  t.match(directives('max-age=-1'), { maxAge: undefined }, 'an invalid max-age is none');
  t.match(directives(undefined), { noStore: false, unshared: false, shareable: false, maxAge: undefined });
});

t.test('keys: operation and normalised parameters; lists carry the generation', async (t) => {
  const cache = openResponseCache({ ttlSeconds: { listPets: 5, getPet: 0 }, maxBytes: 1 << 20, staleIfErrorSeconds: 0, store: 'memory' }, { sharedCredential: true, maxEntryBytes: 1 << 20 });
  t.ok(cache);
  const req = (over: Partial<UpstreamRequest>): UpstreamRequest => ({ method: 'GET', operation: 'listPets', petId: undefined, query: 'limit=20', pathname: '/v1/pets', path: '/v1/pets?limit=20', headers: {}, body: undefined, native: undefined, ...over });
  const k = cacheKey(cache!, req({}));
  t.equal(k, 'listPets 0 limit=20');
  t.equal(cacheKey(cache!, req({ operation: 'getPet', petId: '1' })), undefined, 'getPet ttl 0: not cached');
  t.equal(cacheKey(cache!, req({ method: 'POST', operation: 'createPet' })), undefined);
  cache!.store.dropLists();
  t.equal(cacheKey(cache!, req({})), 'listPets 1 limit=20', 'a new generation after createPet');
  t.equal(openResponseCache({ ttlSeconds: { listPets: 0, getPet: 0 }, maxBytes: 1 << 20, staleIfErrorSeconds: 0, store: 'memory' }, { sharedCredential: true, maxEntryBytes: 1 }), undefined, 'both TTLs 0: no cache');
});

t.test('the memory store stays within maxBytes however many distinct keys', async (t) => {
  const maxBytes = 256 * 1024;
  const now = 1_000_000;
  const store = new MemoryCacheStore(maxBytes, () => now);
  const body = Buffer.alloc(300, 'x');
  for (let i = 0; i < 20_000; i++) {
    store.set(`getPet ${i}`, entry(body, now));
    if (store.size > maxBytes) break;
  }
  t.ok(store.size <= maxBytes, `held ${store.size} bytes <= ${maxBytes}`);
  t.ok(store.count < 20_000 && store.count > 100, `kept ${store.count} entries, the oldest dropped`);
  t.ok(store.get('getPet 19999'), 'the newest is kept');
  t.equal(store.get('getPet 0'), undefined, 'the least recently used went first');
});

t.test('the memory store drops an entry past its stale window', async (t) => {
  let now = 0;
  const store = new MemoryCacheStore(1 << 20, () => now);
  store.set('k', entry(Buffer.from('{}'), now));
  t.ok(store.get('k'));
  now = 120_000;
  t.equal(store.get('k'), undefined);
});

t.test('metrics: the cache counts are exported by result', async (t) => {
  const { GatewayMetrics } = await import('../../src/ops/metrics.js');
  const m = new GatewayMetrics({ defaultMetrics: false, cacheCounts: () => ({ hit: 3, miss: 2, stale: 1, coalesced: 7 }) });
  const text = await m.registry.metrics();
  for (const [result, n] of [['hit', 3], ['miss', 2], ['stale', 1], ['coalesced', 7]] as const) {
    t.match(text, new RegExp(`^petstore_gateway_cache_requests_total\\{result="${result}"\\} ${n}$`, 'm'), result);
  }
});
