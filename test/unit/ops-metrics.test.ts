/**
 * GatewayMetrics (src/ops/metrics.ts): known records give known values in the exposition, parsed by
 * a Prometheus text-format library; a flood of hostile records creates no series beyond the bounded
 * set; reloads, the breaker gauge and the store error count read through.
 */
import { Counter } from 'prom-client';
import t from 'tap';
import { FAILURE_KINDS } from '../../src/core/upstream.js';
import { GatewayMetrics, KNOWN_METHODS, KNOWN_STATUSES, OTEL_DURATION_BUCKETS, OVERFLOW_EVENTS, type OverflowEvent } from '../../src/ops/metrics.js';
import { find, parseExposition, value } from '../helpers/prom.js';
import { record } from '../helpers/record.js';

const SERVER = 'http_server_request_duration_seconds';
const CLIENT = 'http_client_request_duration_seconds';

t.test('known traffic gives known values', async (t) => {
  let open = false;
  let storeErrors = 0;
  let logDropped = 0;
  const m = new GatewayMetrics({ breakerOpen: () => open, storeErrors: () => storeErrors, logDropped: () => logDropped, defaultMetrics: false });
  m.onEnd(record({ durationMs: 3 })); // 0.003 s: first bucket
  m.onEnd(record({ durationMs: 30 })); // 0.03 s: fourth bucket (0.05)
  m.onEnd(record({ method: 'GET', route: '/v1/pets/{petId}', operation: 'getPet', status: 404, errorCode: 'pet_not_found', upstreamStatus: 404, durationMs: 20000 }));
  m.onEnd(record({ status: 401, errorCode: 'invalid_api_key', rejectedBy: 'auth', upstreamStatus: undefined, upstreamMs: undefined, consumer: undefined }));
  m.onEnd(record({ status: 401, errorCode: 'invalid_api_key', rejectedBy: 'auth', upstreamStatus: undefined, upstreamMs: undefined, consumer: undefined }));
  m.onEnd(record({ status: 504, errorCode: 'upstream_timeout', upstreamStatus: undefined, upstreamMs: 10000, upstreamFailure: 'headers_timeout' }));
  m.onEnd(record({ method: 'GET', route: '/v1/pets/{petId}', operation: 'getPet', consumer: 'team-b' }));
  m.onEnd(record({ method: 'GET', route: '/v1/pets/{petId}', operation: 'getPet', consumer: 'team-b' }));
  m.onEnd(record({ status: 0, upstreamStatus: undefined, upstreamMs: 2, upstreamFailure: undefined })); // the client left
  m.reloaded(true);
  m.reloaded(false);
  m.reloaded(true);
  open = true;
  storeErrors = 7;

  const s = parseExposition(await m.registry.metrics());
  t.equal(s.types.get(SERVER), 'histogram');
  const ok = { http_request_method: 'GET', http_route: '/v1/pets', http_response_status_code: '200' };
  // Server durations also carry the client's protocol (upstream calls do not: that is the gateway's own).
  const okServer = { ...ok, network_protocol_version: '1.1' };
  t.equal(value(s, `${SERVER}_count`, okServer), 2, 'two listPets 200');
  t.equal(value(s, `${SERVER}_sum`, okServer), 0.033, 'seconds, not milliseconds');
  t.equal(value(s, `${SERVER}_bucket`, { ...okServer, le: '0.005' }), 1);
  t.equal(value(s, `${SERVER}_bucket`, { ...okServer, le: '0.05' }), 2);
  t.equal(value(s, `${SERVER}_bucket`, { ...okServer, le: '+Inf' }), 2);
  const buckets = find(s, `${SERVER}_bucket`, okServer).map((b) => b.labels.le);
  t.same(buckets, [...OTEL_DURATION_BUCKETS.map(String), '+Inf'], "OpenTelemetry's buckets");
  const slow = { http_request_method: 'GET', http_route: '/v1/pets/{petId}', http_response_status_code: '404', network_protocol_version: '1.1' };
  t.equal(value(s, `${SERVER}_bucket`, { ...slow, le: '10' }), 0, '20 s is past the last finite bucket');
  t.equal(value(s, `${SERVER}_bucket`, { ...slow, le: '+Inf' }), 1);
  t.equal(value(s, `${SERVER}_count`, { http_request_method: 'GET', http_route: '/v1/pets', error_type: 'aborted', network_protocol_version: '1.1' }), 1, 'no status: error_type aborted');

  t.equal(value(s, `${CLIENT}_count`, ok), 2, 'upstream calls that answered 200');
  t.equal(value(s, `${CLIENT}_count`, { http_request_method: 'GET', http_route: '/v1/pets', error_type: 'headers_timeout' }), 1);
  t.equal(value(s, `${CLIENT}_sum`, { http_request_method: 'GET', http_route: '/v1/pets', error_type: 'headers_timeout' }), 10);
  t.equal(value(s, `${CLIENT}_count`, { http_request_method: 'GET', http_route: '/v1/pets', error_type: '_OTHER' }), 1, 'a call cut short');
  t.equal(find(s, `${CLIENT}_count`).reduce((a, x) => a + x.value, 0), 7, 'no upstream series for requests that never went upstream');

  t.equal(value(s, 'petstore_gateway_rejections_total', { policy: 'auth', code: 'invalid_api_key' }), 2);
  t.equal(find(s, 'petstore_gateway_rejections_total').length, 1, 'only rejections by a policy');
  t.equal(value(s, 'petstore_gateway_deprecated_requests_total', { operation: 'getPet', consumer: 'team-b' }), 2);
  t.equal(value(s, 'petstore_gateway_deprecated_requests_total', { operation: 'getPet', consumer: 'team-a' }), 1);
  t.equal(find(s, 'petstore_gateway_deprecated_requests_total').length, 2, 'listPets is not deprecated');
  t.equal(value(s, 'petstore_gateway_upstream_failures_total', { kind: 'headers_timeout' }), 1);
  for (const k of FAILURE_KINDS.filter((k) => k !== 'headers_timeout')) t.equal(value(s, 'petstore_gateway_upstream_failures_total', { kind: k }), 0, `${k} exported as 0`);
  t.equal(value(s, 'petstore_gateway_circuit_breaker_open'), 1);
  t.equal(value(s, 'petstore_gateway_policy_reloads_total', { result: 'success' }), 2);
  t.equal(value(s, 'petstore_gateway_policy_reloads_total', { result: 'failure' }), 1);
  t.equal(value(s, 'petstore_gateway_store_errors_total'), 7);
  t.equal(value(s, 'petstore_gateway_log_dropped_lines_total'), 0, 'exported as 0 before any drop');

  open = false;
  storeErrors = 9;
  logDropped = 64;
  const s2 = parseExposition(await m.registry.metrics());
  t.equal(value(s2, 'petstore_gateway_circuit_breaker_open'), 0, 'the gauge follows the breaker');
  t.equal(value(s2, 'petstore_gateway_store_errors_total'), 9, 'the counter follows the store');
  t.equal(value(s2, 'petstore_gateway_log_dropped_lines_total'), 64, 'the counter follows the log destination');
});

t.test('default process and Node metrics, in its own registry only', async (t) => {
  const a = new GatewayMetrics();
  const b = new GatewayMetrics();
  a.onEnd(record());
  const sa = parseExposition(await a.registry.metrics());
  const sb = parseExposition(await b.registry.metrics());
  t.ok(find(sa, 'process_cpu_user_seconds_total').length === 1, 'process metrics');
  t.ok(find(sa, 'nodejs_eventloop_lag_seconds').length === 1, 'Node metrics');
  t.equal(find(sb, `${SERVER}_count`).length, 0, "one gateway's requests are not in another's registry");
});

t.test('a flood of hostile records creates no series beyond the bounded set', async (t) => {
  const m = new GatewayMetrics({ defaultMetrics: false, maxLabelValues: 50 });
  const statuses = [200, 201, 400, 401, 404, 405, 410, 429, 502, 503, 504];
  // A fixed seed: the same flood every run (mulberry32).
  let seed = 12345;
  const rnd = (n: number): number => {
    seed = (seed + 0x6d2b79f5) | 0;
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return Math.floor((((x ^ (x >>> 14)) >>> 0) / 4294967296) * n);
  };
  const junk = (): string => `${'X'.repeat(rnd(5))}${rnd(1e9).toString(36)}`;
  for (let i = 0; i < 10_000; i++) {
    const known = rnd(2) === 0;
    m.onEnd(
      record({
        method: known ? (KNOWN_METHODS[rnd(KNOWN_METHODS.length)] as string) : junk(),
        route: (['/v1/pets', '/v1/pets/{petId}', 'unknown', `/raw/${junk()}`] as const)[rnd(4)] as '/v1/pets',
        operation: rnd(3) === 0 ? 'getPet' : undefined,
        status: rnd(10) === 0 ? 1000 + rnd(1000) : (statuses[rnd(statuses.length)] as number),
        upstreamStatus: rnd(2) === 0 ? undefined : (statuses[rnd(statuses.length)] as number),
        rejectedBy: rnd(2) === 0 ? 'auth' : `policy-${junk()}`,
        errorCode: `code-${junk()}`,
        consumer: `key-${junk()}`,
        protocol: rnd(4) === 0 ? junk() : (['1.1', '2.0', '1.0'][rnd(3)] as string),
      }),
    );
  }
  const s = parseExposition(await m.registry.metrics());
  const methods = new Set(find(s, `${SERVER}_count`).map((x) => x.labels.http_request_method));
  const routes = new Set(find(s, `${SERVER}_count`).map((x) => x.labels.http_route));
  t.ok([...methods].every((x) => x === '_OTHER' || KNOWN_METHODS.includes(x as string)), `methods fold: ${[...methods].join(' ')}`);
  t.ok(methods.has('_OTHER'));
  t.same([...routes].sort(), ['/v1/pets', '/v1/pets/{petId}', 'unknown'], 'a raw path never becomes a route');
  const serverSeries = find(s, `${SERVER}_count`).length;
  const protocols = new Set(find(s, `${SERVER}_count`).map((x) => x.labels.network_protocol_version));
  t.same([...protocols].sort(), ['1.0', '1.1', '2', '_OTHER'], 'protocols fold: any other version is _OTHER');
  t.ok(serverSeries <= (KNOWN_METHODS.length + 1) * 3 * (statuses.length + 1) * 4, `server series bounded: ${serverSeries}`);
  t.ok(find(s, `${SERVER}_count`).every((x) => x.labels.http_response_status_code === undefined || /^[1-5]xx$/.test(String(x.labels.http_response_status_code)) || Number(x.labels.http_response_status_code) <= 599), 'no status past 599');
  const consumers = find(s, 'petstore_gateway_deprecated_requests_total');
  t.ok(consumers.length <= 51, `consumer series capped: ${consumers.length}`);
  t.ok(consumers.some((x) => x.labels.consumer === '_OTHER'), 'past the cap: _OTHER');
  const rejections = find(s, 'petstore_gateway_rejections_total');
  t.ok(rejections.length <= 51 * 51, `rejection series capped: ${rejections.length}`);
  t.equal(find(s, `${SERVER}_count`).reduce((a, x) => a + x.value, 0), 10_000, 'every request counted');
});

t.test('a record that would break a metric does not throw', async (t) => {
  const m = new GatewayMetrics({ defaultMetrics: false });
  t.doesNotThrow(() => m.onEnd(record({ durationMs: Number.NaN, upstreamMs: Number.POSITIVE_INFINITY })));
  t.doesNotThrow(() => m.onEnd(record({ durationMs: -1, upstreamMs: 1 })));
  const s = parseExposition(await m.registry.metrics());
  const ok = { http_request_method: 'GET', http_route: '/v1/pets', http_response_status_code: '200' };
  const okServer = { ...ok, network_protocol_version: '1.1' };
  t.equal(value(s, `${SERVER}_count`, okServer), 0, 'NaN and negative durations are not observations');
  t.equal(value(s, `${CLIENT}_count`, ok), 1, 'only the finite upstream duration');
  t.equal(value(s, `${CLIENT}_sum`, ok), 0.001);
});

t.test('registry.resetMetrics() zeroes every series', async (t) => {
  const m = new GatewayMetrics({ defaultMetrics: false });
  m.onEnd(record({ route: '/v1/pets/{petId}', operation: 'getPet', upstreamFailure: 'reset' }));
  m.reloaded(true);
  m.registry.resetMetrics();
  const s = parseExposition(await m.registry.metrics());
  t.equal(value(s, `${SERVER}_count`, { http_request_method: 'GET', http_route: '/v1/pets/{petId}', http_response_status_code: '200', network_protocol_version: '1.1' }), 0);
  t.equal(value(s, 'petstore_gateway_deprecated_requests_total', { operation: 'getPet', consumer: 'team-a' }), 0);
  t.equal(value(s, 'petstore_gateway_upstream_failures_total', { kind: 'reset' }), 0);
  t.equal(value(s, 'petstore_gateway_policy_reloads_total', { result: 'success' }), 0);
});

t.test('past the label cap, values fold into _OTHER and every record is still counted', async (t) => {
  // Regression: once `policy` values reached the cap, folding into _OTHER recursed for ever (a
  // RangeError swallowed by onEnd), losing that rejection and the deprecated call after it.
  const m = new GatewayMetrics({ defaultMetrics: false, maxLabelValues: 2 });
  for (const p of ['a', 'b', 'c', 'd']) m.onEnd(record({ rejectedBy: `policy-${p}`, errorCode: 'x', operation: 'getPet', consumer: `key-${p}` }));
  const s = parseExposition(await m.registry.metrics());
  t.equal(value(s, 'petstore_gateway_rejections_total', { policy: '_OTHER', code: 'x' }), 2, 'policies c and d fold into _OTHER');
  t.equal(find(s, 'petstore_gateway_rejections_total').reduce((n, x) => n + x.value, 0), 4, 'every rejection counted');
  t.equal(value(s, 'petstore_gateway_deprecated_requests_total', { operation: 'getPet', consumer: '_OTHER' }), 2, 'consumers c and d fold into _OTHER');
  t.equal(find(s, 'petstore_gateway_deprecated_requests_total').reduce((n, x) => n + x.value, 0), 4, 'every deprecated call counted');
});

t.test('statuses outside the known set fold into their class', async (t) => {
  const m = new GatewayMetrics({ defaultMetrics: false });
  for (let status = 100; status <= 599; status++) m.onEnd(record({ status, upstreamStatus: status }));
  const s = parseExposition(await m.registry.metrics());
  const labels = new Set(find(s, `${CLIENT}_count`).map((x) => x.labels.http_response_status_code));
  for (const c of ['1xx', '2xx', '3xx', '4xx', '5xx']) t.ok(labels.has(c), c);
  t.ok(labels.has('404') && labels.has('502') && labels.has('200'), 'known statuses keep their value');
  t.notOk(labels.has('418') || labels.has('299') || labels.has('599'), 'unknown ones do not');
  t.ok(labels.size <= KNOWN_STATUSES.size + 5, `${labels.size} values`);
  t.equal(find(s, `${CLIENT}_count`).reduce((a, x) => a + x.value, 0), 500, 'every call counted');
});

t.test("every request metric is in its own registry: counters prom-client Counters, durations histograms of prom-client's shape", async (t) => {
  const m = new GatewayMetrics({ defaultMetrics: false });
  // The durations are registered metric objects, not Histogram instances (src/ops/series.ts);
  // test/unit/ops-series.test.ts holds their exposition to prom-client's Histogram's.
  const json = await m.registry.getMetricsAsJSON();
  for (const name of [SERVER, CLIENT]) {
    t.ok(m.registry.getSingleMetric(name) !== undefined, `${name} registered`);
    const metric = json.find((x) => x.name === name);
    t.equal(metric?.type, 'histogram', name);
    t.equal(metric?.aggregator, 'sum', `${name}: summed over workers`);
  }
  for (const name of ['petstore_gateway_rejections_total', 'petstore_gateway_deprecated_requests_total', 'petstore_gateway_upstream_failures_total', 'petstore_gateway_policy_reloads_total']) {
    t.ok(m.registry.getSingleMetric(name) instanceof Counter, name);
  }
});

t.test('counters counted between scrapes: each scrape shows the total, a reset starts again at 0', async (t) => {
  const m = new GatewayMetrics({ defaultMetrics: false });
  const rejected = record({ rejectedBy: 'auth', errorCode: 'invalid_api_key', upstreamStatus: undefined, upstreamMs: undefined });
  const count = async (): Promise<number | undefined> => value(parseExposition(await m.registry.metrics()), 'petstore_gateway_rejections_total', { policy: 'auth', code: 'invalid_api_key' });
  m.onEnd(rejected);
  t.equal(await count(), 1);
  t.equal(await count(), 1, 'a second scrape adds nothing');
  m.onEnd(rejected);
  m.onEnd(rejected);
  t.equal(await count(), 3);
  m.registry.resetMetrics();
  t.equal(await count(), 0, 'kept at 0 after a reset');
  m.onEnd(rejected);
  t.equal(await count(), 1, 'counts again from 0');
  const json = await m.registry.getMetricsAsJSON();
  const rejections = json.find((x) => x.name === 'petstore_gateway_rejections_total');
  t.same(rejections?.values.map((v) => v.value), [1], 'getMetricsAsJSON (the cluster aggregation reads it) sees the same');
});

t.test('petstore_gateway_overflows_total: one series per event from the start, read at each scrape, no address or key label', async (t) => {
  const counts: Partial<Record<OverflowEvent, number>> = {};
  const m = new GatewayMetrics({ defaultMetrics: false, overflowCounts: () => counts });
  const before = find(parseExposition(await m.registry.metrics()), 'petstore_gateway_overflows_total');
  t.strictSame(before.map((s) => s.labels.event).sort(), [...OVERFLOW_EVENTS].sort(), 'every event exported before the first overflow');
  t.ok(before.every((s) => s.value === 0 && Object.keys(s.labels).join() === 'event'), 'at 0, with the event as the only label');
  Object.assign(counts, { pipeline_closed: 8, overflow_refused: 4000, consumer_queued: 3, consumer_expired: 1 });
  const exp = parseExposition(await m.registry.metrics());
  for (const [event, n] of Object.entries({ ...counts, address_share_refused: 0 })) t.equal(value(exp, 'petstore_gateway_overflows_total', { event }), n, event);
});
