/**
 * The tracer on its own (src/telemetry/tracer.ts): the head decision (the ratio on the trace id,
 * the parent's flag from a trusted proxy only), the decision at the end (keep classes whatever the
 * head said), and what the spans say. The end-to-end tests (test/e2e/traces.test.ts) run it on
 * real servers with a real collector.
 */
import { test } from 'tap';
import type { RequestHead } from '../../src/core/policy.js';
import { TRACE_EVENTS, type KeepClass } from '../../src/core/trace.js';
import { SPAN_FLAGS, SPAN_KIND, STATUS_CODE, type SpanData } from '../../src/telemetry/span.js';
import { Tracer, type Sampler } from '../../src/telemetry/tracer.js';
import { record } from '../helpers/record.js';

function tracer(sampler: Sampler, keep: readonly KeepClass[] = [], trustedProxies: readonly string[] = []): { tracer: Tracer; spans: SpanData[] } {
  const spans: SpanData[] = [];
  return { tracer: new Tracer({ sampler, keep, trustedProxies, upstreamOrigin: 'http://10.0.0.7:8080', sink: (s) => spans.push(s) }), spans };
}

function head(headers: Record<string, string> = {}, remoteAddress = '192.0.2.10'): RequestHead {
  return { method: 'GET', target: '/v1/pets?limit=5', headers, remoteAddress, httpVersion: '1.1' } as RequestHead;
}

const PARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
const PARENT_UNSAMPLED = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00';

/** Whether `k` of `n` is within 5 standard deviations of n*p (a bound a correct sampler fails with odds below 1e-6). */
function withinBinomial(k: number, n: number, p: number): boolean {
  const sd = Math.sqrt(n * p * (1 - p));
  return Math.abs(k - n * p) <= 5 * sd;
}

void test('the ratio samples new traces within binomial bounds', (t) => {
  for (const ratio of [0, 0.01, 0.1, 0.5, 0.9, 1]) {
    const { tracer: tr } = tracer({ parentBased: true, ratio });
    const n = 20_000;
    let k = 0;
    for (let i = 0; i < n; i++) if (tr.start(head(), false).sampled) k++;
    if (ratio === 0) t.equal(k, 0, 'ratio 0 samples none');
    else if (ratio === 1) t.equal(k, n, 'ratio 1 samples all');
    else t.ok(withinBinomial(k, n, ratio), `ratio ${ratio}: ${k} of ${n}`);
  }
  t.end();
});

void test('the decision depends on the trace id only: the same trace is decided the same at every ratio step (a trusted parent)', (t) => {
  const { tracer: low } = tracer({ parentBased: false, ratio: 0.2 });
  const { tracer: high } = tracer({ parentBased: false, ratio: 0.6 });
  for (let i = 0; i < 2000; i++) {
    const id = low.start(head(), false).traceId;
    const tp = `00-${id}-b7ad6b7169203331-00`;
    // What 0.2 samples, 0.6 samples too (the id's last 56 bits under a threshold).
    // From a trusted peer only: an untrusted client's trace id is not what its ratio is drawn on.
    if (low.start(head({ traceparent: tp }), true).sampled) t.ok(high.start(head({ traceparent: tp }), true).sampled);
  }
  t.end();
});

void test("the parent's sampled flag counts from a trusted proxy only", (t) => {
  const { tracer: tr } = tracer({ parentBased: true, ratio: 0 });
  const trusted = tr.start(head({ traceparent: PARENT }), true);
  t.equal(trusted.sampled, true, 'a trusted parent that sampled: sampled at ratio 0');
  t.equal(trusted.traceId, '0af7651916cd43dd8448eb211c80319c');
  t.equal(trusted.parentSpanId, 'b7ad6b7169203331');
  t.not(trusted.spanId, 'b7ad6b7169203331');
  t.equal(tr.start(head({ traceparent: PARENT }), false).sampled, false, 'from anyone else the ratio decides (0)');
  const { tracer: all } = tracer({ parentBased: true, ratio: 1 });
  t.equal(all.start(head({ traceparent: PARENT_UNSAMPLED }), true).sampled, false, 'a trusted parent that did not sample: not sampled at ratio 1');
  const { tracer: notParent } = tracer({ parentBased: false, ratio: 1 });
  t.equal(notParent.start(head({ traceparent: PARENT_UNSAMPLED }), true).sampled, true, 'traceidratio ignores the parent');
  t.end();
});

void test('every keep class is kept at ratio 0, and only the classes listed', (t) => {
  const cases: Array<[KeepClass, (tr: Tracer) => ReturnType<typeof record>]> = [
    ['error', (tr) => record({ status: 502, errorCode: 'bad_gateway', trace: tr.start(head(), false) })],
    ['rate_limited', (tr) => { const trace = tr.start(head(), false); trace.event(TRACE_EVENTS.rateLimited, { 'gateway.limit': 'rate' }); return record({ status: 429, trace }); }],
    ['deprecated', (tr) => { const trace = tr.start(head(), false); trace.event(TRACE_EVENTS.deprecated); return record({ status: 200, trace }); }],
    ['contract_violation', (tr) => { const trace = tr.start(head(), false); trace.event(TRACE_EVENTS.contractViolation); return record({ status: 502, trace }); }],
  ];
  for (const [cls, make] of cases) {
    const kept = tracer({ parentBased: true, ratio: 0 }, [cls]);
    kept.tracer.onEnd(make(kept.tracer));
    t.equal(kept.spans.length, 1, `${cls} kept`);
    t.equal(kept.spans[0]?.attributes['gateway.sampling'], 'tail');
    t.equal((kept.spans[0]!.flags & SPAN_FLAGS.sampled), 0, 'the flags say what the upstream was told: not sampled');
    const others = tracer({ parentBased: true, ratio: 0 }, (['error', 'rate_limited', 'deprecated', 'contract_violation'] as KeepClass[]).filter((c) => c !== cls && !(cls === 'contract_violation' && c === 'error')));
    others.tracer.onEnd(make(others.tracer));
    t.equal(others.spans.length, 0, `${cls} not kept when not listed`);
  }
  const plain = tracer({ parentBased: true, ratio: 0 }, ['error', 'rate_limited', 'deprecated', 'contract_violation']);
  plain.tracer.onEnd(record({ status: 200, trace: plain.tracer.start(head(), false) }));
  plain.tracer.onEnd(record({ status: 404, errorCode: 'not_found', trace: plain.tracer.start(head(), false) }));
  t.equal(plain.spans.length, 0, 'a 200 and a 404 are not kept at ratio 0');
  t.end();
});

void test('the SERVER span follows the HTTP conventions and says nothing secret', (t) => {
  const { tracer: tr, spans } = tracer({ parentBased: true, ratio: 1 }, [], ['127.0.0.1']);
  const trace = tr.start(head({ traceparent: PARENT, authorization: 'Bearer sk-should-never-appear', 'x-forwarded-for': '198.51.100.4' }, '127.0.0.1'), true);
  trace.event(TRACE_EVENTS.cache, { 'gateway.cache.status': 'hit' });
  tr.onEnd(record({ status: 200, consumer: 'team-a', trace }));
  const [server] = spans;
  t.equal(spans.length, 1, 'no attempt: no CLIENT span');
  t.equal(server?.kind, SPAN_KIND.server);
  t.equal(server?.name, 'GET /v1/pets');
  t.same(server?.attributes, {
    'http.request.method': 'GET',
    'http.route': '/v1/pets',
    'url.path': '/v1/pets',
    'url.scheme': 'http',
    'http.response.status_code': 200,
    'network.protocol.version': '1.1',
    'client.address': '198.51.100.4',
    'gateway.request.id': 'req-1',
    'gateway.operation': 'listPets',
    'gateway.consumer.id': 'team-a',
    'gateway.sampling': 'head',
  });
  t.equal(server?.parentSpanId, 'b7ad6b7169203331');
  t.equal(server?.flags, SPAN_FLAGS.sampled | SPAN_FLAGS.hasIsRemote | SPAN_FLAGS.isRemote);
  t.equal(server?.status, STATUS_CODE.unset);
  t.same(server?.events.map((e) => e.name), ['gateway.cache']);
  t.notMatch(JSON.stringify(spans), /sk-should-never-appear/);
  t.end();
});

void test('a 5xx is an error with the catalogue code as its type; an unknown method is _OTHER', (t) => {
  const { tracer: tr, spans } = tracer({ parentBased: true, ratio: 1 });
  tr.onEnd(record({ status: 504, errorCode: 'upstream_timeout', trace: tr.start(head(), false) }));
  tr.onEnd(record({ method: 'BREW', route: 'unknown', operation: undefined, status: 404, errorCode: 'not_found', trace: tr.start(head(), false) }));
  t.equal(spans[0]?.status, STATUS_CODE.error);
  t.equal(spans[0]?.attributes['error.type'], 'upstream_timeout');
  t.equal(spans[1]?.name, 'HTTP');
  t.equal(spans[1]?.attributes['http.request.method'], '_OTHER');
  t.equal(spans[1]?.attributes['http.request.method_original'], 'BREW');
  t.equal(spans[1]?.attributes['http.route'], undefined);
  t.equal(spans[1]?.status, STATUS_CODE.unset, 'a 4xx is not a SERVER error');
  t.end();
});

void test('the tail budget: traces kept by their outcome alone are bounded per second; head-sampled ones are not', (t) => {
  const spans: SpanData[] = [];
  const tr = new Tracer({ sampler: { parentBased: true, ratio: 0 }, keep: ['rate_limited'], maxTailPerSecond: 10, trustedProxies: [], upstreamOrigin: undefined, sink: (s) => spans.push(s) });
  const limited = () => {
    const trace = tr.start(head(), false);
    trace.event(TRACE_EVENTS.rateLimited, { 'gateway.limit': 'rate' });
    return record({ status: 429, trace });
  };
  for (let i = 0; i < 100; i++) tr.onEnd(limited());
  // A burst of 100 within a few ms: the bucket's 10 tokens, plus at most what refilled meanwhile.
  t.ok(spans.length >= 10 && spans.length <= 12, `${spans.length} kept of 100`);
  t.equal(tr.tailLimited, 100 - spans.length, 'the rest counted, one SERVER span each');
  const before = spans.length;
  tr.configure({ parentBased: true, ratio: 1 }, ['rate_limited'], 10);
  for (let i = 0; i < 50; i++) tr.onEnd(limited());
  t.equal(spans.length, before + 50, 'sampled at the head: not bounded by the tail budget');
  tr.configure({ parentBased: true, ratio: 0 }, ['rate_limited'], 0);
  tr.onEnd(limited());
  t.equal(spans.length, before + 50, '0: none kept by the outcome alone');
  t.end();
});
