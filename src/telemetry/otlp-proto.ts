/**
 * The spans as one OTLP/HTTP protobuf body (`ExportTraceServiceRequest`, opentelemetry-proto
 * collector/trace/v1), written by hand: one `ResourceSpans` holding one `ScopeSpans`.
 *
 * Two passes over the spans. The first measures: every nested message's length and every
 * string's UTF-8 length go into `lengths`, in the order the second pass will need them (a
 * message's slot is taken before its children's, filled after them). The second writes into one
 * buffer of exactly the measured size, taking the lengths back in the same order. No string is
 * measured twice, nothing is copied or shifted, and no value is boxed per field (times are split
 * into two 32-bit halves with plain arithmetic, not BigInt). An attribute's key is one of a few
 * names said again in every span: its whole `KeyValue.key` field is encoded once and copied after.
 *
 * Encoding choices (proto3, https://protobuf.dev/programming-guides/encoding/): fields in field
 * number order; scalar fields at their default value (0, '') are left out, except the span's and
 * the event's name and the scope's name, which are always written (as the OpenTelemetry JS
 * serializer does); the status is written only when it has a code or a message; the dropped
 * counts, links and schema URLs are never written (the gateway drops nothing and links nothing).
 */
import type { TraceAttributes, TraceEvent } from '../core/trace.js';
import type { SpanData, SpanEncoder, SpanSource } from './span.js';
import { unixNanos } from './span.js';

const TWO_32 = 0x1_0000_0000;
/** `int_value` is an int64: an integer outside it is written as `double_value`. */
const INT64_MIN = -(2 ** 63);
const INT64_END = 2 ** 63;
/** Epoch milliseconds below this (year 2527) fit unix nanoseconds in a fixed64 on the fast path. */
const FAST_TIME_END = 2 ** 44;

// Field keys, `(field_number << 3) | wire_type` (0 varint, 1 fixed64, 2 length-delimited, 5 fixed32).
const K_LEN_1 = 0x0a; // tag 1, length-delimited
const K_LEN_2 = 0x12;
const K_LEN_3 = 0x1a;
const K_SPAN_TRACE_STATE = 0x1a;
const K_SPAN_PARENT = 0x22;
const K_SPAN_NAME = 0x2a;
const K_SPAN_KIND = 0x30;
const K_SPAN_START = 0x39;
const K_SPAN_END = 0x41;
const K_SPAN_ATTRIBUTE = 0x4a;
const K_SPAN_EVENT = 0x5a;
const K_SPAN_STATUS = 0x7a;
/** Field 16, fixed32: two bytes of varint key. */
const K_SPAN_FLAGS_0 = 0x85;
const K_SPAN_FLAGS_1 = 0x01;
const K_EVENT_TIME = 0x09;
const K_STATUS_MESSAGE = 0x12;
const K_STATUS_CODE = 0x18;
const K_ANY_STRING = 0x0a;
const K_ANY_BOOL = 0x10;
const K_ANY_INT = 0x18;
const K_ANY_DOUBLE = 0x21;

/** Hex digit values by character code; anything else reads as 0 (the ids are the tracer's own hex). */
const HEX = new Uint8Array(128);
for (let i = 0; i < 10; i++) HEX[48 + i] = i;
for (let i = 0; i < 6; i++) HEX[97 + i] = HEX[65 + i] = 10 + i;

/**
 * The `KeyValue.key` field (key byte, length, UTF-8 bytes) of each attribute key met, made once:
 * at most `MAX_KEY_FIELDS` keys (a key past them is measured and written as any string). The map
 * only grows, so a key the measuring pass found or added here is here for the writing pass too.
 */
const KEY_FIELDS = new Map<string, Uint8Array>();
const MAX_KEY_FIELDS = 1024;

/** The key's field from KEY_FIELDS, added when there is room; undefined past MAX_KEY_FIELDS. */
function keyField(key: string): Uint8Array | undefined {
  const known = KEY_FIELDS.get(key);
  if (known !== undefined || KEY_FIELDS.size >= MAX_KEY_FIELDS) return known;
  const bytes = Buffer.from(key, 'utf8');
  const field = new Uint8Array(1 + varintSize(bytes.length) + bytes.length);
  field[0] = K_LEN_1; // KeyValue.key
  let p = 1;
  let v = bytes.length;
  while (v >= 0x80) {
    field[p++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  field[p++] = v;
  field.set(bytes, p);
  KEY_FIELDS.set(key, field);
  return field;
}

/** Message and string lengths from the measuring pass, read back in order by the writing pass. */
let lengths: number[] = [];
let li = 0;
let buf: Buffer = Buffer.alloc(0);
let pos = 0;
/** The halves of the last 64-bit value split by `splitInt` or `splitTime`. */
let lo = 0;
let hi = 0;

/** Writes one `ExportTraceServiceRequest` of the spans; empty when there are none. */
export const encodeProtobuf: SpanEncoder = (source: SpanSource, spans: readonly SpanData[]): Uint8Array => {
  if (spans.length === 0) return new Uint8Array(0);
  li = 0;
  const size = measureRequest(source, spans);
  const out = Buffer.allocUnsafe(size);
  buf = out;
  pos = 0;
  li = 0;
  writeRequest(source, spans);
  buf = Buffer.alloc(0);
  if (lengths.length > 65_536) lengths = [];
  if (pos !== size) throw new Error(`otlp-proto: wrote ${pos} bytes of ${size} measured`);
  return out;
};

// ---------------------------------------------------------------------------------------------
// Measuring pass: each function returns the bytes its part takes, recording lengths on the way.

/** A slot for a message's length, filled once its children are measured. */
function slot(): number {
  lengths[li] = 0;
  return li++;
}

function varintSize(v: number): number {
  return v < 0x80 ? 1 : v < 0x4000 ? 2 : v < 0x20_0000 ? 3 : v < 0x1000_0000 ? 4 : 5;
}

/** A length-delimited field's bytes after its key: the length's varint and the content. */
function delimited(size: number): number {
  return varintSize(size) + size;
}

/** A string field's bytes after its key; records its UTF-8 length. */
function measureString(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    if (s.charCodeAt(i) >= 0x80) {
      n = Buffer.byteLength(s, 'utf8');
      break;
    }
  }
  lengths[li++] = n;
  return varintSize(n) + n;
}

function measureRequest(source: SpanSource, spans: readonly SpanData[]): number {
  const rsSlot = slot();
  const resSlot = slot();
  const res = measureAttributes(source.resource);
  lengths[resSlot] = res;
  const ssSlot = slot();
  const scopeSlot = slot();
  let scope = 1 + measureString(source.scope.name);
  if (source.scope.version !== '') scope += 1 + measureString(source.scope.version);
  lengths[scopeSlot] = scope;
  let ss = 1 + delimited(scope);
  for (const span of spans) {
    const spanSlot = slot();
    const s = measureSpan(span);
    lengths[spanSlot] = s;
    ss += 1 + delimited(s);
  }
  lengths[ssSlot] = ss;
  const rs = 1 + delimited(res) + 1 + delimited(ss);
  lengths[rsSlot] = rs;
  return 1 + delimited(rs);
}

function measureSpan(span: SpanData): number {
  let n = 1 + delimited(span.traceId.length >>> 1) + 1 + delimited(span.spanId.length >>> 1);
  if (span.traceState) n += 1 + measureString(span.traceState);
  if (span.parentSpanId) n += 1 + delimited(span.parentSpanId.length >>> 1);
  n += 1 + measureString(span.name);
  n += 1 + varintSize(span.kind) + 18;
  n += measureAttributes(span.attributes);
  for (const event of span.events) {
    const evSlot = slot();
    let ev = 9 + 1 + measureString(event.name);
    if (event.attributes !== undefined) ev += measureAttributes(event.attributes);
    lengths[evSlot] = ev;
    n += 1 + delimited(ev);
  }
  if (span.status !== 0 || span.statusMessage) {
    const stSlot = slot();
    let st = 0;
    if (span.statusMessage) st += 1 + measureString(span.statusMessage);
    if (span.status !== 0) st += 1 + varintSize(span.status);
    lengths[stSlot] = st;
    n += 1 + delimited(st);
  }
  if (span.flags !== 0) n += 6;
  return n;
}

/** Repeated `KeyValue`s, each with its key byte. */
function measureAttributes(attributes: TraceAttributes): number {
  let n = 0;
  for (const key of Object.keys(attributes)) {
    const kvSlot = slot();
    const field = keyField(key);
    const k = field === undefined ? 1 + measureString(key) : field.length;
    const anySlot = slot();
    const v = measureValue(attributes[key]);
    lengths[anySlot] = v;
    const kv = k + 1 + delimited(v);
    lengths[kvSlot] = kv;
    n += 1 + delimited(kv);
  }
  return n;
}

/** An `AnyValue`'s content. A value of no attribute type gives an empty `AnyValue`. */
function measureValue(v: unknown): number {
  switch (typeof v) {
    case 'string':
      return 1 + measureString(v);
    case 'boolean':
      return 2;
    case 'number':
      return isInt64(v) ? 1 + int64Size(v) : 9;
    default:
      return 0;
  }
}

function isInt64(v: number): boolean {
  return Number.isInteger(v) && v >= INT64_MIN && v < INT64_END;
}

/** The varint of an int64: a negative one is its 64-bit two's complement, ten bytes. */
function int64Size(v: number): number {
  if (v < 0) return 10;
  let n = 1;
  while (v >= 0x80) {
    v = Math.floor(v / 0x80);
    n++;
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// Writing pass: the same walk, in the same order, taking the lengths back.

function writeRequest(source: SpanSource, spans: readonly SpanData[]): void {
  buf[pos++] = K_LEN_1; // ExportTraceServiceRequest.resource_spans
  writeLength();
  buf[pos++] = K_LEN_1; // ResourceSpans.resource
  writeLength();
  writeAttributes(source.resource, K_LEN_1); // Resource.attributes
  buf[pos++] = K_LEN_2; // ResourceSpans.scope_spans
  writeLength();
  buf[pos++] = K_LEN_1; // ScopeSpans.scope
  writeLength();
  buf[pos++] = K_LEN_1; // InstrumentationScope.name
  writeString(source.scope.name);
  if (source.scope.version !== '') {
    buf[pos++] = K_LEN_2; // InstrumentationScope.version
    writeString(source.scope.version);
  }
  for (const span of spans) {
    buf[pos++] = K_LEN_2; // ScopeSpans.spans
    writeLength();
    writeSpan(span);
  }
}

function writeSpan(span: SpanData): void {
  buf[pos++] = K_LEN_1;
  writeHex(span.traceId);
  buf[pos++] = K_LEN_2;
  writeHex(span.spanId);
  if (span.traceState) {
    buf[pos++] = K_SPAN_TRACE_STATE;
    writeString(span.traceState);
  }
  if (span.parentSpanId) {
    buf[pos++] = K_SPAN_PARENT;
    writeHex(span.parentSpanId);
  }
  buf[pos++] = K_SPAN_NAME;
  writeString(span.name);
  buf[pos++] = K_SPAN_KIND;
  writeVarint(span.kind);
  buf[pos++] = K_SPAN_START;
  writeTime(span.start);
  buf[pos++] = K_SPAN_END;
  writeTime(span.end);
  writeAttributes(span.attributes, K_SPAN_ATTRIBUTE);
  for (const event of span.events) writeEvent(event);
  if (span.status !== 0 || span.statusMessage) {
    buf[pos++] = K_SPAN_STATUS;
    writeLength();
    if (span.statusMessage) {
      buf[pos++] = K_STATUS_MESSAGE;
      writeString(span.statusMessage);
    }
    if (span.status !== 0) {
      buf[pos++] = K_STATUS_CODE;
      writeVarint(span.status);
    }
  }
  if (span.flags !== 0) {
    buf[pos++] = K_SPAN_FLAGS_0;
    buf[pos++] = K_SPAN_FLAGS_1;
    writeFixed32(span.flags);
  }
}

function writeEvent(event: TraceEvent): void {
  buf[pos++] = K_SPAN_EVENT;
  writeLength();
  buf[pos++] = K_EVENT_TIME;
  writeTime(event.at);
  buf[pos++] = K_LEN_2; // Event.name
  writeString(event.name);
  if (event.attributes !== undefined) writeAttributes(event.attributes, K_LEN_3);
}

function writeAttributes(attributes: TraceAttributes, key: number): void {
  for (const k of Object.keys(attributes)) {
    buf[pos++] = key;
    writeLength(); // KeyValue
    const field = KEY_FIELDS.get(k);
    if (field === undefined) {
      buf[pos++] = K_LEN_1; // KeyValue.key
      writeString(k);
    } else {
      buf.set(field, pos);
      pos += field.length;
    }
    buf[pos++] = K_LEN_2; // KeyValue.value
    writeLength(); // AnyValue
    writeValue(attributes[k]);
  }
}

function writeValue(v: unknown): void {
  switch (typeof v) {
    case 'string':
      buf[pos++] = K_ANY_STRING;
      writeString(v);
      return;
    case 'boolean':
      buf[pos++] = K_ANY_BOOL;
      buf[pos++] = v ? 1 : 0;
      return;
    case 'number':
      if (isInt64(v)) {
        buf[pos++] = K_ANY_INT;
        writeInt64(v);
      } else {
        buf[pos++] = K_ANY_DOUBLE;
        pos = buf.writeDoubleLE(v, pos);
      }
      return;
    default:
  }
}

/** The next measured length, as a varint. */
function writeLength(): void {
  writeVarint(lengths[li++]!);
}

/** A varint of a value below 2^32. */
function writeVarint(v: number): void {
  while (v >= 0x80) {
    buf[pos++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  buf[pos++] = v;
}

/** A string whose UTF-8 length was measured: ASCII byte by byte, anything else by Buffer. */
function writeString(s: string): void {
  const n = lengths[li++]!;
  writeVarint(n);
  if (n === s.length) {
    if (n > 32) {
      buf.write(s, pos, n, 'latin1');
    } else {
      for (let i = 0; i < n; i++) buf[pos + i] = s.charCodeAt(i);
    }
  } else {
    buf.write(s, pos, n, 'utf8');
  }
  pos += n;
}

/** Lower-case hex as `bytes`: its length, then a byte per two digits. */
function writeHex(hex: string): void {
  const n = hex.length >>> 1;
  writeVarint(n);
  for (let i = 0; i < n; i++) {
    buf[pos++] = (HEX[hex.charCodeAt(2 * i) & 0x7f]! << 4) | HEX[hex.charCodeAt(2 * i + 1) & 0x7f]!;
  }
}

function writeFixed32(v: number): void {
  buf[pos++] = v & 0xff;
  buf[pos++] = (v >>> 8) & 0xff;
  buf[pos++] = (v >>> 16) & 0xff;
  buf[pos++] = (v >>> 24) & 0xff;
}

/** Epoch milliseconds as fixed64 unix nanoseconds, the value `unixNanos` gives. */
function writeTime(ms: number): void {
  splitTime(ms);
  writeFixed32(lo);
  writeFixed32(hi);
}

/**
 * `unixNanos(ms)` as two 32-bit halves without BigInt: the whole milliseconds split at 2^16 so
 * every product stays below 2^53, then the halves recombined with their carry.
 */
function splitTime(ms: number): void {
  if (!(ms >= 0 && ms < FAST_TIME_END)) {
    const ns = BigInt.asUintN(64, unixNanos(ms));
    lo = Number(ns & 0xffff_ffffn);
    hi = Number(ns >> 32n);
    return;
  }
  const whole = Math.floor(ms);
  const frac = Math.round((ms - whole) * 1e6);
  const wl = whole % 0x1_0000;
  const a = ((whole - wl) / 0x1_0000) * 1e6; // × 2^16 × 1e6 nanoseconds
  const b = wl * 1e6 + frac;
  const low = (a % 0x1_0000) * 0x1_0000 + (b % TWO_32);
  const carry = low >= TWO_32 ? 1 : 0;
  lo = low - carry * TWO_32;
  hi = Math.floor(a / 0x1_0000) + Math.floor(b / TWO_32) + carry;
}

/** An int64 as a varint: up to ten bytes, a negative value in two's complement. */
function writeInt64(v: number): void {
  if (v >= 0 && v < TWO_32) {
    writeVarint(v);
    return;
  }
  splitInt(v);
  while (hi > 0 || lo >= 0x80) {
    buf[pos++] = (lo & 0x7f) | 0x80;
    lo = ((lo >>> 7) | (hi << 25)) >>> 0;
    hi >>>= 7;
  }
  buf[pos++] = lo;
}

/** An integer in int64's range as the two halves of its 64-bit two's complement. */
function splitInt(v: number): void {
  const a = Math.abs(v);
  lo = a % TWO_32;
  hi = Math.floor(a / TWO_32);
  if (v < 0) {
    lo = (~lo >>> 0) + 1;
    hi = ~hi >>> 0;
    if (lo === TWO_32) {
      lo = 0;
      hi = (hi + 1) >>> 0;
    }
  }
}
