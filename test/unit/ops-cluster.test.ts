/**
 * The admin listener of a process group (src/ops/cluster.ts) with a real cluster: a primary and two
 * workers (test/fixtures/ops-cluster.mjs, on the built dist/). Metrics are the sum of the workers',
 * readiness needs every worker ready, the deprecation report merges the workers' memory ledgers.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import t from 'tap';
import { parseExposition, value } from '../helpers/prom.js';
import { PROJECT_ROOT, childEnv, ensureBuilt, request, sleep, waitFor, nodeCommand } from '../helpers/servers.js';

/** Polls an asynchronous check every 50 ms until it gives a value; rejects after `timeoutMs`. */
async function poll<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(50);
  }
}

t.test('a primary answers for two workers', async (t) => {
  ensureBuilt();
  const child = spawn(...nodeCommand([join(PROJECT_ROOT, 'test', 'fixtures', 'ops-cluster.mjs')]), {
    cwd: PROJECT_ROOT,
    env: childEnv(),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
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
  const base = `http://127.0.0.1:${port}`;

  // Ready once both workers are up and say so.
  await poll('ready', async () => ((await request(`${base}/readyz`)).status === 200 ? true : undefined), 20_000);
  const ready = await request(`${base}/readyz`);
  t.same(ready.json, { status: 'ready' });

  const s = parseExposition((await request(`${base}/metrics`)).body);
  const list = { http_request_method: 'GET', http_route: '/v1/pets', http_response_status_code: '200', network_protocol_version: '1.1' };
  t.equal(value(s, 'http_server_request_duration_seconds_count', list), 3, 'worker 1: 1, worker 2: 2');
  t.equal(value(s, 'http_server_request_duration_seconds_bucket', { ...list, le: '0.01' }), 3, 'buckets summed');
  t.equal(value(s, 'petstore_gateway_deprecated_requests_total', { operation: 'getPet', consumer: 'team-a' }), 2);
  t.equal(value(s, 'petstore_gateway_policy_reloads_total', { result: 'success' }), 1);
  t.equal(value(s, 'petstore_gateway_policy_reloads_total', { result: 'failure' }), 1);
  t.equal(value(s, 'petstore_gateway_circuit_breaker_open'), 0);
  t.ok(s.samples.some((x) => x.name === 'process_cpu_user_seconds_total'), 'default metrics too');

  const report = (await request(`${base}/deprecations`)).json as { operations: unknown };
  t.same(report.operations, [
    {
      operation: 'getPet',
      sunset: '2030-12-05T00:00:00Z',
      consumers: [
        { consumer: 'team-a', count: 2, firstSeen: '2026-01-01T00:00:00.000Z', lastSeen: '2026-01-02T00:00:00.000Z' },
        { consumer: 'team-b', count: 1, firstSeen: '2026-01-09T00:00:00.000Z', lastSeen: '2026-01-09T00:00:00.000Z' },
      ],
    },
  ]);

  // One worker's breaker opens: the group is not ready, and the gauge says so.
  child.stdin.write('unready\n');
  const unready = await poll('worker 1 unready', async () => {
    const r = await request(`${base}/readyz`);
    return r.status === 503 ? r : undefined;
  });
  t.same(unready.json, { status: 'not ready', reason: 'circuit breaker open' });
  t.equal(value(parseExposition((await request(`${base}/metrics`)).body), 'petstore_gateway_circuit_breaker_open'), 1, 'max over workers');

  // A worker gone: fewer than two running.
  child.stdin.write('kill\n');
  const down = await poll('worker down', async () => {
    const r = await request(`${base}/readyz`);
    return (r.json as { reason?: string }).reason === 'worker down' ? r : undefined;
  });
  t.equal(down.status, 503, 'a worker down: not ready');
  const one = parseExposition((await request(`${base}/metrics`)).body);
  t.equal(value(one, 'http_server_request_duration_seconds_count', list), 1, 'metrics of the worker left');

  // The worker left dies and the primary asks it (the deprecation report, metrics) before it has
  // read the end of the worker's channel: the message fails (EPIPE), which must not end the
  // primary (node emits it as the worker's 'error'; without a listener, the process ends).
  child.stdin.write('race\n');
  const race = await waitFor('the race outcome', () => /\{"race":.*\}/.exec(stdout)?.[0], 10_000).catch((err: Error) => {
    throw new Error(`${err.message}\nexit: ${child.exitCode ?? child.signalCode}, stderr: ${stderr}`);
  });
  t.match(JSON.parse(race), { race: { dead: true, connected: true } }, 'asked while dead and still connected (the race this checks)');
  t.match(JSON.parse(race), { race: { readiness: { ok: { ready: false } }, deprecations: { error: /EPIPE|ECONNRESET|closed/ } } }, 'not ready; the report fails');
  await sleep(200);
  t.equal((await request(`${base}/healthz`)).status, 200, 'the primary lives on');
  t.equal(child.exitCode, null, 'the primary did not exit');
  child.stdin.write('drain\n');
  const draining = await poll('draining', async () => {
    const r = await request(`${base}/readyz`);
    return (r.json as { reason?: string }).reason === 'draining' ? r : undefined;
  });
  t.equal(draining.status, 503, 'the primary drains first');
  t.equal((await request(`${base}/healthz`)).status, 200, 'alive while draining');
});
