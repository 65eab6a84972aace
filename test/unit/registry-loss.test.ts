/**
 * D3: a Redis that comes back without the registry's data is a data loss, not a mass revocation
 * (src/registry/registry.ts, the epoch). Against a real redis-server: after FLUSHALL, or a restart
 * without persistence, a reader keeps its copy (and adds keys made since), logs one error, counts
 * it and shows it in its status; `restore` (keys import) and `restore([])` (keys reset-epoch) make
 * Redis the registry again; a registry written before epochs existed is stamped so its loss is seen
 * too; a stale replica's older explicit epoch is no operator act. Rotation caps (D2) as well.
 */
import { spawnSync } from 'node:child_process';
import t from 'tap';
import type { TapTest as Tap } from '../helpers/assert.js';
import { digestOf, hashKey } from '../../src/policies/auth/keys.js';
import { KeyRegistry } from '../../src/registry/registry.js';
import type { RegistryConfig, RegistryError } from '../../src/registry/types.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

function config(url: string): RegistryConfig {
  return { redis: { url }, prefix: 'loss:', syncIntervalMs: 100, maxStaleSeconds: 3600, commandTimeoutMs: 1000 };
}

interface Logged {
  readonly level: 'warn' | 'error';
  readonly fields: Record<string, unknown>;
  readonly message: string;
}

function opened(t: Tap, url: string, follow: boolean, logged: Logged[] = []): KeyRegistry {
  const log = {
    warn: (fields: Record<string, unknown>, message: string) => void logged.push({ level: 'warn', fields, message }),
    error: (fields: Record<string, unknown>, message: string) => void logged.push({ level: 'error', fields, message }),
  };
  const r = new KeyRegistry(config(url), { env: {}, follow, log });
  t.teardown(() => r.close());
  return r;
}

const cli = (redis: TestRedis, ...args: string[]) => spawnSync('redis-cli', ['-p', String(redis.port), ...args], { encoding: 'utf8', timeout: 5000 }).stdout.trim();
const knows = (r: KeyRegistry, key: string) => r.grant(digestOf(key), Date.now()) !== undefined;

t.test('FLUSHALL: the copy keeps answering, one error, counted; keys import restores; reset-epoch accepts', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const logged: Logged[] = [];
  const reader = opened(t, redis.url, true, logged);
  const writer = opened(t, redis.url, false);
  await Promise.all([reader.ready, writer.ready]);
  const a = await writer.create({ id: 'a' });
  const b = await writer.create({ id: 'b' });
  await waitFor('both keys known', () => knows(reader, a.key) && knows(reader, b.key), 2000);
  t.match(cli(redis, 'GET', 'loss:{keys}:epoch'), /^0-[0-9a-f]{16}$/, 'the first write stamps an implicit epoch');
  const backup = await writer.exportAll();
  t.strictSame(backup.records.map((r) => r.id), ['a', 'b']);
  t.notMatch(JSON.stringify(backup), a.key, 'the export holds no secret');
  t.match(JSON.stringify(backup), hashKey(a.key), 'only its hash');
  t.match(reader.status(), { connected: true, keys: 2, fresh: true, dataLoss: false, dataLossDetected: 0 });

  t.equal(cli(redis, 'FLUSHALL'), 'OK');
  await waitFor('the loss detected', () => reader.status().dataLoss, 3000);
  t.ok(knows(reader, a.key) && knows(reader, b.key), 'the keys it knew keep working');
  // A key made after the loss (Redis is empty: the write stamps a new implicit epoch) is added.
  const c = await writer.create({ id: 'c' });
  await waitFor('the new key known too', () => knows(reader, c.key), 2000);
  await new Promise((r) => setTimeout(r, 400)); // several syncs: still one detection, one error line
  t.ok(knows(reader, a.key), 'still, after syncs that see the implicit epoch');
  t.match(reader.status(), { dataLoss: true, dataLossDetected: 1, keys: 3 });
  const errors = logged.filter((l) => l.level === 'error');
  t.equal(errors.length, 1, 'one error line');
  t.match(errors[0], { fields: { keysKept: ['a', 'b'] }, message: /lost the registry's data.*keys import.*keys reset-epoch/ });
  // Revoking a kept key cannot work (Redis has no record of it): the refusal says the key still
  // works and the way out, where the process keeps it; a process that keeps nothing says no more.
  const refusal = async (r: KeyRegistry, id: string) => r.revoke(id).then(() => undefined, (err: unknown) => err as RegistryError);
  t.match(await refusal(reader, 'a'), { reason: 'unknown', message: /^no key with id 'a' in Redis, but the gateways still accept it.*keys import.*then revoke.*keys reset-epoch/, hint: /keys import/ });
  t.match(await refusal(reader, 'zz'), { reason: 'unknown', message: "no key with id 'zz'", hint: undefined }, 'an id it does not keep');
  t.match(await refusal(writer, 'a'), { reason: 'unknown', message: "no key with id 'a'" }, 'a CLI process keeps no copy');

  // keys import of the backup: Redis is the registry again (a, b from the backup; c as it is).
  await writer.restore(backup.records);
  await waitFor('the loss cleared', () => !reader.status().dataLoss, 2000);
  t.ok(knows(reader, a.key) && knows(reader, b.key) && knows(reader, c.key), 'every key works');
  t.match(cli(redis, 'GET', 'loss:{keys}:epoch'), /^[1-9][0-9]{12}-[0-9a-f]{16}$/, 'an explicit epoch');
  t.match(logged.at(-1), { level: 'warn', message: /an operator restored or reset it/ });
  t.strictSame((await writer.list()).map((k) => k.id), ['a', 'b', 'c']);

  // Lost again; this time the operator accepts what Redis holds (nothing): the kept keys end.
  cli(redis, 'FLUSHALL');
  await waitFor('the second loss detected', () => reader.status().dataLossDetected === 2, 3000);
  t.ok(knows(reader, a.key), 'kept meanwhile');
  await writer.restore([]);
  await waitFor('reset-epoch: the kept keys end', () => !knows(reader, a.key) && !knows(reader, c.key), 2000);
  t.match(reader.status(), { dataLoss: false, keys: 0 });

  // A revocation is still a revocation (the epoch did not change).
  const d = await writer.create({ id: 'd' });
  await waitFor('d known', () => knows(reader, d.key), 2000);
  await writer.revoke('d');
  await waitFor('d revoked', () => !knows(reader, d.key), 2000);
  t.equal(reader.status().dataLoss, false, 'no loss reported for a revocation');
});

t.test('a restart without persistence; a registry from before epochs; a stale replica', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  // Records written as an older version did: no epoch key.
  const record = (id: string, key: string) => JSON.stringify({ id, created: '2026-01-01T00:00:00.000Z', secrets: [{ hash: hashKey(key) }] });
  const old = 'psg_an-old-form-key-from-before-epochs-000';
  cli(redis, 'HSET', 'loss:{keys}:records', 'old', record('old', old));
  cli(redis, 'SET', 'loss:{keys}:version', '7');
  const logged: Logged[] = [];
  const reader = opened(t, redis.url, true, logged);
  await reader.ready;
  t.ok(knows(reader, old), 'the old record works');
  t.match(cli(redis, 'GET', 'loss:{keys}:epoch'), /^0-/, 'the first full read stamps an epoch');

  await redis.restart(); // empty: no persistence
  await waitFor('the loss detected after the restart', () => reader.status().dataLoss, 10_000);
  t.ok(knows(reader, old), 'the key keeps working');
  t.equal(logged.filter((l) => l.level === 'error').length, 1);

  // A "replica" with the data and an older explicit epoch than the one the reader knows now.
  const writer = opened(t, redis.url, false);
  await writer.ready;
  await writer.restore([]); // reader adopts an explicit epoch E (empty registry)
  await waitFor('reset adopted', () => !reader.status().dataLoss && !knows(reader, old), 2000);
  const fresh = await writer.create({ id: 'fresh' });
  await waitFor('fresh known', () => knows(reader, fresh.key), 2000);
  cli(redis, 'FLUSHALL');
  cli(redis, 'HSET', 'loss:{keys}:records', 'old', record('old', old));
  cli(redis, 'SET', 'loss:{keys}:epoch', '1000000000000-00000000000000aa');
  cli(redis, 'INCR', 'loss:{keys}:version');
  await waitFor('a stale epoch is a loss, not an operator act', () => reader.status().dataLoss, 3000);
  t.ok(knows(reader, fresh.key), 'the key it knew keeps working');
  t.ok(knows(reader, old), 'and what Redis holds is added');
});

t.test('attacks on the epoch and the channel: a future epoch does not block a reset; a flood of "*" costs a few reads', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const reader = opened(t, redis.url, true);
  const writer = opened(t, redis.url, false);
  await Promise.all([reader.ready, writer.ready]);
  const a = await writer.create({ id: 'a' });
  await waitFor('a known', () => knows(reader, a.key), 2000);
  // An epoch from a clock far ahead (or a hand edit) is adopted as an operator's...
  cli(redis, 'SET', 'loss:{keys}:epoch', '9999999999999-00000000000000ff');
  cli(redis, 'INCR', 'loss:{keys}:version');
  await new Promise((r) => setTimeout(r, 400));
  t.ok(knows(reader, a.key));
  await writer.revoke('a');
  // ...and a later reset-epoch still wins: it writes a newer one than the epoch in place.
  await writer.restore([]);
  t.match(cli(redis, 'GET', 'loss:{keys}:epoch'), /^10000000000000-[0-9a-f]{16}$/);
  await waitFor('a gone', () => !knows(reader, a.key), 2000);
  t.equal(reader.status().dataLoss, false);

  // 300 "*" messages (anyone who may PUBLISH): the full reads are coalesced.
  const before = Number(/cmdstat_eval:calls=(\d+)/.exec(cli(redis, 'INFO', 'commandstats'))?.[1] ?? 0);
  const args = Array.from({ length: 300 }, () => ['PUBLISH', 'loss:keys:changed', '*']);
  spawnSync('redis-cli', ['-p', String(redis.port)], { input: args.map((a) => a.join(' ')).join('\n') + '\n', encoding: 'utf8', timeout: 5000 });
  await new Promise((r) => setTimeout(r, 500));
  const evals = Number(/cmdstat_eval:calls=(\d+)/.exec(cli(redis, 'INFO', 'commandstats'))?.[1] ?? 0) - before;
  t.ok(evals < 30, `${evals} full reads for 300 messages`);
});

t.test('a gateway whose ACL user may only read still gets its copy of a registry without an epoch', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const key = 'psg_read-only-gateway-key-00000000000000';
  cli(redis, 'HSET', 'loss:{keys}:records', 'ro', JSON.stringify({ id: 'ro', created: '2026-01-01T00:00:00.000Z', secrets: [{ hash: hashKey(key) }] }));
  t.equal(cli(redis, 'ACL', 'SETUSER', 'reader', 'on', '>reader-password-0123456789', '~*', '&*', '+@read', '+@connection', '+@pubsub', '+@scripting'), 'OK');
  const reader = opened(t, `redis://reader:reader-password-0123456789@127.0.0.1:${redis.port}`, true);
  await reader.ready;
  t.ok(knows(reader, key), 'the copy is read');
  t.equal(cli(redis, 'EXISTS', 'loss:{keys}:epoch'), '0', 'the SET was refused (no stamp)');
});
