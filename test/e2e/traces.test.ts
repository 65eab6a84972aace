/**
 * Traces end to end (docs/operations.md, "Traces"), on every engine: a gateway on 127.0.0.1 with
 * `telemetry.traces` pointed at a real OTLP/HTTP receiver (test/helpers/otlp-receiver.ts, which
 * decodes with the OpenTelemetry protobuf definitions; protoc --decode_raw as a second opinion),
 * in front of a stub upstream that records the `traceparent` it receives.
 */
import type { AddressInfo } from 'node:net';
import tap from 'tap';
import { h2Request, makeTestPki } from '../helpers/certs.js';
import { decodeRaw } from '../helpers/otlp-proto.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js';
import { bearer, forEachEngine, request, sendJson, startGateway, startStubUpstream, type TeardownHost } from '../helpers/servers.js';

const PET = '{"id":7,"name":"Rex","categoryId":9223372036854775807,"status":"available"}';
const PETS = `[${PET}]`;
const CLIENT_TRACE = '0af7651916cd43dd8448eb211c80319c';
const CLIENT_SPAN = 'b7ad6b7169203331';

/** A pet store upstream: /pets, /pets/7, a contract breaker at /pets/66, a 500 at /pets/500, a reset then an answer at /pets/8. */
async function petStore(t: TeardownHost) {
  let resets = 0;
  return startStubUpstream(t, (req, res, raw) => {
    const path = req.url.split('?')[0];
    if (path === '/v1/pets') return sendJson(res, 200, PETS);
    if (path === '/v1/pets/66') return sendJson(res, 200, '{"id":"not a number","name":"Bad"}');
    if (path === '/v1/pets/500') return sendJson(res, 500, '{"error":"boom"}');
    if (path === '/v1/pets/8' && resets++ === 0) return raw.socket.destroy();
    return sendJson(res, 200, PET);
  });
}

async function receiver(t: TeardownHost): Promise<OtlpReceiver> {
  const r = await startOtlpReceiver();
  t.teardown(() => r.close());
  return r;
}

function tracesPolicy(upstream: string, collector: OtlpReceiver, traces: Record<string, unknown> = {}, policies: Record<string, unknown> = {}, server: Record<string, unknown> = {}, upstreamOptions: Record<string, unknown> = {}) {
  return { upstream: { url: `${upstream}/v1`, ...upstreamOptions }, server, policies, telemetry: { traces: { endpoint: collector.url.href, batch: { delayMs: 20 }, ...traces } } };
}

/** The spans of one trace, SERVER first, by the request id the gateway put on the SERVER span. */
function traceOf(spans: ReceivedSpan[], requestId: string): { server: ReceivedSpan | undefined; clients: ReceivedSpan[] } {
  const server = spans.find((s) => s.span.kind === 2 && s.attributes['gateway.request.id'] === requestId);
  const clients = server === undefined ? [] : spans.filter((s) => s.span.kind === 3 && s.span.parentSpanId === server.span.spanId);
  return { server, clients };
}

function eventNames(s: ReceivedSpan | undefined): string[] {
  return ((s?.span.events as Array<{ name: string }> | undefined) ?? []).map((e) => e.name);
}

forEachEngine(tap, async (t, engine) => {
  t.test('a forwarded request: a SERVER span, a CLIENT span, and the upstream gets the CLIENT span as its parent', async (t) => {
    const collector = await receiver(t);
    const up = await petStore(t);
    const gw = await startGateway(t, tracesPolicy(up.origin, collector), { engine });
    const res = await request(`${gw.url}/v1/pets?limit=5`, { headers: { ...bearer(gw.key), 'x-request-id': 'trace-1', traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`, tracestate: 'vendor=abc' } });
    t.equal(res.status, 200);
    const spans = await collector.waitForSpans(2, 10_000);
    const { server, clients } = traceOf(spans, 'trace-1');
    t.ok(server, 'the SERVER span');
    t.equal(clients.length, 1, 'one CLIENT span');
    const client = clients[0]!;
    t.equal(server?.span.traceId, CLIENT_TRACE, "the client's trace continues");
    t.equal(server?.span.parentSpanId, CLIENT_SPAN, "the SERVER span's parent is the client's span");
    t.equal(server?.span.name, 'GET /v1/pets');
    t.equal(server?.span.traceState, 'vendor=abc');
    t.match(server?.attributes, {
      'http.request.method': 'GET',
      'http.route': '/v1/pets',
      'url.path': '/v1/pets',
      'url.scheme': 'http',
      'http.response.status_code': 200,
      'network.protocol.version': '1.1',
      'client.address': '127.0.0.1',
      'gateway.operation': 'listPets',
      'gateway.sampling': 'head',
    });
    t.type(server?.attributes['gateway.consumer.id'], 'string');
    t.equal(client.span.name, 'GET');
    t.match(client.attributes, { 'http.request.method': 'GET', 'server.address': '127.0.0.1', 'server.port': up.port, 'http.response.status_code': 200, 'url.full': `${up.origin}/v1/pets?limit=5` });
    // The upstream's traceparent names the CLIENT span, with the head decision (sampled).
    const received = up.requests.at(-1)?.headers.traceparent;
    t.equal(received, `00-${CLIENT_TRACE}-${client.span.spanId}-01`, 'an untrusted client: its flag ignored, the ratio (1.0) decided');
    t.notMatch(JSON.stringify(spans), new RegExp(gw.key), 'no key in any span');
    t.equal(spans[0]?.resource['service.name'], 'petstore-gateway');
    // The second decoder agrees: the raw protobuf holds both span names.
    const raw = decodeRaw(collector.requests.at(-1)!.raw);
    t.match(raw, /"GET \/v1\/pets"/);
    t.match(raw, /"GET"/);
  });

  t.test('a cache hit has its SERVER span and no CLIENT span; a denial says why', async (t) => {
    const collector = await receiver(t);
    const up = await petStore(t);
    const gw = await startGateway(t, tracesPolicy(up.origin, collector, {}, { cache: { ttlSeconds: { getPet: 60 } } }), { engine });
    await request(`${gw.url}/v1/pets/7`, { headers: { ...bearer(gw.key), 'x-request-id': 'miss' } });
    const hit = await request(`${gw.url}/v1/pets/7`, { headers: { ...bearer(gw.key), 'x-request-id': 'hit' } });
    t.match(hit.headers['cache-status'], /hit/);
    const denied = await request(`${gw.url}/v1/pets/7`, { headers: { 'x-request-id': 'denied' } });
    t.equal(denied.status, 401);
    const spans = await collector.waitForSpans(4, 10_000);
    const miss = traceOf(spans, 'miss');
    t.equal(miss.clients.length, 1, 'the miss went upstream');
    t.ok(eventNames(miss.server).includes('gateway.deprecated'), 'getPet is deprecated: an event');
    const h = traceOf(spans, 'hit');
    t.ok(h.server, 'the hit has a SERVER span');
    t.equal(h.clients.length, 0, 'and no CLIENT span');
    t.ok(eventNames(h.server).includes('gateway.cache'), 'a cache event');
    const d = traceOf(spans, 'denied');
    t.equal(d.server?.attributes['http.response.status_code'], 401);
    t.equal(d.server?.attributes['gateway.error.code'], 'missing_api_key');
    t.equal(d.clients.length, 0);
    const ev = (d.server?.span.events as Array<{ name: string; attributes: Array<{ key: string; value: { stringValue?: string } }> }>).find((e) => e.name === 'gateway.denied');
    t.same(Object.fromEntries((ev?.attributes ?? []).map((a) => [a.key, a.value.stringValue])), { 'gateway.policy': 'auth', 'gateway.error.code': 'missing_api_key' });
  });

  t.test('a retried read is two CLIENT spans; a failed upstream is an error on both spans', async (t) => {
    const collector = await receiver(t);
    const up = await petStore(t);
    const gw = await startGateway(t, tracesPolicy(up.origin, collector, {}, {}, {}, { retryIdempotent: true }), { engine });
    const retried = await request(`${gw.url}/v1/pets/8`, { headers: { ...bearer(gw.key), 'x-request-id': 'retried' } });
    t.equal(retried.status, 200);
    const failed = await request(`${gw.url}/v1/pets/500`, { headers: { ...bearer(gw.key), 'x-request-id': 'failed' } });
    t.ok(failed.status >= 500);
    const spans = await collector.waitForSpans(5, 10_000);
    const r = traceOf(spans, 'retried');
    t.equal(r.clients.length, 2, 'two attempts');
    const [first, second] = [...r.clients].sort((a, b) => Number(BigInt(a.span.startTimeUnixNano as string) - BigInt(b.span.startTimeUnixNano as string)));
    t.equal(first?.attributes['error.type'], 'reset');
    t.equal((first?.span.status as { code?: number } | undefined)?.code, 2);
    t.equal(second?.attributes['http.request.resend_count'], 1);
    t.equal(second?.attributes['http.response.status_code'], 200);
    const received = up.requests.filter((q) => q.url.startsWith('/v1/pets/8')).map((q) => q.headers.traceparent);
    t.equal(received.length, 2);
    t.equal(received[1], `00-${r.server?.span.traceId}-${second?.span.spanId}-01`, "the retry's own span is its parent");
    const f = traceOf(spans, 'failed');
    t.equal((f.server?.span.status as { code?: number } | undefined)?.code, 2, 'the SERVER span is an error');
    t.equal(f.server?.attributes['error.type'], f.server?.attributes['gateway.error.code']);
    t.equal(f.clients[0]?.attributes['error.type'], '500');
  });

  t.test('at ratio 0 only the keep classes are exported: error, contract_violation, deprecated, rate_limited', async (t) => {
    const collector = await receiver(t);
    const up = await petStore(t);
    // `now`: a rate-limit store of this gateway's own (the process-wide one counts every engine's requests).
    const gw = await startGateway(t, tracesPolicy(up.origin, collector, { sampleRatio: 0 }, { 'rate-limit': { limit: 3, windowSeconds: 3600 } }), { engine, now: () => Date.now() });
    const ask = (path: string, id: string) => request(`${gw.url}${path}`, { headers: { ...bearer(gw.key), 'x-request-id': id } });
    t.equal((await ask('/v1/pets', 'plain')).status, 200);
    t.equal((await ask('/v1/pets/66', 'violation')).status, 502);
    t.ok((await ask('/v1/pets/500', 'error')).status >= 500);
    t.equal((await ask('/v1/pets', 'limited')).status, 429);
    // Three kept traces: three SERVER spans and the two CLIENT spans of the two getPet calls.
    await collector.waitForSpans(5, 10_000);
    // Let a late batch arrive, if one were coming.
    await new Promise((r) => setTimeout(r, 200));
    const spans = collector.spans();
    const servers = spans.filter((s) => s.span.kind === 2);
    const ids = servers.map((s) => s.attributes['gateway.request.id']).sort();
    t.same(ids, ['error', 'limited', 'violation'], 'the plain 200 is not kept');
    for (const s of servers) t.equal(s.attributes['gateway.sampling'], 'tail');
    t.ok(eventNames(traceOf(spans, 'violation').server).includes('gateway.contract_violation'));
    t.ok(eventNames(traceOf(spans, 'limited').server).includes('gateway.rate_limited'));
    t.ok(eventNames(traceOf(spans, 'violation').server).includes('gateway.deprecated'), 'getPet: deprecated too');
    // What the upstream was told is the head decision: not sampled.
    for (const q of up.requests) t.match(q.headers.traceparent, /-00$/);
  });

  t.test('deprecated alone is kept at ratio 0 when listed', async (t) => {
    const collector = await receiver(t);
    const up = await petStore(t);
    const gw = await startGateway(t, tracesPolicy(up.origin, collector, { sampleRatio: 0, keep: ['deprecated'] }), { engine });
    await request(`${gw.url}/v1/pets`, { headers: { ...bearer(gw.key), 'x-request-id': 'list' } });
    await request(`${gw.url}/v1/pets/7`, { headers: { ...bearer(gw.key), 'x-request-id': 'get' } });
    await request(`${gw.url}/v1/pets/500`, { headers: { ...bearer(gw.key), 'x-request-id': 'err' } });
    await collector.waitForSpans(2, 10_000);
    await new Promise((r) => setTimeout(r, 200));
    t.same(collector.spans().filter((s) => s.span.kind === 2).map((s) => s.attributes['gateway.request.id']), ['get', 'err'], 'only the getPet calls (the 500 is one): listPets at ratio 0 is not kept');
  });

  t.test('HTTP/2 over TLS: the same spans, protocol version 2', async (t) => {
    const pki = makeTestPki(t);
    const collector = await receiver(t);
    const up = await petStore(t);
    const gw = await startGateway(t, tracesPolicy(up.origin, collector, {}, {}, { tls: { certFile: pki.server.cert, keyFile: pki.server.key } }), { engine });
    const origin = `https://127.0.0.1:${(gw.server.address() as AddressInfo).port}`;
    const res = await h2Request(origin, '/v1/pets', { ca: pki.read(pki.ca), headers: { ...bearer(gw.key), 'x-request-id': 'h2' } });
    t.equal(res.status, 200);
    const spans = await collector.waitForSpans(2, 10_000);
    const { server, clients } = traceOf(spans, 'h2');
    t.equal(server?.attributes['network.protocol.version'], '2');
    t.equal(server?.attributes['url.scheme'], 'https');
    t.equal(clients.length, 1);
    t.equal(String(up.requests.at(-1)?.headers.traceparent).split('-')[2], clients[0]?.span.spanId);
  });
});

// parity: the lane reaches next with undici whatever the engine (src/gateway.ts openLane); the engines' part is covered above
tap.test('the migration lane: a request routed to next is a CLIENT span at next; a fallback is an event and a legacy attempt', async (t) => {
  const collector = await receiver(t);
  const legacy = await petStore(t);
  let nextFails = false;
  const next = await startStubUpstream(t, (req, res) => (nextFails ? sendJson(res, 500, '{"error":"next is down"}') : sendJson(res, 200, req.url.startsWith('/v1/pets/') ? PET : PETS)));
  const policy = { ...tracesPolicy(legacy.origin, collector), migration: { next: { url: `${next.origin}/v1` }, operations: { listPets: { mode: 'next' }, getPet: { mode: 'next' } } } };
  const gw = await startGateway(t, policy);
  t.equal((await request(`${gw.url}/v1/pets`, { headers: { ...bearer(gw.key), 'x-request-id': 'to-next' } })).status, 200);
  nextFails = true;
  t.equal((await request(`${gw.url}/v1/pets/7`, { headers: { ...bearer(gw.key), 'x-request-id': 'fell-back' } })).status, 200);
  const spans = await collector.waitForSpans(5, 10_000);
  const routed = traceOf(spans, 'to-next');
  t.equal(routed.clients.length, 1);
  t.equal(routed.clients[0]?.attributes['server.port'], next.port, "next's address");
  t.equal(String(next.requests[0]?.headers.traceparent).split('-')[2], routed.clients[0]?.span.spanId, 'next got the CLIENT span as its parent');
  const fell = traceOf(spans, 'fell-back');
  t.same(fell.clients.map((c) => c.attributes['server.port']).sort(), [legacy.port, next.port].sort(), 'an attempt at next, then one at legacy');
  t.ok(eventNames(fell.server).includes('gateway.fallback'), 'the fallback is an event');
  t.equal(legacy.requests.length, 1, 'legacy answered the fallback only');
});

// parity: the head decision is the tracer's, made before any transport; the engines' part is covered above
tap.test('the sampling ratio: within binomial bounds over 400 requests at 0.25', async (t) => {
  const collector = await receiver(t);
  const up = await petStore(t);
  const gw = await startGateway(t, tracesPolicy(up.origin, collector, { sampleRatio: 0.25, keep: [] }));
  const n = 400;
  for (let i = 0; i < n; i++) {
    const res = await request(`${gw.url}/v1/pets`, { headers: bearer(gw.key) });
    t.equal(res.status, 200);
  }
  await new Promise((r) => setTimeout(r, 300));
  const sampled = collector.spans().filter((s) => s.span.kind === 2).length;
  const sd = Math.sqrt(n * 0.25 * 0.75);
  t.ok(Math.abs(sampled - n * 0.25) <= 5 * sd, `${sampled} of ${n} sampled (expected ${n * 0.25} +- ${Math.round(5 * sd)})`);
  // Every sampled request's upstream was told so; every other was told not.
  const sampledTraces = new Set(collector.spans().filter((s) => s.span.kind === 3).map((s) => s.span.spanId));
  for (const q of up.requests) {
    const [, , parent, flags] = String(q.headers.traceparent).split('-');
    t.equal(flags === '01', sampledTraces.has(parent!), 'the flag the upstream got matches what was exported');
  }
});
