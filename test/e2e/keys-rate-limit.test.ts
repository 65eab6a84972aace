/**
 * D4 / L8: `rate-limit.perKey` may name a key registry id. `check` (the built CLI) accepts it and
 * says so in a note; at run time the limit applies to the registry's consumer of that id (a real
 * redis-server, a real listening gateway), and not to another registry key.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { KeyRegistry } from '../../src/registry/registry.js';
import { closeRegistries } from '../../src/registry/index.js';
import { startRedis } from '../helpers/redis.js';
import { bearer, ensureBuilt, request, runCli, startGateway, tempDir } from '../helpers/servers.js';
import { until } from '../helpers/wait.js';

ensureBuilt();

// parity: rate-limit and auth are core-chain policies, the same in every engine (rate-limit.test.ts runs perKey on each)
t.test('perKey names a registry id: check notes it, the gateway limits that consumer', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const registry = { redis: { url: redis.url }, prefix: 'rl:', syncIntervalMs: 200, maxStaleSeconds: 3600, commandTimeoutMs: 2000 };
  const policy = { policies: { auth: { registry }, 'rate-limit': { perKey: { 'partner-beta': { limit: 2, windowSeconds: 60 } } } } };

  const dir = tempDir(t, 'keys-rate-limit');
  const file = join(dir, 'p.json');
  writeFileSync(file, JSON.stringify({ version: 1, upstream: { url: 'builtin' }, ...policy }));
  const checked = await runCli(t, ['check', file]);
  t.equal(checked.code, 0, checked.stdout + checked.stderr);
  t.match(checked.stdout, /note: rate-limit perKey "partner-beta": .*registry/);

  const writer = new KeyRegistry(registry, { env: {}, follow: false });
  t.teardown(() => writer.close());
  await writer.ready;
  const beta = await writer.create({ id: 'partner-beta' });
  const gamma = await writer.create({ id: 'partner-gamma' });
  const gw = await startGateway(t, policy);
  t.teardown(() => closeRegistries());
  await until('the registry key works', async () => (await request(`${gw.url}/v1/pets`, { headers: bearer(gamma.key) })).status === 200, 5000);

  const statuses: number[] = [];
  let policyHeader: unknown;
  for (let i = 0; i < 3; i++) {
    const r = await request(`${gw.url}/v1/pets`, { headers: bearer(beta.key) });
    statuses.push(r.status);
    policyHeader = r.headers['ratelimit-policy'];
  }
  t.strictSame(statuses, [200, 200, 429], 'the registry consumer gets its own limit');
  t.equal(policyHeader, '"default";q=2;w=60');
  const other = await request(`${gw.url}/v1/pets`, { headers: bearer(gamma.key) });
  t.equal(other.status, 200, 'another registry consumer is not limited by it');
  t.equal(other.headers['ratelimit-policy'], undefined);
});
