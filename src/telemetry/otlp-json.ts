/**
 * The spans as one OTLP/HTTP JSON body (`ExportTraceServiceRequest`), as the OTLP specification
 * says (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding): lowerCamelCase field
 * names, trace and span ids as hex strings (not base64), enums as integers, 64-bit integers
 * (times, `intValue`) as decimal strings, and a double that is not finite as the proto3 JSON
 * names it ("NaN", "Infinity", "-Infinity").
 *
 * Where the specification leaves a choice, the body is the one the OpenTelemetry JS exporter's
 * `JsonTraceSerializer` writes: the same keys in the same order, zero dropped counts, empty
 * `links`, the status's code even when unset, the scope's version even when empty. It differs
 * only in `intValue`, which that serializer writes as a JSON number (a receiver accepts both) and
 * which a number past 2^53 would round.
 */
import type { TraceAttributes, TraceEvent } from '../core/trace.js';
import type { SpanData, SpanEncoder, SpanSource } from './span.js';
import { unixNanos } from './span.js';

const INT64_MIN = -(2 ** 63);
const INT64_END = 2 ** 63;

/** Writes one `ExportTraceServiceRequest` of the spans as JSON text. */
export const encodeJson: SpanEncoder = (source: SpanSource, spans: readonly SpanData[]): string => {
  if (spans.length === 0) return '{"resourceSpans":[]}';
  let out =
    '{"resourceSpans":[{"resource":{"attributes":' +
    attributes(source.resource) +
    ',"droppedAttributesCount":0},"scopeSpans":[{"scope":{"name":' +
    quote(source.scope.name) +
    ',"version":' +
    quote(source.scope.version) +
    '},"spans":[';
  for (let i = 0; i < spans.length; i++) {
    if (i > 0) out += ',';
    out += span(spans[i]!);
  }
  return out + ']}]}]}';
};

function span(s: SpanData): string {
  let out = '{"traceId":' + quote(s.traceId) + ',"spanId":' + quote(s.spanId);
  if (s.parentSpanId) out += ',"parentSpanId":' + quote(s.parentSpanId);
  if (s.traceState !== undefined) out += ',"traceState":' + quote(s.traceState);
  out +=
    ',"name":' +
    quote(s.name) +
    ',"kind":' +
    s.kind +
    ',"startTimeUnixNano":"' +
    nanos(s.start) +
    '","endTimeUnixNano":"' +
    nanos(s.end) +
    '","attributes":' +
    attributes(s.attributes) +
    ',"droppedAttributesCount":0,"events":[';
  for (let i = 0; i < s.events.length; i++) {
    if (i > 0) out += ',';
    out += event(s.events[i]!);
  }
  out += '],"droppedEventsCount":0,"status":{"code":' + s.status;
  if (s.statusMessage !== undefined) out += ',"message":' + quote(s.statusMessage);
  return out + '},"links":[],"droppedLinksCount":0,"flags":' + (s.flags >>> 0) + '}';
}

function event(e: TraceEvent): string {
  return (
    '{"attributes":' +
    (e.attributes === undefined ? '[]' : attributes(e.attributes)) +
    ',"name":' +
    quote(e.name) +
    ',"timeUnixNano":"' +
    nanos(e.at) +
    '","droppedAttributesCount":0}'
  );
}

function attributes(attrs: TraceAttributes): string {
  let out = '[';
  for (const key in attrs) {
    if (!Object.hasOwn(attrs, key)) continue;
    if (out.length > 1) out += ',';
    out += '{"key":' + quote(key) + ',"value":' + value(attrs[key]) + '}';
  }
  return out + ']';
}

/** An `AnyValue`; a value of no attribute type gives an empty one. */
function value(v: unknown): string {
  switch (typeof v) {
    case 'string':
      return '{"stringValue":' + quote(v) + '}';
    case 'boolean':
      return v ? '{"boolValue":true}' : '{"boolValue":false}';
    case 'number':
      if (Number.isInteger(v) && v >= INT64_MIN && v < INT64_END) {
        // Past 2^53 a double's shortest decimal form is not its exact integer value.
        return '{"intValue":"' + (Number.isSafeInteger(v) ? String(v) : BigInt(v).toString()) + '"}';
      }
      return '{"doubleValue":' + (Number.isFinite(v) ? String(v) : '"' + String(v) + '"') + '}';
    default:
      return '{}';
  }
}

/** `unixNanos(ms)` in decimal: the whole milliseconds, then six digits of nanoseconds. */
function nanos(ms: number): string {
  const whole = Math.floor(ms);
  const frac = Math.round((ms - whole) * 1e6);
  if (whole < 1 || !Number.isSafeInteger(whole) || frac >= 1e6) return unixNanos(ms).toString();
  return String(whole) + String(frac).padStart(6, '0');
}

/**
 * A JSON string: as it is between quotes when nothing in it needs escaping (the common case,
 * without a call out of JavaScript), else as JSON.stringify writes it.
 */
function quote(s: string): string {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c || (c >= 0xd800 && c <= 0xdfff)) return JSON.stringify(s);
  }
  return '"' + s + '"';
}
