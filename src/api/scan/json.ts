/**
 * The JSON lexer every scanner of this folder reads with (RFC 8259): whitespace, strings and their
 * escapes, and `skipValue`, the one loop that passes over any value while checking its structure;
 * and the structural cut of a list built on them (`filterArray`). The shape checks (object.ts) read
 * their own fields and call these for the rest, so there is one definition of what JSON text is.
 * The cut's fast path (flat.ts) only ever passes over an element that skipValue would accept, and
 * hands anything else to it.
 *
 * Scanning bytes is safe for UTF-8: every byte of a multi-byte sequence is >= 0x80, so it can never
 * be mistaken for a quote, bracket, comma or backslash.
 *
 * Every `buf[i]!` in this folder is read under `i < n` (n = buf.length) on the same line or in the
 * loop's condition: the `!` only tells noUncheckedIndexedAccess so. The hot loops read inline
 * (`i < n ? buf[i]! : -1`) rather than through a helper because a call per byte costs as much as
 * the scan.
 */

import { flatObject, loadScratch } from './flat.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;
const LBRACE = 0x7b;
const RBRACE = 0x7d;

/** The bytes are not JSON, or not the JSON the caller needs, within what was read. */
export class ScanError extends Error {}

/**
 * Nesting deeper than this is refused (an item of a list is two levels deep). The scanner keeps its
 * stack of expected closing brackets here rather than in an array per value: it never re-enters
 * itself.
 */
const MAX_DEPTH = 512;
const CLOSERS = new Uint8Array(MAX_DEPTH);

const isSpace = (b: number): boolean => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
const isDigit = (b: number): boolean => b >= 0x30 && b <= 0x39;

function isHex(b: number): boolean {
  return (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66);
}

export function skipSpace(buf: Buffer, i: number): number {
  const n = buf.length;
  for (; i < n; i++) {
    const b = buf[i]!;
    if (b !== 0x20 && b !== 0x0a && b !== 0x0d && b !== 0x09) break;
  }
  return i;
}

/** `i` at a backslash inside a string; returns the index of its escape's last byte (RFC 8259 section 7). */
function skipEscape(buf: Buffer, i: number): number {
  const n = buf.length;
  const e = i + 1 < n ? buf[i + 1]! : -1;
  if (e === 0x75) {
    for (let k = 2; k < 6; k++) if (!isHex(i + k < n ? buf[i + k]! : -1)) throw new ScanError('bad \\u escape');
    return i + 5;
  }
  // " \ / b f n r t
  if (e === QUOTE || e === BACKSLASH || e === 0x2f || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74) return i + 1;
  throw new ScanError(e === -1 ? 'unterminated string' : 'bad escape');
}

/**
 * Set by `skipString` beside the index it returns: whether the string token it passed has an
 * escape (module state, so the hot path allocates no result object per token).
 */
export let escaped = false;

/**
 * `i` at an opening quote; returns the index after the closing quote. Control characters must be
 * escaped inside a JSON string; a raw one is refused.
 */
export function skipString(buf: Buffer, i: number): number {
  const n = buf.length;
  escaped = false;
  for (i++; i < n; i++) {
    const c = buf[i]!;
    if (c > BACKSLASH) continue; // lower-case letters and UTF-8: most string bytes, one test
    if (c === QUOTE) return i + 1;
    if (c === BACKSLASH) {
      escaped = true;
      i = skipEscape(buf, i);
    } else if (c < 0x20) throw new ScanError('control character in a string');
  }
  throw new ScanError('unterminated string');
}

/** The text of a string token `buf[start, end)` that has an escape (rare: the token was already checked). */
export function decode(buf: Buffer, start: number, end: number): string {
  return JSON.parse(buf.toString('utf8', start, end)) as string;
}

/**
 * `i` at the start of any value; returns the index after it. Inside arrays and objects it checks
 * the structure (brackets of the right kind, keys, colons, commas, scalar tokens) without building
 * anything, so what it passes on is JSON.
 *
 * One loop with strings, keys, whitespace and numbers written out in place: this runs over every
 * byte of an enforced list, and a call per token costs as much as the bytes (much slower when
 * split into helpers, measured on a 100-item list).
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

/**
 * Offsets of kept elements, [start, end) pairs: the cut and the checked page each keep theirs in a
 * scratch array of their own, shared by every call (neither re-enters) and doubled when a list
 * needs more: cheaper than a new JS array per response.
 */
export function growKept(a: Uint32Array): Uint32Array {
  const b = new Uint32Array(a.length * 2);
  b.set(a);
  return b;
}

const OPEN = Buffer.from('[');
const SEPARATOR = Buffer.from(',');
const CLOSE = Buffer.from(']');

/** A JSON array of the kept elements `kept[0, k)` of `buf`, as their bytes. */
export function joinKept(buf: Buffer, kept: Uint32Array, k: number): Buffer {
  const parts: Buffer[] = [OPEN];
  for (let e = 0; e < k; e += 2) {
    if (e > 0) parts.push(SEPARATOR);
    parts.push(buf.subarray(kept[e], kept[e + 1]));
  }
  parts.push(CLOSE);
  return Buffer.concat(parts);
}

// ---------------------------------------------------------------------------------------------
// The structural cut of a list, with no check of its items. Beside the lexer: its loops call
// skipString and skipSpace for every key, and a call into another module checks its target each
// time.

/**
 * Whether the string token `buf[start, end)`, just passed by skipString (`escaped` says whether it
 * has an escape), means `wanted` (given as a quoted token, e.g. `"sold"`).
 */
function tokenEquals(buf: Buffer, start: number, end: number, hasEscape: boolean, wanted: Buffer): boolean {
  const length = end - start;
  if (length === wanted.length) {
    let k = 0;
    while (k < wanted.length && buf[start + k] === wanted[k]) k++;
    if (k === wanted.length) return true;
  }
  // An escaped spelling such as "st\u0061tus" still means the same string; it is always longer
  // than JSON.stringify's.
  return length > wanted.length && hasEscape && decode(buf, start, end) === decode(wanted, 0, wanted.length);
}

/**
 * `i` at `{`; returns the end of the object, negated when its top-level `key` member is not the
 * string `wanted`, or when that member appears more than once.
 *
 * A repeated member name is a contract violation: RFC 8259 section 4 says names SHOULD be unique
 * and that parsers then disagree: JSON.parse keeps the last, others keep the first or refuse. An
 * element `{"status":"sold","status":"available"}` would pass a filter judged one way and reach a
 * client that reads it the other way, so it is dropped whatever the filter. Only the filter's
 * field is tracked (one boolean per object, no allocation per key); other repeated names are not
 * the filter's concern.
 */
function matchObject(buf: Buffer, i: number, key: Buffer, wanted: Buffer): number {
  const n = buf.length;
  const keyLength = key.length;
  let matches = false;
  let seen = false;
  i = skipSpace(buf, i + 1);
  if (i < n && buf[i] === RBRACE) return -(i + 1);
  for (;;) {
    if (i >= n || buf[i] !== QUOTE) throw new ScanError('object key expected');
    const keyStart = i;
    i = skipString(buf, i);
    // The field's name spelled plainly (compared byte by byte: this runs for every key), or with escapes.
    let isField: boolean;
    if (i - keyStart === keyLength) {
      let k = 1;
      while (k < keyLength - 1 && buf[keyStart + k] === key[k]) k++;
      isField = k === keyLength - 1;
    } else isField = i - keyStart > keyLength && tokenEquals(buf, keyStart, i, escaped, key);
    i = skipSpace(buf, i);
    if (i >= n || buf[i] !== COLON) throw new ScanError("':' expected");
    i = skipSpace(buf, i + 1);
    const valueStart = i;
    i = i < n && buf[i] === QUOTE ? skipString(buf, i) : skipValue(buf, i);
    if (isField) {
      // Dropped for good on a second member of that name, whatever either value says.
      matches = !seen && buf[valueStart] === QUOTE && tokenEquals(buf, valueStart, i, escaped, wanted);
      seen = true;
    }
    i = skipSpace(buf, i);
    if (i < n && buf[i] === RBRACE) return matches ? i + 1 : -(i + 1);
    if (i >= n || buf[i] !== COMMA) throw new ScanError("',' or '}' expected");
    i = skipSpace(buf, i + 1);
  }
}

/** The cut's kept elements, [start, end) offsets (growKept). */
let KEPT: Uint32Array = new Uint32Array(256);

/** The last field name asked for, as a JSON string token: a list's filter reads one field. */
let lastField: string | undefined;
let lastKey: Buffer = Buffer.alloc(0);

export interface ArrayFilterResult {
  /** The array to send: the original buffer when nothing was removed, else the kept elements. */
  readonly body: Buffer;
  /** Whether any element was removed or cut off. */
  readonly changed: boolean;
}

/**
 * Keeps at most `limit` elements of a JSON array, and, when `value` is given, only the objects
 * whose one top-level `field` member is the string `value` (an object with that member twice is
 * dropped). Scans only as far as it must: the elements after the `limit`-th kept one are never
 * read, so `buf` may be a truncated prefix of a longer body. Throws ScanError when the bytes it
 * reads are not a JSON array or when it needs bytes that `buf` does not hold.
 */
export function filterArray(buf: Buffer, limit: number, field: string | undefined, value: string | undefined): ArrayFilterResult {
  let key = lastKey;
  let wanted: Buffer | undefined;
  if (value !== undefined) {
    if (field === undefined) throw new Error('filterArray: a filter value needs the field it is read from');
    if (field !== lastField) {
      key = lastKey = Buffer.from(JSON.stringify(field));
      lastField = field;
    }
    wanted = Buffer.from(JSON.stringify(value));
  }
  const n = buf.length;
  // Without a filter an element is only skipped: an object of scalars a word at a time (flat.ts).
  const m = wanted === undefined ? loadScratch(buf) : 0;
  let i = skipSpace(buf, 0);
  if (i >= n || buf[i] !== LBRACKET) throw new ScanError('not a JSON array');
  i = skipSpace(buf, i + 1);
  // Buffers are only made if the array must be rebuilt.
  let kept = KEPT;
  let k = 0;
  let removed = false;
  if (i < n && buf[i] === RBRACKET) {
    if (skipSpace(buf, i + 1) !== n) throw new ScanError('trailing data');
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
      end = buf[i] === LBRACE ? flatObject(m, i) : -1;
      if (end === -1) end = skipValue(buf, i);
      if (k === kept.length) kept = KEPT = growKept(kept);
      kept[k++] = start;
      kept[k++] = end;
    } else {
      end = i < n && buf[i] === LBRACE ? matchObject(buf, i, key, wanted) : -skipValue(buf, i);
      if (end > 0) {
        if (k === kept.length) kept = KEPT = growKept(kept);
        kept[k++] = start;
        kept[k++] = end;
      } else {
        end = -end;
        removed = true;
      }
    }
    i = skipSpace(buf, end);
    if (i < n && buf[i] === RBRACKET) {
      if (skipSpace(buf, i + 1) !== n) throw new ScanError('trailing data');
      break;
    }
    if (i >= n || buf[i] !== COMMA) throw new ScanError(i >= n ? 'truncated' : "',' or ']' expected");
    i = skipSpace(buf, i + 1);
  }
  if (!removed) return { body: buf, changed: false };
  return { body: joinKept(buf, kept, k), changed: true };
}
