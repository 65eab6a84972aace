/**
 * A byte-level scanner over a JSON array of objects, for response enforcement without a parse and
 * re-stringify: it finds where each top-level element starts and ends and the value of its
 * top-level `status` field, and stops as soon as the caller has what it needs. Kept elements are
 * copied as their original bytes, so every number survives exactly.
 *
 * Scanning bytes is safe for UTF-8: every byte of a multi-byte sequence is >= 0x80, so it can never
 * be mistaken for a quote, bracket, comma or backslash.
 */

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const STATUS_KEY = Buffer.from('"status"');
const OPEN = Buffer.from('[');
const SEPARATOR = Buffer.from(',');
const CLOSE = Buffer.from(']');

export class ScanError extends Error {}

function isSpace(b: number | undefined): boolean {
  return b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
}

function skipSpace(buf: Buffer, i: number): number {
  while (i < buf.length && isSpace(buf[i])) i++;
  return i;
}

/** `i` at an opening quote; returns the index after the closing quote. */
function skipString(buf: Buffer, i: number): number {
  for (i++; i < buf.length; i++) {
    const b = buf[i];
    if (b === BACKSLASH) i++;
    else if (b === QUOTE) return i + 1;
  }
  throw new ScanError('unterminated string');
}

/** A JSON number or literal, the whole token (RFC 8259 sections 3 and 6). */
const SCALAR = /^(-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?|true|false|null)$/;

/** `i` at the start of a number or literal; returns the index after it. */
function skipScalar(buf: Buffer, i: number): number {
  const start = i;
  while (i < buf.length && !isSpace(buf[i]) && buf[i] !== COMMA && buf[i] !== RBRACKET && buf[i] !== RBRACE && buf[i] !== COLON) i++;
  if (i === start || i - start > 512 || !SCALAR.test(buf.toString('latin1', start, i))) throw new ScanError('value expected');
  return i;
}

/**
 * `i` at the start of any value; returns the index after it. Inside arrays and objects it checks
 * the structure (brackets of the right kind, keys, colons, commas, scalar tokens) without building
 * anything, so what it passes on is JSON.
 */
function skipValue(buf: Buffer, i: number): number {
  const b = buf[i];
  if (b === QUOTE) return skipString(buf, i);
  if (b !== LBRACE && b !== LBRACKET) return skipScalar(buf, i);
  const closers: number[] = [];
  for (;;) {
    // At the start of a value.
    const c = buf[i];
    if (c === LBRACE || c === LBRACKET) {
      const close = c === LBRACE ? RBRACE : RBRACKET;
      closers.push(close);
      i = skipSpace(buf, i + 1);
      if (buf[i] === close) {
        closers.pop();
        i++;
      } else {
        if (close === RBRACE) i = skipKey(buf, i);
        continue;
      }
    } else if (c === QUOTE) i = skipString(buf, i);
    else i = skipScalar(buf, i);
    // After a value: a comma, or closing brackets.
    for (;;) {
      if (closers.length === 0) return i;
      i = skipSpace(buf, i);
      const top = closers[closers.length - 1];
      if (buf[i] === top) {
        closers.pop();
        i++;
        continue;
      }
      if (buf[i] !== COMMA) throw new ScanError(i >= buf.length ? 'truncated' : 'unbalanced brackets');
      i = skipSpace(buf, i + 1);
      if (top === RBRACE) i = skipKey(buf, i);
      break;
    }
  }
}

/** `i` at an object key; returns the index of the value after its colon. */
function skipKey(buf: Buffer, i: number): number {
  if (buf[i] !== QUOTE) throw new ScanError('object key expected');
  i = skipSpace(buf, skipString(buf, i));
  if (buf[i] !== COLON) throw new ScanError("':' expected");
  return skipSpace(buf, i + 1);
}

/** The decoded value of a string token `buf[start, end)`. */
function decodeString(buf: Buffer, start: number, end: number): string {
  const raw = buf.subarray(start, end);
  return raw.includes(BACKSLASH) ? (JSON.parse(raw.toString('utf8')) as string) : raw.subarray(1, -1).toString('utf8');
}

/** `i` at `{`; returns the end of the object and its top-level `status` if it is a string. */
function scanObject(buf: Buffer, i: number): { end: number; status: string | undefined } {
  let status: string | undefined;
  i = skipSpace(buf, i + 1);
  if (buf[i] === RBRACE) return { end: i + 1, status };
  for (;;) {
    const keyStart = i;
    const keyEnd = buf[i] === QUOTE ? skipString(buf, i) : i;
    i = skipKey(buf, i);
    const valueStart = i;
    i = skipValue(buf, i);
    if (buf[valueStart] === QUOTE && isStatusKey(buf, keyStart, keyEnd)) status = decodeString(buf, valueStart, i);
    i = skipSpace(buf, i);
    if (buf[i] === RBRACE) return { end: i + 1, status };
    if (buf[i] !== COMMA) throw new ScanError("',' or '}' expected");
    i = skipSpace(buf, i + 1);
  }
}

function isStatusKey(buf: Buffer, start: number, end: number): boolean {
  const key = buf.subarray(start, end);
  // An escaped spelling such as "st\u0061tus" is still the key `status`.
  return key.equals(STATUS_KEY) || (key.includes(BACKSLASH) && decodeString(buf, start, end) === 'status');
}

export interface ArrayFilterResult {
  /** The array to send: the original buffer when nothing was removed, else the kept elements. */
  readonly body: Buffer;
  /** Whether any element was removed or cut off. */
  readonly changed: boolean;
}

/**
 * Keeps at most `limit` elements of a JSON array, and only objects whose `status` equals `status`
 * when one is given. Scans only as far as it must: the elements after the `limit`-th kept one are
 * never read, so `buf` may be a truncated prefix of a longer body. Throws ScanError when the bytes
 * it reads are not a JSON array or when it needs bytes that `buf` does not hold.
 */
export function filterArray(buf: Buffer, limit: number, status: string | undefined): ArrayFilterResult {
  let i = skipSpace(buf, 0);
  if (buf[i] !== LBRACKET) throw new ScanError('not a JSON array');
  i = skipSpace(buf, i + 1);
  const kept: Buffer[] = [];
  let removed = false;
  if (buf[i] === RBRACKET) {
    if (skipSpace(buf, i + 1) !== buf.length) throw new ScanError('trailing data');
    return { body: buf, changed: false };
  }
  for (;;) {
    if (kept.length === limit) {
      // Another element follows the last one we may send: cut here, unread.
      removed = true;
      break;
    }
    const start = i;
    let end: number;
    let elementStatus: string | undefined;
    if (buf[i] === LBRACE) ({ end, status: elementStatus } = scanObject(buf, i));
    else end = skipValue(buf, i);
    if (status === undefined || elementStatus === status) kept.push(buf.subarray(start, end));
    else removed = true;
    i = skipSpace(buf, end);
    if (buf[i] === RBRACKET) {
      if (skipSpace(buf, i + 1) !== buf.length) throw new ScanError('trailing data');
      break;
    }
    if (buf[i] !== COMMA) throw new ScanError(i >= buf.length ? 'truncated' : "',' or ']' expected");
    i = skipSpace(buf, i + 1);
  }
  if (!removed) return { body: buf, changed: false };
  const parts: Buffer[] = [OPEN];
  kept.forEach((k, n) => {
    if (n > 0) parts.push(SEPARATOR);
    parts.push(k);
  });
  parts.push(CLOSE);
  return { body: Buffer.concat(parts), changed: true };
}
