/**
 * The structural cut of a list answer, with no check of its items: at most `limit` elements of a
 * JSON array, and only the objects whose one `field` member is the string `value` when a value is
 * given. It stops as soon as it has what it needs; kept elements are copied as their original
 * bytes, so every number survives exactly.
 */
import { decode, growKept, joinKept, ScanError, skipSpace, skipString, skipValue } from './json.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;
const LBRACE = 0x7b;
const RBRACE = 0x7d;

/** Whether the string token `buf[start, end)` has an escape. */
function hasEscape(buf: Buffer, start: number, end: number): boolean {
  for (let i = start + 1; i < end - 1; i++) if (buf[i] === BACKSLASH) return true;
  return false;
}

/** Whether the string token `buf[start, end)` means `wanted` (given as a quoted token, e.g. `"sold"`). */
function tokenEquals(buf: Buffer, start: number, end: number, wanted: Buffer): boolean {
  const length = end - start;
  if (length === wanted.length) {
    let k = 0;
    while (k < wanted.length && buf[start + k] === wanted[k]) k++;
    if (k === wanted.length) return true;
  }
  // An escaped spelling such as "st\u0061tus" still means the same string; it is always longer
  // than JSON.stringify's.
  if (length <= wanted.length || !hasEscape(buf, start, end)) return false;
  return decode(buf, start, end) === decode(wanted, 0, wanted.length);
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
function scanObject(buf: Buffer, i: number, key: Buffer, wanted: Buffer): number {
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
    } else isField = i - keyStart > keyLength && tokenEquals(buf, keyStart, i, key);
    i = skipSpace(buf, i);
    if (i >= n || buf[i] !== COLON) throw new ScanError("':' expected");
    i = skipSpace(buf, i + 1);
    const valueStart = i;
    i = i < n && buf[i] === QUOTE ? skipString(buf, i) : skipValue(buf, i);
    if (isField) {
      // Dropped for good on a second member of that name, whatever either value says.
      matches = !seen && buf[valueStart] === QUOTE && tokenEquals(buf, valueStart, i, wanted);
      seen = true;
    }
    i = skipSpace(buf, i);
    if (i < n && buf[i] === RBRACE) return matches ? i + 1 : -(i + 1);
    if (i >= n || buf[i] !== COMMA) throw new ScanError("',' or '}' expected");
    i = skipSpace(buf, i + 1);
  }
}

/** The cut's kept elements, [start, end) offsets (json.ts, growKept). */
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
      end = skipValue(buf, i);
      if (k === kept.length) kept = KEPT = growKept(kept);
      kept[k++] = start;
      kept[k++] = end;
    } else {
      end = i < n && buf[i] === LBRACE ? scanObject(buf, i, key, wanted) : -skipValue(buf, i);
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
