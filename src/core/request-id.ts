/**
 * Request ids and W3C trace context: pure functions the exchange calls
 * once per request, before the chain, so every response (errors included) can carry the id and the
 * upstream receives the same id and a valid `traceparent`.
 *
 * - `X-Request-Id`: kept when it is 1-128 characters of `[A-Za-z0-9._:-]` (nothing a log line, a
 *   header or a shell could misread), else replaced; generated when absent.
 * - `traceparent` / `tracestate`: W3C Trace Context (https://www.w3.org/TR/trace-context/),
 *   version 00 checked exactly, higher versions parsed by the spec's forward-compatibility rules
 *   and sent on as version 00; `tracestate` forwarded only next to a valid `traceparent`; a new
 *   `traceparent` made when the client sent none or an invalid one.
 */
import { randomFillSync } from 'node:crypto';

/** The id the gateway keeps from a client: 1-128 characters of a conservative set. */
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Whether a client's X-Request-Id is kept as is. */
export function isValidRequestId(value: string): boolean {
  return REQUEST_ID.test(value);
}

/**
 * A new request id: a random (version 4) UUID, from the random pool below. node's randomUUID
 * returns a string built by concatenation, which every header check (node's, undici's regex)
 * must first copy flat, which costs more per id checked once as a header than this one,
 * written as bytes and read out as one flat string (`node bench/ops.mjs`). A prefix and a counter
 * cost about the same but would tell every client how many requests the gateway has
 * served.
 */
export function newRequestId(): string {
  const at = draw(16);
  const out = SCRATCH;
  let o = 0;
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) out[o++] = 45; // '-'
    let b = POOL[at + i]!; // `draw(16)` reserved POOL[at .. at + 15]
    if (i === 6) b = (b & 0x0f) | 0x40; // version 4
    else if (i === 8) b = (b & 0x3f) | 0x80; // variant 10 (RFC 9562)
    o = hexByte(out, o, b);
  }
  return out.toString('latin1', 0, 36);
}

/**
 * The request id of a request: the client's `X-Request-Id` when valid, else a new one. A header
 * repeated (an array) is not one id: replaced.
 */
export function requestIdOf(header: string | string[] | undefined): string {
  return typeof header === 'string' && REQUEST_ID.test(header) ? header : newRequestId();
}

/**
 * Random bytes for new ids, drawn from the OS (randomFillSync, the CSPRNG) 4 KiB at a time rather
 * than per request, as node's randomUUID caches its entropy: 16 bytes per request id, 24 per
 * traceparent (16 for the trace id, 8 for the parent id).
 */
const POOL = Buffer.alloc(4096);
let poolOffset = POOL.length;

/** The offset of `n` fresh random bytes in POOL. */
function draw(n: number): number {
  if (poolOffset + n > POOL.length) {
    randomFillSync(POOL);
    poolOffset = 0;
  }
  const at = poolOffset;
  poolOffset += n;
  return at;
}

/** Where ids are written as ASCII before they are read out as one flat string. */
const SCRATCH = Buffer.alloc(64);
const HEX_DIGITS = Buffer.from('0123456789abcdef', 'latin1');

// The `!` on reads of POOL and HEX_DIGITS below: indexes within bounds by construction (a nibble
// into 16 digits; `draw` reserves the bytes it returns), which noUncheckedIndexedAccess cannot see.
function hexByte(out: Buffer, o: number, b: number): number {
  out[o] = HEX_DIGITS[b >> 4]!;
  out[o + 1] = HEX_DIGITS[b & 15]!;
  return o + 2;
}

export interface TraceContext {
  /** The `traceparent` to send upstream: the client's when valid, else a new one. */
  readonly traceparent: string;
  /** The `tracestate` to send upstream, only when the client's traceparent was valid and its tracestate too. */
  readonly tracestate: string | undefined;
  /** Whether `traceparent` is the client's (true) or made here (false). */
  readonly continued: boolean;
}

const HEX = /^[0-9a-f]+$/;
const ZERO_TRACE = '00000000000000000000000000000000';
const ZERO_PARENT = '0000000000000000';

/**
 * The traceparent header, as version 00 to forward, or undefined when it is not valid
 * (W3C Trace Context section 3.2 and "Versioning of traceparent").
 */
export function parseTraceparent(value: string): string | undefined {
  // version "-" trace-id "-" parent-id "-" trace-flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55.
  if (value.length < 55) return undefined;
  if (value.charCodeAt(2) !== 45 || value.charCodeAt(35) !== 45 || value.charCodeAt(52) !== 45) return undefined;
  const version = value.slice(0, 2);
  const traceId = value.slice(3, 35);
  const parentId = value.slice(36, 52);
  const flags = value.slice(53, 55);
  // Lowercase hex only: "Vendors MUST ... not accept uppercase" (section 3.2.2.1); ff is an invalid version.
  if (!HEX.test(version) || version === 'ff' || !HEX.test(traceId) || !HEX.test(parentId) || !HEX.test(flags)) return undefined;
  // All-zero ids are invalid (sections 3.2.2.3 and 3.2.2.4).
  if (traceId === ZERO_TRACE || parentId === ZERO_PARENT) return undefined;
  if (version === '00') {
    // Version 00 is exactly 55 characters: anything after is an error, not an extension.
    return value.length === 55 ? value : undefined;
  }
  // A higher version: the first 55 characters parse as 00, followed by the end or a dash; keep
  // the ids and only the sampled flag (bit 0), the one this gateway's version defines.
  if (value.length > 55 && value.charCodeAt(55) !== 45) return undefined;
  const sampled = (Number.parseInt(flags, 16) & 1) === 1 ? '01' : '00';
  return `00-${traceId}-${parentId}-${sampled}`;
}

// tracestate (section 3.3): list-member = key "=" value, at most 32, joined by "," with optional spaces/tabs.
const TRACESTATE_MEMBER =
  /^(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;
const MAX_TRACESTATE_MEMBERS = 32;
/** Vendors "SHOULD propagate at least 512 characters" (section 3.3.1.5); we forward at most that, whole or not at all. */
export const MAX_TRACESTATE_LENGTH = 512;

/**
 * The tracestate to forward, or undefined when it is absent, malformed or longer than we forward.
 * Several headers (node joins them with ", ") are one list (section 3.3.1.1).
 */
export function parseTracestate(value: string | string[] | undefined): string | undefined {
  if (value === undefined) return undefined;
  const joined = typeof value === 'string' ? value : value.join(',');
  if (joined.length === 0 || joined.length > MAX_TRACESTATE_LENGTH * 2) return undefined;
  const members: string[] = [];
  const keys = new Set<string>();
  for (const raw of joined.split(',')) {
    const member = raw.replace(/^[ \t]+|[ \t]+$/g, '');
    if (member.length === 0) continue; // empty list members are allowed and dropped
    if (!TRACESTATE_MEMBER.test(member)) return undefined;
    const key = member.slice(0, member.indexOf('='));
    if (keys.has(key)) return undefined; // a key appears at most once
    keys.add(key);
    members.push(member);
  }
  if (members.length === 0 || members.length > MAX_TRACESTATE_MEMBERS) return undefined;
  const out = members.join(',');
  return out.length <= MAX_TRACESTATE_LENGTH ? out : undefined;
}

/** Whether `n` bytes of POOL from `at` are all zero. */
function allZero(at: number, n: number): boolean {
  for (let i = at; i < at + n; i++) if (POOL[i] !== 0) return false;
  return true;
}

/**
 * A new version 00 traceparent: random trace and parent ids, flags 00 (this gateway records no
 * trace), written as bytes and read out as one flat string like a request id.
 */
export function newTraceparent(): string {
  let at = draw(24);
  // All-zero ids are invalid; with 2^-64 odds, draw again rather than emit one.
  while (allZero(at, 16) || allZero(at + 16, 8)) at = draw(24);
  const out = SCRATCH;
  out[0] = 48; // '0'
  out[1] = 48;
  out[2] = 45; // '-'
  let o = 3;
  for (let i = 0; i < 16; i++) o = hexByte(out, o, POOL[at + i]!);
  out[o++] = 45;
  for (let i = 16; i < 24; i++) o = hexByte(out, o, POOL[at + i]!);
  out[o++] = 45;
  out[o++] = 48;
  out[o++] = 48;
  return out.toString('latin1', 0, o);
}

/**
 * The trace context to forward upstream, from the client's headers (lower-case names, as node
 * gives them). A repeated traceparent (an array, or node's ", " join) is invalid (section 3.2.1).
 */
export function traceContextOf(headers: Readonly<Record<string, string | string[] | undefined>>): TraceContext {
  const tp = headers.traceparent;
  const parsed = typeof tp === 'string' ? parseTraceparent(tp) : undefined;
  if (parsed === undefined) return { traceparent: newTraceparent(), tracestate: undefined, continued: false };
  return { traceparent: parsed, tracestate: parseTracestate(headers.tracestate), continued: true };
}

/** `n` random bytes (not all zero) as lower-case hex, from the pool: a span id (8) or a trace id (16). */
function randomHex(n: number): string {
  let at = draw(n);
  while (allZero(at, n)) at = draw(n);
  const out = SCRATCH;
  let o = 0;
  for (let i = 0; i < n; i++) o = hexByte(out, o, POOL[at + i]!);
  return out.toString('latin1', 0, o);
}

/** A new span id: 16 hex digits, never all zero (W3C Trace Context section 3.2.2.4). */
export function newSpanId(): string {
  return randomHex(8);
}

/** A new trace id: 32 hex digits, never all zero (section 3.2.2.3). */
export function newTraceId(): string {
  return randomHex(16);
}
