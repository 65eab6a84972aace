/**
 * The JSON lexer every scanner of this folder reads with (RFC 8259): whitespace, strings and their
 * escapes, and `skipValue`, the one loop that passes over any value while checking its structure.
 * The shape checks (object.ts) and the structural cut (filter.ts) read their own fields and call
 * these for the rest, so there is one definition of what JSON text is.
 *
 * Scanning bytes is safe for UTF-8: every byte of a multi-byte sequence is >= 0x80, so it can never
 * be mistaken for a quote, bracket, comma or backslash.
 *
 * Every `buf[i]!` in this folder is read under `i < n` (n = buf.length) on the same line or in the
 * loop's condition: the `!` only tells noUncheckedIndexedAccess so. The hot loops read inline
 * (`i < n ? buf[i]! : -1`) rather than through a helper because a call per byte costs as much as
 * the scan.
 */

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
