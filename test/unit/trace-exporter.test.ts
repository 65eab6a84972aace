/**
 * The span exporter against a real OTLP/HTTP receiver on 127.0.0.1: batching, the schedule delay,
 * the bounded queue, retries as the OTLP spec says them, and a hostile collector (hang, 503, 429,
 * 400, reset, slow) that costs spans, counted, never a rejection or a slow `enqueue`. The encoders
 * here are stand-ins (OTLP/JSON by hand, protobuf through protobufjs and the vendored definitions).
 */
import { test, type Test } from 'tap';
import { SpanExporter, rejectedSpans, retryAfterMs, type SpanExporterOptions } from '../../src/telemetry/exporter.js';
import type { SpanData, SpanEncoder, SpanSource } from '../../src/telemetry/span.js';
import { decodeRaw, exportTraceServiceRequest } from '../helpers/otlp-proto.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceiverOptions } from '../helpers/otlp-receiver.js';
import { fakeLog } from '../helpers/log.js';
import { sleep } from '../helpers/wait.js';

const unhandled: unknown[] = [];
process.on('unhandledRejection', (reason) => void unhandled.push(reason));

const SECRET = 'api-key-0123456789abcdef';
const SOURCE: SpanSource = { resource: { 'service.name': 'gw-test', 'service.version': '1.2.3' }, scope: { name: 'petstore-gateway', version: '0.1.0' } };

function span(i: number): SpanData {
  return {
    traceId: (i + 1).toString(16).padStart(32, '0'),
    spanId: (i + 1).toString(16).padStart(16, '0'),
    parentSpanId: undefined,
    traceState: undefined,
    name: `span-${i}`,
    kind: 2,
    start: 1_700_000_000_000 + i,
    end: 1_700_000_000_001 + i,
    attributes: { 'test.i': i },
    events: [],
    status: 0,
    statusMessage: undefined,
    flags: 1,
  };
}

function keyValues(attrs: Readonly<Record<string, string | number | boolean>>): unknown[] {
  return Object.entries(attrs).map(([key, v]) => ({
    key,
    value: typeof v === 'string' ? { stringValue: v } : typeof v === 'boolean' ? { boolValue: v } : Number.isInteger(v) ? { intValue: v } : { doubleValue: v },
  }));
}

function request(source: SpanSource, spans: readonly SpanData[], ids: (hex: string) => unknown): unknown {
  return {
    resourceSpans: [
      {
        resource: { attributes: keyValues(source.resource) },
        scopeSpans: [{ scope: source.scope, spans: spans.map((s) => ({ traceId: ids(s.traceId), spanId: ids(s.spanId), name: s.name, kind: s.kind, attributes: keyValues(s.attributes) })) }],
      },
    ],
  };
}

const jsonEncode: SpanEncoder = (source, spans) => JSON.stringify(request(source, spans, (hex) => hex));
const protoEncode: SpanEncoder = (source, spans) => {
  const type = exportTraceServiceRequest();
  return type.encode(type.fromObject(request(source, spans, (hex) => Buffer.from(hex, 'hex')) as Record<string, unknown>)).finish();
};

interface Rig {
  receiver: OtlpReceiver;
  exporter: SpanExporter;
  log: ReturnType<typeof fakeLog>;
}

/** A receiver and an exporter pointed at it (test defaults: a long delay, quick retries), both closed at teardown. */
async function rig(t: Test, options: Partial<SpanExporterOptions> = {}, receiverOptions: ReceiverOptions = {}): Promise<Rig> {
  const receiver = await startOtlpReceiver(receiverOptions);
  const log = fakeLog();
  const exporter = new SpanExporter({
    endpoint: receiver.url,
    contentType: 'application/json',
    encode: jsonEncode,
    source: SOURCE,
    headers: { 'X-Api-Key': SECRET },
    delayMs: 10_000,
    timeoutMs: 2000,
    maxAttempts: 3,
    initialBackoffMs: 10,
    maxBackoffMs: 50,
    log,
    ...options,
  });
  t.teardown(async () => {
    await exporter.close(100);
    await receiver.close();
  });
  return { receiver, exporter, log };
}

/** Runs a scenario, then checks that no promise was left to reject unhandled (after a turn for stragglers). */
function scenario(name: string, fn: (t: Test) => Promise<void>): void {
  void test(name, async (t) => {
    const before = unhandled.length;
    await fn(t);
    await sleep(20);
    t.same(unhandled.slice(before), [], 'no unhandled rejection');
  });
}

function enqueueRange(exporter: SpanExporter, from: number, count: number): { accepted: number; refused: number } {
  let accepted = 0;
  for (let i = from; i < from + count; i++) if (exporter.enqueue(span(i))) accepted++;
  return { accepted, refused: count - accepted };
}

for (const [contentType, encode] of [['application/json', jsonEncode], ['application/x-protobuf', protoEncode]] as const) {
  scenario(`batching (${contentType}): full batches go at once, the rest on flush; headers arrive`, async (t) => {
    let encoded = 0;
    const counting: SpanEncoder = (source, spans) => (encoded++, encode(source, spans));
    const { receiver, exporter } = await rig(t, { contentType, encode: counting, maxBatchSpans: 10 });
    enqueueRange(exporter, 0, 25);
    t.equal(encoded, 0, 'nothing is encoded inside enqueue');
    await receiver.waitForRequests(2, 5000);
    await sleep(50);
    t.equal(receiver.requests.length, 2, 'the partial batch waits for the delay or a flush');
    t.equal(exporter.stats().queued, 5);
    await exporter.flush(5000);
    t.equal(receiver.requests.length, 3);
    const spans = receiver.spans();
    t.same(spans.map((s) => s.span.name), Array.from({ length: 25 }, (_, i) => `span-${i}`));
    const perRequest = receiver.requests.map((r) => r.decoded?.resourceSpans?.[0]?.scopeSpans?.[0]?.spans?.length);
    t.same(perRequest, [10, 10, 5], 'each request at most maxBatchSpans');
    t.same(spans[0]!.resource, { 'service.name': 'gw-test', 'service.version': '1.2.3' });
    t.same(spans[0]!.scope, { name: 'petstore-gateway', version: '0.1.0' });
    t.equal(spans[3]!.attributes['test.i'], 3);
    for (const r of receiver.requests) {
      t.equal(r.headers['content-type'], contentType);
      t.equal(r.headers['x-api-key'], SECRET);
      t.match(r.headers['user-agent'], /petstore-gateway/);
    }
    if (contentType === 'application/x-protobuf') t.match(decodeRaw(receiver.requests[0]!.raw), /5: "span-0"/, 'protoc reads the body too');
    t.same(exporter.stats(), { queued: 0, exported: 25, dropped: 0, failed: 0, exports: { ok: 3, retried: 0, failed: 0 } });
  });
}

scenario('the schedule delay sends a partial batch, not before', async (t) => {
  const { receiver, exporter } = await rig(t, { delayMs: 150 });
  const t0 = Date.now();
  enqueueRange(exporter, 0, 3);
  await sleep(40);
  t.equal(receiver.requests.length, 0, 'not before the delay');
  const [first] = await receiver.waitForRequests(1, 5000);
  t.ok(first!.at - t0 >= 140, `sent after the delay (${first!.at - t0} ms)`);
  await receiver.waitForSpans(3, 2000);
  enqueueRange(exporter, 3, 2);
  await receiver.waitForSpans(5, 5000);
  t.equal(receiver.requests.length, 2, 'the timer is armed again for later spans');
});

scenario('a full queue drops and counts exactly while one export is in flight', async (t) => {
  const { receiver, exporter } = await rig(t, { maxQueueSpans: 100, maxBatchSpans: 50, timeoutMs: 5000 }, { mode: 'hang' });
  t.same(enqueueRange(exporter, 0, 50), { accepted: 50, refused: 0 });
  await receiver.waitForRequests(1, 5000);
  t.same(enqueueRange(exporter, 50, 150), { accepted: 100, refused: 50 });
  t.same(exporter.stats(), { queued: 100, exported: 0, dropped: 50, failed: 0, exports: { ok: 0, retried: 0, failed: 0 } });
  await sleep(60);
  t.equal(receiver.requests.length, 1, 'one export in flight at most');
  const t0 = Date.now();
  await exporter.close(200);
  t.ok(Date.now() - t0 < 1500, 'close ends within its grace');
  t.equal(exporter.enqueue(span(999)), false, 'refused after close');
  const s = exporter.stats();
  t.same(s, { queued: 0, exported: 0, dropped: 151, failed: 50, exports: { ok: 0, retried: 0, failed: 1 } });
  t.equal(s.exported + s.dropped + s.failed, 201, 'every span accounted for once');
});

scenario('503 twice, then accepted: the same body is sent again and counted once', async (t) => {
  const { receiver, exporter } = await rig(t, { maxAttempts: 5 });
  receiver.script(['status503', 'status503']);
  enqueueRange(exporter, 0, 5);
  await exporter.flush(5000);
  t.equal(receiver.requests.length, 3);
  t.same(receiver.requests.map((r) => r.mode), ['status503', 'status503', 'ok']);
  t.ok(receiver.requests.every((r) => r.raw.equals(receiver.requests[0]!.raw)), 'the same request each time');
  t.equal(receiver.spans().length, 5);
  t.same(exporter.stats(), { queued: 0, exported: 5, dropped: 0, failed: 0, exports: { ok: 1, retried: 2, failed: 0 } });
});

scenario('429 with Retry-After: honoured, bounded by maxBackoffMs', async (t) => {
  const { receiver, exporter } = await rig(t, { maxBackoffMs: 250, initialBackoffMs: 5 }, { retryAfter: '2' });
  receiver.script(['status429']);
  enqueueRange(exporter, 0, 2);
  await exporter.flush(5000);
  t.equal(receiver.requests.length, 2);
  const gap = receiver.requests[1]!.at - receiver.requests[0]!.at;
  t.ok(gap >= 235 && gap < 1900, `waited maxBackoffMs, not 2 s nor the 5 ms backoff (${gap} ms)`);
  t.same(exporter.stats().exports, { ok: 1, retried: 1, failed: 0 });
  t.equal(retryAfterMs('3'), 3000);
  t.equal(retryAfterMs(new Date(10_000).toUTCString(), 4000), 6000);
  t.equal(retryAfterMs('soon'), undefined);
});

scenario('400 is not retried; the log has the status and counts, never the headers', async (t) => {
  const { receiver, exporter, log } = await rig(t, { maxAttempts: 5 }, { mode: 'status400' });
  enqueueRange(exporter, 0, 4);
  await exporter.flush(5000);
  await sleep(80);
  t.equal(receiver.requests.length, 1);
  t.same(exporter.stats(), { queued: 0, exported: 0, dropped: 0, failed: 4, exports: { ok: 0, retried: 0, failed: 1 } });
  t.equal(log.lines.length, 1);
  t.match(log.lines[0]!.fields, { kind: 'failed', status: 400, spans: 4, attempts: 1 });
  t.notMatch(JSON.stringify(log.lines), /api-key|x-api-key/i);
  // A second failure within the minute is counted, not logged.
  enqueueRange(exporter, 4, 1);
  await exporter.flush(5000);
  t.equal(log.lines.length, 1, 'rate-limited');
});

scenario('a collector that hangs: each attempt times out, attempts bounded, the batch counted failed', async (t) => {
  const { receiver, exporter, log } = await rig(t, { timeoutMs: 200, maxAttempts: 3 }, { mode: 'hang' });
  enqueueRange(exporter, 0, 2);
  const t0 = Date.now();
  await exporter.flush(8000);
  const took = Date.now() - t0;
  t.ok(took >= 580 && took < 5000, `three attempts of 200 ms (${took} ms)`);
  t.equal(receiver.requests.length, 3);
  t.same(exporter.stats(), { queued: 0, exported: 0, dropped: 0, failed: 2, exports: { ok: 0, retried: 2, failed: 1 } });
  t.match(log.lines[0]!.fields, { kind: 'failed', error: 'timeout', attempts: 3 });
});

scenario('a collector that resets: retried, failed, and the next export gets a new connection', async (t) => {
  const { receiver, exporter, log } = await rig(t, { maxAttempts: 2 }, { mode: 'reset' });
  enqueueRange(exporter, 0, 2);
  await exporter.flush(5000);
  t.equal(receiver.requests.length, 2);
  t.same(exporter.stats().exports, { ok: 0, retried: 1, failed: 1 });
  t.match(log.lines[0]!.fields, { kind: 'failed', error: 'network' });
  receiver.mode = 'ok';
  enqueueRange(exporter, 2, 3);
  await exporter.flush(5000);
  t.same(receiver.spans().map((s) => s.span.name), ['span-2', 'span-3', 'span-4']);
  t.same(exporter.stats(), { queued: 0, exported: 3, dropped: 0, failed: 2, exports: { ok: 1, retried: 1, failed: 1 } });
});

scenario('a refused connection is retried within bounds, then failed', async (t) => {
  const dead = await startOtlpReceiver();
  await dead.close();
  const log = fakeLog();
  const exporter = new SpanExporter({ endpoint: dead.url, contentType: 'application/json', encode: jsonEncode, source: SOURCE, headers: {}, maxAttempts: 3, initialBackoffMs: 5, maxBackoffMs: 20, timeoutMs: 1000, log });
  t.teardown(() => exporter.close(50));
  exporter.enqueue(span(0));
  await exporter.flush(5000);
  t.same(exporter.stats(), { queued: 0, exported: 0, dropped: 0, failed: 1, exports: { ok: 0, retried: 2, failed: 1 } });
  t.match(log.lines[0]!.fields, { error: 'network', code: 'ECONNREFUSED' });
});

scenario('a slow collector within the timeout is waited for', async (t) => {
  const { receiver, exporter } = await rig(t, { timeoutMs: 2000 }, { mode: 'slow', slowMs: 150 });
  enqueueRange(exporter, 0, 3);
  const t0 = Date.now();
  await exporter.flush(5000);
  t.ok(Date.now() - t0 >= 140, 'waited for the answer');
  t.same(exporter.stats(), { queued: 0, exported: 3, dropped: 0, failed: 0, exports: { ok: 1, retried: 0, failed: 0 } });
  t.equal(receiver.requests.length, 1);
});

scenario('an answer that drips past the timeout counts as a timeout', async (t) => {
  const { receiver, exporter, log } = await rig(t, { timeoutMs: 300, maxAttempts: 2 }, { mode: 'slow', drip: true, slowMs: 60, padBytes: 40 });
  enqueueRange(exporter, 0, 2);
  await exporter.flush(5000);
  t.equal(receiver.requests.length, 2);
  t.same(exporter.stats(), { queued: 0, exported: 0, dropped: 0, failed: 2, exports: { ok: 0, retried: 1, failed: 1 } });
  t.match(log.lines[0]!.fields, { error: 'timeout' });
});

scenario('a 1 MiB answer is read to 64 KiB and discarded; the next export still goes', async (t) => {
  const { receiver, exporter } = await rig(t, {}, { padBytes: 1024 * 1024 });
  enqueueRange(exporter, 0, 2);
  await exporter.flush(5000);
  receiver.options.padBytes = 0;
  enqueueRange(exporter, 2, 2);
  await exporter.flush(5000);
  t.equal(receiver.spans().length, 4);
  t.same(exporter.stats(), { queued: 0, exported: 4, dropped: 0, failed: 0, exports: { ok: 2, retried: 0, failed: 0 } });
});

for (const contentType of ['application/json', 'application/x-protobuf'] as const) {
  scenario(`partial success (${contentType}) counts as exported, the rejected count logged once a minute`, async (t) => {
    const { exporter, log } = await rig(t, { contentType, encode: contentType === 'application/json' ? jsonEncode : protoEncode }, { mode: 'partial', rejectSpans: 2 });
    enqueueRange(exporter, 0, 3);
    await exporter.flush(5000);
    enqueueRange(exporter, 3, 3);
    await exporter.flush(5000);
    t.same(exporter.stats(), { queued: 0, exported: 6, dropped: 0, failed: 0, exports: { ok: 2, retried: 0, failed: 0 } });
    t.equal(log.lines.length, 1);
    t.match(log.lines[0]!.fields, { kind: 'partial', rejected: 2 });
  });
}

void test('rejectedSpans reads OTLP/JSON and protobuf answers, and 0 from anything else', (t) => {
  t.equal(rejectedSpans(Buffer.from('{"partialSuccess":{"rejectedSpans":"7"}}'), 'application/json'), 7);
  t.equal(rejectedSpans(Buffer.from('{"partialSuccess":{"errorMessage":"warn"}}'), 'application/json'), 0);
  t.equal(rejectedSpans(Buffer.from('not json'), 'application/json'), 0);
  t.equal(rejectedSpans(Buffer.from([0x0a, 0x03, 0x08, 0xac, 0x02]), 'application/x-protobuf'), 300);
  t.equal(rejectedSpans(Buffer.from([0x0a, 0x09, 0x08]), 'application/x-protobuf'), 0, 'truncated');
  t.equal(rejectedSpans(Buffer.alloc(0), 'application/x-protobuf'), 0);
  t.end();
});

scenario('an encoder or a logger that throws costs the batch, nothing else', async (t) => {
  const { receiver, exporter } = await rig(t, {
    encode: () => {
      throw new Error('boom');
    },
    log: {
      warn: () => {
        throw new Error('log down');
      },
    },
  });
  enqueueRange(exporter, 0, 3);
  await exporter.flush(2000);
  t.equal(receiver.requests.length, 0);
  t.same(exporter.stats(), { queued: 0, exported: 0, dropped: 0, failed: 3, exports: { ok: 0, retried: 0, failed: 1 } });
});

scenario('enqueue stays O(1) while the collector hangs: 100k spans well under 200 ms', async (t) => {
  const { receiver, exporter } = await rig(t, { timeoutMs: 10_000 }, { mode: 'hang' });
  enqueueRange(exporter, 0, 512);
  await receiver.waitForRequests(1, 5000);
  const one = span(1);
  let accepted = 0;
  const t0 = performance.now();
  for (let i = 0; i < 100_000; i++) if (exporter.enqueue(one)) accepted++;
  const took = performance.now() - t0;
  t.comment(`100000 enqueues with the queue filling then full: ${took.toFixed(1)} ms`);
  t.ok(took < 200, `100k enqueues in ${took.toFixed(1)} ms`);
  t.equal(accepted, 2048, 'the queue holds maxQueueSpans');
  t.equal(exporter.stats().dropped, 100_000 - 2048);
  t.equal(receiver.requests.length, 1);
});

scenario('flush and close resolve by their deadline while the collector hangs', async (t) => {
  const { receiver, exporter } = await rig(t, { timeoutMs: 10_000, maxAttempts: 5 }, { mode: 'hang' });
  enqueueRange(exporter, 0, 5);
  let t0 = Date.now();
  await exporter.flush(100);
  let took = Date.now() - t0;
  t.ok(took >= 90 && took < 1500, `flush gave up at its deadline (${took} ms)`);
  t.equal(receiver.requests.length, 1);
  t0 = Date.now();
  const closing = exporter.close(300);
  t.equal(exporter.close(300), closing, 'close twice is one close');
  await closing;
  took = Date.now() - t0;
  t.ok(took >= 290 && took < 1500, `close ended at its grace (${took} ms)`);
  t.same(exporter.stats(), { queued: 0, exported: 0, dropped: 0, failed: 5, exports: { ok: 0, retried: 0, failed: 1 } });
  await sleep(100);
  t.equal(receiver.requests.length, 1, 'nothing sent after close');
});

scenario('close exports what is queued, within its grace', async (t) => {
  const { receiver, exporter } = await rig(t);
  enqueueRange(exporter, 0, 7);
  await exporter.close(3000);
  t.equal(receiver.spans().length, 7);
  t.same(exporter.stats(), { queued: 0, exported: 7, dropped: 0, failed: 0, exports: { ok: 1, retried: 0, failed: 0 } });
});

scenario('close during a backoff ends the wait and sends no more', async (t) => {
  const { receiver, exporter } = await rig(t, { maxAttempts: 5, initialBackoffMs: 2000, maxBackoffMs: 5000 }, { mode: 'status503' });
  enqueueRange(exporter, 0, 2);
  await exporter.flush(0);
  await receiver.waitForRequests(1, 5000);
  await sleep(50);
  const t0 = Date.now();
  await exporter.close(100);
  t.ok(Date.now() - t0 < 1000);
  await sleep(50);
  t.equal(receiver.requests.length, 1);
  t.same(exporter.stats(), { queued: 0, exported: 0, dropped: 0, failed: 2, exports: { ok: 0, retried: 1, failed: 1 } });
});
