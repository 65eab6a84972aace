import { test } from 'tap';
import { decodeRaw, decodeTraceRequest, exportTraceServiceRequest } from '../helpers/otlp-proto.js';

void test('the OTLP definitions load and round-trip a request; protoc decodes it raw', (t) => {
  const type = exportTraceServiceRequest();
  const msg = type.fromObject({
    resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: Buffer.alloc(16, 1), spanId: Buffer.alloc(8, 2), name: 'GET /x', kind: 2, startTimeUnixNano: '1700000000000000001' }] }] }],
  });
  const bytes = type.encode(msg).finish();
  const back = decodeTraceRequest(bytes) as { resourceSpans: { scopeSpans: { spans: Record<string, unknown>[] }[] }[] };
  const span = back.resourceSpans[0]!.scopeSpans[0]!.spans[0]!;
  t.equal(span.name, 'GET /x');
  t.equal(span.startTimeUnixNano, '1700000000000000001');
  t.equal(span.kind, 2);
  const raw = decodeRaw(bytes);
  t.match(raw, /5: "GET \/x"/);
  t.match(raw, /7: 0x17979cfe362a0001/);
  t.end();
});
