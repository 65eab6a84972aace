/**
 * The response contract's check of Pet and Pets (docs/interface.md, "Pet", "Pets") in one pass over
 * the bytes, with no value built: the structure is checked as JSON (RFC 8259), each field of the
 * interface against its type, and the fields outside it are found by their offsets. A conforming
 * answer is then forwarded as the very bytes received; unknown fields are dropped by copying the
 * kept members' bytes, so every number, int64 beyond 2^53 included, stays as the upstream wrote it.
 *
 * The field table is generated from PET_SCHEMA (contract.ts), the schema Ajv compiles, so there is
 * one definition of a Pet; the verdicts are held against Ajv's on the same inputs by a
 * differential test (test/unit/pet-scan.test.ts). It accepts what `parseLossless` followed by that
 * Ajv validator accepts: UTF-8 only (a byte that is not is refused, never replaced), a repeated
 * member name only with an equal value (lossless-json's rule, as the reference path had), `__proto__`
 * an ordinary unknown field. One difference, on purpose: nesting deeper than json-scan's bound (512)
 * inside an unknown field is refused, where a recursive parser would go on until its stack ends.
 *
 * Scanning bytes is safe for UTF-8: every byte of a multi-byte sequence is >= 0x80, so it can never
 * be mistaken for a quote, bracket, comma or backslash; the encoding itself is checked once, natively.
 *
 * Most upstreams write every Pet the same way (the schema's order, no space), so each object is
 * first read on a short path (`commonPet`) that matches each key with its colon, and each enum
 * value, four bytes per compare, and gives up at the first byte it does not expect; the general
 * scan then reads that object from its start. A list is then checked for fewer instructions than
 * list-pets' own structural pass (json-scan's skipValue) takes over the same bytes.
 */
import { isUtf8 } from 'node:buffer';
import { parseLossless, PET_SCHEMA } from './contract.js';
import { slot } from './facts.js';
import { ScanError, skipValue } from './json-scan.js';

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

const enum Kind {
  Int64,
  String,
  Enum,
}

/**
 * A token as little-endian 32-bit words, the last one masked to the token's own bytes: the common
 * key and enum value are matched four bytes per compare (`tokenAt`) rather than one.
 */
interface Token {
  readonly bytes: Buffer;
  readonly words: Int32Array;
  readonly mask: number;
}

function tokenOf(text: string): Token {
  const bytes = Buffer.from(text);
  const padded = Buffer.alloc(Math.ceil(bytes.length / 4) * 4);
  bytes.copy(padded);
  const words = new Int32Array(padded.length / 4);
  for (let w = 0; w < words.length; w++) words[w] = padded.readInt32LE(4 * w);
  const rest = bytes.length % 4;
  return { bytes, words, mask: rest === 0 ? -1 : (1 << (8 * rest)) - 1 };
}

interface Field {
  readonly name: string;
  /** The name as a JSON string token, quotes included: how an upstream spells it unescaped. */
  readonly token: Buffer;
  /** The same token with the colon after it: the common spelling of the member's key, whole. */
  readonly key: Token;
  readonly kind: Kind;
  /** For Kind.Enum: each allowed value as a JSON string token, and as text. */
  readonly tokens: readonly Token[];
  readonly values: readonly string[];
}

/**
 * The table of Pet's fields, read from the JSON Schema. A property written with a keyword this
 * scanner does not implement fails here, at load, rather than being let through unchecked.
 */
function fieldsOf(schema: { readonly properties: Readonly<Record<string, object>>; readonly required: readonly string[] }): { fields: readonly Field[]; required: number } {
  const fields = Object.entries(schema.properties).map(([name, s]): Field => {
    const token = Buffer.from(JSON.stringify(name));
    const key = tokenOf(JSON.stringify(name) + ':');
    const p = s as { int64?: unknown; type?: unknown; enum?: unknown };
    const keys = Object.keys(p).join(',');
    if (keys === 'int64' && p.int64 === true) return { name, token, key, kind: Kind.Int64, tokens: [], values: [] };
    if (keys === 'type' && p.type === 'string') return { name, token, key, kind: Kind.String, tokens: [], values: [] };
    if (keys === 'enum' && Array.isArray(p.enum) && p.enum.every((v) => typeof v === 'string')) {
      const values = p.enum as string[];
      return { name, token, key, kind: Kind.Enum, tokens: values.map((v) => tokenOf(JSON.stringify(v))), values };
    }
    throw new Error(`pet-scan: property '${name}' uses a schema the scanner does not implement: ${JSON.stringify(s)}`);
  });
  if (fields.length > 30) throw new Error('pet-scan: at most 30 fields (one bit each)');
  let required = 0;
  for (const name of schema.required) {
    const f = fields.findIndex((x) => x.name === name);
    if (f === -1) throw new Error(`pet-scan: required '${name}' is not a property`);
    required |= 1 << f;
  }
  return { fields, required };
}

const { fields: FIELDS, required: REQUIRED } = fieldsOf(PET_SCHEMA);
/** The field listPets' `status` filter reads (docs/interface.md, "listPets"). */
const STATUS = FIELDS.findIndex((f) => f.name === 'status' && f.kind === Kind.Enum);

/** 2^63 - 1 and 2^63 as digits: the largest magnitudes of a positive and a negative int64. */
const INT64_MAX = Buffer.from('9223372036854775807');
const INT64_MIN = Buffer.from('9223372036854775808');

/** At most this many problems are reported per answer (the log line names them). */
const MAX_PROBLEMS = 5;

export type UnknownFieldMode = 'drop' | 'refuse' | 'pass';

export interface PetScan {
  /** Empty when the body is a valid Pet / Pets (and, with `refuse`, has no unknown field). */
  readonly problems: readonly string[];
  /** With `drop`, when unknown fields were found in a valid body: the body without them. */
  readonly body?: Buffer;
}

/*
 * Every `buf[i]!` below is read under `i < n` (n = buf.length) in the same condition or loop: the
 * `!` only tells noUncheckedIndexedAccess so. Other reads take `number | undefined` and compare it.
 * The flags below are module state set beside a returned index, so the hot path allocates no
 * result object per token; the scan never re-enters itself.
 */

/** Set by the value checks beside the index they return: whether the value had the field's type. */
let valueOk = true;
/** Set by checkField for an enum value of the field's type: which of the field's values it is. */
let enumIndex = -1;
/** Set by `skipString`: whether the string token it passed has an escape. */
let escaped = false;

/** `i` at an opening quote; returns the index after the closing quote (RFC 8259 section 7). */
function skipString(buf: Buffer, i: number): number {
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

function isHex(b: number | undefined): boolean {
  return b !== undefined && ((b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66));
}

/** `i` at a backslash; returns the index of the escape's last byte. */
function skipEscape(buf: Buffer, i: number): number {
  const e = buf[i + 1];
  if (e === 0x75) {
    if (!(isHex(buf[i + 2]) && isHex(buf[i + 3]) && isHex(buf[i + 4]) && isHex(buf[i + 5]))) throw new ScanError('bad \\u escape');
    return i + 5;
  }
  // " \ / b f n r t
  if (e === QUOTE || e === BACKSLASH || e === 0x2f || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74) return i + 1;
  throw new ScanError(e === undefined ? 'unterminated string' : 'bad escape');
}

function skipSpace(buf: Buffer, i: number): number {
  const n = buf.length;
  for (; i < n; i++) {
    const b = buf[i]!;
    if (b !== 0x20 && b !== 0x0a && b !== 0x0d && b !== 0x09) break;
  }
  return i;
}

const isDigit = (b: number | undefined): boolean => b !== undefined && b >= 0x30 && b <= 0x39;

/**
 * `i` at a value due to be an int64; returns the index after the value. `valueOk`: a plain integer
 * within int64, judged on its digits (no Number, no BigInt): `1.0` and `1e2` are numbers but not
 * integers as written, and an int64 backend would not read `9223372036854775808` as the same value.
 */
function checkInt64(buf: Buffer, i: number): number {
  const start = i;
  let b = buf[i];
  if (b !== MINUS && !isDigit(b)) {
    valueOk = false;
    return skipValue(buf, i);
  }
  if (b === MINUS) b = buf[++i];
  const digits = i;
  if (b === ZERO) b = buf[++i];
  else if (isDigit(b)) do b = buf[++i]; while (isDigit(b));
  else throw new ScanError('digit expected');
  const length = i - digits;
  let integer = true;
  if (b === 0x2e) {
    integer = false;
    if (!isDigit(buf[++i])) throw new ScanError('digit expected');
    do b = buf[++i]; while (isDigit(b));
  }
  if (b === 0x65 || b === 0x45) {
    integer = false;
    b = buf[++i];
    if (b === 0x2b || b === MINUS) b = buf[++i];
    if (!isDigit(b)) throw new ScanError('digit expected');
    do b = buf[++i]; while (isDigit(b));
  }
  // Up to 18 digits always fit; 19 are compared with the limit as bytes (same length, no leading
  // zero: byte order is number order).
  valueOk = integer && (length < 19 || (length === 19 && buf.compare(buf[start] === MINUS ? INT64_MIN : INT64_MAX, 0, 19, digits, i) <= 0));
  return i;
}

/** Whether the string token `buf[start, end)` equals `token` byte for byte. */
function sameBytes(buf: Buffer, start: number, end: number, token: Buffer): boolean {
  if (end - start !== token.length) return false;
  for (let k = 0; k < token.length; k++) if (buf[start + k] !== token[k]) return false;
  return true;
}

/** Whether `token` is at `buf[i]`. */
function startsWith(buf: Buffer, i: number, token: Buffer): boolean {
  if (i + token.length > buf.length) return false;
  for (let k = 0; k < token.length; k++) if (buf[i + k] !== token[k]) return false;
  return true;
}

/**
 * Whether `t` is at `buf[i]` (`view` over the same bytes), four bytes per compare; byte by byte
 * only when the last word would read past the end.
 */
function tokenAt(buf: Buffer, view: DataView | undefined, i: number, t: Token): boolean {
  const words = t.words;
  const last = words.length - 1;
  if (view === undefined || i + 4 * last + 4 > buf.length) return startsWith(buf, i, t.bytes);
  for (let w = 0; w < last; w++) if (view.getInt32(i + 4 * w, true) !== words[w]) return false;
  return (view.getInt32(i + 4 * last, true) & t.mask) === words[last];
}

/** The text of a string token that has an escape (rare: the token was already checked). */
function decode(buf: Buffer, start: number, end: number): string {
  return JSON.parse(buf.toString('utf8', start, end)) as string;
}

/** `i` at a value of `field`; returns the index after it, with `valueOk`. */
function checkField(buf: Buffer, view: DataView | undefined, i: number, field: Field): number {
  if (field.kind === Kind.Int64) {
    // The common value first: 1 to 18 digits, no leading zero, sign, fraction or exponent.
    const n = buf.length;
    let j = i;
    let b = j < n ? buf[j]! : -1;
    if (b > ZERO && b <= 0x39) {
      do b = ++j < n ? buf[j]! : -1;
      while (b >= ZERO && b <= 0x39);
      if (j - i < 19 && b !== 0x2e && b !== 0x65 && b !== 0x45) {
        valueOk = true;
        return j;
      }
    }
    return checkInt64(buf, i);
  }
  if (buf[i] !== QUOTE) {
    valueOk = false;
    return skipValue(buf, i);
  }
  valueOk = true;
  if (field.kind === Kind.String) return skipString(buf, i);
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

const NOT_JSON: PetScan = Object.freeze({ problems: Object.freeze(['body is not valid JSON']) });
const REPEATED: PetScan = Object.freeze({ problems: Object.freeze(['body is not valid JSON: a member name repeated with another value']) });
const VALID: PetScan = Object.freeze({ problems: Object.freeze([]) });
const EMPTY = Buffer.alloc(0);
const NONE: readonly never[] = Object.freeze([]);

/**
 * One call's findings. A single instance serves every call (`SCAN`, reset by `begin`): the scan
 * never re-enters itself, and what outlives a call (problems, rare offsets) is copied out of it,
 * so a conforming answer is checked without an object made for it.
 */
class Scan {
  buf: Buffer = EMPTY;
  mode: UnknownFieldMode | undefined = undefined;
  readonly problems: string[] = [];
  /** A member name repeated in one object with another value: parsers disagree on such JSON. */
  repeated = false;
  /** With `refuse`: the names outside the interface, each once. */
  unknownNames: Set<string> | undefined = undefined;
  /** With `drop`: the output so far, and where in `buf` the copying stopped. */
  pieces: Buffer[] | undefined = undefined;
  cursor = 0;
  /** The same bytes, read four at a time where a token is compared (a list), else undefined. */
  view: DataView | undefined = undefined;
  /** Without a mode (list-pets' pass): the objects rareMembers must read, as [start, end) pairs. */
  readonly rare: number[] = [];
  /** The last Pet's `status`: the index of its value in the enum, -1 none or invalid, -2 repeated. */
  status = -1;

  begin(buf: Buffer, mode: UnknownFieldMode | undefined, words: boolean): this {
    this.buf = buf;
    this.mode = mode;
    this.problems.length = 0;
    this.repeated = false;
    this.unknownNames = undefined;
    this.pieces = undefined;
    this.cursor = 0;
    this.view = words ? wordView(buf) : undefined;
    this.rare.length = 0;
    this.status = -1;
    return this;
  }

  /** Lets go of the call's body and what was made from it (SCRATCH keeps its bytes until the next list). */
  end(): void {
    this.buf = EMPTY;
    this.view = undefined;
    this.pieces = undefined;
    this.unknownNames = undefined;
    this.problems.length = 0;
    this.rare.length = 0;
  }

  /** `index` -1: the body is the Pet; else its place in Pets. Messages as Ajv words them. */
  problem(index: number, field: string | undefined, message: string): void {
    if (this.problems.length >= MAX_PROBLEMS) return;
    const path = (index === -1 ? '' : `/${index}`) + (field === undefined ? '' : `/${field}`);
    this.problems.push(`${path || '/'} ${message}`);
  }

  result(): PetScan {
    if (this.repeated) return REPEATED;
    if (this.problems.length > 0) return { problems: this.problems.slice() };
    // Field names only, never their values: they may be the upstream's internals.
    if (this.unknownNames !== undefined) return { problems: [...this.unknownNames].slice(0, MAX_PROBLEMS).map((f) => `unknown field '${f.slice(0, 64)}'`) };
    if (this.pieces === undefined) return VALID;
    this.pieces.push(this.buf.subarray(this.cursor));
    return { problems: [], body: Buffer.concat(this.pieces) };
  }
}

const SCAN = new Scan();

/**
 * Word reads need a DataView; one over each answer would be an object per request. Bodies up to
 * this size are copied (one memcpy) into a scratch buffer that has its own view, kept for the
 * process; a larger body gets a view of its own, its allocation small beside the body.
 */
const SCRATCH = new Uint8Array(64 * 1024);
const SCRATCH_VIEW = new DataView(SCRATCH.buffer);

/** A view whose bytes [0, buf.length) are buf's: read only under that bound (tokenAt checks it). */
function wordView(buf: Buffer): DataView {
  if (buf.length > SCRATCH.length) return new DataView(buf.buffer, buf.byteOffset, buf.length);
  SCRATCH.set(buf);
  return SCRATCH_VIEW;
}

/**
 * lossless-json's equality of two values under one name (its `isDeepEqual`): a repeated name is
 * accepted when this holds, refused otherwise. Arrays and objects are both compared by their own
 * enumerable keys, as there.
 */
function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, k) => sameValue(x, b[k]));
  if (typeof a === 'object' && a !== null && typeof b === 'object' && b !== null) {
    const x = a as Record<string, unknown>;
    const y = b as Record<string, unknown>;
    return [...new Set([...Object.keys(x), ...Object.keys(y)])].every((k) => sameValue(x[k], y[k]));
  }
  return false;
}

/** A member of an object: its key and value as offsets, its name, its field (-1: outside the interface). */
interface Member {
  readonly keyStart: number;
  readonly valueStart: number;
  readonly valueEnd: number;
  readonly name: string;
  readonly field: number;
}

/**
 * The members of the object at `start`, already checked by scanPet: read again, only for an object
 * with a name outside the interface or a repeated one (rare, so the common path records nothing).
 */
function membersOf(buf: Buffer, start: number): Member[] {
  const out: Member[] = [];
  let i = skipSpace(buf, start + 1);
  while (buf[i] === QUOTE) {
    const keyStart = i;
    i = skipString(buf, i);
    const name = decode(buf, keyStart, i);
    const valueStart = skipSpace(buf, skipSpace(buf, i) + 1);
    const valueEnd = skipValue(buf, valueStart);
    out.push({ keyStart, valueStart, valueEnd, name, field: FIELDS.findIndex((f) => f.name === name) });
    i = skipSpace(buf, valueEnd);
    if (buf[i] === COMMA) i = skipSpace(buf, i + 1);
  }
  return out;
}

/**
 * Whether a repeated name has another value. A field of the interface is compared as its type
 * (numbers by their text, strings decoded: lossless-json compares a number's text); any other value
 * as lossless-json would, once parsed.
 */
function differs(buf: Buffer, a: Member, b: Member): boolean {
  const field = FIELDS[a.field];
  if (field === undefined) return !sameValue(parseLossless(buf.subarray(a.valueStart, a.valueEnd)), parseLossless(buf.subarray(b.valueStart, b.valueEnd)));
  if (field.kind === Kind.Int64) return buf.compare(buf, a.valueStart, a.valueEnd, b.valueStart, b.valueEnd) !== 0;
  return decode(buf, a.valueStart, a.valueEnd) !== decode(buf, b.valueStart, b.valueEnd);
}

/**
 * An object with a member name outside the interface or a repeated one: repeats checked, unknown
 * names collected for `refuse`, or the object rebuilt without them for `drop` from the kept
 * members' own bytes.
 */
function rareMembers(s: Scan, start: number, end: number): void {
  const buf = s.buf;
  const members = membersOf(buf, start);
  const first = new Map<string, Member>();
  let unknown = false;
  for (const m of members) {
    const before = first.get(m.name);
    if (before === undefined) first.set(m.name, m);
    else if (differs(buf, before, m)) s.repeated = true;
    if (m.field !== -1) continue;
    unknown = true;
    if (s.mode === 'refuse') (s.unknownNames ??= new Set()).add(m.name);
  }
  if (s.mode !== 'drop' || !unknown) return;
  const pieces = (s.pieces ??= []);
  pieces.push(buf.subarray(s.cursor, start), OPEN);
  let comma = false;
  for (const m of members) {
    if (m.field === -1) continue;
    if (comma) pieces.push(SEPARATOR);
    pieces.push(buf.subarray(m.keyStart, m.valueEnd));
    comma = true;
  }
  pieces.push(CLOSE);
  s.cursor = end;
}

const OPEN = Buffer.from('{');
const SEPARATOR = Buffer.from(',');
const CLOSE = Buffer.from('}');

/**
 * The field whose unescaped name token has this length, when one field has it (-2: several, -1:
 * none): the common key is then matched with one compare of its bytes.
 */
const BY_LENGTH = new Int8Array(64).fill(-1);
FIELDS.forEach((f, k) => {
  const l = f.token.length;
  if (l < BY_LENGTH.length) BY_LENGTH[l] = BY_LENGTH[l] === -1 ? k : -2;
});

/** The field whose name the key token `buf[start, end)` is, or -1 for a name outside the interface. */
function fieldOf(buf: Buffer, start: number, end: number, hasEscape: boolean): number {
  if (!hasEscape) {
    const f = end - start < BY_LENGTH.length ? BY_LENGTH[end - start]! : -1;
    if (f >= 0) return sameBytes(buf, start, end, FIELDS[f]!.token) ? f : -1;
    if (f === -1) return -1;
  }
  const name = decode(buf, start, end);
  return FIELDS.findIndex((x) => x.name === name);
}

/**
 * Whether the digits `buf[start, end)` (no leading zero) are 19 and at most `limit`'s: same
 * length, so byte order is number order.
 */
function within19(buf: Buffer, start: number, end: number, limit: Buffer): boolean {
  if (end - start !== 19) return false;
  for (let k = 0; k < 19; k++) {
    const d = buf[start + k]! - limit[k]!;
    if (d !== 0) return d < 0;
  }
  return true;
}

/** Set by `commonPet` beside the index it returns: the Pet's `status` as in `Scan.status`. */
let commonStatus = -1;

/**
 * `i` at `{`: the common Pet read with the least work, or -1 as soon as the object is anything
 * else (scanPet then reads it from its start and finds what it is). Common: the members in the
 * schema's order with no space between tokens, each key spelled plainly with its colon, every
 * value in its usual form (an int64 without a leading zero, fraction or exponent, 0 included, a
 * string without escapes, an enum value as one of its tokens) and the required ones present. Such
 * an object is a valid Pet with nothing outside the interface, so nothing is recorded but its
 * `status`.
 */
function commonPet(buf: Buffer, view: DataView | undefined, i: number): number {
  const n = buf.length;
  let seen = 0;
  let status = -1;
  i++;
  for (let f = 0; f < FIELDS.length; f++) {
    const field = FIELDS[f]!;
    if (!tokenAt(buf, view, i, field.key)) return -1;
    i += field.key.bytes.length;
    let b = i < n ? buf[i]! : -1;
    if (field.kind === Kind.Int64) {
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
        if (i - start > 18 && !within19(buf, start, i, negative ? INT64_MIN : INT64_MAX)) return -1;
      }
    } else if (field.kind === Kind.String) {
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
      if (f === STATUS) status = k;
      b = i < n ? buf[i]! : -1;
    }
    seen |= 1 << f;
    if (b === COMMA) {
      i++;
      continue;
    }
    if (b !== RBRACE || (seen & REQUIRED) !== REQUIRED) return -1;
    commonStatus = status;
    return i + 1;
  }
  return -1;
}

/**
 * `i` at `{` of a Pet (`index` as in Scan.problem); returns the index after its `}`. Records
 * nothing per member: an object with a name outside the interface or repeated is read again by
 * rareMembers.
 */
function scanPet(s: Scan, i: number, index: number): number {
  const buf = s.buf;
  const view = s.view;
  const common = commonPet(buf, view, i);
  if (common !== -1) {
    s.status = commonStatus;
    return common;
  }
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
      const guess = FIELDS[next];
      // The expected key with its colon right after it, in word compares: the common member.
      if (guess !== undefined && tokenAt(buf, view, i, guess.key)) i += guess.key.bytes.length;
      else {
        if (i >= n || buf[i] !== QUOTE) throw new ScanError('object key expected');
        const keyStart = i;
        i = skipString(buf, i);
        f = fieldOf(buf, keyStart, i, escaped);
        if (i < n && buf[i] !== COLON) i = skipSpace(buf, i);
        if (i >= n || buf[i] !== COLON) throw new ScanError("':' expected");
        i++;
      }
      next = f + 1;
      i = skipSpace(buf, i);
      if (f === -1) {
        i = skipValue(buf, i);
        rare = true;
      } else {
        const field = FIELDS[f]!;
        i = checkField(buf, view, i, field);
        if (!valueOk) s.problem(index, field.name, field.kind === Kind.Int64 ? 'must be an integer within int64' : field.kind === Kind.String ? 'must be string' : 'must be equal to one of the allowed values');
        if ((seen & (1 << f)) !== 0) rare = true;
        if (f === STATUS) s.status = (seen & (1 << f)) !== 0 ? -2 : valueOk ? enumIndex : -1;
        seen |= 1 << f;
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
  if ((seen & REQUIRED) !== REQUIRED) {
    for (let f = 0; f < FIELDS.length; f++) if ((REQUIRED & (1 << f)) !== 0 && (seen & (1 << f)) === 0) s.problem(index, undefined, `must have required property '${FIELDS[f]!.name}'`);
  }
  if (rare && s.mode === undefined) s.rare.push(start, i + 1);
  else if (rare) rareMembers(s, start, i + 1);
  return i + 1;
}

/** `i` at an element of Pets (`index` >= 0) or at the Pet that is the body (-1). */
function scanElement(s: Scan, i: number, index: number): number {
  if (s.buf[i] === LBRACE) return scanPet(s, i, index);
  s.problem(index, undefined, 'must be object');
  return skipValue(s.buf, i);
}

function scanList(s: Scan, i: number): number {
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

/**
 * Checks a whole answer body against Pet (`list` false) or Pets (`list` true) and finds the fields
 * outside the interface, handled as `unknownFields` says. Never throws on any input.
 */
export function scanPetBody(body: Buffer, list: boolean, unknownFields: UnknownFieldMode): PetScan {
  // RFC 8259 section 8.1: JSON between systems is UTF-8; checked natively, once, for the whole body.
  if (!isUtf8(body)) return NOT_JSON;
  const s = SCAN.begin(body, unknownFields, list);
  try {
    const start = skipSpace(body, 0);
    const end = list ? scanList(s, start) : scanElement(s, start, -1);
    if (skipSpace(body, end) !== body.length) return NOT_JSON;
    return s.result();
  } catch (err) {
    if (err instanceof ScanError) return NOT_JSON;
    throw err;
  } finally {
    s.end();
  }
}

/**
 * What list-pets' pass over a listPets answer found for the response contract, when that pass also
 * checked each Pet (the body it passes on is then `body`, unchanged): the contract finishes from
 * here instead of reading the list a second time.
 */
export interface PetsFindings {
  readonly body: Buffer;
  readonly problems: readonly string[];
  readonly repeated: boolean;
  /** Objects with a name outside the interface or a repeated one, as [start, end) pairs. */
  readonly rare: readonly number[];
}

/**
 * One slot, two steps: `'wanted'` on a listPets request, set by a policy that will check the answer
 * as Pets (the response contract); then, by list-pets, the findings of its pass, when that pass
 * checked the list it passes on.
 */
export const PETS_CHECK = slot<'wanted' | PetsFindings>('petsCheck');

export interface PageScan {
  /** The array to send: the original buffer when nothing was removed, else the kept elements. */
  readonly body: Buffer;
  /** Whether any element was removed or cut off. */
  readonly changed: boolean;
  /** When nothing was removed: each Pet checked on the way, for the response contract. */
  readonly findings?: PetsFindings;
}

/** Offsets of the kept elements, [start, end) pairs, in a scratch array shared by every call. */
let KEPT: Uint32Array = new Uint32Array(256);

function join(buf: Buffer, kept: Uint32Array, k: number): Buffer {
  const parts: Buffer[] = [LIST_OPEN];
  for (let e = 0; e < k; e += 2) {
    if (e > 0) parts.push(SEPARATOR);
    parts.push(buf.subarray(kept[e], kept[e + 1]));
  }
  parts.push(LIST_CLOSE);
  return Buffer.concat(parts);
}

const LIST_OPEN = Buffer.from('[');
const LIST_CLOSE = Buffer.from(']');

/**
 * json-scan's filterArray (the same cut after `limit` kept elements, unread beyond; the same
 * status filter; an object with two `status` members dropped; the same ScanError when the bytes
 * read are not a JSON array) that checks each kept element as a Pet on the way, so that a list the
 * response contract will check is read once.
 */
export function scanPetPage(buf: Buffer, limit: number, status: string | undefined): PageScan {
  // A status outside the enum (never, after the query check) would match no element: -3.
  const index = status === undefined ? -1 : FIELDS[STATUS]!.values.indexOf(status);
  const wanted = status !== undefined && index === -1 ? -3 : index;
  const s = SCAN.begin(buf, undefined, true);
  try {
    return readPage(s, limit, wanted);
  } finally {
    s.end();
  }
}

function readPage(s: Scan, limit: number, wanted: number): PageScan {
  const buf = s.buf;
  let i = skipSpace(buf, 0);
  if (buf[i] !== LBRACKET) throw new ScanError('not a JSON array');
  i = skipSpace(buf, i + 1);
  let kept = KEPT;
  let k = 0;
  let removed = false;
  let cut = false;
  if (buf[i] === RBRACKET) i++;
  else {
    for (;;) {
      if (k === limit * 2) {
        // Another element follows the last one we may send: cut here, unread.
        removed = cut = true;
        break;
      }
      const start = i;
      const problems = s.problems.length;
      const rare = s.rare.length;
      const repeated = s.repeated;
      const end = scanElement(s, i, k / 2);
      if (wanted === -1 || (buf[start] === LBRACE && s.status === wanted)) {
        if (k === kept.length) kept = KEPT = growKept(kept);
        kept[k++] = start;
        kept[k++] = end;
      } else {
        // Dropped by the filter: what it held is not the answer's, nor are its problems.
        removed = true;
        s.problems.length = problems;
        s.rare.length = rare;
        s.repeated = repeated;
      }
      i = skipSpace(buf, end);
      if (buf[i] === RBRACKET) {
        i++;
        break;
      }
      if (buf[i] !== COMMA) throw new ScanError(i >= buf.length ? 'truncated' : "',' or ']' expected");
      i = skipSpace(buf, i + 1);
    }
  }
  if (!cut && skipSpace(buf, i) !== buf.length) throw new ScanError('trailing data');
  if (removed) return { body: join(buf, kept, k), changed: true };
  // The common page: every Pet valid and plain. Else the findings are copied out of the shared
  // scan, as they live until the response contract reads them.
  if (s.problems.length === 0 && s.rare.length === 0 && !s.repeated) return new CleanPage(buf);
  return new CheckedPage(buf, s.problems.slice(), s.repeated, s.rare.slice());
}

/**
 * An unchanged page whose every Pet was valid, with no name outside the interface or repeated. The
 * page is its own findings, and they are its methods: one object of one field per answer, smaller
 * than filterArray's result.
 */
class CleanPage implements PageScan, PetsFindings {
  constructor(readonly body: Buffer) {}

  get changed(): false {
    return false;
  }

  get findings(): PetsFindings {
    return this;
  }

  get problems(): readonly string[] {
    return NONE;
  }

  get repeated(): false {
    return false;
  }

  get rare(): readonly number[] {
    return NONE;
  }
}

/** An unchanged page with what its pass found (a problem, an object to read again). */
class CheckedPage implements PageScan, PetsFindings {
  readonly changed = false;

  constructor(
    readonly body: Buffer,
    readonly problems: readonly string[],
    readonly repeated: boolean,
    readonly rare: readonly number[],
  ) {}

  get findings(): PetsFindings {
    return this;
  }
}

function growKept(a: Uint32Array): Uint32Array {
  const b = new Uint32Array(a.length * 2);
  b.set(a);
  return b;
}

/** The verdict on a list from list-pets' findings, as scanPetBody would give on `findings.body`. */
export function finishPets(findings: PetsFindings, unknownFields: UnknownFieldMode): PetScan {
  if (!isUtf8(findings.body)) return NOT_JSON;
  // The common list: every Pet valid, no name outside the interface, none repeated.
  if (findings.problems.length === 0 && findings.rare.length === 0 && !findings.repeated) return VALID;
  const s = SCAN.begin(findings.body, unknownFields, false);
  try {
    s.problems.push(...findings.problems);
    s.repeated = findings.repeated;
    for (let k = 0; k < findings.rare.length; k += 2) rareMembers(s, findings.rare[k]!, findings.rare[k + 1]!);
    return s.result();
  } finally {
    s.end();
  }
}
