// The response cache's pure parts: Cache-Control directives, keys, and the memory store's bound.
import t from 'tap';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { MemoryCacheStore, entrySize } from '../../src/cache/memory.js';
import { openResponseCache } from '../../src/cache/index.js';
import { cacheKey, directives, hitPlan, storedFields, type CacheEntry } from '../../src/core/forward/cache.js';
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
  const req = (over: Partial<UpstreamRequest>): UpstreamRequest => ({ method: 'GET', operation: 'listPets', param: undefined, query: 'limit=20', pathname: '/v1/pets', path: '/v1/pets?limit=20', headers: {}, body: undefined, native: undefined, ...over });
  const k = cacheKey(cache!, req({}));
  t.equal(k, 'listPets 0 limit=20');
  t.equal(cacheKey(cache!, req({ operation: 'getPet', param: '1' })), undefined, 'getPet ttl 0: not cached');
  t.equal(cacheKey(cache!, req({ method: 'POST', operation: 'createPet' })), undefined);
  cache!.store.dropLists();
  t.equal(cacheKey(cache!, req({})), 'listPets 1 limit=20', 'a new generation after createPet');
  // Keys are remembered by parameter (KeyMemo): what is remembered must never outlive its rules,
  // its generation or its operation.
  t.equal(cacheKey(cache!, req({ answerRules: 'r1' })), 'r1 listPets 1 limit=20', 'other rules: another key');
  t.equal(cacheKey(cache!, req({ answerRules: 'r2' })), 'r2 listPets 1 limit=20');
  t.equal(cacheKey(cache!, req({ answerRules: 'r1' })), 'r1 listPets 1 limit=20', 'the first rules again');
  cache!.store.dropLists();
  t.equal(cacheKey(cache!, req({ answerRules: 'r1' })), 'r1 listPets 2 limit=20', 'a remembered key is dropped with its generation');
  const both = openResponseCache({ ttlSeconds: { listPets: 5, getPet: 5 }, maxBytes: 1 << 20, staleIfErrorSeconds: 0, store: 'memory' }, { sharedCredential: true, maxEntryBytes: 1 << 20 });
  t.equal(cacheKey(both!, req({ operation: 'getPet', param: 'limit=20' })), 'getPet limit=20', 'one parameter of two operations: two keys');
  t.equal(cacheKey(both!, req({})), 'listPets 0 limit=20');
  const keys = new Set<string | undefined>();
  for (let round = 0; round < 2; round++) for (let i = 0; i < 3000; i++) keys.add(cacheKey(both!, req({ operation: 'getPet', param: String(i) })));
  t.equal(keys.size, 3000, 'past the memo bound, every key is still its own');
  t.equal(cacheKey(both!, req({ operation: 'getPet', param: '2999' })), 'getPet 2999');
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

/** A full GC, for a heap measure (tap does not start node with --expose-gc). */
function collect(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

t.test("50,000 distinct keys: the store's count and the real heap both stay within maxBytes", async (t) => {
  const gc = collect();
  const used = (): number => {
    gc();
    gc();
    const m = process.memoryUsage();
    return m.heapUsed + m.arrayBuffers;
  };
  const maxBytes = 8 * 1024 * 1024;
  const now = 1_000_000;
  const store = new MemoryCacheStore(maxBytes, () => now);
  const before = used();
  let worst = 0;
  for (let i = 0; i < 50_000; i++) {
    // A Pet of the interface's size, with an int64 past 2^53, as bench/cache.mjs stores; its body
    // kept as a string too, as the cache keeps a small body (`ONE_WRITE_MAX`), and its fields as
    // a hit's plan for the own fields of the request that filled it, as the exchange keeps them.
    const body = Buffer.from(`{"id":${i},"name":"pet ${i}","categoryId":9223372036854775807,"status":"available"}`);
    const headers = { 'content-type': 'application/json', 'content-length': String(body.length), etag: `"${i}"` };
    const own = { 'x-request-id': `r${i}`, 'ratelimit-policy': '"default";q=100;w=60', ratelimit: '"default";r=99;t=0' };
    store.set(`getPet ${i}`, { status: 200, headers, body, text: body.toString('latin1'), plan: hitPlan(storedFields(headers), own), born: now, freshUntil: now + 30_000, staleUntil: now + 330_000 });
    if (store.size > worst) worst = store.size;
  }
  const grown = used() - before;
  t.ok(worst <= maxBytes, `counted ${worst} bytes at most, bound ${maxBytes}`);
  t.ok(store.count < 50_000, `${store.count} entries kept, the rest dropped`);
  // What the store counts must be what the process holds: an entry counted too cheaply lets the
  // real heap grow past the bound.
  t.ok(grown <= maxBytes, `the heap grew ${grown} bytes for a bound of ${maxBytes}`);
  t.ok(store.get('getPet 49999') !== undefined, 'the newest is kept');
});

t.test('an entry is counted with its key and its headers, not only its body', async (t) => {
  const now = 0;
  const small = entry(Buffer.from('{}'), now);
  const base = entrySize('getPet 1', small);
  t.ok(entrySize('getPet ' + '9'.repeat(1000), small) >= base + 2 * 999, 'a long key costs its UTF-16 length');
  const fat: CacheEntry = { ...small, headers: { ...small.headers, etag: 'x'.repeat(8000), link: ['a'.repeat(1000), 'b'.repeat(1000)] } };
  t.ok(entrySize('getPet 1', fat) >= base + 2 * 10_000, 'header values (lists too) count');
  const body = Buffer.from('{"id":1,"name":"Rex"}');
  t.equal(entrySize('getPet 1', { ...small, body, text: body.toString('latin1') }), entrySize('getPet 1', { ...small, body }) + body.length, 'a body kept as a string too counts twice');
  const fields = storedFields(small.headers);
  t.equal(entrySize('getPet 1', { ...small, fields }), base + 48 + 8 * fields.length, 'the flat list of the fields counts its slots');
  const plan = hitPlan(fields, { 'x-request-id': 'r1', 'content-type': 'text/plain' });
  t.equal(plan.fields.length, fields.length + 2 + 4, 'a plan: the stored fields (an own field of a stored name takes its place), one new own field, Age and Cache-Status');
  t.equal(entrySize('getPet 1', { ...small, plan }), base + 3 * 48 + 32 + 8 * (plan.fields.length + 2 + 2), "a hit's plan counts its three lists' slots");
  // A store of 64 KiB cannot be filled past its bound by headers alone.
  const store = new MemoryCacheStore(64 * 1024, () => now);
  for (let i = 0; i < 100; i++) store.set(`getPet ${i}`, fat);
  t.ok(store.size <= 64 * 1024, `held ${store.size}`);
  t.ok(store.count <= 3, `${store.count} entries of 16 KiB of headers fit`);
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
  const m = new GatewayMetrics({ defaultMetrics: false, cacheCounts: () => ({ hit: 3, miss: 2, stale: 1, coalesced: 7, bypass: 4 }) });
  const text = await m.registry.metrics();
  for (const [result, n] of [['hit', 3], ['miss', 2], ['stale', 1], ['coalesced', 7], ['bypass', 4]] as const) {
    t.match(text, new RegExp(`^petstore_gateway_cache_requests_total\\{result="${result}"\\} ${n}$`, 'm'), result);
  }
});
