// The response cache's pure parts: Cache-Control directives, keys, and the memory store's bound.
import t from 'tap';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { MemoryCacheStore, entrySize } from '../../src/policies/cache/memory.js';
import { openResponseCache } from '../../src/policies/cache/open.js';
import { fieldPlan, flatFields } from '../../src/core/forward/answer.js';
import { TRAILING_FIELDS, type CacheEntry } from '../../src/policies/cache/types.js';
import { directives, httpDate, varyKeyed } from '../../src/policies/cache/directives.js';
import { cacheKey } from '../../src/policies/cache/key.js';
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
  const cache = openResponseCache({ ttlSeconds: { listPets: 5, getPet: 0 }, maxBytes: 1 << 20, staleIfErrorSeconds: 0, store: 'memory', ignoreRequestFields: [] }, { sharedCredential: true, maxEntryBytes: 1 << 20 });
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
  const both = openResponseCache({ ttlSeconds: { listPets: 5, getPet: 5 }, maxBytes: 1 << 20, staleIfErrorSeconds: 0, store: 'memory', ignoreRequestFields: [] }, { sharedCredential: true, maxEntryBytes: 1 << 20 });
  t.equal(cacheKey(both!, req({ operation: 'getPet', param: 'limit=20' })), 'getPet limit=20', 'one parameter of two operations: two keys');
  t.equal(cacheKey(both!, req({})), 'listPets 0 limit=20');
  const keys = new Set<string | undefined>();
  for (let round = 0; round < 2; round++) for (let i = 0; i < 3000; i++) keys.add(cacheKey(both!, req({ operation: 'getPet', param: String(i) })));
  t.equal(keys.size, 3000, 'past the memo bound, every key is still its own');
  t.equal(cacheKey(both!, req({ operation: 'getPet', param: '2999' })), 'getPet 2999');
  t.equal(openResponseCache({ ttlSeconds: { listPets: 0, getPet: 0 }, maxBytes: 1 << 20, staleIfErrorSeconds: 0, store: 'memory', ignoreRequestFields: [] }, { sharedCredential: true, maxEntryBytes: 1 }), undefined, 'both TTLs 0: no cache');
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
    store.set(`getPet ${i}`, { status: 200, headers, body, text: body.toString('latin1'), plan: fieldPlan(flatFields(headers), own, TRAILING_FIELDS), born: now, freshUntil: now + 30_000, staleUntil: now + 330_000 });
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
  const fields = flatFields(small.headers);
  t.equal(entrySize('getPet 1', { ...small, fields }), base + 48 + 8 * fields.length, 'the flat list of the fields counts its slots');
  const plan = fieldPlan(fields, { 'x-request-id': 'r1', 'content-type': 'text/plain' }, TRAILING_FIELDS);
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

/** A GET of `op` as the exchange builds it, with the forwarded fields `headers`. */
function get(op: 'getPet' | 'listPets', headers: Record<string, string | string[]>, over: Partial<UpstreamRequest> = {}): UpstreamRequest {
  return { method: 'GET', operation: op, param: op === 'getPet' ? '7' : undefined, query: op === 'listPets' ? 'limit=20' : '', pathname: '', path: '', headers, body: undefined, native: undefined, answerRules: 'r', ...over };
}

const CONFIG = { ttlSeconds: { listPets: 5, getPet: 5 }, maxBytes: 1 << 20, staleIfErrorSeconds: 0, store: 'memory', ignoreRequestFields: [] } as const;
const BASE = { accept: '*/*', 'user-agent': 'curl/8', 'x-forwarded-proto': 'http', 'x-forwarded-host': 'gw.example' };

t.test('keys: every forwarded field an answer may depend on is part of the key; ids and the address are not', async (t) => {
  const cache = openResponseCache(CONFIG, { sharedCredential: true, maxEntryBytes: 1 << 20 })!;
  const key = (h: Record<string, string | string[]>, op: 'getPet' | 'listPets' = 'getPet') => cacheKey(cache, get(op, h));
  const base = key(BASE);
  for (const [name, value] of [
    ['x-forwarded-host', 'evil.example'],
    ['x-forwarded-proto', 'https'],
    ['accept', 'application/xml'],
    ['accept-language', 'de'],
    ['user-agent', 'other/1'],
    ['x-tenant', 'acme'],
    ['cookie', 'session=a'],
  ] as const) {
    t.not(key({ ...BASE, [name]: value }), base, `${name}: another key`);
  }
  t.not(key({ ...BASE, 'x-tenant': 'acme' }), key({ ...BASE, 'x-tenant': 'globex' }), 'two tenants: two keys');
  t.not(key({ ...BASE, 'x-tenant': '' }), base, 'an empty field is not an absent one');
  t.not(key({ ...BASE, 'x-tenant': ['a', 'b'] }), key({ ...BASE, 'x-tenant': 'a\rb' }), 'a repeated field is not one value');
  t.not(key({ ...BASE, 'x-tenant': ['a', 'b'] }), key({ ...BASE, 'x-tenant': 'a, b' }));
  t.equal(key({ ...BASE, 'x-tenant': ['a', 'b'] }), key({ ...BASE, 'x-tenant': ['a', 'b'] }), 'the same repeated field: the same key');
  t.not(key({ ...BASE, 'x-a': 'b\nx-b=c' as string }), key({ ...BASE, 'x-a': 'b', 'x-b': 'c' }), 'no value can spell two fields');
  for (const name of ['x-request-id', 'traceparent', 'tracestate', 'x-forwarded-for', 'forwarded', 'authorization', 'content-length']) {
    t.equal(key({ ...BASE, [name]: 'per-request-or-client' }), base, `${name}: the same key`);
  }
  const reordered = { 'x-forwarded-host': 'gw.example', 'user-agent': 'curl/8', 'x-forwarded-proto': 'http', accept: '*/*' };
  t.equal(key(reordered), base, 'the order the fields came in makes no other key');
  t.equal(key({ ...BASE, 'x-forwarded-host': 'GW.Example' }), base, 'a host in any case: one key');
  t.equal(key({ ...BASE, 'accept-language': 'de-DE, en;q=0.5' }), key({ ...BASE, 'accept-language': 'de-de,en; q=0.5' }), 'Accept-Language: case and spaces mean nothing');
  t.not(key({ ...BASE, 'user-agent': 'Curl/8' }), base, 'User-Agent: exactly as sent');
  t.not(key({ ...BASE, accept: 'text/html; a="X Y"' }), key({ ...BASE, accept: 'text/html;a="xy"' }), 'a quoted string is kept as sent');
  t.not(key(BASE, 'listPets'), key(BASE), 'two operations: two keys');
  // The memo (`KeyMemo`) and the key made without it agree, for every order and value seen.
  const plain = { ...cache, keys: undefined };
  const names = ['accept', 'accept-language', 'user-agent', 'x-tenant', 'x-forwarded-host', 'x-request-id'];
  let agreed = 0;
  for (let i = 0; i < 6000; i++) {
    const h: Record<string, string> = {};
    for (let j = 0; j < names.length; j++) {
      const name = names[(i + j * 5) % names.length]!;
      if ((i >> j) % 3 !== 0) h[name] = `v${(i * 7 + j) % 11}${j % 2 === 0 ? 'A' : ''}`;
    }
    const op = i % 2 === 0 ? 'getPet' : 'listPets';
    if (cacheKey(cache, get(op, h)) === cacheKey(plain, get(op, h))) agreed++;
  }
  t.equal(agreed, 6000, 'the memo gives the key made without it, past its bound too');
  // A client that sends a new 8 KiB User-Agent each time: what the memo holds stays bounded.
  let most = 0;
  const long = 'x'.repeat(8192);
  for (let i = 0; i < 1000; i++) {
    const k = cacheKey(cache, get('getPet', { ...BASE, 'user-agent': `${long}${i}` }));
    if (i === 999) t.equal(k, cacheKey(plain, get('getPet', { ...BASE, 'user-agent': `${long}${i}` })), 'keys stay right past the bound');
    most = Math.max(most, cache.keys!.bytes);
  }
  t.ok(most <= 1 << 20, `the memo held at most ${most} bytes`);
  const ignoring = openResponseCache({ ...CONFIG, ignoreRequestFields: ['User-Agent', 'x-forwarded-host'] }, { sharedCredential: true, maxEntryBytes: 1 << 20 })!;
  t.equal(cacheKey(ignoring, get('getPet', { ...BASE, 'user-agent': 'x', 'x-forwarded-host': 'y' })), cacheKey(ignoring, get('getPet', BASE)), 'ignoreRequestFields: left out of the key');
  t.not(cacheKey(ignoring, get('getPet', { ...BASE, 'accept-language': 'de' })), cacheKey(ignoring, get('getPet', BASE)), 'the other fields still count');
  t.not(cacheKey(ignoring, get('getPet', {})), cacheKey(cache, get('getPet', {})), 'a cache that ignores fields makes other keys than one that does not (two instances on one Redis store)');
  const sameList = openResponseCache({ ...CONFIG, ignoreRequestFields: ['X-Forwarded-Host', 'user-agent'] }, { sharedCredential: true, maxEntryBytes: 1 << 20 })!;
  t.equal(cacheKey(sameList, get('getPet', BASE)), cacheKey(ignoring, get('getPet', BASE)), 'the same list in another order and case: the same keys');
});

t.test("Vary: a variant per keyed field; `*`, the address, ids and ignored fields are not stored", async (t) => {
  const cache = openResponseCache({ ...CONFIG, ignoreRequestFields: ['user-agent'] }, { sharedCredential: true, maxEntryBytes: 1 << 20 })!;
  for (const vary of [undefined, 'Accept-Language', 'accept, accept-language, x-forwarded-host', 'Accept-Encoding', 'Origin', 'X-Tenant', ['Accept', 'Cookie'], 'Authorization']) {
    t.ok(varyKeyed(cache, vary), `Vary: ${String(vary)}: stored`);
  }
  for (const vary of ['*', 'Accept, *', 'X-Forwarded-For', 'forwarded', 'X-Request-Id', 'traceparent', 'User-Agent', ['accept', 'user-agent']]) {
    t.notOk(varyKeyed(cache, vary), `Vary: ${String(vary)}: not stored`);
  }
  const forwarding = openResponseCache(CONFIG, { sharedCredential: false, maxEntryBytes: 1 << 20 })!;
  t.notOk(varyKeyed(forwarding, 'Authorization'), "the client's own Authorization forwarded: Vary on it is not stored");
});

t.test('Cache-Control: what forbids a stale copy (RFC 9111 section 4.2.4); HTTP-dates', async (t) => {
  t.match(directives('max-age=60'), { noStale: false });
  t.match(directives('max-age=60, must-revalidate'), { noStale: true, shareable: true });
  t.match(directives('max-age=60, Proxy-Revalidate'), { noStale: true, shareable: false });
  t.match(directives('s-maxage=2'), { noStale: true, maxAge: 2 });
  t.match(directives('s-maxage=x, max-age=9'), { noStale: true, maxAge: 9 }, 'an unreadable s-maxage still forbids stale copies');
  t.equal(httpDate('Sun, 06 Nov 1994 08:49:37 GMT'), Date.UTC(1994, 10, 6, 8, 49, 37), 'IMF-fixdate');
  t.equal(httpDate('Sunday, 06-Nov-94 08:49:37 GMT'), Date.UTC(1994, 10, 6, 8, 49, 37), 'RFC 850');
  t.equal(httpDate('Sun Nov  6 08:49:37 1994'), Date.UTC(1994, 10, 6, 8, 49, 37), 'asctime');
  for (const bad of ['0', '1', '-1', 'Thu, 01 Jan 1970 00:00:00 UTC', 'Fri, 31 Feb 2026 00:00:00 GMT', 'Thu, 01 Jan 1970 25:00:00 GMT', '2026-01-01T00:00:00Z', ''] as const) {
    t.ok(Number.isNaN(httpDate(bad)), `${JSON.stringify(bad)} is no HTTP-date`);
  }
  t.ok(Number.isNaN(httpDate(['Sun, 06 Nov 1994 08:49:37 GMT', 'Sun, 06 Nov 1994 08:49:37 GMT'])), 'two values: none');
});
