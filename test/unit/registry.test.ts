/**
 * The key registry (src/registry/registry.ts) against a real redis-server: changes reach another
 * process's local copy by publish/subscribe; the local copy answers while Redis is away (for
 * maxStaleSeconds, on an injected clock); changes are refused while it is away; a revocation made
 * while one instance was cut off applies when it reconnects; a rotation keeps both secrets until
 * the overlap ends. The cut-off is a TCP relay between that instance and Redis, closed and
 * reopened by the test.
 */
import { once } from 'node:events';
import { createServer, connect, type Server, type Socket } from 'node:net';
import t from 'tap';
import type { TapTest as Tap } from '../helpers/assert.js';
import { digestOf } from '../../src/policies/auth/keys.js';
import { KeyRegistry } from '../../src/registry/registry.js';
import { RegistryError, type RegistryConfig } from '../../src/registry/types.js';
import { startRedis } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

/** A TCP relay to Redis that the test can cut (every connection closed, new ones refused) and restore. */
async function relay(t: Tap, port: number) {
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let at = 0;
  const open = async () => {
    server = createServer((client) => {
      const upstream = connect({ host: '127.0.0.1', port });
      for (const s of [client, upstream]) {
        sockets.add(s);
        s.on('error', () => undefined);
        s.on('close', () => sockets.delete(s));
      }
      client.pipe(upstream).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    server.listen(at, '127.0.0.1');
    await once(server, 'listening');
    at = (server.address() as { port: number }).port;
  };
  const cut = async () => {
    const s = server;
    server = undefined;
    const closed = s === undefined ? undefined : new Promise<void>((r) => s.close(() => r()));
    // net.Server.close waits for its connections: end them first.
    for (const sock of sockets) sock.destroy();
    await closed;
  };
  await open();
  t.teardown(cut);
  return { port: at, cut, restore: open };
}


function config(url: string, patch: Partial<RegistryConfig> = {}): RegistryConfig {
  return { redis: { url }, prefix: 'test:', syncIntervalMs: 200, maxStaleSeconds: 60, commandTimeoutMs: 500, ...patch };
}

function opened(t: Tap, c: RegistryConfig, now?: () => number, follow = true): KeyRegistry {
  const r = new KeyRegistry(c, { env: {}, follow, ...(now === undefined ? {} : { now }) });
  t.teardown(() => r.close());
  return r;
}

/** How a registry call ended: 'resolved', or the RegistryError's reason. */
const reasonOf = (p: Promise<unknown>): Promise<string> => p.then(() => 'resolved', (e: unknown) => (e instanceof RegistryError ? e.reason : String(e)));
const knows = (r: KeyRegistry, key: string, nowMs = Date.now()) => r.grant(digestOf(key), nowMs) !== undefined;

t.test('a change on one registry reaches another local copy by publish/subscribe', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  // A sync interval far longer than the test: only pub/sub can bring the change in time.
  const reader = opened(t, config(redis.url, { syncIntervalMs: 600_000 }));
  const writer = opened(t, config(redis.url), undefined, false);
  await Promise.all([reader.ready, writer.ready]);
  const made = await writer.create({ id: 'alice', operations: ['listPets'], scopes: ['migration:tester'] });
  await waitFor('the key in the other copy', () => knows(reader, made.key), 1000);
  const grant = reader.grant(digestOf(made.key), Date.now());
  t.equal(grant?.consumer.id, 'alice');
  t.strictSame([...(grant?.operations ?? [])], ['listPets']);
  t.strictSame(grant?.consumer.scopes, ['migration:tester']);
  t.match(await writer.list(), [{ id: 'alice', operations: ['listPets'], scopes: ['migration:tester'] }]);
  await writer.revoke('alice');
  await waitFor('the revocation in the other copy', () => !knows(reader, made.key), 1000);
  t.pass('revoked within 1 s');
  const list = await writer.list();
  t.strictSame(list, [], 'nothing left');
  // Without scopes the record has no such field, as every record written before keys had scopes.
  const raw = await writer.create({ id: 'bob' });
  await waitFor('bob in the other copy', () => knows(reader, raw.key), 1000);
  t.equal(reader.grant(digestOf(raw.key), Date.now())?.consumer.scopes, undefined, 'no scopes: none');
  t.equal((await writer.list())[0]?.scopes, null);
  const text = JSON.stringify(await writer.list());
  t.notMatch(text, raw.key, 'the list shows no secret');
  t.notMatch(text, 'sha256', 'nor a hash');
});

t.test('create refuses an existing id; rotate and revoke an unknown one', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const r = opened(t, config(redis.url), undefined, false);
  await r.ready;
  await r.create({ id: 'a' });
  t.equal(await reasonOf(r.create({ id: 'a' })), 'exists');
  t.equal(await reasonOf(r.rotate('nobody', 0)), 'unknown');
  t.equal(await reasonOf(r.revoke('nobody')), 'unknown');
  t.equal((await r.list()).length, 1);
});

t.test('rotation: both secrets until the overlap ends, then only the new one (injected clock)', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  let now = Date.parse('2027-01-01T00:00:00Z');
  const clock = () => now;
  // The clock jumps an hour: staleness is another test's subject.
  const r = opened(t, config(redis.url, { maxStaleSeconds: null }), clock);
  await r.ready;
  const first = await r.create({ id: 'svc', operations: ['getPet'], scopes: ['migration:tester', 'b'] });
  const second = await r.rotate('svc', 3600);
  t.equal(second.previousValidUntil, '2027-01-01T01:00:00.000Z');
  t.match(second.info, { operations: ['getPet'], scopes: ['migration:tester', 'b'] }, 'a rotation keeps operations and scopes');
  t.strictSame(r.grant(digestOf(second.key), now)?.consumer.scopes, ['migration:tester', 'b']);
  t.ok(knows(r, first.key, now), 'old secret during the overlap');
  t.ok(knows(r, second.key, now), 'new secret');
  now += 3600 * 1000 - 1;
  t.ok(knows(r, first.key, now), 'old secret 1 ms before the end');
  now += 1;
  t.notOk(knows(r, first.key, now), 'old secret at the end');
  t.ok(knows(r, second.key, now), 'new secret after it');
  const third = await r.rotate('svc', 0);
  t.notOk(knows(r, second.key, now), 'overlap 0: the previous secret ends at once');
  t.ok(knows(r, third.key, now));
  t.notOk(knows(r, first.key, now), 'an ended secret is dropped on the next rotation');
});

t.test('Redis away: the local copy answers, changes are refused, a revocation made meanwhile applies on return', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const link = await relay(t, redis.port);
  let now = Date.now();
  const clock = () => now;
  // This instance reaches Redis through the relay; the writer directly.
  const cutOff = opened(t, config(`redis://127.0.0.1:${link.port}`, { maxStaleSeconds: 60 }), clock);
  const writer = opened(t, config(redis.url), undefined, false);
  await Promise.all([cutOff.ready, writer.ready]);
  const kept = await writer.create({ id: 'kept' });
  const doomed = await writer.create({ id: 'doomed' });
  await waitFor('both keys in the copy', () => knows(cutOff, kept.key, now) && knows(cutOff, doomed.key, now), 2000);

  await link.cut();
  await t.rejects(cutOff.create({ id: 'new' }), RegistryError, 'create while away: refused');
  t.equal(await reasonOf(cutOff.create({ id: 'new' })), 'unavailable');
  await writer.revoke('doomed');
  // The copy cannot learn of it: both still answer (documented: for maxStaleSeconds).
  t.ok(knows(cutOff, kept.key, now), 'known key works while away');
  t.ok(knows(cutOff, doomed.key, now), 'the revocation is not known yet');
  now += 59_000;
  t.ok(knows(cutOff, kept.key, now), 'within maxStaleSeconds');
  now += 2_000;
  t.notOk(knows(cutOff, kept.key, now), 'past maxStaleSeconds the copy no longer answers');

  await link.restore();
  await waitFor('the revocation applied after the return', () => !knows(cutOff, doomed.key, now), 10_000);
  await waitFor('the copy current again', () => knows(cutOff, kept.key, now), 2_000);
  t.pass('back: revoked key refused, kept key works');
});
