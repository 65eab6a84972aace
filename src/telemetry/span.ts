/**
 * The spans the gateway exports, as plain values: what the tracer makes of a finished request
 * (tracer.ts), what the OTLP writers encode (otlp-proto.ts, otlp-json.ts) and the exporter batches
 * (exporter.ts). Their fields are OTLP's (opentelemetry-proto, trace/v1/trace.proto), in the
 * gateway's units: ids as lower-case hex, times as epoch milliseconds with a fraction.
 */
import type { TraceAttributes, TraceEvent } from '../core/trace.js';

/** `Span.SpanKind`: the gateway makes SERVER spans (the client's request) and CLIENT spans (each upstream attempt). */
export const SPAN_KIND = { server: 2, client: 3 } as const;
export type SpanKind = (typeof SPAN_KIND)[keyof typeof SPAN_KIND];

/** `Status.StatusCode`. */
export const STATUS_CODE = { unset: 0, ok: 1, error: 2 } as const;
export type StatusCode = (typeof STATUS_CODE)[keyof typeof STATUS_CODE];

/**
 * `Span.flags`: bits 0-7 the W3C trace flags (bit 0: sampled), bit 8 says whether the parent's
 * remoteness is known, bit 9 that the parent is remote (SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK,
 * SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK).
 */
export const SPAN_FLAGS = { sampled: 0x01, hasIsRemote: 0x100, isRemote: 0x200 } as const;

/**
 * An attribute value: a string, a boolean, or a number; a number that is an integer (`Number.isInteger`)
 * is written as `intValue`, any other as `doubleValue`.
 */
export interface SpanData {
  /** 32 lower-case hex digits. */
  readonly traceId: string;
  /** 16 lower-case hex digits. */
  readonly spanId: string;
  readonly parentSpanId: string | undefined;
  /** The W3C `tracestate` the span was made under, as it came. */
  readonly traceState: string | undefined;
  readonly name: string;
  readonly kind: SpanKind;
  /** Epoch milliseconds with a fraction (`traceNow`); written as unix nanoseconds (`unixNanos`). */
  readonly start: number;
  readonly end: number;
  readonly attributes: TraceAttributes;
  readonly events: readonly TraceEvent[];
  readonly status: StatusCode;
  /** Only with `STATUS_CODE.error`, and only words of the gateway's (never an upstream's text). */
  readonly statusMessage: string | undefined;
  /** `SPAN_FLAGS` bits. */
  readonly flags: number;
}

/** Who made the spans: the `Resource` (service.name, service.version, ...) and the `InstrumentationScope`. */
export interface SpanSource {
  readonly resource: TraceAttributes;
  readonly scope: { readonly name: string; readonly version: string };
}

/** Turns spans into one OTLP `ExportTraceServiceRequest` body. */
export type SpanEncoder = (source: SpanSource, spans: readonly SpanData[]) => Uint8Array | string;

/**
 * Epoch milliseconds (with a fraction) as unix nanoseconds, exact to the nanosecond the double holds:
 * the whole milliseconds and the fraction are converted apart, since the product does not fit 2^53.
 */
export function unixNanos(ms: number): bigint {
  const whole = Math.floor(ms);
  return BigInt(whole) * 1_000_000n + BigInt(Math.round((ms - whole) * 1e6));
}
