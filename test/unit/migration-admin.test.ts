/**
 * The migration report on a real admin listener on 127.0.0.1 (src/ops/admin.ts, admin-migration.ts):
 * `GET /migration`, 404 when the lane is off, `DELETE /migration` behind the admin tokens (404
 * without one, the same failure lock as /keys, 503 when the fleet's Redis cannot be reset); the
 * migration metrics (src/ops/migration-metrics.ts); and `petstore-gateway migration report|reset`
 * (src/cli/migration.ts) against a real local server serving a canned report: its table, its
 * verdict and its exit code.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import t, { type Test } from 'tap';
import { migrationCommand } from '../../src/cli/migration.js';
import { adminKeyRoutes } from '../../src/cli/keys.js';
import { EXIT } from '../../src/cli/usage.js';
import { parsePolicy } from '../../src/config/load.js';
import { READY, startAdmin, type AdminOptions } from '../../src/ops/admin.js';
import { GatewayMetrics } from '../../src/ops/metrics.js';
import { buildReport, gateOf, type MigrationReport } from '../../src/migration/report.js';
import type { MigrationConfig } from '../../src/migration/schema.js';
import { MigrationTally } from '../../src/migration/tally.js';
import { assertError } from '../helpers/assert.js';
import { parseExposition, value } from '../helpers/prom.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { adminUrl, closedPort, request, runCli, spawnCliUntil, tempDir, testKey } from '../helpers/servers.js';

const strongToken = (): string => randomBytes(32).toString('base64url');

const OPERATIONS: MigrationConfig['operations'] = { listPets: { mode: 'shadow', percent: 0 }, getPet: { mode: 'split', percent: 25 } };

/** A policy with admin tokens (and a failure lock of 3), parsed as `serve` does. */
function policy(token: string | undefined) {
  const parsed = parsePolicy(JSON.stringify({ server: { admin: { host: '127.0.0.1', port: 0, bruteForce: { maxFailures: 3, windowSeconds: 60 } } } }), { env: { PETSTORE_API_KEYS: testKey(), ...(token === undefined ? {} : { PETSTORE_ADMIN_TOKENS: token }) } }, {}, { format: 'json' });
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
  return parsed.config;
}

const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined } as unknown as Logger;

async function admin(t: Test, options: Partial<AdminOptions>): Promise<string> {
  const a = await startAdmin({ host: '127.0.0.1', port: 0, readiness: () => READY, metrics: async () => ({ body: '', contentType: 'text/plain' }), deprecations: async () => ({ generatedAt: '', operations: [] }), ...options });
  t.teardown(() => a.close());
  return `http://127.0.0.1:${a.address().port}`;
}

t.test('GET /migration: the report as JSON; absent lane: 404 in the Error shape, /migration not listed', async (t) => {
  const tally = new MigrationTally({ maxPaths: 10, maxSamples: 2 });
  tally.compared('listPets', { equal: false, paths: ['$[*].name'], samples: [{ path: '$[*].name', legacy: '"Rex"', next: '"rex"' }] }, 3, 4);
  tally.routed('getPet', 'next', 9);
  const base = await admin(t, { migration: async () => buildReport(tally.snapshot(), { operations: OPERATIONS, gate: gateOf(null) }, 'instance') });
  const res = await request(`${base}/migration`);
  t.equal(res.status, 200);
  t.equal(res.headers['cache-control'], 'no-store');
  t.match(res.headers['content-type'], /^application\/json/);
  const report = res.json as MigrationReport;
  t.equal(report.scope, 'instance');
  t.strictSame(report.operations.map((o) => [o.operation, o.mode, o.percent]), [['getPet', 'split', 25], ['listPets', 'shadow', 0]]);
  t.strictSame(report.operations[1]?.paths, [{ path: '$[*].name', count: 1 }]);
  t.notOk(/consumer/i.test(res.body), 'the report names no consumer');
  const head = await request(`${base}/migration`, { method: 'HEAD' });
  t.equal(head.status, 200);
  t.equal(head.body, '', 'HEAD: no body');
  const post = await request(`${base}/migration`, { method: 'POST' });
  assertError(t, post, 405, 'method_not_allowed');
  assertError(t, await request(`${base}/migration`, { method: 'DELETE' }), 404, 'not_found', { message: /needs an admin token/ });

  const off = await admin(t, {});
  const none = await request(`${off}/migration`);
  assertError(t, none, 404, 'not_found', { message: 'any' });
  t.notMatch((none.json as { message: string }).message, /\/migration/, 'the 404 lists the endpoints there are');
});

t.test('DELETE /migration behind the admin tokens: 401 without or with a wrong token, 204 resets, 503 when the store cannot be reset', async (t) => {
  const token = strongToken();
  const tally = new MigrationTally({ maxPaths: 10, maxSamples: 2 });
  let storeUp = true;
  const reset = async () => {
    if (!storeUp) throw new Error('Redis away');
    tally.reset();
  };
  const report = async () => buildReport(tally.snapshot(), { operations: OPERATIONS, gate: gateOf(null) }, 'instance');
  const audit: Array<Record<string, unknown>> = [];
  const log = { ...quiet, info: (fields: Record<string, unknown>) => void audit.push(fields) } as unknown as Logger;
  const base = await admin(t, { migration: report, routes: adminKeyRoutes(policy(token), { PETSTORE_ADMIN_TOKENS: token }, log, reset) });
  for (let i = 0; i < 5; i++) tally.compared('listPets', { equal: true, paths: [], samples: [] }, 1, 1);
  const compared = async () => ((await request(`${base}/migration`)).json as MigrationReport).operations.find((o) => o.operation === 'listPets')?.compared ?? 0;
  t.equal(await compared(), 5);
  const missing = await request(`${base}/migration`, { method: 'DELETE' });
  assertError(t, missing, 401, 'missing_api_key', { message: 'any' });
  t.match(missing.headers['www-authenticate'], /^Bearer realm=/);
  assertError(t, await request(`${base}/migration`, { method: 'DELETE', headers: { authorization: `Bearer ${strongToken()}` } }), 401, 'invalid_api_key', { message: 'any' });
  t.equal(await compared(), 5, 'refused: nothing reset');
  const put = await request(`${base}/migration`, { method: 'PUT', headers: { authorization: `Bearer ${token}` } });
  assertError(t, put, 405, 'method_not_allowed');
  t.equal(put.headers.allow, 'GET, HEAD, DELETE');
  storeUp = false;
  const away = await request(`${base}/migration`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } });
  assertError(t, away, 503, 'service_unavailable', { message: /nothing was reset/ });
  t.equal(away.headers['retry-after'], '1');
  t.equal(await compared(), 5, 'the store away: nothing reset');
  storeUp = true;
  const done = await request(`${base}/migration`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } });
  t.equal(done.status, 204);
  t.equal(done.body, '');
  t.equal(await compared(), 0, 'reset');
  t.strictSame(audit.filter((a) => a.audit === 'migration').map((a) => [a.action, a.by]), [['reset', 'PETSTORE_ADMIN_TOKENS#1']], 'one audit line, naming the token, not its value');
  t.notOk(JSON.stringify(audit).includes(token));
  // Wrong tokens on /keys and /migration add up: one lock for the listener (maxFailures 3).
  for (let i = 0; i < 2; i++) await request(`${base}/keys`, { headers: { authorization: `Bearer ${strongToken()}` } });
  const locked = await request(`${base}/migration`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } });
  // One wrong token on /migration and two on /keys: the address is locked, on both.
  assertError(t, locked, 429, 'too_many_auth_failures');
  t.ok(Number(locked.headers['retry-after']) >= 1);
});

t.test('metrics: six counters per operation with fixed label values; no path or value as a label', async (t) => {
  const tally = new MigrationTally({ maxPaths: 10, maxSamples: 2 });
  tally.routed('getPet', 'next', 5);
  tally.routed('getPet', 'legacy', 5);
  tally.fallback('getPet', 'timeout');
  tally.dropped('listPets', 'in_flight');
  tally.compared('listPets', { equal: false, paths: ['$.secretish'], samples: [{ path: '$.secretish', legacy: 'value-a', next: 'value-b' }] }, 1, 1);
  tally.compared('listPets', { equal: true, paths: [], samples: [] }, 1, 1);
  tally.nextFailed('listPets', 'reset');
  tally.nextViolation('getPet', 'status');
  const metrics = new GatewayMetrics({ defaultMetrics: false, migrationCounts: () => tally.metricCounts() });
  const text = await metrics.registry.metrics();
  const s = parseExposition(text);
  t.equal(value(s, 'petstore_gateway_migration_requests_total', { operation: 'getPet', side: 'next' }), 1);
  t.equal(value(s, 'petstore_gateway_migration_requests_total', { operation: 'getPet', side: 'legacy' }), 1);
  t.equal(value(s, 'petstore_gateway_migration_fallbacks_total', { operation: 'getPet', reason: 'timeout' }), 1);
  t.equal(value(s, 'petstore_gateway_migration_fallbacks_total', { operation: 'getPet', reason: 'refused' }), 0, 'every reason from the start');
  t.equal(value(s, 'petstore_gateway_migration_shadow_dropped_total', { operation: 'listPets', reason: 'in_flight' }), 1);
  t.equal(value(s, 'petstore_gateway_migration_comparisons_total', { operation: 'listPets', result: 'equal' }), 1);
  t.equal(value(s, 'petstore_gateway_migration_comparisons_total', { operation: 'listPets', result: 'different' }), 1);
  t.equal(value(s, 'petstore_gateway_migration_next_errors_total', { operation: 'listPets', kind: 'reset' }), 1);
  t.equal(value(s, 'petstore_gateway_migration_next_violations_total', { operation: 'getPet' }), 1);
  t.notMatch(text, /secretish|value-a|value-b/, 'no field path or value in /metrics');
  const labels = new Set(s.samples.filter((x) => x.name.startsWith('petstore_gateway_migration_')).flatMap((x) => Object.keys(x.labels)));
  t.strictSame([...labels].sort(), ['kind', 'operation', 'reason', 'result', 'side']);
  const configured = parseExposition(await new GatewayMetrics({ defaultMetrics: false, migrationCounts: () => new MigrationTally({ maxPaths: 1, maxSamples: 0 }).metricCounts(['createPet']) }).registry.metrics());
  t.equal(value(configured, 'petstore_gateway_migration_requests_total', { operation: 'createPet', side: 'next' }), 0, 'a configured operation has its series before its first request');
  t.equal(value(configured, 'petstore_gateway_migration_next_errors_total', { operation: 'createPet', kind: 'timeout' }), 0);
  const off = await new GatewayMetrics({ defaultMetrics: false }).registry.metrics();
  t.match(off, /# TYPE petstore_gateway_migration_requests_total counter/, 'without a lane the families exist, with no series');
  t.notMatch(off, /petstore_gateway_migration_requests_total\{/);
});

/** A local server answering GET /migration with `report` and DELETE with `deleteStatus` (204 with the right token). */
async function cannedAdmin(t: Test, report: unknown, token = 'x'): Promise<{ url: string; seen: string[] }> {
  const seen: string[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    seen.push(`${req.method} ${req.url} ${req.headers.authorization ?? '-'}`);
    if (req.method === 'DELETE') {
      res.writeHead(req.headers.authorization === `Bearer ${token}` ? 204 : 401).end();
      return;
    }
    const body = JSON.stringify(report);
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

function io(env: Record<string, string> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: { write: (s: string) => out.push(s) }, err: { write: (s: string) => err.push(s) }, env }, out: () => out.join(''), err: () => err.join('') };
}

function canned(compared: number, different: number): MigrationReport {
  const tally = new MigrationTally({ maxPaths: 10, maxSamples: 2 });
  for (let i = 0; i < compared; i++) tally.compared('listPets', i < different ? { equal: false, paths: ['$[*].status'], samples: [{ path: '$[*].status', legacy: '"sold"', next: '"SOLD"' }] } : { equal: true, paths: [], samples: [] }, 2, 3);
  for (let i = 0; i < 50; i++) tally.routed('listPets', 'legacy', 2 + (i % 5));
  return buildReport(tally.snapshot(), { operations: { listPets: { mode: 'shadow', percent: 0 } }, gate: { minComparisons: 1000, maxDifferentRatio: 0.01, maxViolations: 0 } }, 'fleet');
}

t.test('migration report: the table, the verdict and the exit code; flags override the gate', async (t) => {
  const notReady = await cannedAdmin(t, canned(2000, 40));
  const a = io();
  t.equal(await migrationCommand(['report', '--admin', notReady.url], a.io), EXIT.notReady, '2% different: not ready, exit 3');
  t.equal(EXIT.notReady, 3);
  const table = a.out();
  t.match(table, /^fleet \(every instance, from Redis\), counted since /);
  t.match(table, /gate: at least 1000 comparisons \(shadow\) or answers from next \(split, next\), at most 1% different, at most 0 contract violations/);
  t.match(table, /OPERATION\s+MODE\s+ON LEGACY\s+ON NEXT\s+COMPARED\s+DIFFERENT/);
  t.match(table, /listPets\s+shadow\s+\d+\s+\d+\s+2000\s+40 \(2%\)\s+0\s+0\s+0\s+[\d.]+\/[\d.]+\s+[\d.]+\/[\d.]+\s+not ready/);
  t.match(table, /not ready: 2% different, above 1%/);
  t.match(table, /differing paths: \$\[\*\]\.status \(40\)/);
  t.match(table, /newest difference: \$\[\*\]\.status: legacy "sold", next "SOLD"/);
  t.match(table, /verdict: NOT READY \(0 of 1 operations ready\)\n$/);
  t.strictSame(notReady.seen, [`GET /migration -`]);

  const b = io();
  t.equal(await migrationCommand(['report', '--admin', notReady.url, '--max-different-ratio', '0.05'], b.io), EXIT.ok, 'a laxer gate from the flags: ready, exit 0');
  t.match(b.out(), /verdict: READY \(1 of 1 operations\)/);
  const c = io();
  t.equal(await migrationCommand(['report', '--admin', notReady.url, '--json', '--max-different-ratio', '0.05', '--min-comparisons', '5000'], c.io), EXIT.notReady);
  const json = JSON.parse(c.out()) as { report: MigrationReport; verdict: { ready: boolean; gate: unknown; operations: Array<{ reasons: string[] }> } };
  t.equal(json.report.operations[0]?.compared, 2000);
  t.strictSame(json.verdict.gate, { minComparisons: 5000, maxDifferentRatio: 0.05, maxViolations: 0 });
  t.strictSame(json.verdict.operations[0]?.reasons, ['2000 comparisons, fewer than 5000']);

  const ready = await cannedAdmin(t, canned(1500, 3));
  t.equal(await migrationCommand(['report', '--admin', `${ready.url}/`], io().io), EXIT.ok, '0.2% different: ready');

  // The command itself, as a pipeline runs it: the exit code says the verdict.
  const run = await runCli(t, ['migration', 'report', '--admin', notReady.url]);
  t.equal(run.code, 3, `petstore-gateway migration report exits 3 when not ready (stderr: ${run.stderr})`);
  t.match(run.stdout, /verdict: NOT READY/);
  const help = await runCli(t, ['migration', '--help']);
  t.equal(help.code, 0);
  t.match(help.stdout, /^Usage: petstore-gateway migration report/);
});

t.test('migration report and reset: failures and usage', async (t) => {
  const closed = await cannedAdmin(t, {});
  const notAReport = io();
  t.equal(await migrationCommand(['report', '--admin', closed.url], notAReport.io), EXIT.runtime);
  t.match(notAReport.err(), /did not answer a migration report/);
  const off = await admin(t, {});
  const e = io();
  t.equal(await migrationCommand(['report', '--admin', off], e.io), EXIT.runtime, 'the lane off: 404, exit 1');
  t.match(e.err(), /404/);
  const gone = io();
  t.equal(await migrationCommand(['report', '--admin', `http://127.0.0.1:${await closedPort()}`], gone.io), EXIT.runtime, 'nothing listening: exit 1');
  t.match(gone.err(), /got no answer \(ECONNREFUSED\)/);
  for (const args of [[], ['explain'], ['report', '--max-different-ratio', '2'], ['report', '--min-comparisons', '-1'], ['report', '--admin', 'ftp://x'], ['reset', '--json'], ['report', 'extra']]) {
    await t.rejects(migrationCommand(args, io().io), { name: 'Error', command: 'migration' }, `usage error: ${args.join(' ')}`);
  }
  const token = strongToken();
  const target = await cannedAdmin(t, {}, token);
  await t.rejects(migrationCommand(['reset', '--admin', target.url], io().io), /needs an admin token/);
  const r = io({ PETSTORE_ADMIN_TOKENS: `${token},${strongToken()}` });
  t.equal(await migrationCommand(['reset', '--admin', target.url], r.io), EXIT.ok, 'the first of PETSTORE_ADMIN_TOKENS');
  t.strictSame(target.seen, [`DELETE /migration Bearer ${token}`]);
  const wrong = io({ PETSTORE_ADMIN_TOKEN: strongToken() });
  t.equal(await migrationCommand(['reset', '--admin', target.url], wrong.io), EXIT.runtime, 'refused: exit 1');
  t.match(wrong.err(), /answered 401/);
});

// parity: the admin listener and the lane's report are the same whatever the engine.
t.test('serve with a migration section: /migration and its reset on the admin port, read by migration report', async (t) => {
  const dir = tempDir(t, 'migration-serve');
  const file = join(dir, 'policy.json');
  const nowhere = `http://127.0.0.1:${await closedPort()}`;
  writeFileSync(file, JSON.stringify({ upstream: { url: `${nowhere}/v1` }, migration: { next: { url: `${nowhere}/next/v1` }, operations: { listPets: { mode: 'shadow' }, getPet: { mode: 'split', percent: 5 } } } }));
  const token = strongToken();
  const { handle } = await spawnCliUntil(t, ['serve', '--policy', file, '--port', '0'], /"msg":"admin listening[^"]*\/migration, \/console\/\)"/, { env: { PETSTORE_API_KEYS: testKey(), PETSTORE_ADMIN_TOKENS: token, LOG_LEVEL: 'info' }, stream: 'stdout', timeoutMs: 20_000 });
  const base = adminUrl(handle);
  const report = await request(`${base}/migration`);
  t.equal(report.status, 200);
  t.strictSame((report.json as MigrationReport).operations.map((o) => [o.operation, o.mode, o.percent]), [['getPet', 'split', 5], ['listPets', 'shadow', 0]]);
  const metrics = parseExposition((await request(`${base}/metrics`)).body);
  t.equal(value(metrics, 'petstore_gateway_migration_comparisons_total', { operation: 'listPets', result: 'different' }), 0, 'the configured operations have their series');
  t.equal((await request(`${base}/migration`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } })).status, 204);
  const run = await runCli(t, ['migration', 'report', '--admin', base]);
  t.equal(run.code, 3, 'nothing compared yet: not ready');
  t.match(run.stdout, /listPets\s+shadow\s+0\s/);
  t.match(run.stdout, /not ready: 0 comparisons, fewer than 10000/);
});
