/**
 * Readiness of createOps (src/ops/index.ts): the phase, the breaker, and an upstream marked
 * unreachable by a refused call, which comes back once a connection to it opens again. Without
 * that re-check a gateway out of rotation (503) gets no traffic, so no call could ever succeed and
 * mark it reachable: it would stay out for good after the upstream is back.
 *
 * By default the upstream's state is only shown (the `detail` and a metric): every replica shares
 * one upstream, and a 503 on all of them would take the whole service out of rotation. The tests
 * of the upstream's effect on readiness use the opt-in, server.admin.readiness.upstream: true.
 */
import t from 'tap';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { formatProblems, parsePolicy } from '../../src/config/load.js';
import { canConnect, createOps, UpstreamHealth, upstreamAddress } from '../../src/ops/index.js';
import { record } from '../helpers/record.js';
import { closedPort, policyText, testKey } from '../helpers/servers.js';

/** Ops of a policy; `tied`: server.admin.readiness.upstream true (the opt-in of the old behaviour). */
function opsFor(upstreamUrl: string, breakerOpen: () => boolean = () => false, tied = true) {
  const env = { PETSTORE_API_KEYS: testKey() };
  const server = tied ? { server: { admin: { readiness: { upstream: true } } } } : {};
  const loaded = parsePolicy(policyText({ upstream: { url: upstreamUrl }, ...server }), { env });
  if (!loaded.ok) throw new Error(formatProblems('policy', loaded.problems));
  return createOps(loaded.config, { log: pino({ level: 'silent' }), breakerOpen, defaultMetrics: false });
}

const refused = record({ status: 502, errorCode: 'upstream_unavailable', upstreamStatus: undefined, upstreamFailure: 'refused' });

t.test('phases and the breaker', async (t) => {
  let open = false;
  const ops = opsFor('builtin', () => open);
  t.strictSame(await ops.readiness('starting'), { ready: false, reason: 'starting' });
  t.strictSame(await ops.readiness('draining'), { ready: false, reason: 'draining' });
  t.match(await ops.readiness('serving'), { ready: true });
  open = true;
  t.match(await ops.readiness('serving'), { ready: false, reason: 'circuit breaker open', detail: { upstream: { circuitBreaker: 'open', decidesReadiness: true } } });
  t.strictSame(await ops.readiness('draining'), { ready: false, reason: 'draining' }, 'draining first');
});

t.test('by default the upstream is shown, not decisive: breaker open and unreachable stay ready, with the state in detail and a metric', async (t) => {
  let open = false;
  const port = await closedPort();
  const ops = opsFor(`http://127.0.0.1:${port}/v1`, () => open, false);
  t.match(await ops.readiness('serving'), { ready: true, detail: { upstream: { reachable: true, circuitBreaker: 'closed', decidesReadiness: false } } });
  t.notOk('keyRegistry' in ((await ops.readiness('serving')).detail ?? {}), 'no registry, no registry detail');
  open = true;
  ops.observer.onEnd(refused);
  const r = await ops.readiness('serving');
  t.match(r, { ready: true, detail: { upstream: { reachable: false, circuitBreaker: 'open', decidesReadiness: false } } }, 'still ready');
  const text = await ops.metrics.registry.metrics();
  t.match(text, /^petstore_gateway_upstream_reachable 0$/m, 'the metric shows it');
  t.match(text, /^petstore_gateway_circuit_breaker_open 1$/m);
  t.notMatch(text, /^petstore_gateway_key_registry_\w+\{/m, 'no registry series without a registry');
  t.match(await ops.readiness('draining'), { ready: false, reason: 'draining' }, 'the phase still decides');
});

t.test('a refused call marks the upstream unreachable while it refuses; an answer or an open connection brings it back', async (t) => {
  const port = await closedPort();
  const ops = opsFor(`http://127.0.0.1:${port}/v1`);
  t.match(await ops.readiness('serving'), { ready: true }, 'ready before any failure');
  ops.observer.onEnd(refused);
  t.match(await ops.readiness('serving'), { ready: false, reason: 'upstream unreachable' }, 'nothing listens: unreachable');
  t.match(await ops.readiness('serving'), { ready: false, reason: 'upstream unreachable' }, 'still, at the next check');
  ops.observer.onEnd(record({ upstreamStatus: 200 }));
  t.match(await ops.readiness('serving'), { ready: true }, 'a call that got an answer: reachable');
  ops.observer.onEnd(record({ status: 504, upstreamStatus: undefined, upstreamFailure: 'headers_timeout' }));
  t.match(await ops.readiness('serving'), { ready: true }, 'a headers timeout is not unreachable (the connection opened)');
});

t.test('an upstream that listens again is reachable at the next readiness check, without traffic', async (t) => {
  const server = createServer((_req, res) => res.end());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const { port } = server.address() as AddressInfo;
  const ops = opsFor(`http://127.0.0.1:${port}/v1`);
  // The record says refused (as it did while the upstream was down); the upstream listens now.
  ops.observer.onEnd(refused);
  t.equal(ops.health.reachable, false, 'marked unreachable by the refused call');
  t.match(await ops.readiness('serving'), { ready: true }, 'the re-check connects: ready');
  t.equal(ops.health.reachable, true);
});

t.test('concurrent checks share one connection attempt; a failing attempt keeps it unreachable', async (t) => {
  let attempts = 0;
  let answer: (ok: boolean) => void = () => undefined;
  const health = new UpstreamHealth({ host: '127.0.0.1', port: 1, timeoutMs: 100 }, () => {
    attempts++;
    return new Promise<boolean>((r) => (answer = r));
  });
  t.equal(await health.recheck(), true, 'reachable: no attempt');
  t.equal(attempts, 0);
  health.onEnd(refused);
  const checks = [health.recheck(), health.recheck(), health.recheck()];
  answer(false);
  t.strictSame(await Promise.all(checks), [false, false, false]);
  t.equal(attempts, 1, 'one attempt for three concurrent checks');
  const again = health.recheck();
  answer(true);
  t.equal(await again, true, 'the next attempt connects');
  t.equal(attempts, 2);
  t.equal(await new UpstreamHealth(undefined).recheck(), true, 'no address (builtin): reachable');
});

t.test('upstreamAddress and canConnect', async (t) => {
  t.equal(upstreamAddress('builtin', 2000), undefined, 'builtin: none');
  t.strictSame(upstreamAddress('http://10.0.0.1/v1', 2000), { host: '10.0.0.1', port: 80, timeoutMs: 1000 });
  t.strictSame(upstreamAddress('https://api.example/v1', 300), { host: 'api.example', port: 443, timeoutMs: 300 });
  t.strictSame(upstreamAddress('http://[::1]:8081/v1', 2000), { host: '::1', port: 8081, timeoutMs: 1000 });
  t.equal(await canConnect({ host: '127.0.0.1', port: await closedPort(), timeoutMs: 1000 }), false, 'refused: false');
});
