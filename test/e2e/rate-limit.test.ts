/**
 * Consumers end to end, with real parts: per-key rate limits with the IETF
 * RateLimit headers, key expiry and scopes, brute-force protection, and the Redis store shared by
 * several gateway processes and by `serve --workers 2`, with Redis killed and brought back.
 *
 * Every redis-server is a real one (test/helpers/redis.ts) on a free loopback port, stopped at
 * teardown; every gateway process is killed at teardown (test/helpers/servers.ts).
 *
 * Windows: GCRA refills continuously (one request every window / limit), so "exactly N allowed"
 * holds only while the run is shorter than one refill interval. The counting scenarios use a
 * one-hour window (refill every 72 s for limit 50), so a loaded machine cannot make them flaky; the
 * header scenarios use the 60 s window of the example (refill every 20 s for limit 3).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { stringify as yamlStringify } from 'yaml';
import { hashKey } from '../../src/policies/auth/index.js';
import { closeStores, openStores, storesReady } from '../../src/stores/index.js';
import { assertError, type TapTest } from '../helpers/assert.js';
import { manualWallClock } from '../helpers/clock.js';
import { REDIS_SKIP, startRedis, type TestRedis } from '../helpers/redis.js';
import {
  bearer,
  ENGINES,
  forEachEngine,
  request,
  runCli,
  sendJson,
  spawnCliUntil,
  startGateway,
  startStubUpstream,
  tempDir,
  testKey,
  type Engine,
  type Response,
} from '../helpers/servers.js';
import { sleep, within } from '../helpers/wait.js';

/** A request that takes longer than this has hung (the Redis command deadline is 250-500 ms). */
const BOUND_MS = 2000;
/** Process starts on a loaded 2-core machine. */
const START_MS = 30_000;
const BANNER = /petstore-gateway listening on (http:\/\/127\.0\.0\.1:\d+) /;

/** A stub pet store that records what reaches it. */
async function petStub(t: TapTest) {
  return startStubUpstream(t, (req, res) => {
    if (req.url.startsWith('/v1/pets/')) return sendJson(res, 200, `{"id":${req.url.split('/').pop()},"name":"x","categoryId":1,"status":"available"}`);
    return sendJson(res, 200, '[]');
  });
}

/** Parses `"default";r=2;t=40` (draft-ietf-httpapi-ratelimit-headers, RateLimit field). */
function rateLimitField(res: Response): { r: number; t: number } | undefined {
  const m = /^"default";r=(\d+);t=(\d+)$/.exec(String(res.headers.ratelimit ?? ''));
  return m === null ? undefined : { r: Number(m[1]), t: Number(m[2]) };
}

async function timed<T>(fn: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const start = performance.now();
  const value = await fn();
  return { value, ms: performance.now() - start };
}

/** A policy file in a temporary directory; its path. */
function policyFile(t: TapTest, policy: Record<string, unknown>): string {
  const file = join(tempDir(t, 'rate-limit'), 'policy.yaml');
  writeFileSync(file, yamlStringify({ version: 1, upstream: { url: 'builtin' }, ...policy }));
  return file;
}

// ---------------------------------------------------------------------------------------------
// In process, on every engine, with the memory store

forEachEngine(t, async (t, engine) => {
  const keys = Object.fromEntries(['client', 'fresh', 'ops', 'quick', 'expired', 'reader'].map((name) => [name, testKey()])) as Record<
    'client' | 'fresh' | 'ops' | 'quick' | 'expired' | 'reader',
    string
  >;
  // Key ids differ per engine, so that no two gateways' counters could meet in one store.
  const id = (name: string) => `${name}-${engine}`;
  // The gateway's wall clock (rate-limit windows, key expiry, the brute-force window), with a memory
  // store of its own on it: the test moves it instead of waiting out a window.
  const clock = manualWallClock();
  const stub = await petStub(t);
  const gw = await startGateway(
    t,
    {
      upstream: { url: `${stub.origin}/v1` },
      policies: {
        auth: {
          keysFromEnv: null,
          bruteForce: { maxFailures: 4, windowSeconds: 60 },
          keys: [
            { id: id('client'), hash: hashKey(keys.client) },
            { id: id('fresh'), hash: hashKey(keys.fresh) },
            { id: id('ops'), hash: hashKey(keys.ops) },
            { id: id('quick'), hash: hashKey(keys.quick) },
            { id: id('expired'), hash: hashKey(keys.expired), expires: '2001-01-01T00:00:00Z' },
            { id: id('reader'), hash: hashKey(keys.reader), operations: ['listPets'] },
          ],
        },
        'rate-limit': {
          limit: 3,
          windowSeconds: 60,
          perKey: { [id('ops')]: { limit: 5 }, [id('quick')]: { limit: 2, windowSeconds: 2 } },
          store: 'memory',
        },
      },
    },
    { engine, now: clock.now },
  );
  const get = (key: string, path = '/v1/pets') => request(gw.url + path, { headers: bearer(key) });

  t.test('limit 3 per 60 s: three 200s with falling RateLimit, then 429 rate_limited that never reaches the upstream', async (t) => {
    const start = performance.now();
    const ok: Response[] = [];
    for (let i = 0; i < 3; i++) ok.push(await get(keys.client));
    const before = stub.requests.length;
    const denied = await get(keys.client);
    const elapsedMs = performance.now() - start;
    t.strictSame(
      ok.map((r) => r.status),
      [200, 200, 200],
    );
    for (const r of [...ok, denied]) t.equal(r.headers['ratelimit-policy'], '"default";q=3;w=60', 'RateLimit-Policy on every response');
    const fields = ok.map(rateLimitField);
    t.strictSame(
      fields.map((f) => f?.r),
      [2, 1, 0],
      'remaining falls 2, 1, 0',
    );
    // t: seconds until the whole quota is back, 20 s per request used (60 s / 3), rounded up.
    fields.forEach((f, i) => {
      const full = 20 * (i + 1);
      t.ok(f !== undefined && f.t <= full && f.t >= Math.floor(full - elapsedMs / 1000), `t=${f?.t} of request ${i + 1} is ${full} s less the time spent`);
    });
    assertError(t, denied, 429, 'rate_limited');
    const retryAfter = Number(denied.headers['retry-after']);
    // The real wait: the first request's TAT came back within the tolerance, 20 s after it, less
    // the time spent since (at most elapsedMs); Retry-After is rounded up, never shorter.
    t.ok(Number.isInteger(retryAfter) && retryAfter <= 20 && retryAfter * 1000 >= 20_000 - elapsedMs, `Retry-After ${retryAfter} s >= the real wait (20 s - ${Math.round(elapsedMs)} ms)`);
    t.strictSame(rateLimitField(denied), { r: 0, t: retryAfter }, 'RateLimit on the 429: r=0, t=Retry-After');
    t.equal(stub.requests.length, before, 'the refused request never reached the upstream');
  });

  t.test('Retry-After is enough: after waiting it, the next request is served', async (t) => {
    // perKey: 2 per 2 s, one request per second.
    t.equal((await get(keys.quick)).status, 200);
    t.equal((await get(keys.quick)).status, 200);
    const denied = await get(keys.quick);
    assertError(t, denied, 429, 'rate_limited');
    t.equal(denied.headers['ratelimit-policy'], '"default";q=2;w=2', 'the perKey rule in RateLimit-Policy');
    const retryAfter = Number(denied.headers['retry-after']);
    t.equal(retryAfter, 1, 'one request per second: at most 1 s, rounded up');
    clock.advance(retryAfter * 1000 - 1);
    assertError(t, await get(keys.quick), 429, 'rate_limited');
    clock.advance(1);
    const again = await get(keys.quick);
    t.equal(again.status, 200, 'served after Retry-After seconds');
  });

  t.test('a bad key is 401, carries no RateLimit, is never counted against anyone', async (t) => {
    const before = stub.requests.length;
    const bad = await get(testKey());
    assertError(t, bad, 401, 'invalid_api_key', { absent: ['ratelimit', 'ratelimit-policy'] });
    t.equal(stub.requests.length, before, 'not forwarded');
    const first = await get(keys.fresh);
    t.equal(first.status, 200);
    t.strictSame(rateLimitField(first)?.r, 2, 'the next consumer has its whole quota less one');
  });

  t.test('perKey override: 5 per 60 s for ops, 429 on the sixth', async (t) => {
    const statuses: number[] = [];
    let last: Response | undefined;
    for (let i = 0; i < 6; i++) {
      last = await get(keys.ops);
      statuses.push(last.status);
      t.equal(last.headers['ratelimit-policy'], '"default";q=5;w=60');
    }
    t.strictSame(statuses, [200, 200, 200, 200, 200, 429]);
    assertError(t, last!, 429, 'rate_limited');
  });

  t.test('an expired key: 401 expired_api_key with the RFC 6750 "expired" challenge, not forwarded', async (t) => {
    const before = stub.requests.length;
    const res = await get(keys.expired);
    assertError(t, res, 401, 'expired_api_key', {
      headers: { 'www-authenticate': 'Bearer realm="petstore", error="invalid_token", error_description="The access token expired"' },
      absent: ['ratelimit'],
    });
    t.equal(stub.requests.length, before);
  });

  t.test('a key limited to listPets: 200 on listPets, 403 forbidden (insufficient_scope) on getPet', async (t) => {
    t.equal((await get(keys.reader)).status, 200);
    const before = stub.requests.length;
    const res = await get(keys.reader, '/v1/pets/1');
    assertError(t, res, 403, 'forbidden', { headers: { 'www-authenticate': 'Bearer realm="petstore", error="insufficient_scope"' } });
    t.equal(stub.requests.length, before, 'not forwarded');
  });

  // Last: it locks 127.0.0.1 out of this gateway for the rest of the window.
  t.test('brute force: maxFailures 4, the 5th bad key from one address is 429 too_many_auth_failures', async (t) => {
    // One failure so far (the bad-key scenario); the expired and out-of-scope keys were real keys.
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push((await get(testKey())).status);
    t.strictSame(statuses, [401, 401, 401], 'failures 2 to 4: 401');
    const locked = await get(testKey());
    assertError(t, locked, 429, 'too_many_auth_failures');
    const retryAfter = Number(locked.headers['retry-after']);
    t.ok(retryAfter >= 1 && retryAfter <= 15, `Retry-After ${retryAfter} s: one failure's worth (60 s / 4), rounded up`);
    const before = stub.requests.length;
    // The documented choice (src/policies/auth/index.ts): a locked address is locked for every key.
    assertError(t, await get(keys.fresh), 429, 'too_many_auth_failures');
    t.equal(stub.requests.length, before, 'nothing reached the upstream while locked');
  });
});

// ---------------------------------------------------------------------------------------------
// check

// parity: `check` validates the policy file and starts no engine.
t.test('check lists each key with its expiry and operations, never a hash or a key', async (t) => {
  const keys = [testKey(), testKey(), testKey()];
  const envKey = testKey();
  const file = policyFile(t, {
    policies: {
      auth: {
        keys: [
          { id: 'ops', hash: hashKey(keys[0]!) },
          { id: 'mobile', hash: hashKey(keys[1]!), expires: '2099-12-31T23:59:59Z', operations: ['listPets', 'getPet'] },
          { id: 'old', hash: hashKey(keys[2]!), expires: '2001-01-01T00:00:00Z' },
        ],
      },
    },
  });
  const r = await runCli(t, ['check', file], { env: { PETSTORE_API_KEYS: envKey }, timeoutMs: 30_000 });
  t.equal(r.code, 0, r.stderr);
  t.strictSame(r.stdout.split('\n'), [
    `${file}: ok`,
    '  key ops: never expires, all operations',
    '  key mobile: expires 2099-12-31T23:59:59Z, operations: listPets, getPet',
    '  key old: EXPIRED 2001-01-01T00:00:00Z, all operations',
    '  key PETSTORE_API_KEYS#1: never expires, all operations (from the environment)',
    '',
  ]);
  for (const secret of [...keys, envKey, ...keys.map(hashKey), 'sha256:']) t.notOk(r.stdout.includes(secret) || r.stderr.includes(secret), 'no key or hash in the output');
});

// ---------------------------------------------------------------------------------------------
// Redis: in process, killed and brought back, on every engine

forEachEngine(t, async (t, engine) => {
  t.test('Redis killed: open limits locally, closed answers 503, both fast; the limit holds again once Redis is back', { skip: REDIS_SKIP }, async (t) => {
    const redis = await startRedis();
    t.teardown(() => redis.stop());
    // The process-wide stores this test opened: closed whether Redis is still up or already gone.
    t.teardown(() => closeStores());
    const store = { redis: { url: redis.url, prefix: `${engine}:`, commandTimeoutMs: 500, maxReconnectDelayMs: 200 } };
    const start = (mode: 'open' | 'closed') =>
      startGateway(t, { policies: { 'rate-limit': { limit: 3, windowSeconds: 3600, store, onStoreError: mode } } }, { engine });
    const open = await start('open');
    const closed = await start('closed');
    t.ok(await storesReady(5000), 'connected to Redis');
    const get = (gw: { url: string; key: string }) => timed(() => request(`${gw.url}/v1/pets`, { headers: bearer(gw.key), timeoutMs: 10_000 }));

    // Both gateways' env keys have the same id (PETSTORE_API_KEYS#1) but different keys: each
    // counts against the one consumer id in Redis, which is the point of a shared store.
    const first = await get(open);
    t.equal(first.value.status, 200);
    t.equal(rateLimitField(first.value)?.r, 2, 'counted in Redis');

    await t.test('frozen Redis (SIGSTOP): answers within the bound, no hang', async (t) => {
      redis.pause();
      try {
        const o = await get(open);
        t.equal(o.value.status, 200, 'open: served');
        // The store's count is unknown; this process's own counters decide meanwhile.
        t.equal(rateLimitField(o.value)?.r, 2, "open: counted by this process's own counters (limit 3)");
        t.equal(o.value.headers['ratelimit-policy'], '"default";q=3;w=3600', 'open: the policy is still known');
        t.ok(o.ms < BOUND_MS, `open in ${Math.round(o.ms)} ms`);
        const c = await get(closed);
        assertError(t, c.value, 503, 'service_unavailable', { message: 'any', headers: { 'retry-after': '1' } });
        t.ok(c.ms < BOUND_MS, `closed in ${Math.round(c.ms)} ms`);
      } finally {
        redis.resume();
      }
    });

    const errorsBefore = openStores().reduce((n, s) => n + s.errors, 0);
    await redis.kill();
    const whileDown: number[] = [];
    for (let i = 0; i < 3; i++) {
      const o = await get(open);
      whileDown.push(o.value.status);
      t.ok(o.ms < BOUND_MS, `in ${Math.round(o.ms)} ms`);
      const c = await get(closed);
      assertError(t, c.value, 503, 'service_unavailable', { message: 'any' });
      t.ok(c.ms < BOUND_MS, `closed #${i + 1} in ${Math.round(c.ms)} ms`);
    }
    // Limit 3 on this process's own counters, one of them taken while Redis was frozen: never unlimited.
    t.strictSame(whileDown, [200, 200, 429], 'open while Redis is down: 200, 200, then 429 from the local counters');
    t.ok(openStores().reduce((n, s) => n + s.errors, 0) > errorsBefore, 'the failures are counted (the metric reads this)');

    await redis.restart();
    // Reconnection: the closed gateway answers 503 until Redis is back, then counts from an empty
    // Redis (no persistence): 200 with r=2. Bounded: 100 tries at least 50 ms apart.
    let back: Response | undefined;
    for (let i = 0; i < 100 && back === undefined; i++) {
      const c = await get(closed);
      if (c.value.status === 200) back = c.value;
      else {
        t.equal(c.value.status, 503, 'only 503 while reconnecting');
        await sleep(50);
      }
    }
    t.ok(back, 'reconnected within the bound');
    t.equal(back === undefined ? undefined : rateLimitField(back)?.r, 2);
    const rest: number[] = [];
    for (let i = 0; i < 3; i++) rest.push((await get(closed)).value.status);
    t.strictSame(rest, [200, 200, 429], 'the limit holds again: 3, then 429');
    // The open gateway's consumer id is the same: already at its limit in the new Redis.
    const o = await get(open);
    assertError(t, o.value, 429, 'rate_limited');
  });
});

forEachEngine(t, async (t, engine) => {
  t.test('the first requests after a start wait for the first connection to Redis instead of going unlimited', { skip: REDIS_SKIP }, async (t) => {
    const redis = await startRedis();
    t.teardown(() => redis.stop());
    t.teardown(() => closeStores());
    await redis.kill();
    // Redis is not there yet when the gateway starts: its store keeps trying to connect.
    const store = { redis: { url: redis.url, prefix: `start-${engine}:`, commandTimeoutMs: 8000, maxReconnectDelayMs: 100 } };
    const gw = await startGateway(t, { policies: { 'rate-limit': { limit: 3, windowSeconds: 3600, store, onStoreError: 'open' } } }, { engine });
    const pending = request(`${gw.url}/v1/pets`, { headers: bearer(gw.key), timeoutMs: 15_000 });
    await sleep(100);
    await redis.restart();
    const first = await pending;
    t.equal(first.status, 200);
    t.strictSame(rateLimitField(first)?.r, 2, 'counted (RateLimit r=2), not served unlimited');
  });
});

// ---------------------------------------------------------------------------------------------
// Redis: one gateway process per engine, and --workers 2

/** Spawns `serve` with a policy file and waits for its banner; its URL and handle. */
async function serveProcess(t: TapTest, file: string, engine: Engine, key: string, extra: string[] = [], env: Record<string, string> = {}) {
  const { handle, match } = await spawnCliUntil(t, ['serve', '--policy', file, '--port', '0', '--engine', engine, ...extra], BANNER, {
    env: { PETSTORE_API_KEYS: key, ...env },
    timeoutMs: START_MS,
    stream: 'stderr',
  });
  return { url: match[1]!, handle };
}

/** `n` requests, `concurrency` at a time, the i-th to urls[i % urls.length]; their responses, in order. */
async function spread(urls: string[], key: string, n: number, concurrency: number): Promise<Response[]> {
  const out: Response[] = [];
  for (let i = 0; i < n; i += concurrency) {
    const batch = Array.from({ length: Math.min(concurrency, n - i) }, (_, j) =>
      request(`${urls[(i + j) % urls.length]}/v1/pets`, { headers: bearer(key), timeoutMs: 10_000 }),
    );
    out.push(...(await Promise.all(batch)));
  }
  return out;
}

function redisPolicy(t: TapTest, redis: TestRedis, limit: number, commandTimeoutMs?: number): string {
  return policyFile(t, { policies: { 'rate-limit': { limit, windowSeconds: 3600, store: { redis: { url: redis.url, commandTimeoutMs } } } } });
}

// parity: one process per engine, all three on one Redis in the same scenario: each engine's store
// counts against the others' (every pair of engines meets), and each is stopped with Redis frozen.
t.test(`three gateway processes (${ENGINES.join(', ')}) on one Redis: limit 50, 200 requests, exactly 50 served`, { skip: REDIS_SKIP }, async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  // A command deadline well past a loaded machine's round trip: a take that times out is counted
  // by that process alone (onStoreError open), which would make "exactly 50" a race with the load.
  const file = redisPolicy(t, redis, 50, 1000);
  const key = testKey();
  const gateways = await Promise.all(ENGINES.map((engine) => serveProcess(t, file, engine, key)));
  const responses = await spread(gateways.map((g) => g.url), key, 200, 9);
  const served = responses.filter((r) => r.status !== 429);
  t.equal(served.length, 50, 'exactly 50 non-429 answers');
  t.ok(
    served.every((r) => r.status === 200),
    'each of them a 200',
  );
  const byGateway = ENGINES.map((_, g) => responses.filter((r, j) => j % ENGINES.length === g && r.status === 200).length);
  t.ok(byGateway.every((n) => n > 0), `every gateway served part of the 50 (${byGateway.join(' + ')})`);
  const denied = responses.find((r) => r.status === 429);
  if (denied !== undefined) {
    assertError(t, denied, 429, 'rate_limited');
    t.equal(denied.headers['ratelimit-policy'], '"default";q=50;w=3600');
  }

  // A frozen Redis leaves each gateway a command without an answer: stopping must not wait for it.
  redis.pause();
  t.teardown(() => redis.resume());
  const frozen = await Promise.all(gateways.map((g) => request(`${g.url}/v1/pets`, { headers: bearer(key), timeoutMs: 10_000 })));
  for (const res of frozen) {
    t.equal(res.status, 200, 'onStoreError open (the default): served');
    t.equal(rateLimitField(res)?.r, 49, "counted by this process's own counters (limit 50), never unlimited");
  }
  const answered = await Promise.all(gateways.map((g) => request(`${g.url}/v1/pets`, { headers: bearer(testKey()), timeoutMs: 10_000 })));
  t.strictSame(answered.map((r) => r.status), ENGINES.map(() => 401), 'still answering');
  const stopped = await Promise.all(
    gateways.map((g) => {
      g.handle.child.kill('SIGTERM');
      return within(g.handle.exited, 10_000, 'hung' as const);
    }),
  );
  t.strictSame(stopped, ENGINES.map(() => ({ code: 0, signal: null })), 'SIGTERM with Redis frozen: every engine exits 0, no hang on the Redis connection');
});

// parity: node:cluster and the Redis store are the CLI's and src/stores', whatever engine the workers
// run; a worker is a process with its own store connection, and every engine's process counting
// on one Redis with the others is the scenario above.
t.test('serve --workers 2 on Redis: one limit for both workers', { skip: REDIS_SKIP }, async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const file = redisPolicy(t, redis, 10);
  const key = testKey();
  const { url, handle } = await serveProcess(t, file, 'undici', key, ['--workers', '2'], { LOG_LEVEL: 'info' });
  // Fresh connections (no keep-alive), 3 at a time: node:cluster hands them to both workers.
  const responses = await spread([url], key, 30, 3);
  t.equal(responses.filter((r) => r.status !== 429).length, 10, 'exactly 10 of 30 served');
  t.equal(responses.filter((r) => r.status === 200).length, 10);
  // Which worker answered: the access lines (msg "request") carry each worker's pid.
  let pids = new Set<number>();
  for (let tries = 0; tries < 100 && pids.size < 2; tries++) {
    pids = new Set(
      handle
        .output()
        .stdout.split('\n')
        .filter((l) => l.includes('"msg":"request"'))
        .map((l) => (JSON.parse(l) as { pid: number }).pid),
    );
    if (pids.size < 2) await sleep(50);
  }
  t.equal(pids.size, 2, 'both workers answered requests');
  t.notMatch(handle.output().stdout, /memory store counts per worker/, 'no per-worker notice of the rate limit with Redis');
});

// parity: the notice is logged by the cluster primary from the policy file, before any worker
// loads an engine; the per-engine behaviour of the memory store is tested above on every engine.
t.test('serve --workers 2 with the memory store says at start that limits and per-client bounds are per worker', async (t) => {
  const file = policyFile(t, { policies: { 'rate-limit': { limit: 10, windowSeconds: 60 } } });
  const both = /(\{[^\n]*memory store counts per worker[^\n]*\})\n(?:[^\n]*\n)*?(\{[^\n]*per-client bounds are kept per worker[^\n]*\})\n/;
  const { match } = await spawnCliUntil(t, ['serve', '--policy', file, '--port', '0', '--workers', '2'], both, {
    env: { PETSTORE_API_KEYS: testKey(), LOG_LEVEL: 'warn' },
    timeoutMs: START_MS,
    stream: 'stdout',
  });
  const line = JSON.parse(match[1]!) as { level: number; msg: string; workers: number };
  t.equal(line.level, 40, 'a warning');
  t.equal(line.workers, 2);
  t.match(line.msg, /memory store counts per worker: with --workers 2 a consumer may make up to 2x its limit; use store: \{redis: \{url\}\}/);
  const bounds = JSON.parse(match[2]!) as { level: number; msg: string };
  t.equal(bounds.level, 40, 'the per-client bounds: a warning too');
  t.match(bounds.msg, /auth\.bruteForce allows 2 x 100 failed guesses per 60 s from one address/);
});
