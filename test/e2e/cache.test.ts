// The response cache (policies.cache) against a slow upstream process that counts its calls
// (test/fixtures/slow-upstream.mjs), on every engine: concurrent identical misses make one call,
// hits are the miss's bytes, private and no-store answers are not stored, createPet drops the
// lists, stale copies answer a dead upstream within the window and 502 after it, and two gateways
// on one real redis-server share entries and invalidation.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import tap from 'tap';
import { RedisCacheStore } from '../../src/policies/cache/open.js';
import { parsePolicy, formatProblems } from '../../src/config/load.js';
import { createGateway, GatewayHolder } from '../../src/gateway.js';
import { assertError, type TapTest } from '../helpers/assert.js';
import { h2Request, makeTestPki } from '../helpers/certs.js';
import { startRedis } from '../helpers/redis.js';
import { bearer, forEachEngine, JSON_TYPE, listenEngine, policyText, PROJECT_ROOT, request, sendJson, sleep, startGateway, startStubUpstream, testKey, waitFor, type Engine, nodeCommand } from '../helpers/servers.js';

interface Upstream {
  readonly url: string;
  readonly child: ChildProcess;
  calls(): Promise<Record<string, number>>;
  post(path: string): Promise<void>;
}

async function startUpstream(t: TapTest, delayMs = 50): Promise<Upstream> {
  const child = spawn(...nodeCommand([join(PROJECT_ROOT, 'test', 'fixtures', 'slow-upstream.mjs')]), { env: { PATH: process.env.PATH, DELAY_MS: String(delayMs) }, stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  });
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('slow upstream did not start')), 10_000);
    child.stdout!.setEncoding('utf8').on('data', (s: string) => {
      out += s;
      const m = /listening on (\S+)/.exec(out);
      if (m !== null) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
  });
  const origin = url.replace(/\/v1$/, '');
  return {
    url,
    child,
    calls: async () => (await request(`${origin}/__calls`)).json as Record<string, number>,
    post: async (path) => {
      await request(`${origin}${path}`, { method: 'POST' });
    },
  };
}

/**
 * Cache-Status as RFC 9211 section 2 defines it: an sf-list member, our cache's token, then
 * parameters (RFC 8941 section 3.1.2), each at most once: `hit`, `stored` and `collapsed` true
 * Booleans, `fwd` one of the registered tokens, `fwd-status` and `ttl` Integers, `detail` a Token;
 * `hit` and `fwd` never together (a hit was not forwarded).
 */
function assertCacheStatus(t: TapTest, value: unknown): void {
  const fail = (why: string): void => void t.fail(`Cache-Status ${JSON.stringify(value)}: ${why}`);
  if (typeof value !== 'string') return fail('missing');
  const [name, ...params] = value.split(';');
  if (name !== 'petstore-gateway') return fail('not our cache');
  const seen = new Set<string>();
  const forms: Record<string, RegExp> = {
    hit: /^$/,
    stored: /^$/,
    collapsed: /^$/,
    fwd: /^=(bypass|method|uri-miss|vary-miss|miss|request|stale|partial)$/,
    'fwd-status': /^=[1-5]\d\d$/,
    ttl: /^=-?\d{1,15}$/,
    detail: /^=[A-Za-z*][!#$%&'*+\-.^_`|~0-9A-Za-z:/]*$/,
  };
  for (const p of params) {
    const m = /^ ?([a-z*][a-z0-9_\-.*]*)(.*)$/.exec(p);
    if (m === null) return fail(`bad parameter ${JSON.stringify(p)}`);
    const key = m[1] ?? '';
    const rest = m[2] ?? '';
    if (seen.has(key)) return fail(`${key} twice`);
    seen.add(key);
    const form = forms[key];
    if (form === undefined || !form.test(rest)) return fail(`bad ${key}${rest}`);
  }
  if (seen.has('hit') && seen.has('fwd')) return fail('hit and fwd together');
  t.pass(`Cache-Status ${value} is RFC 9211 syntax`);
}

interface Started {
  readonly url: string;
  readonly key: string;
  readonly holder: GatewayHolder;
}

// One consumer sends 200 identical requests at once: the per-connection and per-consumer bounds
// are raised past that, as an operator whose one client fans out would.
async function startCached(t: TapTest, engine: Engine, upstreamUrl: string, cache: Record<string, unknown>, now?: () => number, upstream: Record<string, unknown> = {}): Promise<Started> {
  const key = testKey();
  const env = { PETSTORE_API_KEYS: key };
  const text = policyText({ upstream: { url: upstreamUrl, timeouts: { headersMs: 10_000 }, ...upstream }, server: { maxConnections: 1000, maxInFlightPerConsumer: 256 }, policies: { cache } });
  const loaded = parsePolicy(text, { env });
  if (!loaded.ok) throw new Error(formatProblems('policy', loaded.problems));
  const holder = new GatewayHolder(createGateway(loaded.config, { env }), now === undefined ? {} : { now });
  const { url } = await listenEngine(t, engine, holder);
  return { url, key, holder };
}

forEachEngine(tap, async (t, engine) => {
  t.test('200 concurrent identical misses make one upstream call; hits are the same bytes', async (t) => {
    const up = await startUpstream(t);
    const gw = await startCached(t, engine, up.url, { ttlSeconds: { getPet: 60 } });
    const counts = gw.holder.cache!.counts;
    await up.post('/__hold');
    const all = Array.from({ length: 200 }, () => request(`${gw.url}/v1/pets/42`, { headers: bearer(gw.key), timeoutMs: 20_000 }));
    await waitFor('199 requests waiting on the one call', () => counts.miss === 1 && counts.coalesced === 199, 15_000);
    await up.post('/__release');
    const answers = await Promise.all(all);
    t.same((await up.calls())['GET /v1/pets/42'], 1, 'one upstream call');
    t.ok(answers.every((r) => r.status === 200 && r.body === '{"id":9007199254740993,"name":"Rex","categoryId":3,"status":"available"}'), 'every answer is the upstream bytes (int64 exact)');
    const statuses = answers.map((r) => String(r.headers['cache-status']));
    for (const s of new Set(statuses)) assertCacheStatus(t, s);
    t.equal(statuses.filter((s) => s.endsWith('; collapsed')).length, 199, '199 answers say collapsed');
    t.match(statuses.find((s) => !s.endsWith('; collapsed')), /^petstore-gateway; fwd=uri-miss; fwd-status=200; stored; ttl=\d+$/, 'the first says miss, stored');
    const hit = await request(`${gw.url}/v1/pets/42`, { headers: bearer(gw.key) });
    t.equal(hit.status, 200);
    t.same(hit.raw, answers[0]!.raw, 'a hit is byte-identical to the miss');
    t.match(hit.headers['cache-status'], /^petstore-gateway; hit; ttl=\d+$/);
    assertCacheStatus(t, hit.headers['cache-status']);
    t.match(hit.headers.age, /^\d+$/, 'Age on a hit');
    t.equal(hit.headers.deprecation, answers[0]!.headers.deprecation, 'getPet\'s deprecation fields on a hit as on the miss');
    t.ok(hit.headers.deprecation !== undefined && hit.headers.sunset !== undefined);
    t.equal(hit.headers['content-type'], answers[0]!.headers['content-type']);
    t.same((await up.calls())['GET /v1/pets/42'], 1, 'the hit made no call');
    t.equal(counts.hit, 1);
  });

  t.test('a private answer is never handed to the requests that waited for it: they send their own', async (t) => {
    const up = await startUpstream(t, 1);
    const gw = await startCached(t, engine, up.url, { ttlSeconds: { getPet: 60 } });
    const counts = gw.holder.cache!.counts;
    await up.post('/__hold');
    const all = Array.from({ length: 5 }, () => request(`${gw.url}/v1/pets/7`, { headers: bearer(gw.key), timeoutMs: 10_000 }));
    await waitFor('4 requests waiting on the one call', () => counts.miss === 1 && counts.coalesced === 4);
    await up.post('/__release');
    const answers = await Promise.all(all);
    t.ok(answers.every((r) => r.status === 200), 'every request answered');
    t.equal((await up.calls())['GET /v1/pets/7'], 5, 'one upstream call per request');
    t.notOk(answers.some((r) => /collapsed|stored/.test(String(r.headers['cache-status']))), 'none shared, none stored');
  });

  t.test('the first client leaves: the requests that waited still get the answer', async (t) => {
    const up = await startUpstream(t, 1);
    const gw = await startCached(t, engine, up.url, { ttlSeconds: { getPet: 60 } });
    const counts = gw.holder.cache!.counts;
    await up.post('/__hold');
    const first = request(`${gw.url}/v1/pets/42`, { headers: bearer(gw.key), timeoutMs: 500 }).then(
      () => 'answered',
      () => 'left',
    );
    await waitFor('the first request in flight', () => counts.miss === 1);
    const second = request(`${gw.url}/v1/pets/42`, { headers: bearer(gw.key), timeoutMs: 10_000 });
    await waitFor('the second request waiting', () => counts.coalesced === 1);
    t.equal(await first, 'left', 'the first client hung up');
    await up.post('/__release');
    const r = await second;
    t.equal(r.status, 200, 'the waiting request is answered');
    t.match(r.body, /9007199254740993/);
  });

  t.test('what is not stored: private, no-store, errors; what a hit still gets: authentication', async (t) => {
    const up = await startUpstream(t, 1);
    const gw = await startCached(t, engine, up.url, { ttlSeconds: { getPet: 60, listPets: 60 } });
    for (const id of ['7', '8', '404']) {
      const a = await request(`${gw.url}/v1/pets/${id}`, { headers: bearer(gw.key) });
      const b = await request(`${gw.url}/v1/pets/${id}`, { headers: bearer(gw.key) });
      t.equal(a.status, b.status, `pet ${id}: the same answer twice`);
      t.notMatch(String(b.headers['cache-status']), /hit|stored/, `pet ${id}: not stored`);
      t.equal((await up.calls())[`GET /v1/pets/${id}`], 2, `pet ${id}: two upstream calls`);
    }
    await request(`${gw.url}/v1/pets/42`, { headers: bearer(gw.key) });
    assertError(t, await request(`${gw.url}/v1/pets/42`), 401, 'missing_api_key');
    t.equal((await up.calls())['GET /v1/pets/42'], 1);
  });

  t.test('listPets: the key is the normalised query; a created pet drops every list', async (t) => {
    const up = await startUpstream(t, 1);
    const gw = await startCached(t, engine, up.url, { ttlSeconds: { listPets: 60 } });
    const h = bearer(gw.key);
    const first = await request(`${gw.url}/v1/pets`, { headers: h });
    t.equal(first.status, 200);
    const same = await request(`${gw.url}/v1/pets?limit=20&junk=1`, { headers: h });
    t.match(same.headers['cache-status'], /; hit;/, 'limit made explicit, an unknown parameter dropped: the same key');
    t.same(same.raw, first.raw);
    const sold = await request(`${gw.url}/v1/pets?status=sold&limit=5`, { headers: h });
    const swapped = await request(`${gw.url}/v1/pets?limit=5&status=sold`, { headers: h });
    t.match(swapped.headers['cache-status'], /; hit;/, 'parameter order does not matter');
    // The upstream ignores the filter; the response phase applies it to the hit as to the miss.
    t.equal(swapped.body, '[{"id":1,"name":"a","categoryId":3,"status":"sold"}]', 'the hit is filtered like the miss');
    t.same(swapped.raw, sold.raw);
    const created = await request(`${gw.url}/v1/pets`, { method: 'POST', headers: { ...h, 'content-type': 'application/json' }, body: '{"name":"new","categoryId":1}' });
    t.equal(created.status, 201);
    t.equal(created.headers['cache-status'], 'petstore-gateway; fwd=method; fwd-status=201', 'createPet goes forward by its method');
    const after = await request(`${gw.url}/v1/pets`, { headers: h });
    t.match(after.headers['cache-status'], /fwd=uri-miss/, 'after createPet the list is asked again');
    t.equal((await up.calls())['GET /v1/pets?limit=20'], 2);
    const pet = await request(`${gw.url}/v1/pets/42`, { headers: h });
    t.equal(pet.headers['cache-status'], 'petstore-gateway; fwd=bypass; fwd-status=200', 'getPet, TTL 0: bypassed');
    for (const r of [first, same, sold, created, after, pet]) assertCacheStatus(t, r.headers['cache-status']);
    t.same({ ...gw.holder.cache!.counts }, { hit: 2, miss: 3, stale: 0, coalesced: 0, bypass: 2 }, 'every outcome counted once');
  });

  t.test('the rate limit counts hits', async (t) => {
    const up = await startUpstream(t, 1);
    // Its own key id per engine: the rate limit's memory store is one per process.
    const keysFromEnv = `CACHE_KEYS_${engine.replace(/\W/g, '_').toUpperCase()}`;
    const key = testKey();
    const text = policyText({ upstream: { url: up.url }, policies: { auth: { keysFromEnv }, 'rate-limit': { limit: 2, windowSeconds: 3600 }, cache: { ttlSeconds: { getPet: 60 } } } });
    const loaded = parsePolicy(text, { env: { [keysFromEnv]: key } });
    if (!loaded.ok) throw new Error(formatProblems('policy', loaded.problems));
    const { url } = await listenEngine(t, engine, new GatewayHolder(createGateway(loaded.config, { env: { [keysFromEnv]: key } })));
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push((await request(`${url}/v1/pets/42`, { headers: bearer(key) })).status);
    t.same(statuses, [200, 200, 429], 'the third request, a hit, is refused');
    t.equal((await up.calls())['GET /v1/pets/42'], 1);
  });

  t.test('stale-if-error: a dead upstream is answered from the stale copy within the window, 502 after', async (t) => {
    const up = await startUpstream(t, 1);
    let clock = Date.now();
    const gw = await startCached(t, engine, up.url, { ttlSeconds: { getPet: 10 }, staleIfErrorSeconds: 60 }, () => clock);
    const h = bearer(gw.key);
    const miss = await request(`${gw.url}/v1/pets/42`, { headers: h });
    t.equal(miss.status, 200);
    clock += 30_000; // stale, within the window
    const exited = once(up.child, 'exit');
    up.child.kill('SIGKILL');
    await exited;
    const stale = await request(`${gw.url}/v1/pets/42`, { headers: h });
    t.equal(stale.status, 200, 'the stale copy answers');
    t.same(stale.raw, miss.raw, 'the same bytes');
    t.match(stale.headers['cache-status'], /^petstore-gateway; fwd=stale; ttl=-\d+; detail=stale-if-error$/, 'Cache-Status says it is stale');
    assertCacheStatus(t, stale.headers['cache-status']);
    t.match(stale.headers.age, /^3\d$/, 'Age counts from the miss');
    t.equal(gw.holder.cache!.counts.stale, 1);
    clock += 60_000; // past the window
    assertError(t, await request(`${gw.url}/v1/pets/42`, { headers: h }), 502, 'upstream_unavailable', { message: 'any' });
  });

  t.test('stale-if-error while the circuit breaker is open: stale hits within the window, 503 after', async (t) => {
    const up = await startUpstream(t, 1);
    let clock = Date.now();
    const breaker = { circuitBreaker: { failures: 2, coolDownMs: 600_000 } };
    const gw = await startCached(t, engine, up.url, { ttlSeconds: { getPet: 10, listPets: 10 }, staleIfErrorSeconds: 60 }, () => clock, breaker);
    const h = bearer(gw.key);
    const pet = await request(`${gw.url}/v1/pets/42`, { headers: h });
    const list = await request(`${gw.url}/v1/pets?status=sold`, { headers: h });
    t.equal(pet.status, 200);
    t.equal(list.status, 200);
    const exited = once(up.child, 'exit');
    up.child.kill('SIGKILL');
    await exited;
    // Two real failures (pets never cached) open the breaker.
    for (let i = 0; i < 2; i++) assertError(t, await request(`${gw.url}/v1/pets/99`, { headers: h }), 502, 'upstream_unavailable', { message: 'any' });
    t.equal(gw.holder.breaker?.rejecting, true, 'the breaker is open');
    assertError(t, await request(`${gw.url}/v1/pets/99`, { headers: h }), 503, 'service_unavailable', { message: 'any' });
    const fresh = await request(`${gw.url}/v1/pets/42`, { headers: h });
    t.match(fresh.headers['cache-status'], /^petstore-gateway; hit; ttl=\d+$/, 'a fresh hit asks nothing of the open breaker');
    t.same(fresh.raw, pet.raw);
    clock += 30_000; // stale, within the window
    const counts = gw.holder.cache!.counts;
    const staleBefore = counts.stale;
    const stalePet = await request(`${gw.url}/v1/pets/42`, { headers: h });
    t.equal(stalePet.status, 200, 'a stale getPet answers instead of 503');
    t.same(stalePet.raw, pet.raw, 'the same bytes');
    t.match(stalePet.headers['cache-status'], /^petstore-gateway; hit; ttl=-\d+; detail=circuit-open$/, 'Cache-Status: a stale hit, nothing went forward');
    t.match(stalePet.headers.age, /^3\d$/);
    assertCacheStatus(t, stalePet.headers['cache-status']);
    const staleList = await request(`${gw.url}/v1/pets?status=sold`, { headers: h });
    t.equal(staleList.status, 200, 'a stale listPets answers too');
    t.equal(staleList.body, list.body);
    t.match(staleList.headers['cache-status'], /; hit; ttl=-\d+; detail=circuit-open$/);
    t.equal(counts.stale - staleBefore, 2, 'counted as stale');
    t.equal(gw.holder.breaker?.rejecting, true, 'stale answers tell the breaker nothing: still open');
    clock += 60_000; // past the window
    const after = await request(`${gw.url}/v1/pets/42`, { headers: h });
    assertError(t, after, 503, 'service_unavailable', { message: 'any' });
    t.match(after.headers['retry-after'], /^\d+$/);
  });

  t.test('two gateways on one redis-server share entries and invalidation', async (t) => {
    const redis = await startRedis();
    t.teardown(() => redis.stop());
    const up = await startUpstream(t, 1);
    const cache = { ttlSeconds: { listPets: 60, getPet: 60 }, store: { redis: { url: redis.url, prefix: `t${Date.now()}:` } } };
    const a = await startCached(t, engine, up.url, cache);
    const b = await startCached(t, engine, up.url, cache);
    const storeOf = (g: Started): RedisCacheStore => {
      const store = g.holder.cache?.store;
      if (!(store instanceof RedisCacheStore)) throw new Error('expected the Redis store');
      return store;
    };
    await Promise.all([storeOf(a).ready, storeOf(b).ready]);
    const pet = await request(`${a.url}/v1/pets/42`, { headers: bearer(a.key) });
    t.equal(pet.status, 200);
    // The write is not awaited by the request: B may ask before it landed (bounded: 50 tries).
    let fromB = await request(`${b.url}/v1/pets/42`, { headers: bearer(b.key) });
    for (let i = 0; i < 50 && !/; hit;/.test(String(fromB.headers['cache-status'])); i++) {
      await sleep(20);
      fromB = await request(`${b.url}/v1/pets/42`, { headers: bearer(b.key) });
    }
    t.match(fromB.headers['cache-status'], /; hit;/, 'B hits the entry A stored');
    t.same(fromB.raw, pet.raw, 'B answers A\'s entry, byte for byte');
    t.ok((await up.calls())['GET /v1/pets/42']! <= 2, 'B made no call once the entry landed');
    await request(`${a.url}/v1/pets`, { headers: bearer(a.key) });
    const gen = storeOf(a).generation;
    const created = await request(`${b.url}/v1/pets`, { method: 'POST', headers: bearer(b.key, { 'content-type': 'application/json' }), body: '{"name":"n","categoryId":1}' });
    t.equal(created.status, 201);
    await waitFor('A hears of the invalidation', () => storeOf(a).generation > gen);
    const list = await request(`${a.url}/v1/pets`, { headers: bearer(a.key) });
    t.match(list.headers['cache-status'], /fwd=uri-miss/, 'the list is asked again on A');
  });
});




forEachEngine(tap, async (t, engine) => {
  t.test('a Redis store that dies: every request is answered by the upstream, none hangs', async (t) => {
    const redis = await startRedis();
    t.teardown(() => redis.stop());
    const up = await startUpstream(t, 1);
    const gw = await startCached(t, engine, up.url, { ttlSeconds: { getPet: 60 }, store: { redis: { url: redis.url } } });
    const store = gw.holder.cache?.store;
    if (store instanceof RedisCacheStore) await store.ready;
    t.equal((await request(`${gw.url}/v1/pets/42`, { headers: bearer(gw.key) })).status, 200);
    await redis.kill();
    const started = Date.now();
    const after = await request(`${gw.url}/v1/pets/42`, { headers: bearer(gw.key), timeoutMs: 5000 });
    t.equal(after.status, 200, 'answered from the upstream');
    t.match(after.headers['cache-status'], /fwd=uri-miss/);
    t.ok(Date.now() - started < 3000, 'without waiting for Redis');
  });
});

// parity: the 5xx rule is the cache layer's alone; every engine's transport failures are covered above
tap.test('stale-if-error on a 5xx answer', async (t) => {
  const up = await startUpstream(t, 1);
  let clock = Date.now();
  const gw = await startCached(t, 'undici', up.url, { ttlSeconds: { listPets: 5 }, staleIfErrorSeconds: 60 }, () => clock);
  const h = bearer(gw.key);
  const miss = await request(`${gw.url}/v1/pets`, { headers: h });
  clock += 10_000;
  await up.post('/__fail');
  const stale = await request(`${gw.url}/v1/pets`, { headers: h });
  t.equal(stale.status, 200);
  t.same(stale.raw, miss.raw);
  t.match(stale.headers['cache-status'], /fwd=stale; fwd-status=503; ttl=-\d+; detail=stale-if-error/);
});


// A hit hands the response its fields as a flat list (node's raw form): HTTP/2's response object
// (TLS with ALPN) takes that form too, and must write every field, the int64 bytes as stored.
forEachEngine(tap, async (t, engine) => {
  t.test('HTTP/2 over TLS: a hit has the stored fields, its own, Age and Cache-Status', async (t) => {
    const pki = makeTestPki(t);
    const pet = '{"id":7,"name":"Rex","categoryId":9223372036854775807,"status":"available"}';
    const stub = await startStubUpstream(t, (_req, res) => sendJson(res, 200, pet, { etag: '"v1"' }));
    const gw = await startGateway(
      t,
      { upstream: { url: `${stub.origin}/v1` }, server: { tls: { certFile: pki.server.cert, keyFile: pki.server.key } }, policies: { cache: { ttlSeconds: { getPet: 60 } } } },
      { engine },
    );
    const origin = `https://127.0.0.1:${(gw.server.address() as AddressInfo).port}`;
    const ask = () => h2Request(origin, '/v1/pets/7', { ca: pki.read(pki.ca), headers: { ...bearer(gw.key), 'x-request-id': 'h2-hit' } });
    const miss = await ask();
    const hit = await ask();
    t.equal(stub.requests.length, 1, 'one upstream call');
    t.equal(hit.alpn, 'h2');
    for (const res of [miss, hit]) {
      t.equal(res.status, 200);
      t.equal(res.body, pet, 'the int64 bytes as the upstream sent them');
      t.equal(res.headers['content-type'], JSON_TYPE);
      t.equal(res.headers.etag, '"v1"');
      t.equal(Number(res.headers['content-length']), Buffer.byteLength(pet));
      t.equal(res.headers['x-request-id'], 'h2-hit');
      t.ok(res.headers.deprecation !== undefined, "getPet's Deprecation");
      t.match(res.headers.age, /^\d+$/);
    }
    t.match(hit.headers['cache-status'], /^petstore-gateway; hit; ttl=\d+$/);
  });
});
