/**
 * The Redis store against a real redis-server (test/helpers/redis.ts): one limit shared by two
 * store instances (two gateways), failures that are fast and never hang (killed, frozen), the
 * limit holding again once Redis is back, the policy's fail-open and fail-closed on it, the
 * shared deprecation ledger, and one connection per URL in the process registry.
 */
import { createClient } from 'redis';
import t, { type Test } from 'tap';
import { GatewayError } from '../../src/core/errors.js';
import { rateLimit } from '../../src/policies/rate-limit/index.js';
import { closeStores, openDeprecationLedger, openStore, openStores, storesReady } from '../../src/stores/index.js';
import { RedisStore } from '../../src/stores/redis.js';
import type { RateLimitRule } from '../../src/stores/types.js';
import { keyed } from '../helpers/exchange.js';
import { fakeLog } from '../helpers/log.js';
import { REDIS_SKIP, startRedis, type TestRedis } from '../helpers/redis.js';
import { sleep, waitFor } from '../helpers/wait.js';

const RULE: RateLimitRule = { limit: 50, windowMs: 60_000 };
/** Generous on a loaded 2-core machine, yet far from a hang: the command timeout is 250 ms. */
const FAST_MS = 1000;

async function redisAndStores(t: Test, n: number, prefix = `t${Math.random().toString(36).slice(2, 8)}:`) {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const stores = Array.from({ length: n }, () => new RedisStore({ url: redis.url, prefix }, { ledgerFlushMs: 50 }));
  t.teardown(() => Promise.all(stores.map((s) => s.close())));
  await Promise.all(stores.map((s) => s.ready));
  return { redis, stores };
}

/** Timed take: its outcome and how long it took. */
async function timedTake(store: RedisStore, key: string): Promise<{ ok: boolean; allowed?: boolean; ms: number }> {
  const start = performance.now();
  try {
    const d = await store.take(key, RULE);
    return { ok: true, allowed: d.allowed, ms: performance.now() - start };
  } catch {
    return { ok: false, ms: performance.now() - start };
  }
}

async function burst(stores: RedisStore[], key: string, n: number): Promise<number> {
  const decisions = await Promise.all(Array.from({ length: n }, (_, i) => stores[i % stores.length]!.take(key, RULE)));
  return decisions.filter((d) => d.allowed).length;
}

t.test('one limit across two instances: limit 50, 200 takes spread over both, exactly 50 allowed', { skip: REDIS_SKIP }, async (t) => {
  const { stores } = await redisAndStores(t, 2);
  t.ok(stores.every((s) => s.healthy));
  t.equal(await burst(stores, 'app', 200), 50);
  // Sequential too, alternating instances: the 51st is refused with the exact GCRA wait.
  const { stores: more } = await redisAndStores(t, 2);
  const seq = [];
  for (let i = 0; i < 51; i++) seq.push(await more[i % 2]!.take('app', RULE));
  t.equal(seq.filter((d) => d.allowed).length, 50);
  t.strictSame(
    seq.slice(0, 2).map((d) => d.remaining),
    [49, 48],
  );
  const refused = seq[50]!;
  t.equal(refused.allowed, false);
  t.ok(refused.retryAfterMs > 0 && refused.retryAfterMs <= 1200, `retry after at most one interval (${refused.retryAfterMs} ms)`);
  t.equal(stores[0]!.errors, 0);
});

t.test('remaining is never above limit - 1, even when the slack exceeds an interval (a huge limit)', { skip: REDIS_SKIP }, async (t) => {
  const { stores } = await redisAndStores(t, 1);
  const huge: RateLimitRule = { limit: 1_000_000_000, windowMs: 60_000 };
  const first = await stores[0]!.take('huge', huge);
  t.equal(first.allowed, true);
  t.equal(first.remaining, huge.limit - 1, 'the Lua script clamps as gcra.ts does');
});

t.test('Redis killed mid-run: takes reject fast and healthy turns false; after a restart the limit holds again', { skip: REDIS_SKIP }, async (t) => {
  const { redis, stores } = await redisAndStores(t, 2);
  t.equal(await burst(stores, 'app', 30), 30);
  await redis.kill();
  for (let i = 0; i < 10; i++) {
    const r = await timedTake(stores[i % 2]!, 'app');
    t.equal(r.ok, false, `take ${i + 1} rejects`);
    t.ok(r.ms < FAST_MS, `take ${i + 1} rejects fast (${r.ms.toFixed(1)} ms)`);
  }
  t.equal(stores[0]!.healthy, false);
  t.ok(stores[0]!.errors >= 5 && stores[1]!.errors >= 5, 'every failure counted');
  await redis.restart();
  // Reconnects by itself (capped backoff, 2 s at most between attempts).
  await waitFor('both stores healthy again', () => stores.every((s) => s.healthy), 10_000);
  // The restarted Redis is empty (no persistence): a fresh allowance, and the limit holds exactly.
  t.equal(await burst(stores, 'app', 200), 50);
});

t.test('a frozen Redis (no answer at all): the command timeout rejects, never a hang', { skip: REDIS_SKIP }, async (t) => {
  const { redis, stores } = await redisAndStores(t, 1);
  redis.pause();
  t.teardown(() => redis.resume());
  const results = await Promise.all(Array.from({ length: 5 }, () => timedTake(stores[0]!, 'app')));
  for (const r of results) {
    t.equal(r.ok, false, 'rejected');
    t.ok(r.ms >= 200 && r.ms < 250 + FAST_MS, `after the 250 ms timeout (${r.ms.toFixed(1)} ms)`);
  }
  t.equal(stores[0]!.healthy, false);
  redis.resume();
  // The same connection answers again once thawed (bounded: 50 tries).
  let again = await timedTake(stores[0]!, 'after-thaw');
  for (let i = 0; i < 50 && !again.ok; i++) {
    await sleep(100);
    again = await timedTake(stores[0]!, 'after-thaw');
  }
  t.equal(again.ok, true, 'answers again once thawed');
  t.equal(stores[0]!.healthy, true);
});

/** Holds this process's event loop for `ms`, as a flood of pipelined requests parsed in one go does. */
function blockLoop(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // busy: nothing else runs
  }
}

t.test("the gateway's own event-loop lag is not a Redis failure: answers read after the lag count", { skip: REDIS_SKIP }, async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const store = new RedisStore({ url: redis.url, prefix: 'lag:', commandTimeoutMs: 50 });
  t.teardown(() => store.close());
  await store.ready;
  // 20 takes started, then the loop is held for 6 deadlines: Redis answered long ago, unread.
  const takes = Array.from({ length: 20 }, () => store.take('app', RULE).then((d) => d.allowed, () => 'failed' as const));
  blockLoop(300);
  const outcomes = await Promise.all(takes);
  t.strictSame(outcomes, Array.from({ length: 20 }, () => true), 'every take decided by Redis, none failed');
  t.equal(store.errors, 0, 'no failure counted');
  // Lag before the command is written (a busy loop right after the take): the same.
  const late = store.take('app', RULE);
  blockLoop(200);
  t.equal((await late).allowed, true, 'written after the lag, answered, decided');
});

t.test('a frozen Redis under lag still fails, within a bounded number of deadlines', { skip: REDIS_SKIP }, async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const store = new RedisStore({ url: redis.url, prefix: 'lagf:', commandTimeoutMs: 50 });
  t.teardown(() => store.close());
  await store.ready;
  redis.pause();
  t.teardown(() => redis.resume());
  const start = performance.now();
  const take = store.take('app', RULE).then(() => 'answered', () => 'failed');
  blockLoop(120);
  t.equal(await take, 'failed', 'no answer: failed');
  const ms = performance.now() - start;
  t.ok(ms >= 50 && ms < 9 * 50 + FAST_MS, `after at most 9 deadlines of wall time plus slack (${ms.toFixed(0)} ms)`);
});

t.test('the policy on Redis: fail open limits locally (one warning), fail closed answers 503; both at once, and limits resume', { skip: REDIS_SKIP }, async (t) => {
  const { redis, stores } = await redisAndStores(t, 1);
  const store = stores[0]!;
  const log = fakeLog();
  const make = (onStoreError: 'open' | 'closed') =>
    rateLimit.create({ limit: 2, windowSeconds: 60, perKey: {}, store: 'memory', onStoreError }, { env: {}, log, openStore: () => store });
  const open = make('open');
  const closed = make('closed');
  const ask = (p: typeof open) => {
    const ex = keyed('app');
    return Promise.resolve(p.onRequest!(ex)).then((d) => ({ d, ex }));
  };
  t.equal((await ask(open)).d, undefined);
  t.equal((await ask(open)).d, undefined);
  const limited = await ask(open);
  t.match(limited.d, { code: 'rate_limited', status: 429 });
  t.equal(limited.ex.responseHeaders.ratelimit?.startsWith('"default";r=0;t='), true);

  await redis.kill();
  const whileAway: Array<string | undefined> = [];
  for (let i = 0; i < 5; i++) {
    const start = performance.now();
    const d = (await ask(open)).d;
    whileAway.push(d instanceof GatewayError ? d.code : undefined);
    t.match((await ask(closed)).d, { code: 'service_unavailable', status: 503 }, 'closed: 503');
    t.ok(performance.now() - start < 2 * FAST_MS, 'without a hang');
  }
  t.strictSame(whileAway, [undefined, undefined, 'rate_limited', 'rate_limited', 'rate_limited'], "open: this process's own counters keep the limit (2)");
  t.ok(log.lines.filter((l) => l.fields.policy === 'rate-limit').length <= 2, 'warnings throttled, not one per request');

  await redis.restart();
  await waitFor('healthy again', () => store.healthy, 10_000);
  t.equal((await ask(closed)).d, undefined, 'Redis back (empty): counted again');
  t.equal((await ask(closed)).d, undefined);
  t.match((await ask(closed)).d, { code: 'rate_limited' }, 'the limit holds again');
});

t.test('the Redis deprecation ledger: two instances, one report', { skip: REDIS_SKIP }, async (t) => {
  const { stores } = await redisAndStores(t, 2);
  const at = Date.parse('2027-03-01T12:00:00Z');
  stores[0]!.ledger.record('getPet', 'ops', at + 1000);
  stores[1]!.ledger.record('getPet', 'ops', at);
  stores[1]!.ledger.record('getPet', 'ops', at + 5000);
  stores[0]!.ledger.record('getPet', 'mobile', at + 42);
  // record() never waits: poll the report until the four writes have landed (bounded: 50 tries).
  let report = await stores[1]!.ledger.report();
  for (let i = 0; i < 50 && report.reduce((n, r) => n + r.count, 0) < 4; i++) {
    await sleep(20);
    report = await stores[1]!.ledger.report();
  }
  t.strictSame(report, [
    { operation: 'getPet', consumer: 'ops', count: 3, firstSeen: new Date(at).toISOString(), lastSeen: new Date(at + 5000).toISOString() },
    { operation: 'getPet', consumer: 'mobile', count: 1, firstSeen: new Date(at + 42).toISOString(), lastSeen: new Date(at + 42).toISOString() },
  ]);
  t.strictSame(await stores[0]!.ledger.report(), report, 'the same report from either instance');
});

t.test('the ledger counts in the process and writes once per flush: 1,000 calls, one script call per consumer', { skip: REDIS_SKIP }, async (t) => {
  const { redis, stores } = await redisAndStores(t, 2);
  const admin = createClient({ url: redis.url });
  await admin.connect();
  t.teardown(() => admin.close());
  const evals = async () => {
    const info = await admin.info('commandstats');
    // Successful script calls (node-redis tries EVALSHA first and falls back to EVAL on NOSCRIPT).
    return [...info.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+),.*?failed_calls=(\d+)/g)].reduce((n, m) => n + Number(m[1]) - Number(m[2]), 0);
  };
  await stores[0]!.ledger.flush();
  const before = await evals();
  const at = Date.parse('2027-03-01T12:00:00Z');
  for (let i = 0; i < 1000; i++) stores[0]!.ledger.record('getPet', i % 2 === 0 ? 'ops' : 'mobile', at + i);
  const own = await stores[0]!.ledger.report();
  t.strictSame(
    own.map((r) => [r.consumer, r.count, r.firstSeen, r.lastSeen]),
    [
      ['mobile', 500, new Date(at + 1).toISOString(), new Date(at + 999).toISOString()],
      ['ops', 500, new Date(at).toISOString(), new Date(at + 998).toISOString()],
    ],
    "the instance's own calls are in its report at once",
  );
  t.equal((await evals()) - before, 2, 'two script calls (one per consumer) for 1,000 calls');
  t.strictSame(await stores[1]!.ledger.report(), own, 'the other instance reads the same report');
});

t.test('a failed ledger write never throws and is counted', { skip: REDIS_SKIP }, async (t) => {
  const { redis, stores } = await redisAndStores(t, 1);
  await redis.kill();
  const before = stores[0]!.errors;
  t.doesNotThrow(() => stores[0]!.ledger.record('getPet', 'ops', Date.now()));
  await waitFor('the failure counted', () => stores[0]!.errors > before, 2000);
  await t.rejects(stores[0]!.ledger.report());
});

t.test('the process registry: one connection per URL, shared by a reload; closeStores closes them', { skip: REDIS_SKIP }, async (t) => {
  const redis: TestRedis = await startRedis();
  t.teardown(() => redis.stop());
  t.teardown(() => closeStores());
  const config = { redis: { url: redis.url } };
  const a = openStore(config);
  const b = openStore({ redis: { url: redis.url, commandTimeoutMs: 999 } });
  t.equal(a, b, 'the same store for the same URL');
  t.equal(openStore('memory'), openStore('memory'));
  t.equal(openDeprecationLedger(config), (a as RedisStore).ledger, 'the ledger rides on the same connection');
  t.equal(await storesReady(5000), true);
  t.strictSame(
    openStores().map((s) => s.kind),
    ['memory', 'redis'],
  );
  t.equal((await a.take('k', RULE)).allowed, true);
  await closeStores();
  t.strictSame(openStores(), []);
  t.not(openStore(config), a, 'a new store after closeStores');
  await closeStores();
});
