// The response cache against an upstream whose answers depend on the request fields the gateway
// forwards, without saying so in Vary (a legacy backend): one client's variant is never served to
// another (X-Forwarded-Host from Host or HTTP/2 :authority, Accept-Language, User-Agent, an
// allow-listed X-Tenant), also through a second instance on one redis-server; Vary is honoured
// (a variant per keyed field, `*` and the client's address never stored); no stale copy of an
// answer that forbids one (must-revalidate, proxy-revalidate, s-maxage); Expires counts; an
// uncached 404 says what the cache did; a hostile invalidation message freezes nothing.
import type { AddressInfo } from 'node:net';
import tap from 'tap';
import { RedisCacheStore } from '../../src/policies/cache/open.js';
import { formatProblems, parsePolicy } from '../../src/config/load.js';
import { createGateway, GatewayHolder } from '../../src/gateway.js';
import { createRedisClient, type RedisConnection } from '../../src/stores/connection.js';
import { assertError, type TapTest } from '../helpers/assert.js';
import { h2Request, makeTestPki } from '../helpers/certs.js';
import { manualWallClock } from '../helpers/clock.js';
import { REDIS_SKIP, startRedis } from '../helpers/redis.js';
import { bearer, forEachEngine, listenEngine, policyText, request, sendJson, sleep, startGateway, startStubUpstream, testKey, waitFor, type RecordedRequest, type StubUpstream } from '../helpers/servers.js';

const HTTP_DATE_PAST = 'Thu, 01 Jan 1970 00:00:00 GMT';

/**
 * A legacy pet store (the attack pass's upstream-vary.mjs): a pet's name depends on X-Tenant,
 * X-Forwarded-Host, Accept-Language and User-Agent, and no answer says Vary, except where the
 * petId asks for a header: 21 Vary: Accept-Language, 22 Vary: *, 23 Vary: X-Forwarded-For; 31
 * must-revalidate, 32 proxy-revalidate, 33 s-maxage, 34 max-age only (all 2 s); 41 Expires in
 * 1970, 42 Expires 5 s after its Date, 43 Expires "0"; 99 is not found. `failing()` makes every
 * answer a 503.
 */
function legacyUpstream(t: TapTest): Promise<StubUpstream & { failing(on: boolean): void; calls(path: string): number }> {
  let failing = false;
  return startStubUpstream(t, (req: RecordedRequest, res) => {
    if (failing) return sendJson(res, 503, '{"message":"down"}');
    if (req.method === 'POST') return sendJson(res, 201, '{"id":1000,"name":"new","categoryId":1,"status":"available"}');
    const h = req.headers;
    const host = String(h['x-forwarded-host'] ?? '');
    const name =
      h['x-tenant'] !== undefined
        ? `secret-of-tenant-${String(h['x-tenant'])}`
        : /evil/.test(host)
          ? `Rex, see https://${host}/promo`
          : String(h['accept-language'] ?? '').startsWith('de')
            ? 'Rex-DE'
            : /Bot/.test(String(h['user-agent'] ?? ''))
              ? 'Rex-for-bots'
              : 'Rex';
    const m = /^\/v1\/pets\/(\d+)$/.exec(req.url);
    const id = m === null ? undefined : Number(m[1]);
    if (id === 99) return sendJson(res, 404, '{"message":"no such pet"}');
    const body = id !== undefined ? `{"id":${id},"name":"${name}","categoryId":1,"status":"available"}` : `[{"id":1,"name":"${name}","categoryId":1,"status":"available"}]`;
    const now = Date.now();
    const extra: Record<number, Record<string, string>> = {
      21: { vary: 'Accept-Language' },
      22: { vary: '*' },
      23: { vary: 'X-Forwarded-For' },
      31: { 'cache-control': 'max-age=2, must-revalidate' },
      32: { 'cache-control': 'max-age=2, proxy-revalidate' },
      33: { 'cache-control': 's-maxage=2' },
      34: { 'cache-control': 'max-age=2' },
      41: { expires: HTTP_DATE_PAST },
      42: { date: new Date(now).toUTCString(), expires: new Date(now + 5000).toUTCString() },
      43: { expires: '0' },
    };
    sendJson(res, 200, body, id === undefined ? {} : (extra[id] ?? {}));
  }).then((stub) =>
    Object.assign(stub, {
      failing: (on: boolean) => void (failing = on),
      calls: (path: string) => stub.requests.filter((r) => r.method === 'GET' && r.url === path).length,
    }),
  );
}

/** The name of the pet in a getPet body, or of the first in a list. */
function nameOf(body: string): string | undefined {
  const v = JSON.parse(body) as { name?: string } | { name?: string }[];
  return Array.isArray(v) ? v[0]?.name : v.name;
}

/** Waits until an asynchronous check holds: at most 100 tries, 20 ms apart. */
async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (await check()) return;
    await sleep(20);
  }
  throw new Error(`gave up waiting: ${what}`);
}

/** A Redis connection of the test's own, closed at teardown. */
async function redisClient(t: TapTest, url: string): Promise<RedisConnection> {
  const c = createRedisClient({ url });
  c.on('error', () => undefined);
  await c.connect();
  t.teardown(() => c.close());
  return c;
}

const CACHE = { ttlSeconds: { getPet: 30, listPets: 30 }, staleIfErrorSeconds: 300 };

forEachEngine(tap, async (t, engine) => {
  const up = await legacyUpstream(t);
  const clock = manualWallClock();
  const gw = await startGateway(t, { upstream: { url: `${up.origin}/v1` }, headers: { request: { allow: ['X-Tenant'] } }, policies: { cache: CACHE } }, { engine, now: clock.now });
  const ask = (path: string, headers: Record<string, string> = {}) => request(`${gw.url}${path}`, { headers: bearer(gw.key, headers) });

  t.test('one client never gets the variant another client made (Host, X-Tenant, Accept-Language, User-Agent)', async (t) => {
    const cases: [string, Record<string, string>, string][] = [
      ['/v1/pets/11', { host: 'evil.example' }, 'Rex, see https://evil.example/promo'],
      ['/v1/pets/12', { 'x-tenant': 'acme' }, 'secret-of-tenant-acme'],
      ['/v1/pets/13', { 'accept-language': 'de' }, 'Rex-DE'],
      ['/v1/pets/14', { 'user-agent': 'EvilBot/1' }, 'Rex-for-bots'],
      ['/v1/pets?limit=5', { 'accept-language': 'de' }, 'Rex-DE'],
    ];
    for (const [path, fields, poisoned] of cases) {
      const what = `${path} ${JSON.stringify(fields)}`;
      const first = await ask(path, fields);
      t.equal(nameOf(first.body), poisoned, `${what}: the upstream's variant for that client`);
      t.match(first.headers['cache-status'], /fwd=uri-miss; fwd-status=200; stored/, `${what}: stored`);
      const other = await ask(path);
      t.equal(other.status, 200);
      t.equal(nameOf(other.body), 'Rex', `${what}: another client gets its own answer`);
      t.match(other.headers['cache-status'], /fwd=uri-miss/, `${what}: not the first client's entry`);
      const again = await ask(path, fields);
      t.match(again.headers['cache-status'], /; hit;/, `${what}: the same fields hit`);
      t.equal(nameOf(again.body), poisoned);
      t.equal(up.calls(path), 2, `${what}: one upstream call per variant`);
    }
    const tenant = await ask('/v1/pets/12', { 'x-tenant': 'globex' });
    t.equal(nameOf(tenant.body), 'secret-of-tenant-globex', "tenant globex never gets acme's pet");
    const ids = await ask('/v1/pets/12', { 'x-tenant': 'globex', 'x-request-id': 'another-request' });
    t.match(ids.headers['cache-status'], /; hit;/, 'a request id is not part of the key: clients still share entries');
  });

  t.test('Vary: a variant per keyed field; Vary: * and Vary on the client address are not stored', async (t) => {
    const de = await ask('/v1/pets/21', { 'accept-language': 'de' });
    t.match(de.headers['cache-status'], /stored/, 'Vary: Accept-Language is stored');
    t.equal(nameOf((await ask('/v1/pets/21')).body), 'Rex', 'another language: another variant');
    const hit = await ask('/v1/pets/21', { 'accept-language': 'de' });
    t.match(hit.headers['cache-status'], /; hit;/);
    t.equal(nameOf(hit.body), 'Rex-DE');
    t.match(hit.headers.vary, /Accept-Language/, 'the Vary is passed on');
    for (const id of [22, 23]) {
      await ask(`/v1/pets/${id}`);
      const second = await ask(`/v1/pets/${id}`);
      t.notMatch(String(second.headers['cache-status']), /hit|stored/, `pet ${id}: not stored`);
      t.equal(up.calls(`/v1/pets/${id}`), 2);
    }
  });

  t.test('Expires counts when there is no max-age: in the past (or invalid) is not stored', async (t) => {
    for (const id of [41, 43]) {
      const first = await ask(`/v1/pets/${id}`);
      t.equal(first.status, 200);
      t.notMatch(String(first.headers['cache-status']), /stored/, `pet ${id}: not stored`);
      t.notMatch(String((await ask(`/v1/pets/${id}`)).headers['cache-status']), /hit/, `pet ${id}: never a hit`);
    }
    const five = await ask('/v1/pets/42');
    t.match(five.headers['cache-status'], /stored; ttl=[45]$/, 'Expires 5 s after Date: fresh for 5 s, not the configured 30');
  });

  t.test('stale-if-error never serves what must-revalidate, proxy-revalidate or s-maxage forbid', async (t) => {
    for (const id of [31, 32, 33, 34]) t.match((await ask(`/v1/pets/${id}`)).headers['cache-status'], /stored; ttl=2$/, `pet ${id} stored for 2 s`);
    clock.advance(3000);
    up.failing(true);
    t.teardown(() => up.failing(false));
    for (const id of [31, 32, 33]) {
      const r = await ask(`/v1/pets/${id}`);
      t.not(r.status, 200, `pet ${id}: no stale copy for a failing upstream`);
      t.notMatch(String(r.headers['cache-status']), /stale/, `pet ${id}: Cache-Status says no stale copy`);
    }
    const stale = await ask('/v1/pets/34');
    t.equal(stale.status, 200, 'max-age alone: the stale copy answers');
    t.match(stale.headers['cache-status'], /fwd=stale; fwd-status=503; ttl=-\d+; detail=stale-if-error/);
  });

  t.test("an upstream 404 says what the cache did, as docs/cache.md's table shows", async (t) => {
    const r = await ask('/v1/pets/99');
    assertError(t, r, 404, 'pet_not_found', { message: 'any' });
    t.equal(r.headers['cache-status'], 'petstore-gateway; fwd=uri-miss; fwd-status=404');
    t.equal((await ask('/v1/pets/99')).headers['cache-status'], 'petstore-gateway; fwd=uri-miss; fwd-status=404', 'not stored: asked again');
    assertError(t, await request(`${gw.url}/v1/pets/99`), 401, 'missing_api_key');
    t.equal((await request(`${gw.url}/v1/pets/99`)).headers['cache-status'], undefined, "the gateway's own refusal says nothing of the cache");
  });
});

// HTTP/2: the client's :authority reaches the upstream as X-Forwarded-Host, so it is part of the key.
forEachEngine(tap, async (t, engine) => {
  t.test('HTTP/2 :authority: one client\'s authority is not another\'s', async (t) => {
    const pki = makeTestPki(t);
    const up = await legacyUpstream(t);
    const gw = await startGateway(t, { upstream: { url: `${up.origin}/v1` }, server: { tls: { certFile: pki.server.cert, keyFile: pki.server.key } }, policies: { cache: CACHE } }, { engine });
    const origin = `https://127.0.0.1:${(gw.server.address() as AddressInfo).port}`;
    const ask = (authority?: string) => h2Request(origin, '/v1/pets/15', { ca: pki.read(pki.ca), headers: { ...bearer(gw.key), ...(authority === undefined ? {} : { ':authority': authority }) } });
    const evil = await ask('evil.example');
    t.equal(evil.alpn, 'h2');
    t.equal(nameOf(evil.body), 'Rex, see https://evil.example/promo');
    const victim = await ask();
    t.equal(nameOf(victim.body), 'Rex', "the next client does not get the attacker's authority");
    t.match(victim.headers['cache-status'], /fwd=uri-miss/);
    t.match((await ask('EVIL.example')).headers['cache-status'], /; hit;/, 'an authority in another case is the same host');
  });
});

interface Instance {
  readonly url: string;
  readonly key: string;
  readonly store: RedisCacheStore;
}

async function instance(t: TapTest, upstream: string, cache: Record<string, unknown>): Promise<Instance> {
  const key = testKey();
  const env = { PETSTORE_API_KEYS: key };
  const loaded = parsePolicy(policyText({ upstream: { url: upstream }, headers: { request: { allow: ['X-Tenant'] } }, policies: { cache } }), { env });
  if (!loaded.ok) throw new Error(formatProblems('policy', loaded.problems));
  const holder = new GatewayHolder(createGateway(loaded.config, { env }));
  t.teardown(() => holder.close());
  const store = holder.cache?.store;
  if (!(store instanceof RedisCacheStore)) throw new Error('expected the Redis store');
  await store.ready;
  const { url } = await listenEngine(t, 'undici', holder);
  return { url, key, store };
}

// parity: the key and the Redis store are the cache layer's, above every engine's transport
tap.test('two instances on one redis-server: a variant reaches only the clients it belongs to', { skip: REDIS_SKIP }, async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const up = await legacyUpstream(t);
  const cache = { ...CACHE, store: { redis: { url: redis.url, prefix: `v${Date.now()}:` } } };
  const a = await instance(t, `${up.origin}/v1`, cache);
  const b = await instance(t, `${up.origin}/v1`, cache);
  const acme = await request(`${a.url}/v1/pets/16`, { headers: bearer(a.key, { 'x-tenant': 'acme' }) });
  t.equal(nameOf(acme.body), 'secret-of-tenant-acme');
  // The write is not awaited by the request: wait until B finds it (bounded).
  await until("B finds acme's entry", async () => /; hit;/.test(String((await request(`${b.url}/v1/pets/16`, { headers: bearer(b.key, { 'x-tenant': 'acme' }) })).headers['cache-status'])));
  const globex = await request(`${b.url}/v1/pets/16`, { headers: bearer(b.key, { 'x-tenant': 'globex' }) });
  t.equal(nameOf(globex.body), 'secret-of-tenant-globex', "B never hands acme's pet to globex");
  t.match(globex.headers['cache-status'], /fwd=uri-miss/);
  const none = await request(`${b.url}/v1/pets/16`, { headers: bearer(b.key) });
  t.equal(nameOf(none.body), 'Rex', 'nor to a client without a tenant');
  const keys = (await (await redisClient(t, redis.url)).command(undefined, ['KEYS', '*'])) as string[];
  t.notOk(keys.some((k) => /acme|globex/.test(k)), 'Redis keys name no field value');
});

// parity: the invalidation channel is the Redis store's, above every engine's transport
tap.test('a hostile value on the invalidation channel or in the counter freezes no invalidation', { skip: REDIS_SKIP }, async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const up = await legacyUpstream(t);
  const prefix = `l${Date.now()}:`;
  const cache = { ...CACHE, store: { redis: { url: redis.url, prefix } } };
  const a = await instance(t, `${up.origin}/v1`, cache);
  const b = await instance(t, `${up.origin}/v1`, cache);
  const admin = await redisClient(t, redis.url);
  const list = (i: Instance) => request(`${i.url}/v1/pets?limit=3`, { headers: bearer(i.key) });
  const create = async () => {
    const r = await request(`${a.url}/v1/pets`, { method: 'POST', headers: bearer(a.key, { 'content-type': 'application/json' }), body: '{"name":"n","categoryId":1}' });
    t.equal(r.status, 201);
  };
  /** Fills the list on B, creates a pet on A, and expects B to ask the upstream again. */
  const invalidates = async (what: string) => {
    await list(b);
    await until(`${what}: B's list stored`, async () => /; hit;/.test(String((await list(b)).headers['cache-status'])));
    const before = b.store.generation;
    await create();
    await waitFor(`${what}: B hears of the createPet`, () => b.store.generation !== before);
    t.match((await list(b)).headers['cache-status'], /fwd=uri-miss/, `${what}: a createPet drops B's lists`);
    t.ok(Number.isSafeInteger(b.store.generation + 1) && b.store.generation + 1 !== b.store.generation, `${what}: the generation can still move (${b.store.generation})`);
  };
  await invalidates('before any attack');
  await admin.command(undefined, ['PUBLISH', `${prefix}invalidate`, '9007199254740991']);
  await admin.command(undefined, ['PUBLISH', `${prefix}invalidate`, 'junk']);
  for (let i = 1; i <= 3; i++) await invalidates(`createPet #${i} after PUBLISH 2^53-1`);
  await admin.command(undefined, ['SET', `${prefix}lists`, '9007199254740991']);
  await invalidates('after SET of the counter to 2^53-1');
  await invalidates('and once more');
  t.ok(Number(await admin.command(undefined, ['GET', `${prefix}lists`])) < 2 ** 40, 'the counter was set back');
  await admin.command(undefined, ['SET', `${prefix}lists`, 'not-a-number']);
  await invalidates('after SET of the counter to text');
  await redis.restart();
  await waitFor('both instances read the empty counter', () => a.store.generation === 0 && b.store.generation === 0);
  await invalidates('after Redis came back empty');
});
