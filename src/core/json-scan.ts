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

const LITERALS = [Buffer.from('true'), Buffer.from('false'), Buffer.from('null')];

function isDigit(b: number | undefined): boolean {
  return b !== undefined && b >= 0x30 && b <= 0x39;
}

/** `i` at the start of a number or literal (RFC 8259 sections 3 and 6); returns the index after it. */
function skipScalar(buf: Buffer, i: number): number {
  const b = buf[i];
  for (const lit of LITERALS) {
    if (b === lit[0]) {
      for (let k = 1; k < lit.length; k++) if (buf[i + k] !== lit[k]) throw new ScanError('value expected');
      return i + lit.length;
    }
  }
  // number = [ minus ] int [ frac ] [ exp ]
  if (buf[i] === 0x2d) i++;
  if (buf[i] === 0x30) i++;
  else if (isDigit(buf[i])) while (isDigit(buf[i])) i++;
  else throw new ScanError('value expected');
  if (buf[i] === 0x2e) {
    if (!isDigit(buf[++i])) throw new ScanError('digit expected');
    while (isDigit(buf[i])) i++;
  }
  if (buf[i] === 0x65 || buf[i] === 0x45) {
    i++;
    if (buf[i] === 0x2b || buf[i] === 0x2d) i++;
    if (!isDigit(buf[i])) throw new ScanError('digit expected');
    while (isDigit(buf[i])) i++;
  }
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

/** Whether the string token `buf[start, end)` has an escape. */
function hasEscape(buf: Buffer, start: number, end: number): boolean {
  for (let i = start + 1; i < end - 1; i++) if (buf[i] === BACKSLASH) return true;
  return false;
}

/** The decoded value of a string token `buf[start, end)`. */
function decodeString(buf: Buffer, start: number, end: number): string {
  return hasEscape(buf, start, end) ? (JSON.parse(buf.toString('utf8', start, end)) as string) : buf.toString('utf8', start + 1, end - 1);
}

/** Whether the string token `buf[start, end)` means `wanted` (given as a quoted token, e.g. `"sold"`). */
function tokenEquals(buf: Buffer, start: number, end: number, wanted: Buffer): boolean {
  if (end - start === wanted.length) {
    let k = 0;
    while (k < wanted.length && buf[start + k] === wanted[k]) k++;
    if (k === wanted.length) return true;
  }
  // An escaped spelling such as "st\u0061tus" still means the same string.
  return hasEscape(buf, start, end) && decodeString(buf, start, end) === wanted.toString('utf8', 1, wanted.length - 1);
}

/**
 * `i` at `{`; returns the end of the object, negated when its top-level `status` is not the string
 * `wanted` (the last `status` wins, as with JSON.parse).
 */
function scanObject(buf: Buffer, i: number, wanted: Buffer): number {
  let matches = false;
  i = skipSpace(buf, i + 1);
  if (buf[i] === RBRACE) return -(i + 1);
  for (;;) {
    const keyStart = i;
    const keyEnd = buf[i] === QUOTE ? skipString(buf, i) : i;
    i = skipKey(buf, i);
    const valueStart = i;
    i = skipValue(buf, i);
    if (tokenEquals(buf, keyStart, keyEnd, STATUS_KEY)) matches = buf[valueStart] === QUOTE && tokenEquals(buf, valueStart, i, wanted);
    i = skipSpace(buf, i);
    if (buf[i] === RBRACE) return matches ? i + 1 : -(i + 1);
    if (buf[i] !== COMMA) throw new ScanError("',' or '}' expected");
    i = skipSpace(buf, i + 1);
  }
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
  const wanted = status === undefined ? undefined : Buffer.from(JSON.stringify(status));
  let i = skipSpace(buf, 0);
  if (buf[i] !== LBRACKET) throw new ScanError('not a JSON array');
  i = skipSpace(buf, i + 1);
  // Kept elements as [start, end) offsets; Buffers are only made if the array must be rebuilt.
  const kept: number[] = [];
  let removed = false;
  if (buf[i] === RBRACKET) {
    if (skipSpace(buf, i + 1) !== buf.length) throw new ScanError('trailing data');
    return { body: buf, changed: false };
  }
  for (;;) {
    if (kept.length === limit * 2) {
      // Another element follows the last one we may send: cut here, unread.
      removed = true;
      break;
    }
    const start = i;
    let end: number;
    if (wanted === undefined) {
      end = skipValue(buf, i);
      kept.push(start, end);
    } else {
      end = buf[i] === LBRACE ? scanObject(buf, i, wanted) : -skipValue(buf, i);
      if (end > 0) kept.push(start, end);
      else {
        end = -end;
        removed = true;
      }
    }
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
  for (let k = 0; k < kept.length; k += 2) {
    if (k > 0) parts.push(SEPARATOR);
    parts.push(buf.subarray(kept[k], kept[k + 1]));
  }
  parts.push(CLOSE);
  return { body: Buffer.concat(parts), changed: true };
}
