// The cost of writing one OTLP export body: the gateway's writers (dist/telemetry/otlp-proto.js,
// otlp-json.js) against the OpenTelemetry JS exporter's ProtobufTraceSerializer and
// JsonTraceSerializer, on one batch of 512 typical spans: 256 SERVER spans (12 attributes, 2
// events) each with one CLIENT span (8 attributes). The official serializers get the same spans as
// ReadableSpans, built before timing (the SDK holds its spans in that shape already).
//
//   npx tsc -p tsconfig.json && node bench/otlp-encode.mjs
//
// Environment: BENCH_OTLP_ROUNDS (15), BENCH_OTLP_ITERS (40 batches per round), BENCH_OTLP_ONLY (run
// only the encoders whose name holds it: 'protobuf', 'ours'). The encoders run in
// alternation, round by round, so the machine's load falls on each alike; each round's time per
// batch is recorded and the median and the best reported, per batch and per span.
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { encodeProtobuf } from '../dist/telemetry/otlp-proto.js';
import { encodeJson } from '../dist/telemetry/otlp-json.js';
import { unixNanos } from '../dist/telemetry/span.js';

const ROUNDS = Number(process.env.BENCH_OTLP_ROUNDS ?? 15);
const ITERS = Number(process.env.BENCH_OTLP_ITERS ?? 40);
const PAIRS = 256;

const SOURCE = {
  resource: { 'service.name': 'petstore-gateway', 'service.version': '0.1.0', 'service.instance.id': 'c0a8-worker-1', 'host.name': 'gw-7' },
  scope: { name: 'petstore-gateway', version: '0.1.0' },
};
const T0 = performance.timeOrigin + performance.now();
const hex = (n, len) => n.toString(16).padStart(len, '0');

function pair(i) {
  const start = T0 + i * 3.7;
  const traceId = hex(0x4bf92f35 + i, 8) + '77b34da6a3ce929d0e0e4736';
  const server = {
    traceId,
    spanId: hex(0xa1b2c3d4 + i, 16),
    parentSpanId: i % 2 === 0 ? '00f067aa0ba902b7' : undefined,
    traceState: i % 4 === 0 ? 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE' : undefined,
    name: 'GET /v1/pets/{petId}',
    kind: 2,
    start,
    end: start + 4.321987,
    attributes: {
      'http.request.method': 'GET',
      'url.path': `/v1/pets/${i}`,
      'url.scheme': 'https',
      'http.route': '/v1/pets/{petId}',
      'server.address': 'api.example.com',
      'server.port': 443,
      'client.address': '203.0.113.9',
      'network.protocol.version': '1.1',
      'user_agent.original': 'Mozilla/5.0 (X11; Linux x86_64) curl/8.5.0',
      'http.response.status_code': 200,
      'gateway.operation': 'getPet',
      'gateway.key_id': 'key-42',
    },
    events: [
      { name: 'gateway.cache', at: start + 0.2, attributes: { 'gateway.cache.status': 'stale' } },
      { name: 'gateway.deprecated', at: start + 0.3, attributes: { 'gateway.operation': 'getPet' } },
    ],
    status: 0,
    statusMessage: undefined,
    flags: 0x301,
  };
  const client = {
    traceId,
    spanId: hex(0xc1d2e3f4 + i, 16),
    parentSpanId: server.spanId,
    traceState: server.traceState,
    name: 'GET',
    kind: 3,
    start: start + 0.5,
    end: start + 3.9,
    attributes: {
      'http.request.method': 'GET',
      'server.address': '10.0.0.7',
      'server.port': 8080,
      'url.full': `http://10.0.0.7:8080/v1/pets/${i}`,
      'network.peer.address': '10.0.0.7',
      'http.request.resend_count': 0,
      'http.response.status_code': 200,
      'gateway.upstream': 'primary',
    },
    events: [],
    status: 0,
    statusMessage: undefined,
    flags: 0x101,
  };
  return [server, client];
}

const spans = [];
for (let i = 0; i < PAIRS; i++) spans.push(...pair(i));

const resource = resourceFromAttributes(SOURCE.resource);
const scope = { name: SOURCE.scope.name, version: SOURCE.scope.version };
const hr = (ms) => {
  const ns = unixNanos(ms);
  return [Number(ns / 1_000_000_000n), Number(ns % 1_000_000_000n)];
};
const readable = spans.map((s) => {
  const ctx = { traceId: s.traceId, spanId: s.spanId, traceFlags: s.flags & 0xff };
  if (s.traceState !== undefined) ctx.traceState = { serialize: () => s.traceState };
  const remote = (s.flags & 0x200) !== 0;
  return {
    name: s.name,
    kind: s.kind - 1,
    spanContext: () => ctx,
    parentSpanContext: s.parentSpanId === undefined ? undefined : { traceId: s.traceId, spanId: s.parentSpanId, traceFlags: ctx.traceFlags, isRemote: remote },
    startTime: hr(s.start),
    endTime: hr(s.end),
    status: { code: s.status },
    attributes: s.attributes,
    links: [],
    events: s.events.map((e) => ({ name: e.name, time: hr(e.at), attributes: e.attributes })),
    duration: [0, 0],
    ended: true,
    resource,
    instrumentationScope: scope,
    droppedAttributesCount: 0,
    droppedEventsCount: 0,
    droppedLinksCount: 0,
  };
});

const ONLY = process.env.BENCH_OTLP_ONLY ?? '';
const encoders = Object.fromEntries(
  Object.entries({
    'ours protobuf': () => encodeProtobuf(SOURCE, spans),
    'official protobuf': () => ProtobufTraceSerializer.serializeRequest(readable),
    'ours JSON': () => encodeJson(SOURCE, spans),
    'official JSON': () => JsonTraceSerializer.serializeRequest(readable),
  }).filter(([name]) => name.includes(ONLY)),
);

const size = (body) => (typeof body === 'string' ? Buffer.byteLength(body) : body.length);
const times = Object.fromEntries(Object.keys(encoders).map((k) => [k, []]));
let sink = 0;
for (const fn of Object.values(encoders)) for (let i = 0; i < 200; i++) sink += size(fn());
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, fn] of Object.entries(encoders)) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < ITERS; i++) sink += size(fn());
    times[name].push(Number(process.hrtime.bigint() - t0) / 1e3 / ITERS);
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
console.log(`node ${process.version}, ${spans.length} spans a batch (${PAIRS} SERVER + ${PAIRS} CLIENT), ${ROUNDS} rounds of ${ITERS} batches`);
console.log('encoder              bytes    µs/batch (median, best)   µs/span (median)');
for (const [name, fn] of Object.entries(encoders)) {
  const m = median(times[name]);
  const best = Math.min(...times[name]);
  console.log(`${name.padEnd(19)} ${String(size(fn())).padStart(7)}   ${m.toFixed(0).padStart(8)} ${best.toFixed(0).padStart(8)}          ${(m / spans.length).toFixed(2).padStart(6)}`);
}
if (sink === 0) console.log('');
