/**
 * The rate-limit store, the deprecation report and the response cache's Redis store on Redis as
 * operators run it (src/stores/connection.ts): a key prefix per deployment on one redis-server, a
 * three-node Redis Cluster, and TLS with an ACL user (Sentinel: store-redis-sentinel.test.ts). "Two
 * instances" are two stores on two connections (their connection configs differ by one
 * millisecond of connect timeout, so the process pool gives each its own), as two gateways have.
 */
import t from 'tap';
import type { TapTest as Tap } from '../helpers/assert.js';
import { RedisCacheStore } from '../../src/policies/cache/redis.js';
import { parsePolicy } from '../../src/config/load.js';
import type { CacheEntry } from '../../src/policies/cache/types.js';
import { acquireRedis, describeConnection, maskUrl } from '../../src/stores/connection.js';
import { RedisStore } from '../../src/stores/redis.js';
import type { RedisStoreConfig } from '../../src/stores/types.js';
import { fakeLog } from '../helpers/log.js';
import { REDIS_SKIP, startRedis } from '../helpers/redis.js';
import { allowedAcross, cli, freePort, RULE_OF_FOUR as RULE, startCluster, startTlsRedis, twoInstances } from '../helpers/redis-forms.js';
import { sleep, waitFor } from '../helpers/wait.js';


function store(t: Tap, config: RedisStoreConfig, env: Record<string, string> = {}): RedisStore {
  const s = new RedisStore(config, { env, ledgerFlushMs: 50 });
  t.teardown(() => s.close());
  return s;
}

/** Two instances (see twoInstances), closed at the end of the test. */
function instancesOf(t: Tap, config: RedisStoreConfig, env: Record<string, string> = {}): Promise<[RedisStore, RedisStore]> {
  return twoInstances((c) => store(t, c, env), config);
}

function entry(body: string): CacheEntry {
  const now = Date.now();
  return { status: 200, headers: { 'content-type': 'application/json' }, body: Buffer.from(body), born: now, freshUntil: now + 60_000, staleUntil: now + 120_000 };
}

t.test('credentials never printed whole: a user alone is masked too', async (t) => {
  t.equal(describeConnection({ url: 'redis://gateway@redis.internal:6379/0' }), 'redis://***@redis.internal:6379/0');
  t.equal(describeConnection({ url: 'rediss://gateway:s3cret@redis.internal:6380' }), 'rediss://***:***@redis.internal:6380');
  t.equal(describeConnection({ url: 'redis://127.0.0.1:6379' }), 'redis://127.0.0.1:6379');
  t.notMatch(maskUrl('http://us er:pw@host/v1'), /us er|pw/, 'not a URL: still masked');
  t.equal(describeConnection({ sentinel: { masterName: 'm', nodes: ['10.0.0.1:26379'] }, username: 'gateway' }), 'sentinel m via 10.0.0.1:26379');
});

t.test('one connection per connection config in a process; the last use closes it', async (t) => {
  const port = await freePort();
  const a = acquireRedis({ url: `redis://127.0.0.1:${port}`, connectTimeoutMs: 50 });
  const b = acquireRedis({ url: `redis://127.0.0.1:${port}`, connectTimeoutMs: 50, maxReconnectDelayMs: 2000 });
  const c = acquireRedis({ url: `redis://127.0.0.1:${port}`, connectTimeoutMs: 51 });
  t.equal(a.conn, b.conn, 'the same config (defaults written or not): one connection');
  t.not(a.conn, c.conn, 'another config: another connection');
  await a.release();
  const d = acquireRedis({ url: `redis://127.0.0.1:${port}`, connectTimeoutMs: 50 });
  t.equal(d.conn, b.conn, 'still open while b holds it');
  await Promise.all([b.release(), c.release(), d.release()]);
  const e = acquireRedis({ url: `redis://127.0.0.1:${port}`, connectTimeoutMs: 50 });
  t.not(e.conn, a.conn, 'a new connection once every use released it');
  await e.release();
});

t.test('the cache store with Redis away: a miss, counted, one warning for many failures', async (t) => {
  const port = await freePort();
  const log = fakeLog();
  // The store's clock stands still: every failure falls in one 10 s throttle window, however
  // slowly a loaded machine runs the loop.
  const t0 = Date.now();
  const cache = new RedisCacheStore({ url: `redis://gateway@127.0.0.1:${port}`, connectTimeoutMs: 50, maxReconnectDelayMs: 100 }, { log, now: () => t0 });
  t.teardown(() => cache.close());
  for (let i = 0; i < 8; i++) {
    t.equal(await cache.get(`k${i}`), undefined, 'a miss: the upstream answers');
    cache.set(`k${i}`, entry('[]'));
  }
  cache.dropLists();
  await waitFor('the failures counted', () => cache.errors >= 17, 3000);
  const warnings = log.lines.filter((l) => l.message === 'response cache store failed; answering from the upstream');
  t.equal(warnings.length, 1, 'throttled: one line in 10 s');
  t.notMatch(JSON.stringify(log.lines), /gateway@/, 'the URL user is not logged');
});

t.test('two deployments on one redis-server: their prefixes keep counters apart', { skip: REDIS_SKIP }, async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const config = { url: redis.url };
  const blue = store(t, config, { PETSTORE_REDIS_PREFIX: 'blue:' });
  const green = store(t, config, { PETSTORE_REDIS_PREFIX: 'green:' });
  const plain = store(t, config);
  const own = store(t, { ...config, prefix: 'own:' }, { PETSTORE_REDIS_PREFIX: 'blue:' });
  await Promise.all([blue.ready, green.ready, plain.ready, own.ready]);
  t.equal(await allowedAcross([blue], 'k'), 4, 'blue: its own limit');
  t.equal(await allowedAcross([green], 'k'), 4, 'green: its own limit, untouched by blue');
  t.equal(await allowedAcross([plain], 'k'), 4, 'no prefix set: the default, apart from both');
  t.equal(await allowedAcross([own], 'k'), 4, 'a section prefix wins over the deployment one');
  blue.ledger.record('getPet', 'ops', Date.now());
  await blue.ledger.flush();
  t.strictSame((await green.ledger.report()).length, 0, 'green sees none of blue\'s report');
  t.equal((await blue.ledger.report()).length, 1);
  const keys = cli(['-p', String(redis.port), 'KEYS', '*']).split('\n').filter(Boolean).sort();
  t.strictSame(keys, ['blue:deprecations', 'blue:deprecations:getPet', 'blue:rl:k', 'green:rl:k', 'own:rl:k', 'petstore-gateway:rl:k'], 'the key names, unchanged for a deployment that sets no prefix');
  t.throws(() => new RedisStore(config, { env: { PETSTORE_REDIS_PREFIX: 'a {tag}' } }), /PETSTORE_REDIS_PREFIX/);

  const cacheBlue = new RedisCacheStore(config, { env: { PETSTORE_REDIS_PREFIX: 'blue:' } });
  const cacheGreen = new RedisCacheStore(config, { env: { PETSTORE_REDIS_PREFIX: 'green:' } });
  t.teardown(() => Promise.all([cacheBlue.close(), cacheGreen.close()]));
  await Promise.all([cacheBlue.ready, cacheGreen.ready]);
  cacheBlue.set('getPet:1', entry('{"id":1}'));
  await waitFor('blue stored it', async () => (await cacheBlue.get('getPet:1')) !== undefined, 2000);
  t.equal(await cacheGreen.get('getPet:1'), undefined, 'green does not see blue\'s entry');
  // An entry's Redis key is a digest of the cache key (which holds forwarded field values).
  t.match(cli(['-p', String(redis.port), 'KEYS', 'blue:cache:*']), /^blue:cache:e:[\w-]{43}$/m);
});

t.test('Redis Cluster: the rate limit, the deprecation report and the cache shared by two instances', { skip: REDIS_SKIP }, async (t) => {
  const c = await startCluster(t);
  const config = { cluster: { nodes: c.nodes } };
  const both = await instancesOf(t, config);
  // Keys spread over the three masters' slots: each limit holds across both instances.
  for (const key of ['alpha', 'beta', 'gamma', 'delta']) t.equal(await allowedAcross(both, key), 4, `limit 4 for ${key}`);
  // The report's script writes two keys: one hash slot, or Redis answers CROSSSLOT.
  both[0].ledger.record('getPet', 'ops', 1_000);
  both[1].ledger.record('getPet', 'ops', 2_000);
  await Promise.all(both.map((s) => s.ledger.flush()));
  t.equal(both[0].errors + both[1].errors, 0, 'no command failed');
  const rows = await both[1].ledger.report();
  t.strictSame(rows.map((r) => [r.operation, r.consumer, r.count]), [['getPet', 'ops', 2]], 'both instances counted in one report');

  const one = new RedisCacheStore({ ...config, connectTimeoutMs: 1000 });
  const two = new RedisCacheStore({ ...config, connectTimeoutMs: 1001 });
  t.teardown(() => Promise.all([one.close(), two.close()]));
  await Promise.all([one.ready, two.ready]);
  one.set('getPet:7', entry('{"id":7}'));
  const seen = await waitFor('the entry on the other instance', async () => await two.get('getPet:7'), 3000);
  t.equal(seen?.body.toString(), '{"id":7}');
  const before = two.generation;
  one.dropLists();
  await waitFor('the invalidation reached the other instance', () => two.generation > before, 3000);
  t.equal(one.errors + two.errors, 0, 'no cache command failed');
});

t.test('rediss:// with a CA file and an ACL user: one limit across two instances', { skip: REDIS_SKIP }, async (t) => {
  const tls = await startTlsRedis(t);
  const config = { url: `rediss://${tls.user}@127.0.0.1:${tls.port}`, passwordFromEnv: 'REDIS_PASSWORD', caFile: tls.caFile };
  const both = await instancesOf(t, config, { REDIS_PASSWORD: tls.password });
  t.equal(await allowedAcross(both, 'tls'), 4);
  t.equal(both[0].where, `rediss://***@127.0.0.1:${tls.port}`, 'the user is masked where the store is named');

  const log = fakeLog();
  const wrong = new RedisStore({ ...config, connectTimeoutMs: 1002 }, { env: { REDIS_PASSWORD: 'not-it' }, log });
  t.teardown(() => wrong.close());
  await Promise.race([wrong.ready, sleep(1500)]);
  await t.rejects(wrong.take('tls', RULE), 'a wrong password: the take fails (onStoreError decides)');
  t.notMatch(JSON.stringify(log.lines), new RegExp(`${tls.user}@|${tls.password}`), 'neither user nor password logged');
});

t.test('every redis: section takes the same forms; exactly one of url, sentinel, cluster', async (t) => {
  const policy = (redis: string) =>
    JSON.stringify({
      version: 1,
      policies: {
        auth: { keys: [{ id: 'ops', hash: `sha256:${'0'.repeat(64)}` }] },
        'rate-limit': { limit: 5, store: { redis: JSON.parse(redis) as unknown } },
        cache: { ttlSeconds: { getPet: 5 }, store: { redis: JSON.parse(redis) as unknown } },
      },
    });
  const accepted = [
    '{"url": "rediss://gateway@10.0.0.1:6380/0", "passwordFromEnv": "REDIS_PASSWORD", "caFile": "/etc/ca.pem"}',
    '{"sentinel": {"masterName": "mymaster", "nodes": ["10.0.0.1:26379"]}, "username": "gateway", "tls": true}',
    '{"cluster": {"nodes": ["10.0.0.1:7000", "[::1]:7001"]}, "prefix": "blue:"}',
  ];
  for (const redis of accepted) {
    const r = parsePolicy(policy(redis), { env: {} }, {}, { format: 'json' });
    t.ok(r.ok, `accepted: ${redis} ${r.ok ? '' : JSON.stringify(r.problems)}`);
  }
  const refused: Array<[string, RegExp]> = [
    ['{}', /store\.redis","message":"give exactly one of url, sentinel, cluster/],
    ['{"url": "redis://10.0.0.1:6379", "cluster": {"nodes": ["10.0.0.1:7000"]}}', /give exactly one of url, sentinel, cluster/],
    // A shape the schema refuses inside the oneOf is reported at the store, as every oneOf is.
    ['{"url": "redis://10.0.0.1:6379", "prefix": "a {tag}"}', /rate-limit\\"\]\.store","message":"is not any of the accepted forms/],
    ['{"cluster": {"nodes": ["not-a-node"]}}', /rate-limit\\"\]\.store","message":"is not any of the accepted forms/],
  ];
  for (const [redis, problem] of refused) {
    const r = parsePolicy(policy(redis), { env: {} }, {}, { format: 'json' });
    t.match(r.ok ? '' : JSON.stringify(r.problems), problem, `refused: ${redis}`);
  }
});
