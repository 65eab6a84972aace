/**
 * The words of an answer: a scratch copy of its bytes with a DataView over it, read four bytes per
 * compare; and the list cut's fast path over it (`flatObject`): an element that is an object of
 * scalars, skipped a word at a time with no error of its own. Whatever it does not take, skipValue
 * (json.ts) reads from the element's start and judges.
 *
 * The scratch and its view are module constants: a function that reads only them has their base
 * and length built into its code, where a view passed in is checked again at every read. Each
 * read still costs more than the compare after it (skipValue: about 29 instructions per byte on
 * Node 24), so strings and digits are tested four bytes per read: `(v - 0x01010101) & ~v &
 * 0x80808080` flags the zero bytes of `v` (a byte of `x` equal to `k`'s is a zero byte of
 * `x ^ k`), `(x - 0x20202020) & ~x & 0x80808080` the bytes below 0x20 (never one of UTF-8's,
 * >= 0x80). A borrow can flag a byte above a flagged one, never below it, so the lowest flag is
 * exact. Every `SCRATCH[i]!` is read under `i < m` (m <= the scratch's length), as json.ts's.
 */

/**
 * Word reads need a DataView; one over each answer would be an object per request. Bodies up to
 * this size are copied (one memcpy) into a scratch buffer that has its own view, kept for the
 * process; a larger body gets a view of its own, its allocation small beside the body. The scans
 * never re-enter, so one scratch serves them all, each starting with its own copy.
 */
const SCRATCH = new Uint8Array(64 * 1024);
const SCRATCH_VIEW = new DataView(SCRATCH.buffer);

/** A view whose bytes [0, buf.length) are buf's: read only under that bound (object.ts tokenAt checks it). */
export function wordView(buf: Buffer): DataView {
  if (buf.length > SCRATCH.length) return new DataView(buf.buffer, buf.byteOffset, buf.length);
  SCRATCH.set(buf);
  return SCRATCH_VIEW;
}

/**
 * Copies the first bytes of `buf` into the scratch for flatObject; returns how many: its `m`, the
 * whole body up to the scratch's size. A larger body's elements past that point are skipValue's.
 */
export function loadScratch(buf: Buffer): number {
  const m = Math.min(buf.length, SCRATCH.length);
  SCRATCH.set(m === buf.length ? buf : buf.subarray(0, m));
  return m;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const MINUS = 0x2d;
const ZERO = 0x30;
const NINE = 0x39;
const RBRACE = 0x7d;
const QUOTES = 0x22222222;
const BACKSLASHES = 0x5c5c5c5c;
const ONES = 0x01010101;
const CONTROLS = 0x20202020;
const HIGH = 0x80808080 | 0;
/** "true", "null" and the "alse" of "false" as little-endian words. */
const TRUE = 0x65757274;
const NULL = 0x6c6c756e;
const ALSE = 0x65736c61;

const isSpace = (b: number): boolean => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;

/**
 * `i` at an opening quote in the scratch's first `m` bytes: the index after the closing quote
 * when the string has no escape, else -1 (an escape, a control character, or no end within `m`).
 */
function plainString(m: number, i: number): number {
  for (i++; ; ) {
    let c: number;
    if (i + 4 <= m) {
      const x = SCRATCH_VIEW.getInt32(i, true);
      const q = x ^ QUOTES;
      const e = x ^ BACKSLASHES;
      const t = (((q - ONES) & ~q) | ((e - ONES) & ~e) | ((x - CONTROLS) & ~x)) & HIGH;
      if (t === 0) {
        i += 4;
        continue;
      }
      // The lowest flagged byte: a quote, a backslash or a control character.
      i += (31 - Math.clz32(t & -t)) >> 3;
      c = SCRATCH[i]!;
    } else {
      if (i >= m) return -1;
      c = SCRATCH[i]!;
      if (c !== QUOTE && c !== BACKSLASH && c >= 0x20) {
        i++;
        continue;
      }
    }
    return c === QUOTE ? i + 1 : -1;
  }
}

/**
 * `i` at `{` in the scratch's first `m` bytes (loadScratch): the index after the object when each
 * of its members' values is a string without escapes, an integer (no fraction or exponent) or a
 * literal, spaces allowed between tokens; -1 as soon as it meets anything else (a nested value, an
 * escape, a fraction, a byte out of place, the end of `m`). What it takes, skipValue takes and
 * ends at the same index: it never decides that bytes are not JSON.
 */
export function flatObject(m: number, i: number): number {
  let b = ++i < m ? SCRATCH[i]! : -1;
  if (b <= 0x20) while (isSpace(b)) b = ++i < m ? SCRATCH[i]! : -1;
  if (b === RBRACE) return i + 1;
  for (;;) {
    if (b !== QUOTE || (i = plainString(m, i)) === -1) return -1;
    b = i < m ? SCRATCH[i]! : -1;
    if (b <= 0x20) while (isSpace(b)) b = ++i < m ? SCRATCH[i]! : -1;
    if (b !== COLON) return -1;
    b = ++i < m ? SCRATCH[i]! : -1;
    if (b <= 0x20) while (isSpace(b)) b = ++i < m ? SCRATCH[i]! : -1;
    if (b === QUOTE) {
      if ((i = plainString(m, i)) === -1) return -1;
    } else if (b === MINUS || (b >= ZERO && b <= NINE)) {
      if (b === MINUS) b = ++i < m ? SCRATCH[i]! : -1;
      if (b === ZERO) i++;
      else if (b > ZERO && b <= NINE) {
        // Four digits per step (each byte 0x30-0x39: high nibble 3, still 3 after adding 6), then
        // the last few one by one. A digit after a 0, a fraction or an exponent is then neither a
        // separator nor a space: skipValue reads it.
        for (i++; i + 4 <= m; i += 4) {
          const x = SCRATCH_VIEW.getInt32(i, true);
          if ((x & 0xf0f0f0f0) !== 0x30303030 || ((x + 0x06060606) & 0xf0f0f0f0) !== 0x30303030) break;
        }
        while (i < m && SCRATCH[i]! >= ZERO && SCRATCH[i]! <= NINE) i++;
      } else return -1;
    } else if (b === 0x74 || b === 0x6e) {
      if (i + 4 > m || SCRATCH_VIEW.getInt32(i, true) !== (b === 0x74 ? TRUE : NULL)) return -1;
      i += 4;
    } else if (b === 0x66) {
      if (i + 5 > m || SCRATCH_VIEW.getInt32(i + 1, true) !== ALSE) return -1;
      i += 5;
    } else return -1;
    b = i < m ? SCRATCH[i]! : -1;
    if (b <= 0x20) while (isSpace(b)) b = ++i < m ? SCRATCH[i]! : -1;
    if (b === RBRACE) return i + 1;
    if (b !== COMMA) return -1;
    b = ++i < m ? SCRATCH[i]! : -1;
    if (b <= 0x20) while (isSpace(b)) b = ++i < m ? SCRATCH[i]! : -1;
  }
}
