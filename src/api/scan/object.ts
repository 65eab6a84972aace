/**
 * The check of one object against a compiled shape in one pass over its bytes, with no value built:
 * each member's key found in the shape's table, each value of a field checked against its type,
 * the members outside the shape skipped (json.ts) and their object noted for members.ts.
 *
 * Most upstreams write every object the same way (the shape's order, no space), so each object is
 * first read on a short path (`commonObject`) that matches each key with its colon, and each enum
 * value, four bytes per compare, and gives up at the first byte it does not expect; the general
 * scan (`scanObject`) then reads that object from its start. A list is then checked for fewer
 * instructions than the structural cut (skipValue) takes over the same bytes.
 *
 * The flags below are module state set beside a returned index, so the hot path allocates no
 * result object per token; the scan never re-enters itself.
 */
import { decode, escaped, ScanError, skipSpace, skipString, skipValue } from './json.js';
import { rareMembers } from './members.js';
import type { Scan } from './scan.js';
import { Kind, type CompiledField, type CompiledShape, type Token } from './shape.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const MINUS = 0x2d;
const ZERO = 0x30;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;
const LBRACE = 0x7b;
const RBRACE = 0x7d;

/** Set by the value checks beside the index they return: whether the value had the field's type. */
let valueOk = true;
/** Set by checkField for an enum value of the field's type: which of the field's values it is. */
let enumIndex = -1;
/** Set by `commonObject` beside the index it returns: the object's filter field, as in `Scan.status`. */
let commonStatus = -1;

const isDigit = (b: number): boolean => b >= 0x30 && b <= 0x39;

/** Whether `token` is at `buf[i]`. */
function startsWith(buf: Buffer, i: number, token: Buffer): boolean {
  if (i + token.length > buf.length) return false;
  for (let k = 0; k < token.length; k++) if (buf[i + k] !== token[k]) return false;
  return true;
}

/**
 * Whether `t` is at `buf[i]` (`view` over the same bytes), four bytes per compare; byte by byte
 * only when the last word would read past the end. In this file, beside its callers: a call to
 * another module's function checks its target each time, in the loops of the common path.
 */
function tokenAt(buf: Buffer, view: DataView | undefined, i: number, t: Token): boolean {
  const words = t.words;
  const last = words.length - 1;
  if (view === undefined || i + 4 * last + 4 > buf.length) return startsWith(buf, i, t.bytes);
  for (let w = 0; w < last; w++) if (view.getInt32(i + 4 * w, true) !== words[w]) return false;
  return (view.getInt32(i + 4 * last, true) & t.mask) === words[last];
}

/**
 * `i` at a value due to be an integer of `field`'s kind; returns the index after the value.
 * `valueOk`: a plain integer within the kind's bounds, judged on its digits (no Number, no BigInt):
 * `1.0` and `1e2` are numbers but not integers as written, and an int64 backend would not read
 * `9223372036854775808` as the same value.
 */
function checkInteger(buf: Buffer, i: number, field: CompiledField): number {
  const n = buf.length;
  const start = i;
  let b = i < n ? buf[i]! : -1;
  if (b !== MINUS && !isDigit(b)) {
    valueOk = false;
    return skipValue(buf, i);
  }
  if (b === MINUS) b = ++i < n ? buf[i]! : -1;
  const digits = i;
  if (b === ZERO) b = ++i < n ? buf[i]! : -1;
  else if (isDigit(b)) do b = ++i < n ? buf[i]! : -1; while (isDigit(b));
  else throw new ScanError('digit expected');
  const length = i - digits;
  let integer = true;
  if (b === 0x2e) {
    integer = false;
    b = ++i < n ? buf[i]! : -1;
    if (!isDigit(b)) throw new ScanError('digit expected');
    do b = ++i < n ? buf[i]! : -1; while (isDigit(b));
  }
  if (b === 0x65 || b === 0x45) {
    integer = false;
    b = ++i < n ? buf[i]! : -1;
    if (b === 0x2b || b === MINUS) b = ++i < n ? buf[i]! : -1;
    if (!isDigit(b)) throw new ScanError('digit expected');
    do b = ++i < n ? buf[i]! : -1; while (isDigit(b));
  }
  // Fewer digits than the bounds always fit; as many are compared with the bound as bytes (same
  // length, no leading zero: byte order is number order).
  const most = field.digits;
  valueOk = integer && (length < most || (length === most && buf.compare(buf[start] === MINUS ? field.min : field.max, 0, most, digits, i) <= 0));
  return i;
}

/** `i` at a value of `field`; returns the index after it, with `valueOk`. */
function checkField(buf: Buffer, view: DataView | undefined, i: number, field: CompiledField): number {
  const kind = field.kind;
  if (kind <= Kind.Int32) {
    // The common value first: fewer digits than the bounds, no leading zero, sign, fraction or exponent.
    const n = buf.length;
    let j = i;
    let b = j < n ? buf[j]! : -1;
    if (b > ZERO && b <= 0x39) {
      do b = ++j < n ? buf[j]! : -1;
      while (b >= ZERO && b <= 0x39);
      if (j - i < field.digits && b !== 0x2e && b !== 0x65 && b !== 0x45) {
        valueOk = true;
        return j;
      }
    }
    return checkInteger(buf, i, field);
  }
  if (buf[i] !== QUOTE) {
    valueOk = false;
    return skipValue(buf, i);
  }
  valueOk = true;
  if (kind === Kind.String) return skipString(buf, i);
  // A value spelled as one of the tokens is that value, whole: the token ends with its quote.
  const tokens = field.tokens;
  for (let k = 0; k < tokens.length; k++) {
    const t = tokens[k]!;
    if (tokenAt(buf, view, i, t)) {
      enumIndex = k;
      return i + t.bytes.length;
    }
  }
  const end = skipString(buf, i);
  // An escaped spelling such as "sol\u0064" is the same string (RFC 8259 section 7).
  enumIndex = escaped ? field.values.indexOf(decode(buf, i, end)) : -1;
  valueOk = enumIndex !== -1;
  return end;
}

/**
 * Whether the digits `buf[start, end)` (no leading zero) are as many as `limit`'s and at most
 * `limit`: same length, so byte order is number order.
 */
function within(buf: Buffer, start: number, end: number, limit: Buffer): boolean {
  if (end - start !== limit.length) return false;
  for (let k = 0; k < limit.length; k++) {
    const d = buf[start + k]! - limit[k]!;
    if (d !== 0) return d < 0;
  }
  return true;
}

/**
 * `i` at `{`: the common object read with the least work, or -1 as soon as the object is anything
 * else (scanObject then reads it from its start and finds what it is). Common: the members in the
 * shape's order with no space between tokens, each key spelled plainly with its colon, every value
 * in its usual form (an integer without a leading zero, fraction or exponent, 0 included, a string
 * without escapes, an enum value as one of its tokens) and the required ones present. Such an
 * object is valid with nothing outside the shape, so nothing is recorded but its filter field.
 */
function commonObject(c: CompiledShape, buf: Buffer, view: DataView | undefined, i: number): number {
  const n = buf.length;
  let seen = 0;
  let status = -1;
  i++;
  for (let field = c.first; field !== null; field = field.next) {
    if (!tokenAt(buf, view, i, field.key)) return -1;
    i += field.key.bytes.length;
    let b = i < n ? buf[i]! : -1;
    const kind = field.kind;
    if (kind <= Kind.Int32) {
      const negative = b === MINUS;
      if (negative) b = ++i < n ? buf[i]! : -1;
      if (b === ZERO) {
        // 0 (or -0) whole: whatever follows it here (a digit, `.`, `e`) is neither `,` nor `}`,
        // so the member's end check below sends such a value to the general path.
        b = ++i < n ? buf[i]! : -1;
      } else {
        if (b < ZERO || b > 0x39) return -1;
        const start = i;
        do b = ++i < n ? buf[i]! : -1;
        while (b >= ZERO && b <= 0x39);
        if (i - start >= field.digits && !within(buf, start, i, negative ? field.min : field.max)) return -1;
      }
    } else if (kind === Kind.String) {
      if (b !== QUOTE) return -1;
      for (;;) {
        b = ++i < n ? buf[i]! : -1;
        if (b > BACKSLASH) continue;
        if (b === QUOTE) break;
        // an escape, a control character or the end: the general path judges it
        if (b < 0x20 || b === BACKSLASH) return -1;
      }
      b = ++i < n ? buf[i]! : -1;
    } else {
      const tokens = field.tokens;
      let k = 0;
      while (k < tokens.length && !tokenAt(buf, view, i, tokens[k]!)) k++;
      if (k === tokens.length) return -1;
      i += tokens[k]!.bytes.length;
      if (field.filtered) status = k;
      b = i < n ? buf[i]! : -1;
    }
    seen |= field.bit;
    if (b === COMMA) {
      i++;
      continue;
    }
    if (b !== RBRACE || (seen & c.required) !== c.required) return -1;
    commonStatus = status;
    return i + 1;
  }
  return -1;
}

/**
 * `i` at `{` of an object (`index` as in Scan.problem); returns the index after its `}`. Records
 * nothing per member: an object with a name outside the shape or repeated is read again by
 * rareMembers.
 */
function scanObject(s: Scan, i: number, index: number): number {
  const buf = s.buf;
  const view = s.view;
  const c = s.shape;
  const common = commonObject(c, buf, view, i);
  if (common !== -1) {
    s.status = commonStatus;
    return common;
  }
  const fields = c.fields;
  const n = buf.length;
  const start = i;
  let seen = 0;
  let rare = false;
  s.status = -1;
  // The field expected next: an upstream writes its members in one order, and a key that is the
  // expected field's token is matched without being scanned twice.
  let next = 0;
  i = skipSpace(buf, i + 1);
  if (i < n && buf[i] !== RBRACE) {
    for (;;) {
      let f = next;
      const guess = fields[next];
      // The expected key with its colon right after it, in word compares: the common member.
      if (guess !== undefined && tokenAt(buf, view, i, guess.key)) i += guess.key.bytes.length;
      else {
        if (i >= n || buf[i] !== QUOTE) throw new ScanError('object key expected');
        const keyStart = i;
        i = skipString(buf, i);
        f = c.nameOf(buf, keyStart, i, escaped);
        if (i < n && buf[i] !== COLON) i = skipSpace(buf, i);
        if (i >= n || buf[i] !== COLON) throw new ScanError("':' expected");
        i++;
      }
      next = f + 1;
      i = skipSpace(buf, i);
      if (f < 0 || f >= fields.length) {
        // Outside the shape, or forbidden (a problem here, whatever the mode); read again later.
        if (f !== -1) s.problem(index, c.names[f], 'must not be sent');
        i = skipValue(buf, i);
        rare = true;
      } else {
        const field = fields[f]!;
        i = checkField(buf, view, i, field);
        if (!valueOk) s.problem(index, field.name, field.problem);
        const bit = 1 << f;
        if ((seen & bit) !== 0) rare = true;
        if (f === c.filter) s.status = (seen & bit) !== 0 ? -2 : valueOk ? enumIndex : -1;
        seen |= bit;
      }
      if (i < n && buf[i] !== COMMA && buf[i] !== RBRACE) i = skipSpace(buf, i);
      if (i < n && buf[i] === COMMA) {
        i = skipSpace(buf, i + 1);
        continue;
      }
      if (i < n && buf[i] === RBRACE) break;
      throw new ScanError(i >= n ? 'truncated' : "',' or '}' expected");
    }
  }
  if (i >= n) throw new ScanError('truncated');
  if ((seen & c.required) !== c.required) {
    for (let f = 0; f < fields.length; f++) if ((c.required & (1 << f)) !== 0 && (seen & (1 << f)) === 0) s.problem(index, undefined, `must have required property '${fields[f]!.name}'`);
  }
  if (rare && s.mode === undefined) s.rare.push(start, i + 1);
  else if (rare) rareMembers(s, start, i + 1);
  return i + 1;
}

/** `i` at an element of a list (`index` >= 0) or at the object that is the body (-1). */
export function scanElement(s: Scan, i: number, index: number): number {
  if (s.buf[i] === LBRACE) return scanObject(s, i, index);
  s.problem(index, undefined, 'must be object');
  return skipValue(s.buf, i);
}

export function scanList(s: Scan, i: number): number {
  const buf = s.buf;
  if (buf[i] !== LBRACKET) {
    s.problem(-1, undefined, 'must be array');
    return skipValue(buf, i);
  }
  i = skipSpace(buf, i + 1);
  if (buf[i] === RBRACKET) return i + 1;
  for (let index = 0; ; index++) {
    i = skipSpace(buf, scanElement(s, i, index));
    if (buf[i] === RBRACKET) return i + 1;
    if (buf[i] !== COMMA) throw new ScanError(i >= buf.length ? 'truncated' : "',' or ']' expected");
    i = skipSpace(buf, i + 1);
  }
}
