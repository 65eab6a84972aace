/**
 * The OTLP trace export request as the OpenTelemetry protobuf definitions describe it
 * (test/fixtures/otlp-proto, loaded with protobufjs), and Debian's `protoc --decode_raw` as a
 * second, independent decoder that needs no definition.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import protobuf from 'protobufjs';
import { PROJECT_ROOT } from './root.js';

const PROTO_ROOT = join(PROJECT_ROOT, 'test', 'fixtures', 'otlp-proto') + '/';

let request: protobuf.Type | undefined;

/** `opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest`, loaded once. */
export function exportTraceServiceRequest(): protobuf.Type {
  if (request !== undefined) return request;
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => (target.startsWith('/') ? target : PROTO_ROOT + target);
  root.loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto', { keepCase: false });
  request = root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest');
  return request;
}

/**
 * A protobuf body decoded to a plain object: the trace and span ids as lower-case hex (as OTLP/JSON
 * writes them; other bytes base64), 64-bit integers as decimal strings, enums as numbers, defaults
 * left out.
 */
export function decodeTraceRequest(body: Uint8Array): Record<string, unknown> {
  const type = exportTraceServiceRequest();
  const message = type.decode(body);
  const plain = type.toObject(message, { longs: String, enums: Number, bytes: String, defaults: false, arrays: true }) as Record<string, unknown>;
  hexIds(plain);
  return plain;
}

const ID_FIELDS = new Set(['traceId', 'spanId', 'parentSpanId']);

/** protobufjs writes bytes as base64; OTLP/JSON writes the ids as hex: turned to hex here, in place. */
function hexIds(node: unknown): void {
  if (Array.isArray(node)) {
    for (const item of node) hexIds(item);
    return;
  }
  if (node === null || typeof node !== 'object') return;
  const o = node as Record<string, unknown>;
  for (const [k, v] of Object.entries(o)) {
    if (ID_FIELDS.has(k) && typeof v === 'string') o[k] = Buffer.from(v, 'base64').toString('hex');
    else hexIds(v);
  }
}

/** `protoc --decode_raw` of a body: its text output (field numbers and values, no names). */
export function decodeRaw(body: Uint8Array): string {
  const r = spawnSync('protoc', ['--decode_raw'], { input: body, encoding: 'utf8', timeout: 10_000 });
  if (r.error !== undefined) throw r.error;
  if (r.status !== 0) throw new Error(`protoc --decode_raw exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}
