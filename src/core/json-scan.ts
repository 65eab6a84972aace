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

/**
 * Nesting deeper than this is refused (a pet is two levels deep). The scanner keeps its stack of
 * expected closing brackets here rather than in an array per value: it never re-enters itself.
 */
const MAX_DEPTH = 512;
const CLOSERS = new Uint8Array(MAX_DEPTH);

/**
 * The byte at `i`, or -1 past the end (a typed array read out of bounds would be `undefined`).
 * Every `buf[i]!` in this file is read under `i < n` (n = buf.length) on the same line or in the
 * loop's condition: the `!` only tells noUncheckedIndexedAccess so. The hot loops read inline
 * rather than through `at` because a call per byte costs as much as the scan.
 */
function at(buf: Buffer, i: number): number {
  return i < buf.length ? buf[i]! : -1;
}

const isSpace = (b: number): boolean => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
const isDigit = (b: number): boolean => b >= 0x30 && b <= 0x39;

function skipSpace(buf: Buffer, i: number): number {
  const n = buf.length;
  while (i < n && isSpace(buf[i]!)) i++;
  return i;
}

function isHex(b: number): boolean {
  return (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66);
}

/** `i` at a backslash inside a string; returns the index of its escape's last byte (RFC 8259 section 7). */
function skipEscape(buf: Buffer, i: number): number {
  const e = at(buf, i + 1);
  if (e === 0x75) {
    for (let k = 2; k < 6; k++) if (!isHex(at(buf, i + k))) throw new ScanError('bad \\u escape');
    return i + 5;
  }
  // " \ / b f n r t
  if (e === QUOTE || e === BACKSLASH || e === 0x2f || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74) return i + 1;
  throw new ScanError(e === -1 ? 'unterminated string' : 'bad escape');
}

/**
 * `i` at an opening quote; returns the index after the closing quote. Control characters must be
 * escaped inside a JSON string; a raw one is refused.
 */
function skipString(buf: Buffer, i: number): number {
  const n = buf.length;
  for (i++; i < n; i++) {
    const b = buf[i]!;
    if (b > BACKSLASH) continue;
    if (b === QUOTE) return i + 1;
    if (b === BACKSLASH) i = skipEscape(buf, i);
    else if (b < 0x20) throw new ScanError('control character in a string');
  }
  throw new ScanError('unterminated string');
}

/**
 * `i` at the start of any value; returns the index after it. Inside arrays and objects it checks
 * the structure (brackets of the right kind, keys, colons, commas, scalar tokens) without building
 * anything, so what it passes on is JSON.
 *
 * One loop with strings, keys, whitespace and numbers written out in place: this runs over every
 * byte of an enforced list, and a call per token costs as much as the bytes (much slower when
 * split into helpers, measured on a 100-animal list).
 */
export function skipValue(buf: Buffer, i: number): number {
  const n = buf.length;
  let depth = 0;
  // Inside an object, after `{` or `,`: a key and its colon come before the value.
  let key = false;
  let b: number;
  for (;;) {
    // At the start of a value, or of a key (no leading space).
    b = i < n ? buf[i]! : -1;
    if (b === QUOTE) {
      for (i++; ; i++) {
        if (i >= n) throw new ScanError('unterminated string');
        const c = buf[i]!;
        if (c > BACKSLASH) continue; // lower-case letters and UTF-8: most string bytes, one test
        if (c === QUOTE) break;
        if (c === BACKSLASH) i = skipEscape(buf, i);
        else if (c < 0x20) throw new ScanError('control character in a string');
      }
      i++;
      if (key) {
        key = false;
        b = i < n ? buf[i]! : -1;
        while (isSpace(b)) b = ++i < n ? buf[i]! : -1;
        if (b !== COLON) throw new ScanError("':' expected");
        b = ++i < n ? buf[i]! : -1;
        while (isSpace(b)) b = ++i < n ? buf[i]! : -1;
        continue;
      }
    } else if (key) {
      throw new ScanError('object key expected');
    } else if (b === LBRACE || b === LBRACKET) {
      const close = b === LBRACE ? RBRACE : RBRACKET;
      if (depth === MAX_DEPTH) throw new ScanError('nested too deeply');
      CLOSERS[depth++] = close;
      b = ++i < n ? buf[i]! : -1;
      while (isSpace(b)) b = ++i < n ? buf[i]! : -1;
      if (b !== close) {
        key = close === RBRACE;
        continue;
      }
      depth--;
      i++;
    } else if (b === 0x74 || b === 0x66 || b === 0x6e) {
      const literal = b === 0x74 ? 'true' : b === 0x66 ? 'false' : 'null';
      for (let k = 1; k < literal.length; k++) if ((i + k < n ? buf[i + k] : -1) !== literal.charCodeAt(k)) throw new ScanError('value expected');
      i += literal.length;
    } else {
      // number = [ minus ] int [ frac ] [ exp ]  (RFC 8259 section 6)
      if (b === 0x2d) b = ++i < n ? buf[i]! : -1;
      if (b === 0x30) b = ++i < n ? buf[i]! : -1;
      else if (isDigit(b)) do b = ++i < n ? buf[i]! : -1; while (isDigit(b));
      else throw new ScanError('value expected');
      if (b === 0x2e) {
        b = ++i < n ? buf[i]! : -1;
        if (!isDigit(b)) throw new ScanError('digit expected');
        do b = ++i < n ? buf[i]! : -1; while (isDigit(b));
      }
      if (b === 0x65 || b === 0x45) {
        b = ++i < n ? buf[i]! : -1;
        if (b === 0x2b || b === 0x2d) b = ++i < n ? buf[i]! : -1;
        if (!isDigit(b)) throw new ScanError('digit expected');
        do b = ++i < n ? buf[i]! : -1; while (isDigit(b));
      }
    }
    // After a value: a comma, or closing brackets.
    for (;;) {
      if (depth === 0) return i;
      b = i < n ? buf[i]! : -1;
      while (isSpace(b)) b = ++i < n ? buf[i]! : -1;
      const top = CLOSERS[depth - 1]!;
      if (b === top) {
        depth--;
        i++;
        continue;
      }
      if (b !== COMMA) throw new ScanError(i >= n ? 'truncated' : 'unbalanced brackets');
      b = ++i < n ? buf[i]! : -1;
      while (isSpace(b)) b = ++i < n ? buf[i]! : -1;
      key = top === RBRACE;
      break;
    }
  }
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
  const length = end - start;
  if (length === wanted.length) {
    let k = 0;
    while (k < wanted.length && buf[start + k] === wanted[k]) k++;
    if (k === wanted.length) return true;
  }
  // An escaped spelling such as "st\u0061tus" still means the same string; it is always longer.
  return length > wanted.length && hasEscape(buf, start, end) && decodeString(buf, start, end) === wanted.toString('utf8', 1, wanted.length - 1);
}

/**
 * `i` at `{`; returns the end of the object, negated when its top-level `status` is not the string
 * `wanted`, or when `status` appears more than once.
 *
 * A repeated member name is a contract violation: RFC 8259 section 4 says names SHOULD be unique
 * and that parsers then disagree: JSON.parse keeps the last, others keep the first or refuse. An
 * element `{"status":"sold","status":"available"}` would pass a filter judged one way and reach a
 * client that reads it the other way, so it is dropped whatever the filter. Only `status` is
 * tracked (one boolean per object, no allocation per key); other repeated names are not the
 * filter's concern.
 */
function scanObject(buf: Buffer, i: number, wanted: Buffer): number {
  let matches = false;
  let seen = false;
  i = skipSpace(buf, i + 1);
  if (at(buf, i) === RBRACE) return -(i + 1);
  for (;;) {
    if (at(buf, i) !== QUOTE) throw new ScanError('object key expected');
    const keyStart = i;
    i = skipString(buf, i);
    // "status" spelled plainly (checked byte by byte: this runs for every key), or with escapes.
    const keyLength = i - keyStart;
    const isStatus =
      keyLength === 8
        ? buf[keyStart + 1] === 0x73 && buf[keyStart + 2] === 0x74 && buf[keyStart + 3] === 0x61 && buf[keyStart + 4] === 0x74 && buf[keyStart + 5] === 0x75 && buf[keyStart + 6] === 0x73
        : keyLength > 8 && tokenEquals(buf, keyStart, i, STATUS_KEY);
    i = skipSpace(buf, i);
    if (at(buf, i) !== COLON) throw new ScanError("':' expected");
    i = skipSpace(buf, i + 1);
    const valueStart = i;
    i = at(buf, i) === QUOTE ? skipString(buf, i) : skipValue(buf, i);
    if (isStatus) {
      // Dropped for good on a second `status`, whatever either value says.
      matches = !seen && buf[valueStart] === QUOTE && tokenEquals(buf, valueStart, i, wanted);
      seen = true;
    }
    i = skipSpace(buf, i);
    if (at(buf, i) === RBRACE) return matches ? i + 1 : -(i + 1);
    if (at(buf, i) !== COMMA) throw new ScanError("',' or '}' expected");
    i = skipSpace(buf, i + 1);
  }
}

/**
 * Offsets of the kept elements, [start, end) pairs, in a scratch array shared by every call
 * (filterArray never re-enters) and doubled when a list needs more: cheaper than a new JS array
 * per response.
 */
let KEPT: Uint32Array = new Uint32Array(256);

function grow(a: Uint32Array): Uint32Array {
  const b = new Uint32Array(a.length * 2);
  b.set(a);
  return b;
}

export interface ArrayFilterResult {
  /** The array to send: the original buffer when nothing was removed, else the kept elements. */
  readonly body: Buffer;
  /** Whether any element was removed or cut off. */
  readonly changed: boolean;
}

/**
 * Keeps at most `limit` elements of a JSON array, and only objects whose one `status` member equals
 * `status` when one is given (an object with two `status` members is dropped). Scans only as far as it must: the elements after the `limit`-th kept one are
 * never read, so `buf` may be a truncated prefix of a longer body. Throws ScanError when the bytes
 * it reads are not a JSON array or when it needs bytes that `buf` does not hold.
 */
export function filterArray(buf: Buffer, limit: number, status: string | undefined): ArrayFilterResult {
  const wanted = status === undefined ? undefined : Buffer.from(JSON.stringify(status));
  let i = skipSpace(buf, 0);
  if (at(buf, i) !== LBRACKET) throw new ScanError('not a JSON array');
  i = skipSpace(buf, i + 1);
  // Kept elements as [start, end) offsets (in a scratch array: filterArray never re-enters);
  // Buffers are only made if the array must be rebuilt.
  let kept = KEPT;
  let k = 0;
  let removed = false;
  if (at(buf, i) === RBRACKET) {
    if (skipSpace(buf, i + 1) !== buf.length) throw new ScanError('trailing data');
    return { body: buf, changed: false };
  }
  for (;;) {
    if (k === limit * 2) {
      // Another element follows the last one we may send: cut here, unread.
      removed = true;
      break;
    }
    const start = i;
    let end: number;
    if (wanted === undefined) {
      end = skipValue(buf, i);
      if (k === kept.length) kept = KEPT = grow(kept);
      kept[k++] = start;
      kept[k++] = end;
    } else {
      end = at(buf, i) === LBRACE ? scanObject(buf, i, wanted) : -skipValue(buf, i);
      if (end > 0) {
        if (k === kept.length) kept = KEPT = grow(kept);
        kept[k++] = start;
        kept[k++] = end;
      } else {
        end = -end;
        removed = true;
      }
    }
    i = skipSpace(buf, end);
    if (at(buf, i) === RBRACKET) {
      if (skipSpace(buf, i + 1) !== buf.length) throw new ScanError('trailing data');
      break;
    }
    if (at(buf, i) !== COMMA) throw new ScanError(i >= buf.length ? 'truncated' : "',' or ']' expected");
    i = skipSpace(buf, i + 1);
  }
  if (!removed) return { body: buf, changed: false };
  const parts: Buffer[] = [OPEN];
  for (let e = 0; e < k; e += 2) {
    if (e > 0) parts.push(SEPARATOR);
    parts.push(buf.subarray(kept[e], kept[e + 1]));
  }
  parts.push(CLOSE);
  return { body: Buffer.concat(parts), changed: true };
}
