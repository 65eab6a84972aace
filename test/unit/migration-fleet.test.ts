/**
 * The fleet's migration counts in a real redis-server (src/migration/fleet.ts, view.ts):
 * two tallies (two instances) adding into one Redis, the report reading the sum; Redis killed
 * (counts kept, a throttled warning, nothing thrown) and back empty (every instance's counts come
 * back); a reset by one instance seen by the other; the hash bounds across instances.
 */
import { createClient } from 'redis';
import t, { type Test } from 'tap';
import { MigrationFleet } from '../../src/migration/fleet.js';
import type { MigrationConfig } from '../../src/migration/schema.js';
import { MigrationTally, OTHER } from '../../src/migration/tally.js';
import { openMigrationView, type MigrationLaneView } from '../../src/migration/view.js';
import type { Comparison } from '../../src/migration/types.js';
import { fakeLog } from '../helpers/log.js';
import { REDIS_SKIP, startRedis, type TestRedis } from '../helpers/redis.js';
import { within } from '../helpers/wait.js';

const differ = (path: string): Comparison => ({ equal: false, paths: [path], samples: [{ path, legacy: '1', next: '2' }] });
const EQUAL: Comparison = { equal: true, paths: [], samples: [] };

function config(url: string, maxPaths = 100): MigrationConfig {
  return {
    next: { url: 'http://127.0.0.1:1/v1' },
    operations: { listPets: { mode: 'shadow', percent: 0 }, getPet: { mode: 'split', percent: 10 } },
    shadow: { percent: 100, maxInFlight: 64, timeoutMs: 2000, maxBodyBytes: 65536, maxAnswerBytes: 1048576 },
    compare: { ignore: [], listOrder: 'strict', maxSamples: 5, maxPaths },
    tester: { header: 'x-migration-side', scope: 'migration:tester' },
    gate: { minComparisons: 10, maxDifferentRatio: 0.1, maxViolations: 0 },
    store: { url, sentinel: null, cluster: null, username: null, passwordFromEnv: null, tls: false, caFile: null, connectTimeoutMs: 1000, maxReconnectDelayMs: 100 },
  };
}

/** Two instances on one Redis (their own key prefix), each flushing every `flushMs`. */
async function fleetOf(t: Test, n: number, flushMs = 60_000, maxPaths = 100): Promise<{ redis: TestRedis; views: MigrationLaneView[]; logs: ReturnType<typeof fakeLog>[]; prefix: string }> {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const prefix = `t${Math.random().toString(36).slice(2, 8)}:`;
  const logs = Array.from({ length: n }, () => fakeLog());
  const views = logs.map((log) => openMigrationView(config(redis.url, maxPaths), { env: { PETSTORE_REDIS_PREFIX: prefix }, log, flushMs }));
  t.teardown(() => Promise.all(views.map((v) => v.close())));
  return { redis, views, logs, prefix };
}

t.test('two instances add into one Redis; either reports the sum, scope fleet', { skip: REDIS_SKIP }, async (t) => {
  const { views, prefix, redis } = await fleetOf(t, 2);
  const [a, b] = views as [MigrationLaneView, MigrationLaneView];
  for (let i = 0; i < 30; i++) a.tally.compared('listPets', i < 3 ? differ('$.name') : EQUAL, 5, 8);
  for (let i = 0; i < 20; i++) b.tally.compared('listPets', i < 2 ? differ('$.status') : EQUAL, 5, 9);
  b.tally.routed('getPet', 'next', 4);
  b.tally.fallback('getPet', 'timeout');
  const fromA = await a.report();
  t.equal(fromA.scope, 'fleet');
  const list = fromA.operations.find((o) => o.operation === 'listPets');
  // a flushed before reading; b has not flushed yet (its flushMs is a minute).
  t.equal(list?.compared, 30, "a's own counts, flushed before its read");
  const fromB = await b.report();
  const sum = fromB.operations.find((o) => o.operation === 'listPets');
  t.strictSame([sum?.compared, sum?.equal, sum?.different], [50, 45, 5], 'the sum of both');
  t.strictSame(sum?.paths, [{ path: '$.name', count: 3 }, { path: '$.status', count: 2 }]);
  t.equal(sum?.latency.next.count, 50);
  t.equal(sum?.samples.length, 5, 'the newest maxSamples of both');
  const getPet = fromB.operations.find((o) => o.operation === 'getPet');
  t.strictSame([getPet?.mode, getPet?.percent, getPet?.routed.next, getPet?.fallbacks], ['split', 10, 1, { timeout: 1 }]);
  // Flushing again adds only what is new: no double counting.
  a.tally.compared('listPets', EQUAL, 1, 1);
  await a.snapshot();
  await b.snapshot();
  const again = (await a.report()).operations.find((o) => o.operation === 'listPets');
  t.equal(again?.compared, 51, 'a second flush adds the new comparison only');
  // The keys carry the deployment prefix and one hash tag.
  const client = createClient({ url: redis.url });
  await client.connect();
  t.teardown(() => void client.destroy());
  const keys = (await client.keys(`${prefix}*`)).sort();
  t.ok(keys.length > 0 && keys.every((k) => k.startsWith(`${prefix}{migration}:`)), `keys: ${keys.join(' ')}`);
});

t.test('the fleet hash keeps the bounds across instances: maxPaths distinct paths, the rest under (other)', { skip: REDIS_SKIP }, async (t) => {
  const { views } = await fleetOf(t, 2, 60_000, 10);
  const [a, b] = views as [MigrationLaneView, MigrationLaneView];
  for (let i = 0; i < 10; i++) a.tally.compared('listPets', differ(`$.a${i}`), 1, 1);
  for (let i = 0; i < 10; i++) b.tally.compared('listPets', differ(`$.b${i}`), 1, 1);
  await a.snapshot();
  await b.snapshot();
  const paths = (await a.report()).operations.find((o) => o.operation === 'listPets')?.paths ?? [];
  t.equal(paths.length, 11, '10 names and "(other)"');
  t.strictSame(paths.find((p) => p.path === OTHER)?.count, 10, "b's paths, past the bound");
  t.equal(paths.reduce((n, p) => n + p.count, 0), 20, 'nothing lost');
});

t.test('Redis killed: counts stay local, one throttled warning, nothing thrown; back empty: every instance counts again', { skip: REDIS_SKIP }, async (t) => {
  const { views, redis, logs } = await fleetOf(t, 2);
  const [a, b] = views as [MigrationLaneView, MigrationLaneView];
  for (let i = 0; i < 10; i++) a.tally.compared('listPets', EQUAL, 1, 1);
  for (let i = 0; i < 7; i++) b.tally.compared('listPets', EQUAL, 1, 1);
  await a.snapshot();
  await b.snapshot();
  t.equal((await a.report()).operations.find((o) => o.operation === 'listPets')?.compared, 17, 'both flushed');
  await redis.kill();
  // Counted while Redis is away: kept.
  for (let i = 0; i < 5; i++) a.tally.compared('listPets', differ('$.x'), 1, 1);
  const whileDown = await within(a.report(), 5000, undefined);
  t.ok(whileDown !== undefined, 'the report answers while Redis is away');
  t.equal(whileDown?.scope, 'instance', "this instance's counts instead");
  t.match(whileDown?.storeError, /Redis could not be read/);
  t.equal(whileDown?.operations.find((o) => o.operation === 'listPets')?.compared, 15);
  for (let i = 0; i < 3; i++) await a.snapshot();
  const warnings = logs[0]!.lines.filter((l) => /migration counts not written to Redis/.test(l.message));
  t.equal(warnings.length, 1, 'one warning for several failed flushes (throttled)');
  await t.rejects(a.reset(), 'a reset while Redis is away fails (nothing reset)');
  t.equal(a.tally.snapshot().operations.listPets?.compared, 15, 'and the counts are still there');
  // Back, empty (no persistence): each instance's flush restores all it counted.
  await redis.restart();
  const back = async () => {
    for (let i = 0; i < 100; i++) {
      await a.snapshot();
      await b.snapshot();
      const r = await a.report();
      if (r.scope === 'fleet' && r.operations.find((o) => o.operation === 'listPets')?.compared === 22) return r;
      await new Promise((r) => setTimeout(r, 50));
    }
    return undefined;
  };
  const restored = await back();
  t.ok(restored !== undefined, 'the fleet counts come back: 15 + 7, nothing lost');
  t.strictSame(restored?.operations.find((o) => o.operation === 'listPets')?.paths, [{ path: '$.x', count: 5 }]);
});

t.test('a reset by one instance is the fleet\'s: the other drops only what it had not flushed', { skip: REDIS_SKIP }, async (t) => {
  const { views } = await fleetOf(t, 2);
  const [a, b] = views as [MigrationLaneView, MigrationLaneView];
  for (let i = 0; i < 10; i++) b.tally.compared('listPets', EQUAL, 1, 1);
  await b.snapshot();
  const before = await a.report();
  t.equal(before.operations.find((o) => o.operation === 'listPets')?.compared, 10);
  await a.reset();
  const after = await a.report();
  t.equal(after.operations.find((o) => o.operation === 'listPets')?.compared ?? 0, 0, 'zero after the reset');
  t.ok(Date.parse(after.since) >= Date.parse(before.since), 'since moves to the reset');
  // b counted 2 more before it heard of the reset (not flushed): dropped; then 3 more: counted.
  for (let i = 0; i < 2; i++) b.tally.compared('listPets', EQUAL, 1, 1);
  await b.snapshot();
  for (let i = 0; i < 3; i++) b.tally.compared('listPets', EQUAL, 1, 1);
  await b.snapshot();
  t.equal((await a.report()).operations.find((o) => o.operation === 'listPets')?.compared, 3, 'only what b counted after it learnt of the reset');
  t.equal(b.tally.snapshot().operations.listPets?.compared, 15, "b's own counts (its metrics) are its process's");
});

t.test('a flusher closes with a last flush; a reader alone (no tally) only reads', { skip: REDIS_SKIP }, async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const env = { PETSTORE_REDIS_PREFIX: `c${Math.random().toString(36).slice(2, 8)}:` };
  const store = config(redis.url).store!;
  const tally = new MigrationTally({ maxPaths: 10, maxSamples: 2 });
  const writer = new MigrationFleet(store, tally, { bounds: tally.bounds, env });
  tally.routed('getPet', 'legacy', 3);
  await writer.close();
  const reader = new MigrationFleet(store, undefined, { bounds: tally.bounds, env });
  t.teardown(() => reader.close());
  const s = await reader.read();
  t.strictSame(s.operations.getPet?.routed, { legacy: 1, next: 0 }, 'the close flushed');
  t.equal(reader.errors, 0);
});
