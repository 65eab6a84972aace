/**
 * The admin listener (src/ops/admin.ts) on 127.0.0.1:0 with real HTTP requests: each endpoint,
 * readiness flipping, the deprecation report fed by DeprecationRecorder, 404 and 405 in the Error
 * shape, HEAD, and failing callbacks.
 */
import t from 'tap';
import { READY, startAdmin, type Readiness } from '../../src/ops/admin.js';
import { DeprecationRecorder, deprecationReport, mergeUses } from '../../src/ops/deprecations.js';
import { GatewayMetrics } from '../../src/ops/metrics.js';
import { assertError, assertJson, type TapTest } from '../helpers/assert.js';
import { fakeLedger } from '../helpers/ledger.js';
import { parseExposition, value } from '../helpers/prom.js';
import { record } from '../helpers/record.js';
import { request } from '../helpers/servers.js';

const SUNSET = '2030-12-05T00:00:00Z';

async function setup(t: TapTest) {
  let readiness: Readiness = { ready: false, reason: 'starting' };
  let metricsFail = false;
  const metrics = new GatewayMetrics({ defaultMetrics: false });
  const ledger = fakeLedger();
  const errors: string[] = [];
  const admin = await startAdmin({
    host: '127.0.0.1',
    port: 0,
    readiness: () => readiness,
    metrics: async () => {
      if (metricsFail) throw new Error('registry broke');
      return { body: await metrics.registry.metrics(), contentType: metrics.registry.contentType };
    },
    deprecations: async () => deprecationReport(await ledger.report(), [{ operation: 'getPet', sunset: SUNSET }]),
    onError: (_err, path) => void errors.push(path),
  });
  t.teardown(() => admin.close());
  const base = `http://127.0.0.1:${admin.address().port}`;
  return {
    base,
    metrics,
    ledger,
    errors,
    setReadiness: (r: Readiness): void => {
      readiness = r;
    },
    breakMetrics: (): void => {
      metricsFail = true;
    },
  };
}

t.test('healthz and readyz', async (t) => {
  const a = await setup(t);
  const h = await request(`${a.base}/healthz`);
  assertJson(t, h, 200);
  t.same(h.json, { status: 'ok' });
  t.equal(h.headers['cache-control'], 'no-store');

  let r = await request(`${a.base}/readyz`);
  t.equal(r.status, 503, 'starting');
  t.same(r.json, { status: 'not ready', reason: 'starting' });
  a.setReadiness(READY);
  r = await request(`${a.base}/readyz`);
  assertJson(t, r, 200);
  t.same(r.json, { status: 'ready' });
  for (const reason of ['draining', 'circuit breaker open', 'upstream unreachable', 'store down']) {
    a.setReadiness({ ready: false, reason });
    r = await request(`${a.base}/readyz`);
    t.equal(r.status, 503, reason);
    t.same(r.json, { status: 'not ready', reason });
  }
  t.equal((await request(`${a.base}/healthz`)).status, 200, 'alive while not ready');
  r = await request(`${a.base}/readyz?verbose=1`);
  t.equal(r.status, 503, 'a query string is ignored');
});

t.test('metrics: Prometheus text with the content type of the registry', async (t) => {
  const a = await setup(t);
  a.metrics.onEnd(record());
  a.metrics.onEnd(record({ status: 429, errorCode: 'too_many_requests', rejectedBy: 'rate-limit', upstreamStatus: undefined, upstreamMs: undefined }));
  const res = await request(`${a.base}/metrics`);
  t.equal(res.status, 200);
  t.equal(res.headers['content-type'], a.metrics.registry.contentType);
  t.match(res.headers['content-type'], /^text\/plain; version=0\.0\.4/);
  const s = parseExposition(res.body);
  t.equal(value(s, 'http_server_request_duration_seconds_count', { http_request_method: 'GET', http_route: '/v1/pets', http_response_status_code: '200', network_protocol_version: '1.1' }), 1);
  t.equal(value(s, 'petstore_gateway_rejections_total', { policy: 'rate-limit', code: 'too_many_requests' }), 1);

  a.breakMetrics();
  const broken = await request(`${a.base}/metrics`);
  assertError(t, broken, 500, 'internal_error');
  t.same(a.errors, ['/metrics'], 'the failure is told to the operator');
});

t.test('deprecations: who still calls getPet, from the ledger', async (t) => {
  const a = await setup(t);
  let res = await request(`${a.base}/deprecations`);
  assertJson(t, res, 200);
  const empty = res.json as { generatedAt: string; operations: unknown[] };
  t.same(empty.operations, [{ operation: 'getPet', sunset: SUNSET, consumers: [] }], 'the operation is listed before anyone calls it');
  t.match(empty.generatedAt, /^\d{4}-\d{2}-\d{2}T/);

  const recorder = new DeprecationRecorder(a.ledger);
  const at = (iso: string) => Date.parse(iso);
  recorder.onEnd(record({ operation: 'getPet', route: '/v1/pets/{petId}', consumer: 'team-b', startedAt: at('2026-01-02T00:00:00Z') }));
  recorder.onEnd(record({ operation: 'getPet', route: '/v1/pets/{petId}', consumer: 'team-a', startedAt: at('2026-01-01T00:00:00Z') }));
  recorder.onEnd(record({ operation: 'getPet', route: '/v1/pets/{petId}', consumer: 'team-b', startedAt: at('2026-01-05T00:00:00Z'), status: 404 }));
  recorder.onEnd(record({ operation: 'getPet', route: '/v1/pets/{petId}', consumer: undefined, status: 401 }));
  recorder.onEnd(record({ operation: 'listPets', consumer: 'team-c' }));
  res = await request(`${a.base}/deprecations`);
  assertJson(t, res, 200);
  t.same((res.json as { operations: unknown }).operations, [
    {
      operation: 'getPet',
      sunset: SUNSET,
      consumers: [
        { consumer: 'team-b', count: 2, firstSeen: '2026-01-02T00:00:00.000Z', lastSeen: '2026-01-05T00:00:00.000Z' },
        { consumer: 'team-a', count: 1, firstSeen: '2026-01-01T00:00:00.000Z', lastSeen: '2026-01-01T00:00:00.000Z' },
      ],
    },
  ]);
  a.ledger.fail = true;
  assertError(t, await request(`${a.base}/deprecations`), 500, 'internal_error');
});

t.test('only these endpoints: 404 and 405 in the Error shape; HEAD like GET', async (t) => {
  const a = await setup(t);
  for (const path of ['/', '/v1/pets', '/metrics/', '/HEALTHZ', '/healthz/x', '/admin/metrics']) {
    assertError(t, await request(`${a.base}${path}`), 404, 'not_found', { message: /No admin endpoint/ });
  }
  for (const method of ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
    assertError(t, await request(`${a.base}/healthz`, { method, body: method === 'POST' ? '{}' : undefined }), 405, 'method_not_allowed', { headers: { allow: 'GET, HEAD' } });
  }
  const head = await request(`${a.base}/healthz`, { method: 'HEAD' });
  t.equal(head.status, 200);
  t.equal(head.body, '', 'no body');
  t.equal(head.headers['content-length'], '15', 'the length GET would have');
  a.setReadiness({ ready: false, reason: 'draining' });
  t.equal((await request(`${a.base}/readyz`, { method: 'HEAD' })).status, 503);
});

t.test('a readiness check that throws is not ready', async (t) => {
  const admin = await startAdmin({
    port: 0,
    readiness: () => {
      throw new Error('cannot tell');
    },
    metrics: async () => ({ body: '', contentType: 'text/plain' }),
    deprecations: async () => deprecationReport([], []),
  });
  t.teardown(() => admin.close());
  t.equal(admin.address().address, '127.0.0.1', 'loopback by default');
  const res = await request(`http://127.0.0.1:${admin.address().port}/readyz`);
  t.equal(res.status, 503);
  t.same(res.json, { status: 'not ready', reason: 'readiness check failed' });
});

t.test('a port in use is an error at start', async (t) => {
  const first = await startAdmin({ port: 0, readiness: () => READY, metrics: async () => ({ body: '', contentType: 'text/plain' }), deprecations: async () => deprecationReport([], []) });
  t.teardown(() => first.close());
  await t.rejects(startAdmin({ port: first.address().port, readiness: () => READY, metrics: async () => ({ body: '', contentType: 'text/plain' }), deprecations: async () => deprecationReport([], []) }), { code: 'EADDRINUSE' });
});

t.test('mergeUses: counts added, earliest first, latest last', async (t) => {
  const merged = mergeUses([
    [{ operation: 'getPet', consumer: 'a', count: 2, firstSeen: '2026-01-02T00:00:00.000Z', lastSeen: '2026-01-03T00:00:00.000Z' }],
    [
      { operation: 'getPet', consumer: 'a', count: 3, firstSeen: '2026-01-01T00:00:00.000Z', lastSeen: '2026-01-02T12:00:00.000Z' },
      { operation: 'getPet', consumer: 'b', count: 1, firstSeen: '2026-01-04T00:00:00.000Z', lastSeen: '2026-01-04T00:00:00.000Z' },
    ],
    [],
  ]);
  t.same(merged, [
    { operation: 'getPet', consumer: 'a', count: 5, firstSeen: '2026-01-01T00:00:00.000Z', lastSeen: '2026-01-03T00:00:00.000Z' },
    { operation: 'getPet', consumer: 'b', count: 1, firstSeen: '2026-01-04T00:00:00.000Z', lastSeen: '2026-01-04T00:00:00.000Z' },
  ]);
});
