// The cost of recording one traced request, in one process, side by side, round by round: the
// gateway's recorder (src/telemetry: Tracer + the OTLP protobuf writer) and the official
// OpenTelemetry JS SDK (@opentelemetry/sdk-trace-base 2.x, BatchSpanProcessor, the official OTLP
// protobuf serializer), each making what one forwarded request makes at sampleRatio 1.0: a SERVER
// span with the gateway's attributes and one event, a CLIENT span, and its share of an export body.
// No network: the bodies are made and dropped. CPU microseconds per request, median over rounds.
//
//   npm run build && node bench/trace-recorders.mjs      (BENCH_TRACE_ROUNDS, BENCH_TRACE_N)
import { context, trace, SpanKind, ROOT_CONTEXT } from '@opentelemetry/api';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { Tracer } from '../dist/telemetry/tracer.js';
import { encodeProtobuf } from '../dist/telemetry/otlp-proto.js';
import { TRACE_EVENTS } from '../dist/core/trace.js';

const ROUNDS = Number(process.env.BENCH_TRACE_ROUNDS ?? 7);
const N = Number(process.env.BENCH_TRACE_N ?? 20000);
const RESOURCE = { 'service.name': 'petstore-gateway', 'service.version': '0.1.0', 'service.instance.id': 'bench/1' };
const SOURCE = { resource: RESOURCE, scope: { name: 'petstore-gateway', version: '0.1.0' } };
const HEAD = { method: 'GET', target: '/v1/pets?limit=20', headers: { authorization: 'Bearer x', 'user-agent': 'bench' }, remoteAddress: '127.0.0.1', httpVersion: '1.1' };

// ---- Ours ---------------------------------------------------------------------------------------
function ours() {
  let queue = [];
  const tracer = new Tracer({ sampler: { parentBased: true, ratio: 1 }, keep: [], trustedProxies: [], upstreamOrigin: 'http://127.0.0.1:8081', sink: (s) => queue.push(s) });
  const send = tracer.wrapSend((request, handler) => {
    handler.onStart({ pause() {}, resume() {}, abort() {} });
    handler.onHead(200, {});
    handler.onEnd();
  });
  const handler = { onStart() {}, onHead: () => 0, onData() {}, onEnd() {}, onBody() {}, onFailure() {}, onRefused() {} };
  return () => {
    const t = tracer.start(HEAD, false);
    t.event(TRACE_EVENTS.deprecated, { 'gateway.operation': 'listPets' });
    send({ method: 'GET', path: '/v1/pets?limit=20', headers: {}, exchange: { trace: t } }, handler);
    tracer.onEnd({ startedAt: Date.now(), durationMs: 1, requestId: 'r-1', method: 'GET', route: '/v1/pets', operation: 'listPets', status: 200, errorCode: undefined, rejectedBy: undefined, upstreamStatus: 200, upstreamMs: 1, upstreamFailure: undefined, bytesIn: 0, bytesOut: 100, clientAddress: '127.0.0.1', protocol: '1.1', consumer: 'team-a', facts: undefined, trace: t });
    if (queue.length >= 512) {
      encodeProtobuf(SOURCE, queue);
      queue = [];
    }
  };
}

// ---- The official SDK -----------------------------------------------------------------------------
function official() {
  const exporter = {
    export(spans, done) {
      ProtobufTraceSerializer.serializeRequest(spans);
      done({ code: 0 });
    },
    shutdown: async () => {},
    forceFlush: async () => {},
  };
  const provider = new BasicTracerProvider({ resource: resourceFromAttributes(RESOURCE), spanProcessors: [new BatchSpanProcessor(exporter, { maxQueueSize: 4096, maxExportBatchSize: 512, scheduledDelayMillis: 1000 })] });
  const tracer = provider.getTracer('petstore-gateway', '0.1.0');
  const fn = () => {
    const server = tracer.startSpan('GET /v1/pets', { kind: SpanKind.SERVER, attributes: { 'http.request.method': 'GET', 'http.route': '/v1/pets', 'url.path': '/v1/pets', 'url.scheme': 'http', 'network.protocol.version': '1.1', 'client.address': '127.0.0.1' } }, ROOT_CONTEXT);
    server.addEvent(TRACE_EVENTS.deprecated, { 'gateway.operation': 'listPets' });
    const client = tracer.startSpan('GET', { kind: SpanKind.CLIENT, attributes: { 'http.request.method': 'GET', 'server.address': '127.0.0.1', 'server.port': 8081, 'url.full': 'http://127.0.0.1:8081/v1/pets?limit=20', 'network.protocol.version': '1.1' } }, trace.setSpan(context.active(), server));
    client.setAttribute('http.response.status_code', 200);
    client.end();
    server.setAttributes({ 'http.response.status_code': 200, 'gateway.request.id': 'r-1', 'gateway.operation': 'listPets', 'gateway.consumer.id': 'team-a', 'gateway.sampling': 'head' });
    server.end();
  };
  fn.flush = () => provider.forceFlush();
  return fn;
}

async function measure(make) {
  const fn = make();
  for (let i = 0; i < 2000; i++) fn(); // warm
  if (fn.flush) await fn.flush();
  const c0 = process.cpuUsage();
  for (let i = 0; i < N; i++) {
    fn();
    // The SDK's processor exports on a timer: let it run as the event loop would between requests.
    if (i % 512 === 511) await new Promise((r) => setImmediate(r));
  }
  if (fn.flush) await fn.flush();
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / N;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const a = [];
const b = [];
for (let r = 0; r < ROUNDS; r++) {
  a.push(await measure(ours));
  b.push(await measure(official));
}
console.log(`node ${process.version}, ${N} requests per round, ${ROUNDS} rounds, CPU µs per traced request (2 spans):`);
console.log(`  gateway recorder + own protobuf writer : median ${median(a).toFixed(2)}  (rounds ${a.map((x) => x.toFixed(1)).join(' ')})`);
console.log(`  official SDK 2.x + official serializer : median ${median(b).toFixed(2)}  (rounds ${b.map((x) => x.toFixed(1)).join(' ')})`);
console.log(`  official / gateway: ${(median(b) / median(a)).toFixed(2)}`);
