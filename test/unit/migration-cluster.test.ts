/**
 * /migration of a process group (src/ops/cluster.ts with src/migration/view.ts): a real
 * primary and two workers (test/fixtures/migration-cluster.mjs, on the built dist/), each with its
 * own tally. Without Redis the report is the sum of the workers' (and so are the metrics); with a
 * real redis-server, the fleet's from Redis; DELETE /migration resets every worker (and the store).
 */
import { randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import type { MigrationReport } from '../../src/migration/report.js';
import { parseExposition, value } from '../helpers/prom.js';
import { REDIS_SKIP, startRedis } from '../helpers/redis.js';
import { PROJECT_ROOT, childEnv, ensureBuilt, nodeCommand, request, sleep, waitFor } from '../helpers/servers.js';

/** Starts the group; its admin base URL once both workers answer the migration question. */
async function group(t: Test, env: Record<string, string>): Promise<string> {
  ensureBuilt();
  const child = spawn(...nodeCommand([join(PROJECT_ROOT, 'test', 'fixtures', 'migration-cluster.mjs')]), { cwd: PROJECT_ROOT, env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
  child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  const port = await waitFor('the admin port', () => /\{"admin":(\d+)\}/.exec(stdout)?.[1], 20_000).catch((err: Error) => {
    throw new Error(`${err.message}\nstderr: ${stderr}`);
  });
  return `http://127.0.0.1:${port}`;
}

/** The report once it counts both workers' comparisons (33: 11 + 22), bounded. */
async function whole(base: string): Promise<MigrationReport> {
  for (let i = 0; i < 200; i++) {
    const r = await request(`${base}/migration`);
    const report = r.status === 200 ? (r.json as MigrationReport) : undefined;
    if (report?.operations.find((o) => o.operation === 'listPets')?.compared === 33) return report;
    await sleep(50);
  }
  throw new Error(`${base}/migration never counted both workers`);
}

async function resetAndCheck(t: Test, base: string, token: string): Promise<void> {
  t.equal((await request(`${base}/migration`, { method: 'DELETE' })).status, 401, 'the reset needs the admin token');
  const done = await request(`${base}/migration`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } });
  t.equal(done.status, 204, 'reset');
  const after = (await request(`${base}/migration`)).json as MigrationReport;
  t.strictSame(
    after.operations.map((o) => [o.operation, o.compared, o.routed.next]),
    [['getPet', 0, 0], ['listPets', 0, 0]],
    'every worker starts again from zero',
  );
}

t.test('--workers without Redis: /migration and the metrics are the sum of the workers', async (t) => {
  const token = randomBytes(32).toString('base64url');
  const base = await group(t, { ADMIN_TOKEN: token });
  const report = await whole(base);
  t.equal(report.scope, 'instance');
  const list = report.operations.find((o) => o.operation === 'listPets');
  t.strictSame([list?.compared, list?.equal, list?.different], [33, 30, 3], 'worker 1: 10 + 1, worker 2: 20 + 2');
  t.strictSame(list?.paths, [{ path: '$.w2', count: 2 }, { path: '$.w1', count: 1 }]);
  t.equal(list?.latency.next.count, 33, 'latency buckets added');
  t.equal(report.operations.find((o) => o.operation === 'getPet')?.routed.next, 3);
  const s = parseExposition((await request(`${base}/metrics`)).body);
  t.equal(value(s, 'petstore_gateway_migration_comparisons_total', { operation: 'listPets', result: 'different' }), 3, 'the metrics summed too');
  t.equal(value(s, 'petstore_gateway_migration_requests_total', { operation: 'getPet', side: 'next' }), 3);
  await resetAndCheck(t, base, token);
});

t.test('--workers with Redis: the fleet\'s report, read once from Redis; the reset resets the store and the workers', { skip: REDIS_SKIP }, async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const token = randomBytes(32).toString('base64url');
  const base = await group(t, { ADMIN_TOKEN: token, MIGRATION_REDIS: redis.url, PETSTORE_REDIS_PREFIX: 'mc:' });
  const report = await whole(base);
  t.equal(report.scope, 'fleet', 'from Redis: each worker flushed when asked');
  t.equal(report.operations.find((o) => o.operation === 'listPets')?.different, 3);
  await resetAndCheck(t, base, token);
  t.equal(((await request(`${base}/migration`)).json as MigrationReport).scope, 'fleet');
});
