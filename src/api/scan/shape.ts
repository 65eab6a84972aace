/**
 * An ObjectShape (model.ts) compiled into the tables the checks read: each field's key and enum
 * values as byte tokens, its integer bounds as digits, the required fields as a bit set, and a
 * lookup of a key by its length. Built once per shape, at load; a shape with something the scanner
 * cannot check is refused here, naming the field, rather than let through unchecked.
 */
import type { FieldType, ObjectShape } from '../model.js';
import { decode } from './json.js';

export const enum Kind {
  Int64,
  Int32,
  String,
  Enum,
}

/**
 * A token as little-endian 32-bit words, the last one masked to the token's own bytes: the common
 * key and enum value are matched four bytes per compare (`tokenAt`) rather than one.
 */
export interface Token {
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
export function tokenAt(buf: Buffer, view: DataView | undefined, i: number, t: Token): boolean {
  const words = t.words;
  const last = words.length - 1;
  if (view === undefined || i + 4 * last + 4 > buf.length) return startsWith(buf, i, t.bytes);
  for (let w = 0; w < last; w++) if (view.getInt32(i + 4 * w, true) !== words[w]) return false;
  return (view.getInt32(i + 4 * last, true) & t.mask) === words[last];
}

/**
 * Word reads need a DataView; one over each answer would be an object per request. Bodies up to
 * this size are copied (one memcpy) into a scratch buffer that has its own view, kept for the
 * process; a larger body gets a view of its own, its allocation small beside the body.
 */
const SCRATCH = new Uint8Array(64 * 1024);
const SCRATCH_VIEW = new DataView(SCRATCH.buffer);

/** A view whose bytes [0, buf.length) are buf's: read only under that bound (tokenAt checks it). */
export function wordView(buf: Buffer): DataView {
  if (buf.length > SCRATCH.length) return new DataView(buf.buffer, buf.byteOffset, buf.length);
  SCRATCH.set(buf);
  return SCRATCH_VIEW;
}

export interface CompiledField {
  readonly name: string;
  /** The name as a JSON string token, quotes included: how an upstream spells it unescaped. */
  readonly token: Buffer;
  /** The same token with the colon after it: the common spelling of the member's key, whole. */
  readonly key: Token;
  readonly kind: Kind;
  /** For an integer: the most digits of its bounds, and the largest magnitudes as digits. */
  readonly digits: number;
  readonly max: Buffer;
  readonly min: Buffer;
  /** For Kind.Enum: each allowed value as a JSON string token, and as text. */
  readonly tokens: readonly Token[];
  readonly values: readonly string[];
  /** What a value of another type is, as Ajv words it. */
  readonly problem: string;
}

/** The digits of 2^63 - 1 and 2^63, of 2^31 - 1 and 2^31: the largest magnitudes of each kind. */
const INT64 = { digits: 19, max: Buffer.from('9223372036854775807'), min: Buffer.from('9223372036854775808') };
const INT32 = { digits: 10, max: Buffer.from('2147483647'), min: Buffer.from('2147483648') };
const NOT_INTEGER = { digits: 0, max: Buffer.alloc(0), min: Buffer.alloc(0) };
const NO_VALUES: readonly string[] = [];

/** One field, or a refusal naming it (the kinds come from a document: a new one must fail here). */
function fieldOf(shape: string, name: string, type: FieldType): CompiledField {
  switch (type.kind) {
    case 'int64':
      return field(name, Kind.Int64, INT64, NO_VALUES, 'must be an integer within int64');
    case 'int32':
      return field(name, Kind.Int32, INT32, NO_VALUES, 'must be an integer within int32');
    case 'string':
      return field(name, Kind.String, NOT_INTEGER, NO_VALUES, 'must be string');
    case 'enum': {
      const values = type.values;
      if (values.length === 0 || !values.every((v) => typeof v === 'string')) throw new Error(`compileShape: ${shape}.${name}: an enum of strings, at least one`);
      return field(name, Kind.Enum, NOT_INTEGER, values, 'must be equal to one of the allowed values');
    }
    default:
      throw new Error(`compileShape: ${shape}.${name} has a type the scanner does not implement: ${JSON.stringify(type)}`);
  }
}

/** Every field written out in one order, so that the checks see one object shape, whatever the kind. */
function field(name: string, kind: Kind, bounds: typeof INT64, values: readonly string[], problem: string): CompiledField {
  return {
    name,
    token: Buffer.from(JSON.stringify(name)),
    key: tokenOf(JSON.stringify(name) + ':'),
    kind,
    digits: bounds.digits,
    max: bounds.max,
    min: bounds.min,
    tokens: values.map((v) => tokenOf(JSON.stringify(v))),
    values,
    problem,
  };
}

/** The tables of one shape. Every check of this folder takes one; none holds state of a call. */
export class CompiledShape {
  /** The fields, in the shape's order: the order the common object is read in. */
  readonly fields: readonly CompiledField[];
  /** The fields' names, then the forbidden ones': a member's index in this list, -1 for any other. */
  readonly names: readonly string[];
  /** Bit f set: fields[f] is required. */
  readonly required: number;
  /** The index of the field a list's filter reads (an enum), or -1. */
  readonly filter: number;
  /**
   * The name whose unescaped token has this length, when one name has it (-2: several, -1: none):
   * a key is then matched with one compare of its bytes.
   */
  readonly byLength = new Int16Array(64).fill(-1);
  /** The names as JSON string tokens, in the order of `names`. */
  readonly tokens: readonly Buffer[];

  constructor(
    readonly shape: ObjectShape,
    filterField: string | undefined,
  ) {
    const label = shape.name || 'shape';
    this.fields = shape.fields.map((f) => fieldOf(label, f.name, f.type));
    // One bit per field in an int32, the sign left alone.
    if (this.fields.length > 30) throw new Error(`compileShape: ${label} has ${this.fields.length} fields, at most 30`);
    this.names = [...this.fields.map((f) => f.name), ...new Set(shape.forbidden)];
    for (const [k, name] of this.names.entries()) {
      if (this.names.indexOf(name) !== k) throw new Error(`compileShape: ${label}.${name} is ${k < this.fields.length ? 'defined twice' : 'both a field and forbidden'}`);
    }
    let required = 0;
    for (const name of shape.required) {
      const f = this.fields.findIndex((x) => x.name === name);
      if (f === -1) throw new Error(`compileShape: ${label}: required '${name}' is not a field`);
      required |= 1 << f;
    }
    this.required = required;
    this.filter = filterField === undefined ? -1 : this.fields.findIndex((f) => f.name === filterField);
    if (filterField !== undefined && this.fields[this.filter]?.kind !== Kind.Enum) throw new Error(`compileShape: ${label}.${filterField}: a list's filter reads an enum field of the shape`);
    this.tokens = this.names.map((name) => Buffer.from(JSON.stringify(name)));
    this.tokens.forEach((t, k) => {
      const l = t.length;
      if (l < this.byLength.length) this.byLength[l] = this.byLength[l] === -1 ? k : -2;
    });
  }

  /** The index in `names` of the key token `buf[start, end)`, or -1 for a name outside the shape. */
  nameOf(buf: Buffer, start: number, end: number, hasEscape: boolean): number {
    if (!hasEscape) {
      const f = end - start < this.byLength.length ? this.byLength[end - start]! : -1;
      if (f >= 0) return sameBytes(buf, start, end, this.tokens[f]!) ? f : -1;
      if (f === -1) return -1;
    }
    return this.names.indexOf(decode(buf, start, end));
  }
}

/** Whether the string token `buf[start, end)` equals `token` byte for byte. */
function sameBytes(buf: Buffer, start: number, end: number, token: Buffer): boolean {
  if (end - start !== token.length) return false;
  for (let k = 0; k < token.length; k++) if (buf[start + k] !== token[k]) return false;
  return true;
}
