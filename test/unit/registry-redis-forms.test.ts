/**
 * The registry on Redis as operators run it (src/stores/connection.ts): TLS with a private CA and
 * an ACL user (the CA as `caFile`, and through NODE_EXTRA_CA_CERTS in a child process), Redis
 * Sentinel through a failover, and a three-node Redis Cluster. Each: a change made by one
 * registry reaches another's local copy.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import type { TapTest as Tap } from '../helpers/assert.js';
import { digestOf } from '../../src/policies/auth/keys.js';
import { KeyRegistry } from '../../src/registry/registry.js';
import { RegistryError, type RegistryConfig } from '../../src/registry/types.js';
import type { RedisConnectionConfig } from '../../src/stores/connection.js';
import { cli, startCluster, startSentinel, startTlsRedis } from '../helpers/redis-forms.js';
import { runCli, tempDir } from '../helpers/servers.js';
import { sleep, waitFor } from '../helpers/wait.js';


function registry(t: Tap, redis: RedisConnectionConfig, env: Record<string, string> = {}, follow = true): KeyRegistry {
  const config: RegistryConfig = { redis, prefix: 'forms:', syncIntervalMs: 500, maxStaleSeconds: 600, commandTimeoutMs: 1000 };
  const r = new KeyRegistry(config, { env, follow });
  t.teardown(() => r.close());
  return r;
}

/** How a registry call ended: 'resolved', or the RegistryError's reason. */
const reasonOf = (p: Promise<unknown>): Promise<string> => p.then(() => 'resolved', (e: unknown) => (e instanceof RegistryError ? e.reason : String(e)));
const knows = (r: KeyRegistry, key: string) => r.grant(digestOf(key), Date.now()) !== undefined;

t.test('rediss:// with a CA file and an ACL user (password from the environment)', async (t) => {
  const tls = await startTlsRedis(t);
  const conn = { url: `rediss://${tls.user}@127.0.0.1:${tls.port}`, passwordFromEnv: 'REDIS_PASSWORD', caFile: tls.caFile };
  const env = { REDIS_PASSWORD: tls.password };
  const reader = registry(t, conn, env);
  const writer = registry(t, conn, env, false);
  await Promise.all([reader.ready, writer.ready]);
  const made = await writer.create({ id: 'over-tls' });
  await waitFor('the key over TLS', () => knows(reader, made.key), 2000);
  t.strictSame((await writer.list()).map((k) => k.id), ['over-tls']);

  const wrong = registry(t, conn, { REDIS_PASSWORD: 'not-it' }, false);
  await Promise.race([wrong.ready, sleep(1500)]);
  t.equal(await reasonOf(wrong.list()), 'unavailable', 'a wrong password is refused');
  const noCa = registry(t, { url: conn.url, passwordFromEnv: 'REDIS_PASSWORD' }, env, false);
  await Promise.race([noCa.ready, sleep(1500)]);
  t.equal(await reasonOf(noCa.list()), 'unavailable', 'without the CA the certificate is not trusted');

  // NODE_EXTRA_CA_CERTS instead of caFile, in the CLI (node reads it at start).
  const dir = tempDir(t, 'forms-policy');
  const file = join(dir, 'policy.json');
  writeFileSync(file, JSON.stringify({ version: 1, policies: { auth: { keysFromEnv: null, registry: { redis: { url: conn.url, passwordFromEnv: 'REDIS_PASSWORD' }, prefix: 'forms:' } } } }));
  const list = await runCli(t, ['keys', 'list', '--json', '--policy', file], { env: { REDIS_PASSWORD: tls.password, NODE_EXTRA_CA_CERTS: tls.caFile }, timeoutMs: 30_000 });
  t.equal(list.code, 0, list.stderr);
  t.match(list.stdout, /"id":"over-tls"/);
});

t.test('Redis Sentinel: changes before and after a failover; the local copy answers throughout', async (t) => {
  const s = await startSentinel(t);
  const conn = { sentinel: { masterName: s.masterName, nodes: [`127.0.0.1:${s.sentinelPort}`] } };
  const reader = registry(t, conn);
  const writer = registry(t, conn, {}, false);
  await Promise.all([reader.ready, writer.ready]);
  const before = await writer.create({ id: 'before' });
  await waitFor('the first key', () => knows(reader, before.key), 2000);
  const oldMaster = s.master();
  t.match(cli(['-p', String(s.sentinelPort), 'SENTINEL', 'failover', s.masterName]), /OK/);
  // Under a steady stream of lookups (what requests do): each answers from the local copy.
  let lookups = 0;
  let misses = 0;
  // Bounded, and generous: under a loaded CI machine the client hears of the new master late
  // (one CI run on node 24 saw no write succeed within 20 s; alone it takes under 2 s).
  const deadline = Date.now() + 45_000;
  let after: { key: string } | undefined;
  // A fresh id per attempt: an attempt that timed out on the client may still have run on the
  // server, and a retry under the same id would then be refused as 'exists'.
  const reasons = new Map<string, number>();
  for (let attempt = 0; after === undefined && Date.now() < deadline; attempt++) {
    for (let i = 0; i < 1000; i++, lookups++) if (!knows(reader, before.key)) misses++;
    // Writes go to the new master once the old one follows it (`demote`: at once, not at the
    // sentinel's next INFO round); before, a write the old master took could be dropped.
    if (s.demote(oldMaster)) {
      after = await writer.create({ id: `after-${attempt}` }).catch((e: unknown) => {
        const reason = e instanceof RegistryError ? e.reason : String(e);
        reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
        return undefined;
      });
    }
    await sleep(100);
  }
  t.not(s.master(), oldMaster, 'the sentinel promoted the replica');
  t.equal(misses, 0, `${lookups} lookups during the failover, none missed`);
  t.ok(after, `a change succeeds on the new master (refusals before: ${JSON.stringify([...reasons])})`);
  if (after !== undefined) await waitFor('the new key in the copy', () => knows(reader, after.key), 10_000);
  t.ok(knows(reader, before.key), 'the old key still works');
});

t.test('Redis Cluster, three nodes: changes (one slot per script, by hash tag) and pub/sub', async (t) => {
  const cluster = await startCluster(t);
  const conn = { cluster: { nodes: cluster.nodes } };
  const reader = registry(t, conn);
  const writer = registry(t, conn, {}, false);
  await Promise.all([reader.ready, writer.ready]);
  const made = await writer.create({ id: 'in-cluster', operations: ['getPet'] });
  await waitFor('the key in the copy', () => knows(reader, made.key), 3000);
  const rotated = await writer.rotate('in-cluster', 60);
  await waitFor('the rotated key', () => knows(reader, rotated.key), 3000);
  t.ok(knows(reader, made.key), 'old secret during the overlap');
  await writer.revoke('in-cluster');
  await waitFor('the revocation', () => !knows(reader, rotated.key), 3000);
  t.strictSame(await writer.list(), []);
});
